/* cuda.c — the CUDA backend: one per device, the table's operations as
 * kernel launches on CUDA streams.
 *
 * Weights are uploaded at mat_create in their GGUF block layout (the
 * kernels read the blocks as the CPU's reference defines them; no repack),
 * into memory the backend owns. A stream is a CUDA stream (non-blocking)
 * with grow-only scratch buffers for quantized activations and for the
 * host inputs of row operations (a norm's weight, a bias, a gather map,
 * copied in stream order); operations are queued and return at once, sync
 * and download wait. Activations, results and the expert-routed matmul's
 * expert/src arrays are device memory (rows_alloc; cv_cuda_alloc for
 * tests).
 *
 * Kernel modules are compiled on first use (cuda_rtc.c, cached on disk):
 * act.cu, rows.cu, attn.cu and moe.cu when the first stream is created,
 * mm.cu once per
 * weight type when the first matrix of that type is. A launch that fails
 * is logged and recorded on its stream (the table's operations return
 * nothing), which then skips its work until cv_cuda_stream_error reads it.
 *
 * The driver's primary context is per process and per device, so backends
 * are too: a small registry under a mutex, filled on first open and kept
 * for the process's life, as the CPU backend is. */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/cuda_int.h"
#include "kernels/kernels.h"

#define MAX_DEVICES 16
/* Warps a block of the matmul kernels (mm.cu's CV_MM_WARPS) and the
 * largest decode tile: up to this many tokens run 1-row tiles. */
#define MM_WARPS 4
#define MM_DECODE_TOKENS 8
#define ROUTE_TILE 8 /* common.cuh's CV_ROUTE_TILE */
/* An expert-routed call with more routes than this groups them by expert
 * first (one more launch), so an expert's rows are read once per tile of 8
 * routes rather than once per route. */
#define ROUTES_DIRECT_MAX 16
#define ACT_BLOCK_BYTES 48 /* cv_act_q8: 32 levels, scale, two half sums */

/* The kernels every stream needs (those of the base programs), loaded when
 * the first stream is created. */
enum { K_QUANTIZE, K_ROUTE_GROUP, K_RMSNORM, K_ADD, K_SCALE, K_SOFTCAP, K_GLU, K_SIGMOID_MUL, K_ATTN_ROWS,
       K_MOE_ROUTE, K_MOE_GLU, K_MOE_SUM, K_COUNT };
#define N_BASE 4
static const char *const base_sources[N_BASE] = { "act.cu", "rows.cu", "attn.cu", "moe.cu" };
static const struct {
    int source; /* into base_sources */
    const char *name;
} base_kernels[K_COUNT] = {
    [K_QUANTIZE] = { 0, "cv_quantize_q8" }, [K_ROUTE_GROUP] = { 0, "cv_route_group" },
    [K_RMSNORM] = { 1, "cv_rmsnorm" },      [K_ADD] = { 1, "cv_add" },
    [K_SCALE] = { 1, "cv_scale" },          [K_SOFTCAP] = { 1, "cv_softcap" },
    [K_GLU] = { 1, "cv_glu" },              [K_SIGMOID_MUL] = { 1, "cv_sigmoid_mul" },
    [K_ATTN_ROWS] = { 2, "cv_attn_rows" },  [K_MOE_ROUTE] = { 3, "cv_moe_route" },
    [K_MOE_GLU] = { 3, "cv_moe_glu" },      [K_MOE_SUM] = { 3, "cv_moe_sum" },
};

typedef struct mm_module {
    pthread_mutex_t mu;    /* held while compiling: the types compile in parallel */
    bool tried;
    int rc;                /* 0: loaded */
    char msg[512];         /* why not */
    cu_module mod;
    cu_function dense[5];  /* 1x1, 1x2, 1x4, 1x8, 4x8 */
    cu_function routes, grouped;
    cu_function dequant;   /* cv_dequant_rows */
} mm_module;

typedef struct cuda_dev {
    cv_backend pub;
    int ordinal;
    cv_cuda_driver drv;
    cv_cuda_nvrtc rtc;
    cv_cuda_target target;
    cu_device dev;
    cu_context ctx;
    cv_cuda_device_info info;
    char cache_dir[PATH_MAX];
    pthread_mutex_t mu;    /* loading the base programs */
    bool base_tried;       /* the stream kernels below */
    int base_rc;
    char base_msg[512];
    cu_module base_mod[N_BASE]; /* base_sources' */
    cu_function k[K_COUNT];
    mm_module mm[CV_GGML_TYPE_COUNT];
} cuda_dev;

typedef struct cuda_mat {
    cv_bmat pub;
    cu_dptr p;
    size_t row_bytes;
    const mm_module *mm;
} cuda_mat;

typedef struct cuda_stream {
    cv_bstream pub;
    cu_stream s;
    cu_dptr act;           /* quantized activations */
    size_t act_bytes;
    cu_dptr aux;           /* a row operation's host inputs, copied in */
    size_t aux_bytes;
    uint8_t *stage;        /* host memory gathering what embed_rows copies in */
    size_t stage_bytes;
    int err_code;          /* the first failure, CV_E*; 0 none */
    char err_msg[512];
} cuda_stream;

struct cv_experts_ws {
    int64_t max_rows, max_n_in, max_n_out;
    int32_t n_expert;
    cu_dptr wp;            /* [n_expert] device addresses of the experts' matrices */
    cu_dptr order;         /* [max_rows] */
    cu_dptr tiles;         /* [max_tiles] int4 */
    cu_dptr n_tiles;       /* int */
    cu_dptr act;           /* [max_rows] quantized rows of max_n_in */
    uint64_t *wp_host;     /* [n_expert] staging */
};

static cuda_dev *dev_of(const cv_backend *be) { return (cuda_dev *)be; }
static cuda_stream *stream_of(cv_bstream *s) { return (cuda_stream *)s; }

/* The context is current per thread: every entry point makes it so. */
static void ctx_enter(cuda_dev *d) { d->drv.cuCtxSetCurrent(d->ctx); }

/* ---- the weight types ---- */

/* Whether mm.cu has a kernel for type, and whether its activations are
 * quantized (int8 levels) or the f32 rows. */
static bool gpu_type(uint32_t type, bool *int8)
{
    switch (type) {
    case CV_GGML_F32: case CV_GGML_F16: case CV_GGML_BF16:
        *int8 = false;
        return true;
    case CV_GGML_Q4_0: case CV_GGML_Q4_1: case CV_GGML_Q5_0: case CV_GGML_Q5_1: case CV_GGML_Q8_0:
    case CV_GGML_Q2_K: case CV_GGML_Q3_K: case CV_GGML_Q4_K: case CV_GGML_Q5_K: case CV_GGML_Q6_K:
    case CV_GGML_IQ4_NL: case CV_GGML_IQ4_XS: case CV_GGML_MXFP4:
        *int8 = true;
        return true;
    default:
        return false;
    }
}

static size_t act_row_bytes(uint32_t type, int64_t n_in)
{
    bool int8 = false;
    gpu_type(type, &int8);
    return int8 ? (size_t)(n_in / 32) * ACT_BLOCK_BYTES : (size_t)n_in * sizeof(float);
}

/* ---- modules ---- */

static int load_image(cuda_dev *d, const char *source, const char *defines, cu_module *mod, char *msg, size_t n_msg)
{
    cv_buf image = { 0 };
    cv_err err = { 0 };
    bool hit = false;
    const double t0 = cv_now_s();
    int rc = cv_cuda_rtc_get(&d->rtc, &d->target, d->cache_dir, source, defines, &image, &hit, &err);
    if (rc == 0) {
        if (!hit)
            cv_info("cuda:%d: compiled %s%s%s for %s_%d in %.1f s%s%s", d->ordinal, source, *defines ? " " : "", defines,
                    d->target.ptx ? "compute" : "sm", d->target.sm, cv_now_s() - t0,
                    d->cache_dir[0] ? ", cached in " : " (no cache directory)", d->cache_dir);
        char name[64];
        const cu_result r = d->drv.cuModuleLoadData(mod, image.data);
        if (r != CU_SUCCESS)
            rc = cv_err_set(&err, CV_EUNSUPPORTED, "cuda:%d: the driver cannot load %s %s built for %s_%d: %s",
                            d->ordinal, source, defines, d->target.ptx ? "compute" : "sm", d->target.sm,
                            cv_cuda_result_name(&d->drv, r, name, sizeof name));
    }
    if (rc)
        snprintf(msg, n_msg, "%s", err.msg);
    cv_buf_free(&image);
    return rc;
}

