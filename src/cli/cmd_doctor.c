/* cmd_doctor.c — `corvid doctor`: what this machine gives corvid. It
 * prints the CPU and the features CPUID reports, the ISA path the kernels
 * chose (and whether $CORVID_ISA lowered it), the compute threads, and for
 * every dtype its activation type and how its dot and matmul run; then a
 * self-check (each dtype's active matmul against the scalar reference on a
 * small random matrix) and, unless --quick, the machine probes `corvid
 * bench` measures against. Exit status 1 when the self-check fails, so a
 * SIMD path that miscomputes on some CPU is caught before a model runs.
 * Given a MODEL, it also says what serving it takes here: RAM against what
 * is available, and the decode ceiling of the bytes a token reads. The
 * CUDA lines say what of a GPU this machine has and, when none is usable,
 * exactly why (backend/cuda/cuda.h, cv_cuda_describe); with a usable one
 * and a MODEL, where the model's parts would go on it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/cuda.h"
#include "cli/cli.h"
#include "cli/models.h"
#include "cli/offload.h"
#include "gguf/gguf.h"
#include "kernels/attention.h"
#include "kernels/deltanet.h"
#include "kernels/kernels.h"
#include "model/model.h"

static void print_features(const cv_cpu_features *f)
{
    const struct { const char *name; bool on; } feats[] = {
        { "sse4.2", f->sse42 },     { "avx", f->avx },           { "avx2", f->avx2 },
        { "fma", f->fma },          { "f16c", f->f16c },         { "bmi2", f->bmi2 },
        { "avx512f", f->avx512f },  { "avx512bw", f->avx512bw }, { "avx512vl", f->avx512vl },
        { "avx512dq", f->avx512dq },
        { "avx512_vnni", f->avx512_vnni }, { "avx512_bf16", f->avx512_bf16 }, { "avx_vnni", f->avx_vnni },
    };
    printf("features   ");
    for (size_t i = 0; i < CV_ARRAY_LEN(feats); i++)
        if (feats[i].on)
            printf("%s ", feats[i].name);
    printf("\nos state   YMM %s, ZMM %s\n", f->os_avx ? "saved" : "NOT saved", f->os_avx512 ? "saved" : "not saved");
}

/* Max |active - scalar| / max |scalar| of a 5-token matmul on a 64 x 512
 * random matrix of `type`; negative when the matrix cannot be built. */
static double self_check(uint32_t type, cv_isa isa, cv_pool *pool)
{
    const cv_dtype *dt = cv_dtype_get(type);
    const int64_t n_in = 512, n_out = 64, n_tok = 5;
    const size_t row = (size_t)(n_in / dt->block_elems) * dt->block_bytes;
    float *wf = malloc(n_in * sizeof *wf), *x = malloc(n_in * n_tok * sizeof *x);
    float *y0 = malloc(n_out * n_tok * sizeof *y0), *y1 = malloc(n_out * n_tok * sizeof *y1);
    uint8_t *w = malloc(row * n_out);
    cv_rng r;
    cv_rng_seed(&r, 2024 + type);
    for (int64_t o = 0; o < n_out; o++) {
        for (int64_t i = 0; i < n_in; i++)
            wf[i] = cv_rng_normal(&r);
        cv_quantize_row(type, wf, w + o * row, n_in, NULL);
    }
    for (int64_t i = 0; i < n_in * n_tok; i++)
        x[i] = cv_rng_normal(&r);
    double worst = -1;
    cv_wmat *m0 = NULL, *m1 = NULL;
    if (cv_wmat_create_isa(type, n_in, n_out, w, row * n_out, CV_ISA_SCALAR, &m0, NULL) == 0 &&
        cv_wmat_create_isa(type, n_in, n_out, w, row * n_out, isa, &m1, NULL) == 0) {
        cv_matmul(NULL, m0, n_tok, x, y0);
        cv_matmul(pool, m1, n_tok, x, y1);
        double diff = 0, mag = 0;
        for (int64_t i = 0; i < n_out * n_tok; i++) {
            diff = fmax(diff, fabs((double)y1[i] - y0[i]));
            mag = fmax(mag, fabs((double)y0[i]));
        }
        worst = isfinite(diff) ? diff / (mag > 0 ? mag : 1) : 1e30;
    }
    cv_wmat_destroy(m0);
    cv_wmat_destroy(m1);
    free(wf);
    free(x);
    free(y0);
    free(y1);
    free(w);
    return worst;
}

