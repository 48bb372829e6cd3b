/* cpu.c — what this CPU can run, read once from CPUID/XGETBV, and the
 * process ISA: the best supported, lowered by $CORVID_ISA. Both are computed
 * on first use under pthread_once and never change afterwards, so they are
 * constants of the process rather than mutable state. The AVX2 path needs
 * AVX2 + FMA + F16C and the OS saving YMM registers (OSXSAVE and XCR0 bits
 * 1-2); without all of them corvid runs the scalar reference. */
#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>

#include "kernels/kernels_int.h"

static cv_cpu_features features;
static cv_isa active_isa;
static bool avx512_on;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* What the AVX-512 attention tile uses: F, BW, and VNNI for q8_0 caches'
 * int8 scores (every AVX-512 CPU since Cascade Lake and Zen 4). */
static bool has_avx512(const cv_cpu_features *f)
{
    return f->avx512f && f->avx512bw && f->avx512_vnni && f->os_avx512;
}

static bool can_run(const cv_cpu_features *f, cv_isa isa)
{
    switch (isa) {
    case CV_ISA_SCALAR:
        return true;
    case CV_ISA_AVX2:
        return f->avx && f->os_avx && f->avx2 && f->fma && f->f16c && f->bmi2; /* the AVX2 files are built with -mbmi2 */
    default:
        return false;
    }
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
    active_isa = can_run(f, CV_ISA_AVX2) ? CV_ISA_AVX2 : CV_ISA_SCALAR;
    const char *env = getenv("CORVID_ISA");
    if (env && *env) {
        if (!strcmp(env, "scalar"))
            active_isa = CV_ISA_SCALAR;
        else if (!strcmp(env, "avx2") || !strcmp(env, "avx512")) {
            if (!can_run(f, CV_ISA_AVX2))
                cv_warn("CORVID_ISA=%s but this CPU cannot run AVX2+FMA+F16C; using scalar", env);
            else if (!strcmp(env, "avx512") && !has_avx512(f))
                cv_warn("CORVID_ISA=avx512 but this CPU (or OS) has no AVX-512 F+BW+VNNI; using avx2");
        } else
            cv_warn("CORVID_ISA=%s is not one of scalar, avx2, avx512; ignored", env);
    }
    avx512_on = active_isa == CV_ISA_AVX2 && has_avx512(f) && !(env && !strcmp(env, "avx2"));
}

bool cv_avx512_supported(void) { return has_avx512(cv_cpu_features_get()); }

bool cv_avx512_active(void)
{
    pthread_once(&once, detect);
    return avx512_on;
}

const cv_cpu_features *cv_cpu_features_get(void)
{
    pthread_once(&once, detect);
    return &features;
}

bool cv_isa_supported(cv_isa isa) { return can_run(cv_cpu_features_get(), isa); }

cv_isa cv_isa_best(void) { return cv_isa_supported(CV_ISA_AVX2) ? CV_ISA_AVX2 : CV_ISA_SCALAR; }

cv_isa cv_isa_active(void)
{
    pthread_once(&once, detect);
    return active_isa;
}

const char *cv_isa_name(cv_isa isa)
{
    switch (isa) {
    case CV_ISA_SCALAR:
        return "scalar";
    case CV_ISA_AVX2:
        return "avx2";
    default:
        return "unknown";
    }
}