static int get_fn(cuda_dev *d, cu_module mod, const char *name, cu_function *f, char *msg, size_t n_msg)
{
    char rn[64];
    const cu_result r = d->drv.cuModuleGetFunction(f, mod, name);
    if (r == CU_SUCCESS)
        return 0;
    snprintf(msg, n_msg, "cuda:%d: kernel %s missing from its module: %s", d->ordinal, name,
             cv_cuda_result_name(&d->drv, r, rn, sizeof rn));
    return CV_EUNSUPPORTED;
}

/* The base programs, which every stream needs. */
static int base_modules(cuda_dev *d, cv_err *err)
{
    pthread_mutex_lock(&d->mu);
    if (!d->base_tried) {
        d->base_tried = true;
        for (int i = 0; i < N_BASE && d->base_rc == 0; i++)
            d->base_rc = load_image(d, base_sources[i], "", &d->base_mod[i], d->base_msg, sizeof d->base_msg);
        for (int k = 0; k < K_COUNT && d->base_rc == 0; k++)
            d->base_rc = get_fn(d, d->base_mod[base_kernels[k].source], base_kernels[k].name, &d->k[k], d->base_msg,
                                sizeof d->base_msg);
    }
    const int rc = d->base_rc;
    pthread_mutex_unlock(&d->mu);
    return rc ? cv_err_set(err, rc, "%s", d->base_msg) : 0;
}

/* mm.cu for one weight type. */
static int mm_module_get(cuda_dev *d, uint32_t type, const mm_module **out, cv_err *err)
{
    static const char *const dense_names[5] = { "cv_mm_dense_1x1", "cv_mm_dense_1x2", "cv_mm_dense_1x4",
                                                "cv_mm_dense_1x8", "cv_mm_dense_4x8" };
    mm_module *m = &d->mm[type];
    pthread_mutex_lock(&m->mu);
    if (!m->tried) {
        m->tried = true;
        char defines[32];
        snprintf(defines, sizeof defines, "-DCV_WTYPE=%u", type);
        m->rc = load_image(d, "mm.cu", defines, &m->mod, m->msg, sizeof m->msg);
        for (int i = 0; i < 5 && m->rc == 0; i++)
            m->rc = get_fn(d, m->mod, dense_names[i], &m->dense[i], m->msg, sizeof m->msg);
        if (m->rc == 0)
            m->rc = get_fn(d, m->mod, "cv_mm_routes_1", &m->routes, m->msg, sizeof m->msg);
        if (m->rc == 0)
            m->rc = get_fn(d, m->mod, "cv_mm_grouped_4x8", &m->grouped, m->msg, sizeof m->msg);
        if (m->rc == 0)
            m->rc = get_fn(d, m->mod, "cv_dequant_rows", &m->dequant, m->msg, sizeof m->msg);
    }
    const int rc = m->rc;
    pthread_mutex_unlock(&m->mu);
    *out = m;
    return rc ? cv_err_set(err, rc, "%s", m->msg) : 0;
}

/* ---- device memory ---- */

static int dev_alloc(cuda_dev *d, size_t n, cu_dptr *p, const char *what, cv_err *err)
{
    char rn[64];
    const cu_result r = d->drv.cuMemAlloc(p, n ? n : 1);
    if (r == CU_SUCCESS)
        return 0;
    *p = 0;
    size_t free_b = 0, total_b = 0;
    d->drv.cuMemGetInfo(&free_b, &total_b);
    if (r == CU_ERROR_OUT_OF_MEMORY)
        return cv_err_set(err, CV_ENOMEM, "cuda:%d: out of memory: %s takes %.1f MiB, %.1f MiB free of %.1f MiB",
                          d->ordinal, what, n / 1048576.0, free_b / 1048576.0, total_b / 1048576.0);
    return cv_err_set(err, CV_EIO, "cuda:%d: allocating %.1f MiB for %s: %s", d->ordinal, n / 1048576.0, what,
                      cv_cuda_result_name(&d->drv, r, rn, sizeof rn));
}

int cv_cuda_alloc(cv_backend *be, size_t n, void **out, cv_err *err)
{
    cuda_dev *d = dev_of(be);
    ctx_enter(d);
    cu_dptr p;
    int rc = dev_alloc(d, n, &p, "a buffer", err);
    *out = rc ? NULL : (void *)(uintptr_t)p;
    return rc;
}

void cv_cuda_free(cv_backend *be, void *p)
{
    cuda_dev *d = dev_of(be);
    if (!p)
        return;
    ctx_enter(d);
    d->drv.cuMemFree((cu_dptr)(uintptr_t)p);
}

static int copy_result(cuda_dev *d, cu_result r, const char *what, size_t n, cv_err *err)
{
    char rn[64];
    if (r == CU_SUCCESS)
        return 0;
    return cv_err_set(err, CV_EIO, "cuda:%d: %s of %zu bytes: %s", d->ordinal, what, n,
                      cv_cuda_result_name(&d->drv, r, rn, sizeof rn));
}

int cv_cuda_upload(cv_backend *be, void *dst, const void *src, size_t n, cv_err *err)
{
    cuda_dev *d = dev_of(be);
    ctx_enter(d);
    return copy_result(d, d->drv.cuMemcpyHtoD((cu_dptr)(uintptr_t)dst, src, n), "upload", n, err);
}

int cv_cuda_download(cv_backend *be, void *dst, const void *src, size_t n, cv_err *err)
{
    cuda_dev *d = dev_of(be);
    ctx_enter(d);
    return copy_result(d, d->drv.cuMemcpyDtoH(dst, (cu_dptr)(uintptr_t)src, n), "download", n, err);
}

int cv_cuda_copy(cv_backend *be, void *dst, const void *src, size_t n, cv_err *err)
{
    cuda_dev *d = dev_of(be);
    ctx_enter(d);
    /* a device-to-device copy returns before it is done: wait for it */
    cu_result r = d->drv.cuMemcpyDtoD((cu_dptr)(uintptr_t)dst, (cu_dptr)(uintptr_t)src, n);
    if (r == CU_SUCCESS)
        r = d->drv.cuCtxSynchronize();
    return copy_result(d, r, "device copy", n, err);
}

/* ---- streams ---- */

/* Records a stream's first failure; later operations skip their work. */
static void stream_fail(cuda_stream *st, int code, const char *what, cu_result r)
{
    cuda_dev *d = dev_of(st->pub.be);
    char rn[64];
    if (st->err_code)
        return;
    st->err_code = code;
    snprintf(st->err_msg, sizeof st->err_msg, "cuda:%d: %s: %s", d->ordinal, what,
             r ? cv_cuda_result_name(&d->drv, r, rn, sizeof rn) : "failed");
    cv_error("%s (the stream's later work is skipped)", st->err_msg);
}

/* The same, for a failure err already says in full. */
static void stream_fail_err(cuda_stream *st, const cv_err *err)
{
    if (st->err_code)
        return;
    snprintf(st->err_msg, sizeof st->err_msg, "%s", err->msg);
    st->err_code = err->code;
    cv_error("%s (the stream's later work is skipped)", err->msg);
}

int cv_cuda_stream_error(cv_bstream *s, cv_err *err)
{
    cuda_stream *st = stream_of(s);
    const int rc = st->err_code;
    if (rc)
        cv_err_set(err, rc, "%s", st->err_msg);
    st->err_code = 0;
    st->err_msg[0] = 0;
    return rc;
}

static void launch(cuda_stream *st, cu_function f, unsigned gx, unsigned gy, unsigned threads, unsigned shared,
                   void **params, const char *what)
{
    cuda_dev *d = dev_of(st->pub.be);
    if (st->err_code)
        return;
    const cu_result r = d->drv.cuLaunchKernel(f, gx, gy, 1, threads, 1, 1, shared, st->s, params, NULL);
    if (r != CU_SUCCESS)
        stream_fail(st, CV_EIO, what, r);
}

/* Grows one of the stream's scratch buffers to n bytes (a sync first:
 * queued work may still read the old one); false with the stream failed
 * when the device has no room. */
static bool scratch(cuda_stream *st, cu_dptr *buf, size_t *cap, size_t n, const char *what)
{
    cuda_dev *d = dev_of(st->pub.be);
    if (n <= *cap)
        return true;
    d->drv.cuStreamSynchronize(st->s);
    if (*buf)
        d->drv.cuMemFree(*buf);
    *buf = 0;
    *cap = 0;
    cv_err err = { 0 };
    if (dev_alloc(d, n + n / 4, buf, what, &err)) {
        stream_fail_err(st, &err);
        return false;
    }
    *cap = n + n / 4;
    return true;
}