/* MemAvailable of /proc/meminfo in bytes, or 0 when it cannot be read. */
static double mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

/* Where the model's parts would go on cuda:0 for one sequence of n_ctx
 * positions, as --gpu-memory auto chooses them (docs/CUDA.md). */
static void gpu_plan(const cv_gguf *g, const cv_model_summary *s, int32_t n_ctx)
{
    cv_backend *be;
    cv_offload_need need = { 0 };
    cv_err err = { 0 };
    if (cv_cuda_open(0, &be, &err) || cv_offload_need_from_model(g, s, CV_GGML_F16, &need, &err)) {
        printf("           cuda:0: %s\n", err.msg);
        return;
    }
    cv_cuda_device_info di;
    cv_cuda_device_get(be, &di);
    const cv_offload_opts o = { .device_free = di.free_bytes, .device_total = di.total_bytes, .gpu_layers = -1,
                                .n_ctx = n_ctx, .n_seq = 1, .batch_tokens = 256, .logit_rows = 1 };
    cv_offload_plan p;
    cv_buf d = { 0 };
    if (cv_offload_plan_make(&need, &o, &p, &err) == 0) {
        cv_offload_plan_describe(&p, &d);
        printf("           on cuda:0 (%s), %s\n", di.name, d.data);
    } else {
        printf("           cuda:0: %s\n", err.msg);
    }
    cv_buf_free(&d);
    free(need.layers);
}

/* What serving MODEL takes on this machine: the model (dense or MoE, its
 * parameters, active ones), its RAM (an MoE keeps every expert resident)
 * against what is available, and the decode ceiling the bytes a token
 * reads give at the probed bandwidth (0: not probed). Returns 1 when the
 * file cannot be run, or does not fit. */
static int check_model(const char *path, double bw_gbs, bool gpu)
{
    char mp[PATH_MAX];
    cv_gguf *g;
    cv_err err = { 0 };
    if (cv_gguf_open(cv_model_local_or_self(path, mp, sizeof mp), &g, &err)) {
        printf("\nmodel      %s\n", err.msg);
        return 1;
    }
    cv_model_summary s;
    int rc = cv_model_summarize(g, &s, &err);
    printf("\nmodel      %s\n", cv_gguf_path(g));
    if (rc) {
        printf("           corvid cannot run it: %s\n", err.msg);
        cv_gguf_close(g);
        return 1;
    }
    cv_buf d = { 0 };
    cv_model_summary_describe(&s, &d);
    const int32_t n_ctx = CV_MIN(s.hp.n_ctx_train, 32768);
    const double ram = cv_model_summary_ram_bytes(&s, n_ctx, 1, 2), avail = mem_available();
    printf("           %s\n", d.data);
    printf("           RAM %.1f GiB (tensors %.1f GiB%s, f16 KV of %d positions, %.1f KiB a position); %.1f GiB "
           "available%s\n", ram / 1073741824.0, s.bytes / 1073741824.0,
           s.hp.n_expert > 0 ? ", every expert resident" : "", n_ctx,
           (double)(s.kv_pos_elts[0] + s.kv_pos_elts[1]) * 2 / 1024, avail / 1073741824.0,
           avail > 0 && ram > avail ? ": DOES NOT FIT" : "");
    printf("           a token reads %.1f MiB of weights", s.active_bytes / 1048576.0);
    if (bw_gbs > 0)
        printf(": decode at most %.1f tok/s at %.1f GB/s", bw_gbs * 1e9 / (double)s.active_bytes, bw_gbs);
    printf("\n");
    if (gpu)
        gpu_plan(g, &s, n_ctx);
    cv_buf_free(&d);
    cv_gguf_close(g);
    return avail > 0 && ram > avail;
}

/* One operation's level at the process's ISA and, for each level above it
 * that the process would allow, why that one does not run it. */
