/* cpu.c — what this CPU can run, read once from CPUID/XGETBV, and the
 * process level: the best supported, lowered by $CORVID_ISA. Both are
 * computed on first use under pthread_once and never change afterwards, so
 * they are constants of the process rather than mutable state. A level
 * needs its instructions and the OS saving their registers (OSXSAVE and
 * XCR0): YMM for avx2 and avx-vnni, opmask and ZMM too for avx512. */
#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>

#include "kernels/kernels_int.h"

static cv_cpu_features features;
static cv_isa active_isa;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Why f cannot run isa, or NULL. Every SIMD level builds on AVX2 (its
 * files are compiled with -mavx2 -mfma -mf16c -mbmi2 as well). */
static const char *missing(const cv_cpu_features *f, cv_isa isa)
{
    if (isa == CV_ISA_SCALAR)
        return NULL;
    if ((unsigned)isa >= CV_ISA_COUNT)
        return "not a level corvid knows";
    if (!(f->avx && f->avx2 && f->fma && f->f16c && f->bmi2))
        return "no AVX2+FMA+F16C+BMI2 on this CPU";
    if (!f->os_avx)
        return "the OS does not save YMM state";
    if (isa == CV_ISA_AVX_VNNI && !f->avx_vnni)
        return "no AVX-VNNI on this CPU";
    if (isa == CV_ISA_AVX512) {
        if (!(f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq))
            return "no AVX-512 F+BW+VL+DQ on this CPU";
        if (!f->avx512_vnni)
            return "no AVX-512 VNNI on this CPU";
        if (!f->os_avx512)
            return "the OS does not save ZMM and opmask state";
    }
    return NULL;
}

static cv_isa best(const cv_cpu_features *f)
{
    for (int isa = CV_ISA_COUNT - 1; isa > CV_ISA_SCALAR; isa--)
        if (!missing(f, isa))
            return isa;
    return CV_ISA_SCALAR;
}

static cv_isa fallback(const cv_cpu_features *f, cv_isa isa)
{
    for (int l = (int)isa - 1; l > CV_ISA_SCALAR; l--)
        if (!missing(f, l))
            return l;
    return CV_ISA_SCALAR;
}

static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void detect(void)
{
    cv_cpu_features *f = &features;
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return;
    unsigned max_leaf = a;
    memcpy(f->vendor, &b, 4);
    memcpy(f->vendor + 4, &d, 4);
    memcpy(f->vendor + 8, &c, 4);
    f->vendor[12] = 0;

    __get_cpuid(1, &a, &b, &c, &d);
    unsigned base_family = (a >> 8) & 0xF, base_model = (a >> 4) & 0xF;
    f->family = base_family == 0xF ? base_family + ((a >> 20) & 0xFF) : base_family;
    f->model = (base_family == 0x6 || base_family == 0xF) ? (((a >> 16) & 0xF) << 4) | base_model : base_model;
    f->sse42 = c & (1u << 20);
    f->fma = c & (1u << 12);
    f->f16c = c & (1u << 29);
    bool osxsave = c & (1u << 27);
    f->avx = c & (1u << 28);
    if (osxsave) {
        uint64_t xcr0 = read_xcr0();
        f->os_avx = (xcr0 & 0x6) == 0x6;            /* XMM and YMM state */
        f->os_avx512 = (xcr0 & 0xE6) == 0xE6;       /* plus opmask, ZMM_Hi256, Hi16_ZMM */
    }
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f->avx2 = b & (1u << 5);
        f->bmi2 = b & (1u << 8);
        f->avx512f = b & (1u << 16);
        f->avx512dq = b & (1u << 17);
        f->avx512bw = b & (1u << 30);
        f->avx512vl = b & (1u << 31);
        f->avx512_vnni = c & (1u << 11);
        __cpuid_count(7, 1, a, b, c, d);
        f->avx_vnni = a & (1u << 4);
        f->avx512_bf16 = a & (1u << 5);
    }
    unsigned ext_max = __get_cpuid_max(0x80000000, NULL);
    if (ext_max >= 0x80000004) {
        unsigned *w = (unsigned *)(void *)f->brand;
        for (unsigned leaf = 0; leaf < 3; leaf++)
            __get_cpuid(0x80000002 + leaf, &w[4 * leaf], &w[4 * leaf + 1], &w[4 * leaf + 2], &w[4 * leaf + 3]);
        f->brand[48] = 0;
        /* Vendors pad the brand with spaces at either end. */
        char *s = f->brand;
        while (*s == ' ')
            s++;
        memmove(f->brand, s, strlen(s) + 1);
        size_t len = strlen(f->brand);
        while (len && f->brand[len - 1] == ' ')
            f->brand[--len] = 0;
    }

    /* Not through the public getters: they wait on this very once. */
    active_isa = best(f);
    const char *env = getenv("CORVID_ISA");
    if (env && *env) {
        int want = -1;
        for (int l = 0; l < CV_ISA_COUNT; l++)
            if (!strcmp(env, cv_isa_name(l)))
                want = l;
        if (want < 0)
            cv_warn("CORVID_ISA=%s is not one of scalar, avx2, avx-vnni, avx512; ignored", env);
        else if (missing(f, want)) {
            active_isa = fallback(f, want);
            cv_warn("CORVID_ISA=%s but %s; using %s", env, missing(f, want), cv_isa_name(active_isa));
        } else
            active_isa = want;
    }
}

const cv_cpu_features *cv_cpu_features_get(void)
{
    pthread_once(&once, detect);
    return &features;
}

bool cv_isa_supported(cv_isa isa) { return !missing(cv_cpu_features_get(), isa); }

const char *cv_isa_missing(cv_isa isa) { return missing(cv_cpu_features_get(), isa); }

cv_isa cv_isa_best(void) { return best(cv_cpu_features_get()); }

cv_isa cv_isa_fallback(cv_isa isa) { return fallback(cv_cpu_features_get(), isa); }

cv_isa cv_isa_active(void)
{
    pthread_once(&once, detect);
    return active_isa;
}

const char *cv_isa_name(cv_isa isa)
{
    static const char *const names[CV_ISA_COUNT] = { "scalar", "avx2", "avx-vnni", "avx512" };
    return (unsigned)isa < CV_ISA_COUNT ? names[isa] : "unknown";
}