static void stream_reserve(cv_bstream *s, const cv_bmat *const *mats, int32_t n_mats, int64_t max_tok)
{
    size_t row = 0;
    for (int32_t i = 0; i < n_mats; i++) {
        bool int8 = false;
        if (gpu_type(mats[i]->type, &int8) && int8)
            row = CV_MAX(row, act_row_bytes(mats[i]->type, mats[i]->n_in));
    }
    cuda_stream *st = stream_of(s);
    if (row > 0 && !st->err_code) {
        ctx_enter(dev_of(s->be));
        scratch(st, &st->act, &st->act_bytes, row * (size_t)max_tok, "the activation scratch");
    }
}

static void quantize_rows(cuda_stream *st, const float *x, int64_t ldx, int64_t n_in, int64_t n_rows, cu_dptr out)
{
    cuda_dev *d = dev_of(st->pub.be);
    cu_dptr xp = (cu_dptr)(uintptr_t)x;
    long long ld = ldx, n = n_in, out_ld = n_in / 32;
    void *params[] = { &xp, &ld, &n, &out, &out_ld };
    launch(st, d->k[K_QUANTIZE], (unsigned)((n_in + 255) / 256), (unsigned)n_rows, 256, 0, params, "quantizing activations");
}

static int stream_create(cv_backend *be, int32_t n_threads, cv_bstream **out, cv_err *err)
{
    cuda_dev *d = dev_of(be);
    *out = NULL;
    ctx_enter(d);
    int rc = base_modules(d, err);
    if (rc)
        return rc;
    cuda_stream *st = cv_xcalloc(1, sizeof *st);
    st->pub.be = be;
    char rn[64];
    const cu_result r = d->drv.cuStreamCreate(&st->s, CU_STREAM_NON_BLOCKING);
    if (r != CU_SUCCESS) {
        free(st);
        return cv_err_set(err, CV_EIO, "cuda:%d: creating a stream: %s", d->ordinal,
                          cv_cuda_result_name(&d->drv, r, rn, sizeof rn));
    }
    *out = &st->pub;
    return 0;
}

static void stream_destroy(cv_bstream *s)
{
    cuda_stream *st = stream_of(s);
    cuda_dev *d = dev_of(s->be);
    ctx_enter(d);
    d->drv.cuStreamSynchronize(st->s);
    if (st->act)
        d->drv.cuMemFree(st->act);
    if (st->aux)
        d->drv.cuMemFree(st->aux);
    free(st->stage);
    d->drv.cuStreamDestroy(st->s);
    free(st);
}

static int stream_threads(const cv_bstream *s) { (void)s; return 1; }

/* The device computes; the one host thread that issues work stays. */
static void stream_set_threads(cv_bstream *s, int32_t n) { (void)s, (void)n; }

static void stream_sync(cv_bstream *s)
{
    cuda_stream *st = stream_of(s);
    cuda_dev *d = dev_of(s->be);
    ctx_enter(d);
    const cu_result r = d->drv.cuStreamSynchronize(st->s);
    if (r != CU_SUCCESS)
        stream_fail(st, CV_EIO, "the stream's work", r);
}

/* ---- weights ---- */

static int mat_create(cv_backend *be, uint32_t type, int64_t n_in, int64_t n_out, const void *data, size_t n_bytes,
                      cv_bmat **out, cv_err *err)
{
    cuda_dev *d = dev_of(be);
    *out = NULL;
    const cv_dtype *dt = cv_dtype_get(type);
    bool int8;
    if (!dt || !dt->is_weight || !gpu_type(type, &int8))
        return cv_err_set(err, CV_EUNSUPPORTED, "cuda:%d: no matmul kernel for tensor type %u (%s)", d->ordinal, type,
                          dt ? dt->name : "unknown");
    if (n_in <= 0 || n_out <= 0)
        return cv_err_set(err, CV_EINVAL, "cuda matmul weights: shape %lld x %lld, both must be > 0",
                          (long long)n_out, (long long)n_in);
    if (n_in > CV_MAX_MATMUL_DIM || n_out > CV_MAX_MATMUL_DIM)
        return cv_err_set(err, CV_ELIMIT, "cuda matmul weights: shape %lld x %lld exceeds the limit of %d per dimension",
                          (long long)n_out, (long long)n_in, CV_MAX_MATMUL_DIM);
    if (n_in % dt->block_elems != 0 || (int8 && n_in % 32 != 0))
        return cv_err_set(err, CV_EINVAL, "cuda matmul weights: row of %lld %s values is not a multiple of its block of %u",
                          (long long)n_in, dt->name, dt->block_elems);
    const size_t row_bytes = (size_t)(n_in / dt->block_elems) * dt->block_bytes;
    if (n_bytes != row_bytes * (size_t)n_out)
        return cv_err_set(err, CV_EINVAL, "cuda matmul weights: %zu bytes given, a %lld x %lld %s matrix takes %zu",
                          n_bytes, (long long)n_out, (long long)n_in, dt->name, row_bytes * (size_t)n_out);
    ctx_enter(d);
    const mm_module *mm;
    int rc = mm_module_get(d, type, &mm, err);
    if (rc)
        return rc;
    char what[96];
    snprintf(what, sizeof what, "a %lld x %lld %s matrix", (long long)n_out, (long long)n_in, dt->name);
    cu_dptr p;
    if ((rc = dev_alloc(d, n_bytes, &p, what, err)))
        return rc;
    if ((rc = copy_result(d, d->drv.cuMemcpyHtoD(p, data, n_bytes), "uploading weights", n_bytes, err))) {
        d->drv.cuMemFree(p);
        return rc;
    }
    cuda_mat *m = cv_xcalloc(1, sizeof *m);
    m->p = p;
    m->row_bytes = row_bytes;
    m->mm = mm;
    m->pub = (cv_bmat){ .type = type, .n_in = n_in, .n_out = n_out, .bytes = n_bytes, .owns_data = true };
    *out = &m->pub;
    return 0;
}

static void mat_destroy(cv_backend *be, cv_bmat *m)
{
    cuda_dev *d = dev_of(be);
    ctx_enter(d);
    d->drv.cuMemFree(((cuda_mat *)m)->p);
    free(m);
}

static const char *mat_path(const cv_bmat *m)
{
    bool int8 = false;
    gpu_type(m->type, &int8);
    return int8 ? "cuda: GGUF blocks in place, dp4a on int8 activations; warp tiles 1x1-1x8 (decode), 4x8 (batch)"
                : "cuda: f32 FMAs on f32 activations; warp tiles 1x1-1x8 (decode), 4x8 (batch)";
}

/* ---- matrix products ---- */

static void matmul(cv_bstream *s, const cv_bmat *w, int64_t n_tok, const float *x, int64_t ldx, float *y, int64_t ldy)
{
    cuda_stream *st = stream_of(s);
    cuda_dev *d = dev_of(s->be);
    const cuda_mat *m = (const cuda_mat *)w;
    if (n_tok <= 0 || st->err_code)
        return;
    ctx_enter(d);
    bool int8 = false;
    gpu_type(w->type, &int8);
    cu_dptr act = (cu_dptr)(uintptr_t)x;
    long long act_ld = ldx * (long long)sizeof(float);
    if (int8) {
        const size_t row = act_row_bytes(w->type, w->n_in);
        if (!scratch(st, &st->act, &st->act_bytes, row * (size_t)n_tok, "the activation scratch"))
            return;
        act = st->act;
        act_ld = (long long)row;
        quantize_rows(st, x, ldx, w->n_in, n_tok, act);
    }
    cu_dptr wp = m->p, yp = (cu_dptr)(uintptr_t)y;
    long long rb = (long long)m->row_bytes, n_in = w->n_in, n_out = w->n_out, nt = n_tok, ly = ldy;
    void *params[] = { &wp, &rb, &n_in, &n_out, &act, &act_ld, &nt, &yp, &ly };
    if (n_tok <= MM_DECODE_TOKENS) {
        const int v = n_tok == 1 ? 0 : n_tok == 2 ? 1 : n_tok <= 4 ? 2 : 3;
        launch(st, m->mm->dense[v], (unsigned)((w->n_out + MM_WARPS - 1) / MM_WARPS), 1, 32 * MM_WARPS, 0, params,
               "matmul");
    } else {
        launch(st, m->mm->dense[4], (unsigned)((w->n_out + 4 * MM_WARPS - 1) / (4 * MM_WARPS)),
               (unsigned)((n_tok + ROUTE_TILE - 1) / ROUTE_TILE), 32 * MM_WARPS, 0, params, "matmul");
    }
}