static void print_op(const char *what, cv_isa ran, const char *(*why_not)(cv_isa, int32_t), int32_t d)
{
    printf("  %-38s %-7s", what, cv_isa_name(ran));
    const char *sep = "  (";
    for (cv_isa l = cv_isa_active(); l > ran; l--) {
        const char *why = why_not(l, d);
        if (why) {
            printf("%s%s: %s", sep, cv_isa_name(l), why);
            sep = "; ";
        }
    }
    printf("%s\n", *sep == ';' ? ")" : "");
}

static const char *vec_why_not(cv_isa l, int32_t d)
{
    (void)d;
    return cv_vec_ops_why_not(l);
}

static cv_isa att_level(int32_t hd)
{
    const att_tile_fn fn = cv_att_tile_for(hd);
    return fn == cv_att_tile_avx512 ? CV_ISA_AVX512 : fn == cv_att_tile_avx2 ? CV_ISA_AVX2 : CV_ISA_SCALAR;
}

static cv_isa dn_level(int32_t d)
{
    const dn_kernels *kn = cv_dn_kernels_for(d);
    return kn == &cv_dn_kernels_avx512 ? CV_ISA_AVX512 : kn == &cv_dn_kernels_avx2 ? CV_ISA_AVX2 : CV_ISA_SCALAR;
}

/* The operations other than matmuls (those are the dtype table's), at the
 * head sizes the supported architectures use. */
static void print_operations(void)
{
    static const struct {
        int32_t hd;
        const char *what;
    } att[] = { { 128, "attention tile, head size 16n" },
                { 72, "attention tile, head size 16n + 8" },
                { 36, "attention tile, other head sizes" } };
    printf("\noperations (each at the highest level with a version of it; why not a higher one):\n");
    print_op("rows: norms, RoPE, GLU, softmax", cv_vec_ops_level(cv_isa_active()), vec_why_not, 0);
    for (size_t i = 0; i < CV_ARRAY_LEN(att); i++)
        print_op(att[i].what, att_level(att[i].hd), cv_att_tile_why_not, att[i].hd);
    print_op("gated deltanet loops, head size 128", dn_level(128), cv_dn_kernels_why_not, 128);
    print_op("latent attention tile (any row size)", dn_level(16), cv_dn_kernels_why_not, 16);
}

typedef struct doctor_opts {
    bool quick;
    int32_t threads;
} doctor_opts;

static const cv_flag flags[] = {
    CV_FLAG_ROW("--quick", NULL, CV_FLAG_BOOL, offsetof(doctor_opts, quick), 0, 0, NULL,
      "without the bandwidth and int8 probes"),
    CV_FLAG_ROW("--threads", NULL, CV_FLAG_I32, offsetof(doctor_opts, threads), 1, 1024, "N",
      "threads of the self-check and the probes (default: every CPU)"),

};
static const cv_cli_spec spec = { .name = "doctor", .args = "[MODEL]", .min_args = 0, .max_args = 1,
                                  .flags = flags, .n_flags = CV_ARRAY_LEN(flags) };