static int64_t max_tiles(int64_t max_rows, int32_t n_expert)
{
    return (max_rows + ROUTE_TILE - 1) / ROUTE_TILE + CV_MIN((int64_t)n_expert, max_rows);
}

static cv_experts_ws *experts_ws_create(cv_bstream *s, int64_t max_rows, int64_t max_n_in, int64_t max_n_out,
                                        int32_t n_expert)
{
    cuda_dev *d = dev_of(s->be);
    ctx_enter(d);
    cv_experts_ws *ws = cv_xcalloc(1, sizeof *ws);
    *ws = (cv_experts_ws){ .max_rows = max_rows, .max_n_in = max_n_in, .max_n_out = max_n_out, .n_expert = n_expert };
    cv_err err = { 0 };
    /* quantized rows (float types read X itself) */
    const size_t act = (size_t)max_rows * (size_t)((max_n_in + 31) / 32) * ACT_BLOCK_BYTES;
    if (dev_alloc(d, (size_t)n_expert * sizeof(uint64_t), &ws->wp, "the experts' table", &err) ||
        dev_alloc(d, (size_t)max_rows * sizeof(int32_t), &ws->order, "the routes' order", &err) ||
        dev_alloc(d, (size_t)max_tiles(max_rows, n_expert) * 16, &ws->tiles, "the routes' tiles", &err) ||
        dev_alloc(d, sizeof(int32_t), &ws->n_tiles, "the tile count", &err) ||
        dev_alloc(d, act, &ws->act, "the experts' activations", &err)) {
        cv_error("%s", err.msg);
        cv_be_experts_ws_destroy(s, ws);
        return NULL;
    }
    ws->wp_host = cv_xcalloc((size_t)n_expert, sizeof *ws->wp_host);
    return ws;
}

static void experts_ws_destroy(cv_bstream *s, cv_experts_ws *ws)
{
    cuda_dev *d = dev_of(s->be);
    ctx_enter(d);
    d->drv.cuStreamSynchronize(stream_of(s)->s);
    const cu_dptr bufs[] = { ws->wp, ws->order, ws->tiles, ws->n_tiles, ws->act };
    for (size_t i = 0; i < CV_ARRAY_LEN(bufs); i++)
        if (bufs[i])
            d->drv.cuMemFree(bufs[i]);
    free(ws->wp_host);
    free(ws);
}

static void matmul_experts(cv_bstream *s, const cv_bmat *const *w, int32_t n_expert, int64_t n_x, const float *x,
                           int64_t ldx, int64_t n_rows, const int32_t *expert, const int32_t *src, float *y,
                           int64_t ldy, cv_experts_ws *ws)
{
    cuda_stream *st = stream_of(s);
    cuda_dev *d = dev_of(s->be);
    if (n_rows <= 0 || st->err_code)
        return;
    if (!ws) {
        stream_fail(st, CV_ENOMEM, "expert matmul without its workspace (experts_ws_create failed)", 0);
        return;
    }
    /* the caller's invariants, as the CPU backend asserts them */
    assert(n_rows <= ws->max_rows && (!src || n_x <= ws->max_rows) && n_expert <= ws->n_expert);
    ctx_enter(d);
    const cuda_mat *m0 = NULL;
    for (int32_t e = 0; e < n_expert; e++) {
        ws->wp_host[e] = w[e] ? ((const cuda_mat *)w[e])->p : 0;
        if (w[e] && !m0)
            m0 = (const cuda_mat *)w[e];
    }
    if (!m0)
        return;
    assert(m0->pub.n_in <= ws->max_n_in && m0->pub.n_out <= ws->max_n_out);
    const cu_result r = d->drv.cuMemcpyHtoDAsync(ws->wp, ws->wp_host, (size_t)n_expert * sizeof(uint64_t), st->s);
    if (r != CU_SUCCESS) {
        stream_fail(st, CV_EIO, "uploading the experts' table", r);
        return;
    }
    bool int8 = false;
    gpu_type(m0->pub.type, &int8);
    const int64_t n_act = src ? n_x : n_rows;
    cu_dptr act = (cu_dptr)(uintptr_t)x;
    long long act_ld = ldx * (long long)sizeof(float);
    if (int8) {
        act = ws->act;
        act_ld = (long long)act_row_bytes(m0->pub.type, m0->pub.n_in);
        quantize_rows(st, x, ldx, m0->pub.n_in, n_act, act);
    }
    cu_dptr wp = ws->wp, ep = (cu_dptr)(uintptr_t)expert, sp = (cu_dptr)(uintptr_t)src, yp = (cu_dptr)(uintptr_t)y;
    long long rb = (long long)m0->row_bytes, n_in = m0->pub.n_in, n_out = m0->pub.n_out, ly = ldy;
    if (n_rows <= ROUTES_DIRECT_MAX) {
        void *params[] = { &wp, &rb, &n_in, &n_out, &act, &act_ld, &ep, &sp, &yp, &ly };
        launch(st, m0->mm->routes, (unsigned)((n_out + MM_WARPS - 1) / MM_WARPS), (unsigned)n_rows, 32 * MM_WARPS, 0,
               params, "expert matmul");
        return;
    }
    int rows = (int)n_rows, ne = n_expert;
    cu_dptr order = ws->order, tiles = ws->tiles, nt = ws->n_tiles;
    void *gp[] = { &ep, &rows, &ne, &order, &tiles, &nt };
    launch(st, d->k[K_ROUTE_GROUP], 1, 1, 256, (unsigned)(2 * n_expert * sizeof(int32_t)), gp, "grouping routes");
    void *params[] = { &wp, &rb, &n_in, &n_out, &act, &act_ld, &sp, &order, &tiles, &nt, &yp, &ly };
    launch(st, m0->mm->grouped, (unsigned)((n_out + 4 * MM_WARPS - 1) / (4 * MM_WARPS)),
           (unsigned)max_tiles(n_rows, n_expert), 32 * MM_WARPS, 0, params, "expert matmul");
}

/* ---- activation memory and row operations ---- */

static void *rows_alloc(cv_backend *be, size_t n_bytes)
{
    cuda_dev *d = dev_of(be);
    ctx_enter(d);
    cu_dptr p;
    cv_err err = { 0 };
    if (dev_alloc(d, n_bytes, &p, "activation rows", &err)) {
        cv_error("%s", err.msg);
        return NULL;
    }
    return (void *)(uintptr_t)p;
}

static void rows_free(cv_backend *be, void *p)
{
    cv_cuda_free(be, p);
}

static void upload(cv_bstream *s, void *dst, const void *src, size_t n_bytes)
{
    cuda_stream *st = stream_of(s);
    cuda_dev *d = dev_of(s->be);
    if (st->err_code)
        return;
    ctx_enter(d);
    /* from pageable memory the driver stages src before returning */
    const cu_result r = d->drv.cuMemcpyHtoDAsync((cu_dptr)(uintptr_t)dst, src, n_bytes, st->s);
    if (r != CU_SUCCESS)
        stream_fail(st, CV_EIO, "upload", r);
}

static void download(cv_bstream *s, void *dst, const void *src, size_t n_bytes)
{
    cuda_stream *st = stream_of(s);
    cuda_dev *d = dev_of(s->be);
    ctx_enter(d);
    cu_result r = d->drv.cuStreamSynchronize(st->s);
    if (r == CU_SUCCESS)
        r = d->drv.cuMemcpyDtoH(dst, (cu_dptr)(uintptr_t)src, n_bytes);
    if (r != CU_SUCCESS)
        stream_fail(st, CV_EIO, "download", r);
}

/* An operation's n (<= HOST_INPUTS_MAX) host inputs (a norm's weight, a
 * bias, a gather map, positions: backend.h) copied into the stream's aux
 * buffer in stream order, each 256-aligned; a NULL src stays a NULL device
 * pointer. */
#define HOST_INPUTS_MAX 8
static bool host_inputs(cuda_stream *st, int n, const void *const *src, const size_t *bytes, cu_dptr *out)
{
    cuda_dev *d = dev_of(st->pub.be);
    size_t off[HOST_INPUTS_MAX], total = 0;
    assert(n <= HOST_INPUTS_MAX);
    for (int i = 0; i < n; i++) {
        off[i] = total;
        total += src[i] ? (bytes[i] + 255) & ~(size_t)255 : 0;
    }
    if (!scratch(st, &st->aux, &st->aux_bytes, total, "a row operation's inputs"))
        return false;
    for (int i = 0; i < n; i++) {
        out[i] = src[i] ? st->aux + off[i] : 0;
        const cu_result r = src[i] ? d->drv.cuMemcpyHtoDAsync(out[i], src[i], bytes[i], st->s) : CU_SUCCESS;
        if (r != CU_SUCCESS) {
            stream_fail(st, CV_EIO, "copying a row operation's inputs", r);
            return false;
        }
    }
    return true;
}

/* Whether a row operation over n_rows rows of n values runs: the
 * elementwise kernels' grid takes a row a block row, at most 65535. */
static bool rows_ok(cuda_stream *st, int32_t n_rows, int64_t n, const char *what)
{
    if (st->err_code || n_rows < 1 || n < 1)
        return false;
    if (n_rows > 65535) {
        stream_fail(st, CV_ELIMIT, what, 0);
        return false;
    }
    ctx_enter(dev_of(st->pub.be));
    return true;
}

static void elementwise(cuda_stream *st, int kernel, int32_t n_rows, int64_t n, void **params, const char *what)
{
    launch(st, dev_of(st->pub.be)->k[kernel], (unsigned)((n + 255) / 256), (unsigned)n_rows, 256, 0, params, what);
}

static void rmsnorm(cv_bstream *s, int32_t n_rows, int64_t n, const float *x, int64_t ldx, const int32_t *gather,
                    const float *w, float eps, float *y, int64_t ldy)
{
    cuda_stream *st = stream_of(s);
    if (!rows_ok(st, n_rows, n, "rmsnorm over more than 65535 rows"))
        return;
    const void *src[2] = { w, gather };
    const size_t bytes[2] = { (size_t)n * sizeof(float), (size_t)n_rows * sizeof(int32_t) };
    cu_dptr in[2];
    if (!host_inputs(st, 2, src, bytes, in))
        return;
    cu_dptr xp = (cu_dptr)(uintptr_t)x, yp = (cu_dptr)(uintptr_t)y;
    long long lx = ldx, nn = n, ly = ldy;
    void *params[] = { &xp, &lx, &in[1], &in[0], &eps, &nn, &yp, &ly };
    launch(st, dev_of(s->be)->k[K_RMSNORM], (unsigned)n_rows, 1, 256, 0, params, "rmsnorm");
}

static void add(cv_bstream *s, int32_t n_rows, int64_t n, float *y, int64_t ldy, const float *a, int64_t lda,
                const float *b, int64_t ldb)
{
    cuda_stream *st = stream_of(s);
    if (!rows_ok(st, n_rows, n, "add over more than 65535 rows"))
        return;
    cu_dptr bp = (cu_dptr)(uintptr_t)b;
    if (ldb == 0) { /* one row for every row: a bias, host memory */
        const void *src[1] = { b };
        const size_t bytes[1] = { (size_t)n * sizeof(float) };
        if (!host_inputs(st, 1, src, bytes, &bp))
            return;
    }
    cu_dptr yp = (cu_dptr)(uintptr_t)y, ap = (cu_dptr)(uintptr_t)a;
    long long ly = ldy, la = lda, lb = ldb, nn = n;
    void *params[] = { &yp, &ly, &ap, &la, &bp, &lb, &nn };
    elementwise(st, K_ADD, n_rows, n, params, "add");
}

/* x[t] = op(x[t], f): scale, softcap. */
static void in_place(cv_bstream *s, int kernel, int32_t n_rows, int64_t n, float *x, int64_t ldx, float f,
                     const char *what, const char *too_many)
{
    cuda_stream *st = stream_of(s);
    if (!rows_ok(st, n_rows, n, too_many))
        return;
    cu_dptr xp = (cu_dptr)(uintptr_t)x;
    long long lx = ldx, nn = n;
    void *params[] = { &xp, &lx, &f, &nn };
    elementwise(st, kernel, n_rows, n, params, what);
}

static void scale(cv_bstream *s, int32_t n_rows, int64_t n, float *x, int64_t ldx, float f)
{
    in_place(s, K_SCALE, n_rows, n, x, ldx, f, "scale", "scale over more than 65535 rows");
}

static void softcap(cv_bstream *s, int32_t n_rows, int64_t n, float *x, int64_t ldx, float cap)
{
    in_place(s, K_SOFTCAP, n_rows, n, x, ldx, cap, "softcap", "softcap over more than 65535 rows");
}

static void glu(cv_bstream *s, const cv_bact *act, int32_t n_rows, int64_t n, float *y, int64_t ldy, const float *g,
                int64_t ldg, const float *u, int64_t ldu)
{
    cuda_stream *st = stream_of(s);
    if (!rows_ok(st, n_rows, n, "glu over more than 65535 rows"))
        return;
    /* rows.cu's CV_GLU_* are cv_bglu's numbers */
    int kind = (int)act->kind;
    float alpha = act->alpha, limit = act->limit;
    cu_dptr yp = (cu_dptr)(uintptr_t)y, gp = (cu_dptr)(uintptr_t)g, up = (cu_dptr)(uintptr_t)u;
    long long ly = ldy, lg = ldg, lu = ldu, nn = n;
    void *params[] = { &kind, &alpha, &limit, &yp, &ly, &gp, &lg, &up, &lu, &nn };
    elementwise(st, K_GLU, n_rows, n, params, "glu");
}

static void sigmoid_mul(cv_bstream *s, int32_t n_rows, int64_t n, float *y, int64_t ldy, const float *x, int64_t ldx,
                        const float *g, int64_t ldg)
{
    cuda_stream *st = stream_of(s);
    if (!rows_ok(st, n_rows, n, "sigmoid_mul over more than 65535 rows"))
        return;
    cu_dptr yp = (cu_dptr)(uintptr_t)y, xp = (cu_dptr)(uintptr_t)x, gp = (cu_dptr)(uintptr_t)g;
    long long ly = ldy, lx = ldx, lg = ldg, nn = n;
    void *params[] = { &yp, &ly, &xp, &lx, &gp, &lg, &nn };
    elementwise(st, K_SIGMOID_MUL, n_rows, n, params, "sigmoid_mul");
}

/* ---- layer passes ---- */

/* kv_addr.cuh's cv_kv and attn.cu's cv_attn_args, field for field (the
 * kernel takes the struct by value). */
typedef struct kv_dev {
    cu_dptr data;
    int64_t head_bytes, block_bytes;
    int32_t n_blocks, n_head_kv, head_dim, n_parts, type, qgroup, run_shift, pad;
} kv_dev;
typedef struct attn_args {
    kv_dev kv;
    cu_dptr qkv, gate, q_bias, k_bias, v_bias, q_norm, k_norm, freq_factors, pos, kv_block;
    int64_t ld_qkv, ld_gate;
    int32_t n_head, n_head_kv, head_dim, kv_layer;
    int32_t gated, v_from_k, v_norm, store_kv;
    int32_t rope_style, n_rot, temp_len;
    float eps, theta, freq_scale, mscale, temp_scale;
} attn_args;
_Static_assert(sizeof(kv_dev) == 56 && sizeof(attn_args) == 216, "attn.cu's argument layout");

/* A pool as the kernels address it: its blocks device memory, laid out as
 * the CPU's (kv_pool_init's runs, or one run). */
static kv_dev kv_dev_of(const kv_pool *kv)
{
    return (kv_dev){ .data = (cu_dptr)(uintptr_t)kv->data, .head_bytes = (int64_t)kv->head_bytes,
                     .block_bytes = (int64_t)kv->block_bytes, .n_blocks = kv->n_blocks, .n_head_kv = kv->n_head_kv,
                     .head_dim = kv->head_dim, .n_parts = kv->n_parts, .type = (int32_t)kv->type,
                     .qgroup = kv->qgroup, .run_shift = kv->run_shift };
}

/* A block a row (attn.cu); the cache's blocks are device memory (kv->data,
 * rows_alloc), its other fields host memory as the engine keeps them. */