int cv_cmd_doctor(int argc, char **argv)
{
    doctor_opts o = { .threads = cv_cpu_count() };
    int n, st;
    if (!cv_cli_parse(&spec, &o, argc, argv, &n, &st))
        return st;
    bool quick = o.quick;
    int threads = o.threads;
    const char *model = n == 1 ? argv[1] : NULL;
    cv_err err = { 0 };
    cv_pool *pool = cv_pool_create(threads, &err);
    if (!pool) {
        fprintf(stderr, "corvid doctor: %s\n", err.msg);
        return 1;
    }

    const cv_cpu_features *f = cv_cpu_features_get();
    printf("cpu        %s (%s, family %u model %u)\n", f->brand[0] ? f->brand : "unknown", f->vendor, f->family,
           f->model);
    print_features(f);
    const cv_isa isa = cv_isa_active();
    const char *env = getenv("CORVID_ISA");
    printf("isa        %s (best this CPU runs: %s; CORVID_ISA %s%s%s)\n", cv_isa_name(isa), cv_isa_name(cv_isa_best()),
           env ? "= \"" : "unset", env ? env : "", env ? "\"" : "");
    printf("levels    ");
    for (int l = CV_ISA_SCALAR; l < CV_ISA_COUNT; l++)
        printf("%s %s%s%s", l ? "," : "", cv_isa_name(l), cv_isa_supported(l) ? " yes" : " no: ",
               cv_isa_supported(l) ? "" : cv_isa_missing(l));
    printf("\n");
    printf("threads    %d online CPUs, compute pool of %d\n", cv_cpu_count(), cv_pool_size(pool));
    cv_buf cuda = { 0 };
    const bool gpu = cv_cuda_describe(&cuda, "cuda       ");
    printf("%s\n", cuda.data);
    cv_buf_free(&cuda);

    printf("%-6s %5s %5s  %-6s %-8s %s\n", "dtype", "block", "bytes", "acts", "dot", "matmul");
    for (uint32_t t = 0; t < CV_GGML_TYPE_COUNT; t++) {
        const cv_dtype *dt = cv_dtype_get(t);
        if (!dt)
            continue;
        if (!dt->is_weight) {
            printf("%-6s %5u %5u  %-6s %-8s %s\n", dt->name, dt->block_elems, dt->block_bytes, "-", "-",
                   "(activation type)");
            continue;
        }
        printf("%-6s %5u %5u  %-6s %-8s %s\n", dt->name, dt->block_elems, dt->block_bytes,
               cv_dtype_get(dt->vec_dot_type)->name, cv_isa_name(cv_dtype_dot_isa(dt, isa)), cv_matmul_path(t, isa));
    }

    print_operations();

    int failed = 0;
    if (isa != CV_ISA_SCALAR) {
        printf("\nself-check (%s matmul vs scalar reference, 64x512, 5 tokens; max error / max |y|):\n ",
               cv_isa_name(isa));
        for (uint32_t t = 0; t < CV_GGML_TYPE_COUNT; t++) {
            const cv_dtype *dt = cv_dtype_get(t);
            if (!dt || !dt->is_weight)
                continue;
            /* Activation rounding ties may differ: one level of one value. */
            double e = self_check(t, isa, pool), tol = dt->is_quantized ? 2e-2 : 1e-5;
            bool ok = e >= 0 && e <= tol;
            failed += !ok;
            printf(" %s %s (%.1e)", dt->name, ok ? "ok" : "FAILED", e);
        }
        printf("\n");
    }

    double bw_gbs = 0;
    if (!quick) {
        cv_probe_result bw, pk, pk32;
        printf("\nprobes (%d threads, median of repeats; the machine may be shared, run twice):\n", cv_pool_size(pool));
        cv_probe_read_bandwidth(pool, &bw, NULL);
        printf("  read bandwidth          %8.2f GB/s    (best %.2f; 256 MiB, 256-bit loads)\n", bw.value, bw.best);
        bw_gbs = bw.value;
        for (int l = CV_ISA_AVX2; l < CV_ISA_COUNT; l++) {
            if (cv_probe_int8_peak(pool, l, &pk, &err) == 0)
                printf("  int8 peak, %-8s      %8.1f GMAC/s  (best %.1f; %s)\n", cv_isa_name(l), pk.value / 1e9,
                       pk.best / 1e9, cv_probe_int8_what(l));
            else
                printf("  int8 peak, %-8s      n/a (%s)\n", cv_isa_name(l), err.msg);
        }
        if (cv_probe_int8_peak_i32(pool, &pk32, NULL) == 0)
            printf("  int8 step, i32 sums     %8.1f GMAC/s  (best %.1f; vpmaddubsw + vpmaddwd + vpaddd)\n",
                   pk32.value / 1e9, pk32.best / 1e9);
    }
    cv_pool_destroy(pool);
    const int model_failed = model ? check_model(model, bw_gbs, gpu) : 0;
    if (failed)
        fprintf(stderr, "corvid doctor: %d dtype(s) failed the self-check; run with CORVID_ISA=scalar and report it\n",
                failed);
    return failed || model_failed ? 1 : 0;
}