static void attn_rows(cv_bstream *s, const cv_batt_rows *a)
{
    cuda_stream *st = stream_of(s);
    if (st->err_code || a->n_rows < 1)
        return;
    ctx_enter(dev_of(s->be));
    const cv_rope_params *rope = a->rope;
    assert(rope->n_rot / 2 <= CV_MAX_ROPE_DIMS / 2 && rope->n_rot <= a->head_dim);
    const size_t n_q = (size_t)a->n_head * (size_t)a->head_dim, n_kv = (size_t)a->n_head_kv * (size_t)a->head_dim;
    const void *src[8] = { a->q_bias, a->k_bias, a->v_bias, a->q_norm, a->k_norm, rope->freq_factors, a->pos,
                           a->store_kv ? a->kv_block : NULL };
    const size_t bytes[8] = { n_q * sizeof(float), n_kv * sizeof(float), n_kv * sizeof(float),
                              (size_t)a->head_dim * sizeof(float), (size_t)a->head_dim * sizeof(float),
                              (size_t)(rope->n_rot / 2) * sizeof(float), (size_t)a->n_rows * sizeof(int32_t),
                              (size_t)a->n_rows * sizeof(int32_t) };
    cu_dptr in[8];
    if (!host_inputs(st, 8, src, bytes, in))
        return;
    attn_args p = {
        .qkv = (cu_dptr)(uintptr_t)a->qkv, .gate = (cu_dptr)(uintptr_t)a->gate, .q_bias = in[0], .k_bias = in[1],
        .v_bias = in[2], .q_norm = in[3], .k_norm = in[4], .freq_factors = in[5], .pos = in[6], .kv_block = in[7],
        .ld_qkv = a->ld_qkv, .ld_gate = a->ld_gate, .n_head = a->n_head, .n_head_kv = a->n_head_kv,
        .head_dim = a->head_dim, .kv_layer = a->kv_layer, .gated = a->gated, .v_from_k = a->v_from_k,
        .v_norm = a->v_norm, .store_kv = a->store_kv, .rope_style = (int32_t)rope->style, .n_rot = rope->n_rot,
        .temp_len = a->temp_len, .eps = a->eps, .theta = rope->theta, .freq_scale = rope->freq_scale,
        .mscale = rope->mscale, .temp_scale = a->temp_scale,
    };
    if (a->store_kv)
        p.kv = kv_dev_of(a->kv);
    void *params[] = { &p };
    launch(st, dev_of(s->be)->k[K_ATTN_ROWS], (unsigned)a->n_rows, 1, 256, 0, params, "attention rows");
}

/* The rows a call names gathered on the host, each padded to 256 bytes
 * (the alignment dtypes.cuh's loads assume of a row's start), copied into
 * the aux buffer in one copy, and dequantized there by the type's
 * program (mm.cu, compiled with the type's first matrix or here). */
static void embed_rows(cv_bstream *s, uint32_t type, int64_t n, const void *table, int64_t n_vocab, int32_t n_rows,
                       const int32_t *tokens, float scale, float *y, int64_t ldy)
{
    cuda_stream *st = stream_of(s);
    cuda_dev *d = dev_of(s->be);
    if (!rows_ok(st, n_rows, n, "embedding more than 65535 rows"))
        return;
    const cv_dtype *dt = cv_dtype_get(type);
    bool int8 = false;
    if (!dt || !gpu_type(type, &int8) || n % dt->block_elems || (int8 && n % 32)) {
        stream_fail(st, CV_EUNSUPPORTED, "no kernel reads this token embedding's type", 0);
        return;
    }
    const mm_module *mm;
    cv_err err = { 0 };
    if (mm_module_get(d, type, &mm, &err)) {
        stream_fail_err(st, &err);
        return;
    }
    const size_t row_bytes = (size_t)(n / dt->block_elems) * dt->block_bytes, pad = (row_bytes + 255) & ~(size_t)255;
    const size_t total = pad * (size_t)n_rows;
    if (total > st->stage_bytes) {
        free(st->stage);
        st->stage = cv_xmalloc(total);
        st->stage_bytes = total;
    }
    for (int32_t t = 0; t < n_rows; t++) {
        assert(tokens[t] >= 0 && tokens[t] < n_vocab);
        memcpy(st->stage + (size_t)t * pad, (const char *)table + (size_t)tokens[t] * row_bytes, row_bytes);
    }
    (void)n_vocab;
    const void *src[1] = { st->stage };
    cu_dptr rows;
    if (!host_inputs(st, 1, src, &total, &rows))
        return;
    cu_dptr yp = (cu_dptr)(uintptr_t)y;
    long long rb = (long long)pad, nn = n, ly = ldy;
    void *params[] = { &rows, &rb, &nn, &scale, &yp, &ly };
    launch(st, mm->dequant, (unsigned)((n + 255) / 256), (unsigned)n_rows, 256, 0, params, "embedding rows");
}

/* moe.cu's cv_moe_args, field for field. */
typedef struct moe_args {
    cu_dptr logits, bias, sel_bias, exp_scale, expert, src, weight;
    int64_t ld_logits;
    int32_t n_expert, k, kind, n_group, n_group_used, norm;
    float scale;
    int32_t pad;
} moe_args;
_Static_assert(sizeof(moe_args) == 96, "moe.cu's argument layout");

/* A block a row (moe.cu); logits and the routes are device memory. */
static void moe_route(cv_bstream *s, const cv_bmoe_route *r)
{
    cuda_stream *st = stream_of(s);
    if (st->err_code || r->n_rows < 1)
        return;
    assert(r->k >= 1 && r->k <= r->n_expert && r->n_expert <= CV_MAX_EXPERTS && r->k <= CV_MAX_EXPERTS_USED);
    ctx_enter(dev_of(s->be));
    const void *src[3] = { r->bias, r->sel_bias, r->exp_scale };
    const size_t n = (size_t)r->n_expert * sizeof(float), bytes[3] = { n, n, n };
    cu_dptr in[3];
    if (!host_inputs(st, 3, src, bytes, in))
        return;
    moe_args p = { .logits = (cu_dptr)(uintptr_t)r->logits, .bias = in[0], .sel_bias = in[1], .exp_scale = in[2],
                   .expert = (cu_dptr)(uintptr_t)r->expert, .src = (cu_dptr)(uintptr_t)r->src,
                   .weight = (cu_dptr)(uintptr_t)r->weight, .ld_logits = r->ld_logits, .n_expert = r->n_expert,
                   .k = r->k, .kind = (int32_t)r->kind, .n_group = r->n_group, .n_group_used = r->n_group_used,
                   .norm = r->norm, .scale = r->scale };
    void *params[] = { &p };
    launch(st, dev_of(s->be)->k[K_MOE_ROUTE], (unsigned)r->n_rows, 1, 256, 0, params, "routing experts");
}

/* Each route's biases and activation, a value a thread (moe.cu); the bias
 * tables are host memory, copied in whole. */
static void moe_glu(cv_bstream *s, const cv_bmoe_rows *m)
{
    cuda_stream *st = stream_of(s);
    const int64_t n_routes = (int64_t)m->n_rows * m->k;
    if (!rows_ok(st, (int32_t)CV_MIN(n_routes, INT32_MAX), m->n_ff, "the experts' activation over more than 65535 routes"))
        return;
    const size_t tb = (size_t)m->n_expert * (size_t)m->n_ff * sizeof(float);
    const void *src[2] = { m->gate_bias, m->up_bias };
    const size_t bytes[2] = { tb, tb };
    cu_dptr in[2];
    if (!host_inputs(st, 2, src, bytes, in))
        return;
    /* moe.cu's CV_GLU_* are cv_bglu's numbers */
    int kind = (int)m->act->kind;
    float alpha = m->act->alpha, limit = m->act->limit;
    cu_dptr ep = (cu_dptr)(uintptr_t)m->expert, gp = (cu_dptr)(uintptr_t)m->gu, hp = (cu_dptr)(uintptr_t)m->h;
    long long lg = m->ld_gu, lh = m->ld_h, ff = m->n_ff;
    void *params[] = { &kind, &alpha, &limit, &ep, &gp, &lg, &in[0], &in[1], &hp, &lh, &ff };
    launch(st, dev_of(s->be)->k[K_MOE_GLU], (unsigned)((m->n_ff + 255) / 256), (unsigned)n_routes, 256, 0, params,
           "the experts' activation");
}

/* Each row's weighted sum, a block a row (moe.cu); the down bias table,
 * the norms' weights and the shared expert's gate are host memory. */
static void moe_sum(cv_bstream *s, const cv_bmoe_rows *m)
{
    cuda_stream *st = stream_of(s);
    if (!rows_ok(st, m->n_rows, m->n, "the experts' sum over more than 65535 rows"))
        return;
    const size_t row = (size_t)m->n * sizeof(float);
    const void *src[4] = { m->down_bias, m->post_norm, m->shared ? m->sh_post_norm : NULL,
                           m->shared ? m->sh_gate : NULL };
    const size_t bytes[4] = { (size_t)m->n_expert * row, row, row, row };
    cu_dptr in[4];
    if (!host_inputs(st, 4, src, bytes, in))
        return;
    int k = m->k;
    float eps = m->eps;
    cu_dptr ep = (cu_dptr)(uintptr_t)m->expert, wp = (cu_dptr)(uintptr_t)m->weight, yp = (cu_dptr)(uintptr_t)m->y;
    cu_dptr sp = (cu_dptr)(uintptr_t)m->shared, xp = (cu_dptr)(uintptr_t)m->x, op = (cu_dptr)(uintptr_t)m->out;
    long long ly = m->ldy, ls = m->ld_shared, lx = m->ldx, lo = m->ld_out, n = m->n;
    void *params[] = { &k, &ep, &wp, &yp, &ly, &in[0], &in[1], &eps, &sp, &ls, &in[2], &in[3], &xp, &lx, &op, &lo, &n };
    launch(st, dev_of(s->be)->k[K_MOE_SUM], (unsigned)m->n_rows, 1, 256, 0, params, "the experts' sum");
}

/* ---- the Gated DeltaNet mixer ----
 * No kernels yet (docs/CUDA.md, "Not done"): no workspace is made, and the
 * pass fails its stream saying so rather than leave its rows unwritten. */

static cv_dn_ws *deltanet_ws_create(cv_bstream *s, int64_t max_rows, int32_t H_k, int32_t H_v, int32_t d)
{
    (void)max_rows, (void)H_k, (void)H_v, (void)d;
    cv_error("cuda:%d: the Gated DeltaNet mixer has no CUDA kernels yet", dev_of(s->be)->ordinal);
    return NULL;
}

static void deltanet_ws_destroy(cv_bstream *s, cv_dn_ws *ws) { (void)s, (void)ws; }

static void deltanet(cv_bstream *s, const cv_bdeltanet *a, cv_dn_ws *ws)
{
    (void)a, (void)ws;
    stream_fail(stream_of(s), CV_EUNSUPPORTED, "the Gated DeltaNet mixer has no CUDA kernels yet", 0);
}

/* ---- attention over the paged cache ----
 * No kernels yet (docs/CUDA.md, "Not done"): no workspace is made, and the
 * pass fails its stream saying so rather than leave its rows unwritten. */

static cv_att_ws *attention_ws_create(cv_bstream *s, const cv_att_ws_shape *shape)
{
    (void)shape;
    cv_error("cuda:%d: attention over the paged cache has no CUDA kernels yet", dev_of(s->be)->ordinal);
    return NULL;
}

static void attention_ws_destroy(cv_bstream *s, cv_att_ws *ws) { (void)s, (void)ws; }

static void attention(cv_bstream *s, const cv_batt *a, cv_att_ws *ws)
{
    (void)a, (void)ws;
    stream_fail(stream_of(s), CV_EUNSUPPORTED, "attention over the paged cache has no CUDA kernels yet", 0);
}

/* ---- multi-head latent attention ----
 * No kernels yet, likewise. */

static void mla_rows(cv_bstream *s, const cv_bmla_rows *a)
{
    (void)a;
    stream_fail(stream_of(s), CV_EUNSUPPORTED, "multi-head latent attention has no CUDA kernels yet", 0);
}

static void mla_latent(cv_bstream *s, const kv_pool *kv, int32_t layer, const int32_t *table, int32_t base,
                       int32_t n, float *y)
{
    (void)kv, (void)layer, (void)table, (void)base, (void)n, (void)y;
    stream_fail(stream_of(s), CV_EUNSUPPORTED, "multi-head latent attention has no CUDA kernels yet", 0);
}

static cv_mla_ws *mla_ws_create(cv_bstream *s, int32_t max_q, int32_t n_head, int32_t nope, int32_t rot, int32_t v)
{
    (void)max_q, (void)n_head, (void)nope, (void)rot, (void)v;
    cv_error("cuda:%d: multi-head latent attention has no CUDA kernels yet", dev_of(s->be)->ordinal);
    return NULL;
}

static void mla_ws_destroy(cv_bstream *s, cv_mla_ws *ws) { (void)s, (void)ws; }

static void mla_dec(cv_bstream *s, const cv_bmla_dec *a, cv_mla_ws *ws)
{
    (void)a, (void)ws;
    stream_fail(stream_of(s), CV_EUNSUPPORTED, "multi-head latent attention has no CUDA kernels yet", 0);
}

static const cv_backend_ops cuda_ops = {
    .abi = CV_BACKEND_ABI,
    .name = "cuda",
    .mat_create = mat_create,
    .mat_destroy = mat_destroy,
    .mat_path = mat_path,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .stream_threads = stream_threads,
    .stream_set_threads = stream_set_threads,
    .stream_reserve = stream_reserve,
    .sync = stream_sync,
    .matmul = matmul,
    .experts_ws_create = experts_ws_create,
    .experts_ws_destroy = experts_ws_destroy,
    .matmul_experts = matmul_experts,
    .rows_alloc = rows_alloc,
    .rows_free = rows_free,
    .upload = upload,
    .download = download,
    .rmsnorm = rmsnorm,
    .add = add,
    .scale = scale,
    .glu = glu,
    .sigmoid_mul = sigmoid_mul,
    .softcap = softcap,
    .attn_rows = attn_rows,
    .moe_route = moe_route,
    .moe_glu = moe_glu,
    .moe_sum = moe_sum,
    .deltanet_ws_create = deltanet_ws_create,
    .deltanet_ws_destroy = deltanet_ws_destroy,
    .deltanet = deltanet,
    .attention_ws_create = attention_ws_create,
    .attention_ws_destroy = attention_ws_destroy,
    .attention = attention,
    .mla_rows = mla_rows,
    .mla_latent = mla_latent,
    .mla_ws_create = mla_ws_create,
    .mla_ws_destroy = mla_ws_destroy,
    .mla_dec = mla_dec,
    .embed_rows = embed_rows,
};

/* ---- opening a device ---- */

int cv_cuda_parse_device(const char *name, int *ordinal, cv_err *err)
{
    *ordinal = 0;
    if (!strcmp(name, "cuda"))
        return 0;
    char *end;
    if (!strncmp(name, "cuda:", 5) && name[5] >= '0' && name[5] <= '9') {
        const long v = strtol(name + 5, &end, 10);
        if (!*end && v < MAX_DEVICES) {
            *ordinal = (int)v;
            return 0;
        }
    }
    return cv_err_set(err, CV_EINVAL, "device '%s': expected cpu, cuda or cuda:N (N < %d)", name, MAX_DEVICES);
}

void cv_cuda_cache_dir(char *out, size_t n)
{
    const char *v = getenv("CORVID_CUDA_CACHE");
    if (v)
        snprintf(out, n, "%s", v);
    else if ((v = getenv("XDG_CACHE_HOME")) && *v)
        snprintf(out, n, "%s/corvid/cuda", v);
    else if ((v = getenv("HOME")) && *v)
        snprintf(out, n, "%s/.cache/corvid/cuda", v);
    else
        snprintf(out, n, "%s", "");
}

/* Fills d for device `ordinal` with the driver already open; on failure
 * the caller closes what is open. */
static int dev_init(cuda_dev *d, int ordinal, cv_err *err)
{
    char rn[64];
    int count = 0;
    cu_result r = d->drv.cuDeviceGetCount(&count);
    if (r != CU_SUCCESS || count == 0)
        return cv_err_set(err, CV_EUNSUPPORTED, "no CUDA device: the driver (%s) sees no NVIDIA GPU%s%s", d->drv.path,
                          r ? ": " : "", r ? cv_cuda_result_name(&d->drv, r, rn, sizeof rn) : "");
    if (ordinal >= count && count == 1)
        return cv_err_set(err, CV_EUNSUPPORTED, "cuda:%d: this machine has one CUDA device, cuda:0", ordinal);
    if (ordinal >= count)
        return cv_err_set(err, CV_EUNSUPPORTED, "cuda:%d: this machine has %d CUDA devices, cuda:0 to cuda:%d",
                          ordinal, count, count - 1);
    int major = 0, minor = 0;
    if ((r = d->drv.cuDeviceGet(&d->dev, ordinal)) != CU_SUCCESS ||
        (r = d->drv.cuDeviceGetName(d->info.name, (int)sizeof d->info.name, d->dev)) != CU_SUCCESS ||
        (r = d->drv.cuDeviceGetAttribute(&major, CU_ATTR_CC_MAJOR, d->dev)) != CU_SUCCESS ||
        (r = d->drv.cuDeviceGetAttribute(&minor, CU_ATTR_CC_MINOR, d->dev)) != CU_SUCCESS ||
        (r = d->drv.cuDeviceGetAttribute(&d->info.n_sm, CU_ATTR_MULTIPROCESSOR_COUNT, d->dev)) != CU_SUCCESS ||
        (r = d->drv.cuDeviceTotalMem(&d->info.total_bytes, d->dev)) != CU_SUCCESS)
        return cv_err_set(err, CV_EUNSUPPORTED, "cuda:%d: reading the device's properties: %s", ordinal,
                          cv_cuda_result_name(&d->drv, r, rn, sizeof rn));
    d->info.name[sizeof d->info.name - 1] = 0;
    d->info.sm = major * 10 + minor;
    d->info.ordinal = ordinal;
    d->info.driver_version = d->drv.version;
    /* the card first: a user with a card too old needs no NVRTC */
    cv_cuda_nvrtc any = { .n_archs = 1, .archs = { CV_CUDA_MIN_SM } };
    int rc = cv_cuda_target_for(&any, d->info.sm, &d->target, err);
    if (rc == 0)
        rc = cv_cuda_nvrtc_open(NULL, &d->rtc, err);
    if (rc == 0)
        rc = cv_cuda_target_for(&d->rtc, d->info.sm, &d->target, err);
    /* What NVRTC builds loads on a driver of its CUDA major version or
     * newer, and PTX (which the driver compiles) only on one of at least
     * its version. */
    const int rtc_version = d->rtc.major * 1000 + d->rtc.minor * 10, drv_version = d->drv.version;
    if (rc == 0 && drv_version > 0 && (drv_version / 1000 < d->rtc.major || (d->target.ptx && drv_version < rtc_version)))
        rc = cv_err_set(err, CV_EUNSUPPORTED,
                        "the NVIDIA driver (%s) supports CUDA %d.%d, older than NVRTC %d.%d (%s): the kernels it "
                        "builds would not load; update the driver, or point CORVID_LIBNVRTC at the NVRTC of CUDA "
                        "%d.%d or older",
                        d->drv.path, drv_version / 1000, drv_version % 1000 / 10, d->rtc.major, d->rtc.minor,
                        d->rtc.path, drv_version / 1000, drv_version % 1000 / 10);
    if (rc) {
        cv_err_prefix(err, "cuda:%d (%s, sm_%d): ", ordinal, d->info.name, d->info.sm);
        return rc;
    }
    d->info.nvrtc_major = d->rtc.major;
    d->info.nvrtc_minor = d->rtc.minor;
    d->info.ptx = d->target.ptx;
    d->info.target_sm = d->target.sm;
    if ((r = d->drv.cuDevicePrimaryCtxRetain(&d->ctx, d->dev)) != CU_SUCCESS ||
        (r = d->drv.cuCtxSetCurrent(d->ctx)) != CU_SUCCESS)
        return cv_err_set(err, CV_EUNSUPPORTED, "cuda:%d (%s): creating its context: %s", ordinal, d->info.name,
                          cv_cuda_result_name(&d->drv, r, rn, sizeof rn));
    d->drv.cuMemGetInfo(&d->info.free_bytes, &d->info.total_bytes);
    cv_cuda_cache_dir(d->cache_dir, sizeof d->cache_dir);
    return 0;
}

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static cuda_dev *registry[MAX_DEVICES];

int cv_cuda_open(int ordinal, cv_backend **out, cv_err *err)
{
    *out = NULL;
    if (ordinal < 0 || ordinal >= MAX_DEVICES)
        return cv_err_set(err, CV_EINVAL, "cuda:%d: device numbers go from 0 to %d", ordinal, MAX_DEVICES - 1);
    pthread_mutex_lock(&registry_mu);
    cuda_dev *d = registry[ordinal];
    int rc = 0;
    if (!d) {
        d = cv_xcalloc(1, sizeof *d);
        d->pub.ops = &cuda_ops;
        d->ordinal = ordinal;
        pthread_mutex_init(&d->mu, NULL);
        for (int t = 0; t < CV_GGML_TYPE_COUNT; t++)
            pthread_mutex_init(&d->mm[t].mu, NULL);
        rc = cv_cuda_driver_open(NULL, &d->drv, err);
        if (rc == 0 && (rc = dev_init(d, ordinal, err)) != 0) {
            cv_cuda_nvrtc_close(&d->rtc);
            cv_cuda_driver_close(&d->drv);
        }
        if (rc) {
            pthread_mutex_destroy(&d->mu);
            for (int t = 0; t < CV_GGML_TYPE_COUNT; t++)
                pthread_mutex_destroy(&d->mm[t].mu);
            free(d);
            d = NULL;
        } else {
            registry[ordinal] = d;
        }
    }
    pthread_mutex_unlock(&registry_mu);
    if (d) {
        ctx_enter(d);
        *out = &d->pub;
    }
    return rc;
}

void cv_cuda_device_get(const cv_backend *be, cv_cuda_device_info *out)
{
    cuda_dev *d = dev_of(be);
    ctx_enter(d);
    *out = d->info;
    d->drv.cuMemGetInfo(&out->free_bytes, &out->total_bytes);
}

/* ---- doctor ---- */

static void describe_cache(cv_buf *out, const char *prefix)
{
    char dir[PATH_MAX];
    cv_cuda_cache_dir(dir, sizeof dir);
    if (!*dir)
        cv_buf_printf(out, "%skernel cache: none (no HOME, XDG_CACHE_HOME or CORVID_CUDA_CACHE): kernels compile at "
                      "every start\n", prefix);
    else
        cv_buf_printf(out, "%skernel cache: %s (keyed by kernel source, NVRTC version and architecture; "
                      "CORVID_CUDA_CACHE moves it)\n", prefix, dir);
}

bool cv_cuda_describe(cv_buf *out, const char *prefix)
{
    cv_err err = { 0 };
    cv_cuda_driver drv;
    cv_cuda_nvrtc rtc;
    const bool have_drv = cv_cuda_driver_open(NULL, &drv, &err) == 0;
    if (have_drv)
        cv_buf_printf(out, "%sdriver %s, CUDA %d.%d\n", prefix, drv.path, drv.version / 1000, drv.version % 1000 / 10);
    else
        cv_buf_printf(out, "%sdriver: %s\n", prefix, err.msg);
    cv_err_clear(&err);
    const bool have_rtc = cv_cuda_nvrtc_open(NULL, &rtc, &err) == 0;
    if (have_rtc)
        cv_buf_printf(out, "%sNVRTC %d.%d (%s), compiles for sm_%d to sm_%d\n", prefix, rtc.major, rtc.minor, rtc.path,
                      rtc.archs[0], rtc.archs[rtc.n_archs - 1]);
    else
        cv_buf_printf(out, "%sNVRTC: %s\n", prefix, err.msg);
    cv_err_clear(&err);
    int count = 0;
    if (have_drv && drv.cuDeviceGetCount(&count) == CU_SUCCESS)
        for (int i = 0; i < count && i < MAX_DEVICES; i++) {
            cv_backend *be;
            if (cv_cuda_open(i, &be, &err) == 0) {
                cv_cuda_device_info di;
                cv_cuda_device_get(be, &di);
                cv_buf_printf(out, "%scuda:%d %s, sm_%d, %d SMs, %.1f GiB (%.1f free): usable, kernels built as %s_%d\n",
                              prefix, i, di.name, di.sm, di.n_sm, di.total_bytes / 1073741824.0,
                              di.free_bytes / 1073741824.0, di.ptx ? "PTX for compute" : "cubins for sm",
                              di.target_sm);
            } else {
                cv_buf_printf(out, "%scuda:%d not usable: %s\n", prefix, i, err.msg);
            }
            cv_err_clear(&err);
        }
    else if (have_drv)
        cv_buf_printf(out, "%sno CUDA device\n", prefix);
    describe_cache(out, prefix);
    if (have_drv)
        cv_cuda_driver_close(&drv);
    if (have_rtc)
        cv_cuda_nvrtc_close(&rtc);
    cv_backend *be0;
    const bool ok = have_drv && have_rtc && count > 0 && cv_cuda_open(0, &be0, NULL) == 0;
    cv_buf_printf(out, "%s%s\n", prefix,
                  ok ? "the forward pass still runs on the CPU: attention and the KV memory are not behind the "
                       "backend table yet (docs/CUDA.md)"
                     : "no usable CUDA device: corvid runs on the CPU");
    return ok;
}
