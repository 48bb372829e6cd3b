/* test_cuda_kernels — the CUDA kernels on a real GPU against the CPU: for
 * every weight type, random weights (quantized by the reference quantizer)
 * times random activations through the CUDA backend's matmul, for decode
 * and batch shapes, and through its expert-routed matmul, few routes and
 * many. Each result is held to the exact product (f64 over the weights as
 * the CPU dequantizes them), no further from it than the CPU backend is,
 * times 1.5 (RMS and worst element over the matrix; the GPU quantizes
 * activations per 32 values with an f32 scale, finer than or as fine as
 * the CPU's q8_0 / q8_K). The kernels also promise that an output's bits
 * depend only on its weight row and its activation row: a token alone, in
 * a batch, and as a route of the expert matmul give the same bits, which
 * is checked exactly. The row operations are held to the CPU backend's
 * within a few float roundings, and so is the attention mixer's row pass,
 * with every option and K/V type, on a cache in device memory; the MoE
 * router chooses the CPU's experts (near ties aside) with its weights,
 * and the rows around the expert matmuls (each route's biases and
 * activation, each row's weighted sum with the shared expert) are the
 * CPU's within a few roundings;
 * the token embedding's rows of every weight type are the CPU's values
 * within rounding.
 *
 * `test_cuda_kernels --bench` instead times the matmuls of the llama3.1-8b
 * shape in Q4_K (Q6_K ffn_down, as Q4_K_M has it) and the device's copy
 * bandwidth, and prints a table (scripts/cuda-check.sh).
 *
 * Without a usable GPU it prints "cuda: no usable GPU here" and CTest
 * reports a skip (tests/backend/CMakeLists.txt), in CI too: no machine CI
 * runs on has a GPU; scripts/cuda-check.sh runs it where one is lent. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "backend/cuda/cuda.h"
#include "cuda_test.h"
#include "test.h"

static cv_backend *g_gpu;
static cv_bstream *g_gst, *g_cst;
static cv_rng g_rng;

/* A random matrix of type as the model loader hands it over: its GGUF
 * bytes, and the values the CPU reads back from them. */
typedef struct rmat {
    uint32_t type;
    int64_t n_in, n_out;
    uint8_t *bytes;
    size_t n_bytes;
    float *deq; /* [n_out][n_in] */
} rmat;

static bool rmat_make(uint32_t type, int64_t n_in, int64_t n_out, rmat *m)
{
    const cv_dtype *dt = cv_dtype_get(type);
    const size_t row = (size_t)(n_in / dt->block_elems) * dt->block_bytes;
    *m = (rmat){ .type = type, .n_in = n_in, .n_out = n_out, .n_bytes = row * (size_t)n_out };
    m->bytes = cv_xmalloc(m->n_bytes);
    m->deq = cv_xmalloc((size_t)(n_in * n_out) * sizeof(float));
    float *src = cv_xmalloc((size_t)n_in * sizeof(float));
    cv_err err = { 0 };
    bool ok = true;
    for (int64_t o = 0; o < n_out && ok; o++) {
        /* rows of different scales, a few outliers: the blocks' scales and
         * minimums all matter */
        const float scale = 0.02f * (1.0f + (float)(o % 7));
        for (int64_t i = 0; i < n_in; i++)
            src[i] = scale * cv_rng_normal(&g_rng) * (cv_rng_below(&g_rng, 97) == 0 ? 6.0f : 1.0f);
        ok = cv_quantize_row(type, src, m->bytes + (size_t)o * row, n_in, &err) == 0 &&
             cv_dequantize_row(type, m->bytes + (size_t)o * row, m->deq + o * n_in, n_in, &err) == 0;
    }
    CHECK_MSG(ok, "%s: %s", dt->name, err.msg);
    free(src);
    return ok;
}

static void rmat_free(rmat *m)
{
    free(m->bytes);
    free(m->deq);
}

static float *random_rows(int64_t n, int64_t ld)
{
    float *x = cv_xmalloc((size_t)(n * ld) * sizeof(float));
    for (int64_t i = 0; i < n * ld; i++)
        x[i] = cv_rng_normal(&g_rng);
    return x;
}

/* Host rows to fresh device memory (NULL after a failed check). */
static void *to_device(const void *host, size_t n)
{
    void *d = NULL;
    cv_err err = { 0 };
    if (cv_cuda_alloc(g_gpu, n, &d, &err) || cv_cuda_upload(g_gpu, d, host, n, &err)) {
        CHECK_MSG(false, "%s", err.msg);
        cv_cuda_free(g_gpu, d);
        return NULL;
    }
    return d;
}

static bool from_device(void *host, const void *dev, size_t n)
{
    cv_err err = { 0 };
    cv_bstream_sync(g_gst);
    const bool ok = cv_cuda_stream_error(g_gst, &err) == 0 && cv_cuda_download(g_gpu, host, dev, n, &err) == 0;
    CHECK_MSG(ok, "%s", err.msg);
    return ok;
}

/* Distance of y [n_tok][n_out] from the exact product: RMS and worst. */
typedef struct dist {
    double rms, max, ref_rms;
} dist;

static dist distance(const rmat *m, const float *x, int64_t ldx, int64_t n_tok, const float *y, int64_t ldy)
{
    double se = 0, sr = 0, mx = 0;
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t o = 0; o < m->n_out; o++) {
            double ref = 0;
            for (int64_t i = 0; i < m->n_in; i++)
                ref += (double)m->deq[o * m->n_in + i] * x[t * ldx + i];
            const double e = fabs((double)y[t * ldy + o] - ref);
            se += e * e;
            sr += ref * ref;
            mx = e > mx ? e : mx;
        }
    const double n = (double)(n_tok * m->n_out);
    return (dist){ .rms = sqrt(se / n), .max = mx, .ref_rms = sqrt(sr / n) };
}

/* The GPU no further from the exact product than the CPU, times 1.5, with
 * a floor for the float types, whose CPU results may be exact. */
static void check_close(const char *what, const dist *g, const dist *c)
{
    const double floor = 1e-5 * c->ref_rms;
    CHECK_MSG(g->rms <= 1.5 * c->rms + floor && g->max <= 1.5 * c->max + 4 * floor,
              "%s: GPU error rms %.3g max %.3g, CPU rms %.3g max %.3g (results rms %.3g)", what, g->rms, g->max,
              c->rms, c->max, c->ref_rms);
}

/* Compiles every weight type's matmul program at once, a thread a type
 * (the backend compiles each on its first matrix, types in parallel): the
 * first start's NVRTC time is then the slowest program's, not their sum. */
static void *warm_type(void *arg)
{
    const uint32_t type = (uint32_t)(uintptr_t)arg;
    const cv_dtype *dt = cv_dtype_get(type);
    uint8_t *w = cv_xcalloc(1, dt->block_bytes * (256 / dt->block_elems));
    cv_bmat *m = NULL;
    cv_err err = { 0 };
    if (cv_bmat_create(g_gpu, type, 256, 1, w, dt->block_bytes * (256 / dt->block_elems), &m, &err) == 0)
        cv_bmat_destroy(g_gpu, m);
    else
        fprintf(stderr, "%s: %s\n", dt->name, err.msg); /* the tests below say it again, as a failure */
    free(w);
    return NULL;
}

static void warm_all_types(void)
{
    uint32_t types[CV_GGML_TYPE_COUNT];
    pthread_t th[CV_GGML_TYPE_COUNT];
    const int n = weight_types(types);
    const double t0 = cv_now_s();
    for (int i = 0; i < n; i++)
        pthread_create(&th[i], NULL, warm_type, (void *)(uintptr_t)types[i]);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    printf("%d matmul programs ready in %.1f s\n", n, cv_now_s() - t0);
}

/* n_in 2304 = 9 blocks of 256 (and 72 of 32); n_out 67 leaves partial
 * tiles of every kernel. */
#define N_IN 2304
#define N_OUT 67
#define MAX_TOK 40

TEST(matmul_every_type_matches_the_cpu)
{
    uint32_t types[CV_GGML_TYPE_COUNT];
    const int n_types = weight_types(types);
    static const int64_t toks[] = { 1, 2, 3, 4, 5, 8, 9, 17, MAX_TOK };
    const int64_t ldx = N_IN + 32, ldy = N_OUT + 5;
    float *x = random_rows(MAX_TOK, ldx);
    float *dx = to_device(x, (size_t)(MAX_TOK * ldx) * sizeof(float));
    float *dy = NULL;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_cuda_alloc(g_gpu, (size_t)(MAX_TOK * ldy) * sizeof(float), (void **)&dy, &err), 0);
    float *yc = cv_xmalloc((size_t)(MAX_TOK * ldy) * sizeof(float));
    float *yg = cv_xmalloc((size_t)(MAX_TOK * ldy) * sizeof(float));
    float *alone = cv_xmalloc((size_t)(MAX_TOK * ldy) * sizeof(float));
    for (int ti = 0; ti < n_types && dx && dy; ti++) {
        const cv_dtype *dt = cv_dtype_get(types[ti]);
        rmat m;
        if (!rmat_make(types[ti], N_IN, N_OUT, &m))
            continue;
        cv_bmat *wc = NULL, *wg = NULL;
        CHECK_MSG(cv_bmat_create(cv_backend_cpu(), m.type, N_IN, N_OUT, m.bytes, m.n_bytes, &wc, &err) == 0 &&
                      cv_bmat_create(g_gpu, m.type, N_IN, N_OUT, m.bytes, m.n_bytes, &wg, &err) == 0,
                  "%s: %s", dt->name, err.msg);
        for (size_t k = 0; k < CV_ARRAY_LEN(toks) && wc && wg; k++) {
            const int64_t n = toks[k];
            cv_be_matmul(g_cst, wc, n, x, ldx, yc, ldy);
            cv_be_matmul(g_gst, wg, n, dx, ldx, dy, ldy);
            if (!from_device(yg, dy, (size_t)(n * ldy) * sizeof(float)))
                break;
            char what[64];
            snprintf(what, sizeof what, "%s, %lld tokens", dt->name, (long long)n);
            const dist g = distance(&m, x, ldx, n, yg, ldy), c = distance(&m, x, ldx, n, yc, ldy);
            check_close(what, &g, &c);
            if (n == 1) {
                memcpy(alone, yg, (size_t)N_OUT * sizeof(float));
                for (int64_t t = 1; t < MAX_TOK; t++) { /* every token alone, for the bitwise check */
                    cv_be_matmul(g_gst, wg, 1, dx + t * ldx, ldx, dy, ldy);
                    if (!from_device(alone + t * ldy, dy, (size_t)N_OUT * sizeof(float)))
                        break;
                }
            }
            bool same = true;
            for (int64_t t = 0; t < n; t++)
                same &= !memcmp(alone + t * ldy, yg + t * ldy, (size_t)N_OUT * sizeof(float));
            CHECK_MSG(same, "%s: a token's outputs differ alone and in the batch", what);
        }
        cv_bmat_destroy(cv_backend_cpu(), wc);
        cv_bmat_destroy(g_gpu, wg);
        rmat_free(&m);
    }
    cv_cuda_free(g_gpu, dx);
    cv_cuda_free(g_gpu, dy);
    free(x);
    free(yc);
    free(yg);
    free(alone);
}

/* Expert-routed: E experts of one type, routes with random experts and
 * sources; each route's output must have the bits of its expert's dense
 * matmul of its source row. 12 routes take the direct kernel, 70 the
 * grouped one. */
static void experts_case(uint32_t type, int64_t n_routes)
{
    enum { E = 6, NX = 10 }; /* NX <= the workspace's rows, as the table asks */
    const cv_dtype *dt = cv_dtype_get(type);
    rmat m[E];
    cv_bmat *wg[E] = { 0 };
    cv_err err = { 0 };
    for (int e = 0; e < E; e++) {
        if (!rmat_make(type, N_IN, N_OUT, &m[e]))
            return;
        CHECK_MSG(cv_bmat_create(g_gpu, type, N_IN, N_OUT, m[e].bytes, m[e].n_bytes, &wg[e], &err) == 0, "%s: %s",
                  dt->name, err.msg);
    }
    /* an expert no route names may be NULL */
    cv_bmat_destroy(g_gpu, wg[E - 1]);
    wg[E - 1] = NULL;
    int32_t expert[96], src[96];
    for (int64_t r = 0; r < n_routes; r++) {
        expert[r] = (int32_t)cv_rng_below(&g_rng, E - 1);
        src[r] = (int32_t)cv_rng_below(&g_rng, NX);
    }
    const int64_t ldx = N_IN, ldy = N_OUT;
    float *x = random_rows(NX, ldx);
    float *dx = to_device(x, (size_t)(NX * ldx) * sizeof(float));
    int32_t *dexp = to_device(expert, (size_t)n_routes * sizeof(int32_t));
    int32_t *dsrc = to_device(src, (size_t)n_routes * sizeof(int32_t));
    float *dy = NULL;
    CHECK_EQ_INT(cv_cuda_alloc(g_gpu, (size_t)(n_routes * ldy) * sizeof(float), (void **)&dy, &err), 0);
    float *y = cv_xmalloc((size_t)(n_routes * ldy) * sizeof(float));
    float *one = cv_xmalloc((size_t)ldy * sizeof(float));
    cv_experts_ws *ws = cv_be_experts_ws_create(g_gst, n_routes, N_IN, N_OUT, E);
    CHECK(ws != NULL);
    if (dx && dexp && dsrc && dy && ws) {
        cv_be_matmul_experts(g_gst, (const cv_bmat *const *)wg, E, NX, dx, ldx, n_routes, dexp, dsrc, dy, ldy, ws);
        if (from_device(y, dy, (size_t)(n_routes * ldy) * sizeof(float))) {
            int differ = 0;
            for (int64_t r = 0; r < n_routes; r++) {
                cv_be_matmul(g_gst, wg[expert[r]], 1, dx + src[r] * ldx, ldx, dy, ldy);
                if (!from_device(one, dy, (size_t)N_OUT * sizeof(float)))
                    break;
                differ += memcmp(one, y + r * ldy, (size_t)N_OUT * sizeof(float)) != 0;
            }
            CHECK_MSG(differ == 0, "%s, %lld routes: %d routes differ from their expert's dense matmul", dt->name,
                      (long long)n_routes, differ);
        }
    }
    cv_be_experts_ws_destroy(g_gst, ws);
    for (int e = 0; e < E; e++) {
        cv_bmat_destroy(g_gpu, wg[e]);
        rmat_free(&m[e]);
    }
    cv_cuda_free(g_gpu, dx);
    cv_cuda_free(g_gpu, dexp);
    cv_cuda_free(g_gpu, dsrc);
    cv_cuda_free(g_gpu, dy);
    free(x);
    free(y);
    free(one);
}

TEST(expert_matmul_has_the_dense_bits)
{
    static const uint32_t types[] = { CV_GGML_Q4_K, CV_GGML_Q8_0, CV_GGML_MXFP4, CV_GGML_F16 };
    for (size_t i = 0; i < CV_ARRAY_LEN(types); i++) {
        experts_case(types[i], 12);
        experts_case(types[i], 70);
    }
}

/* The row operations against the CPU backend's on random rows (and a
 * gather, a bias, each activation): a few float roundings apart at most
 * (the CPU's RMSNorm sums in double, the GPU by a tree in f32; expf and
 * tanhf within their ulps). */
TEST(row_operations_match_the_cpu)
{
    enum { ROWS = 7, N = 4132, LD = N + 8 };
    const size_t bytes = (size_t)ROWS * LD * sizeof(float);
    float *x = random_rows(ROWS, LD), *g = random_rows(ROWS, LD), *w = random_rows(1, N);
    float *yc = cv_xmalloc(bytes), *yg = cv_xmalloc(bytes);
    const int32_t gather[ROWS] = { 6, 0, 0, 3, 2, 5, 1 };
    float *dx = cv_be_rows_alloc(g_gpu, bytes), *dg = cv_be_rows_alloc(g_gpu, bytes), *dy = cv_be_rows_alloc(g_gpu, bytes);
    CHECK(dx && dg && dy);
    if (!dx || !dg || !dy)
        return;
    cv_be_upload(g_gst, dx, x, bytes);
    cv_be_upload(g_gst, dg, g, bytes);
    const cv_bact acts[] = { { .kind = CV_BGLU_SILU }, { .kind = CV_BGLU_GELU_TANH },
                             { .kind = CV_BGLU_SILU_CLAMPED, .alpha = 1.702f, .limit = 1.5f } };
    for (int op = 0; op < 9; op++) {
        /* y starts as x on both sides (scale and softcap work in place) */
        memcpy(yc, x, bytes);
        cv_be_upload(g_gst, dy, x, bytes);
        const char *name = "";
        switch (op) {
        case 0:
            name = "rmsnorm, gathered, weighted";
            cv_be_rmsnorm(g_cst, ROWS, N, x, LD, gather, w, 1e-6f, yc, LD);
            cv_be_rmsnorm(g_gst, ROWS, N, dx, LD, gather, w, 1e-6f, dy, LD);
            break;
        case 1:
            name = "rmsnorm";
            cv_be_rmsnorm(g_cst, ROWS, N, x, LD, NULL, NULL, 1e-5f, yc, LD);
            cv_be_rmsnorm(g_gst, ROWS, N, dx, LD, NULL, NULL, 1e-5f, dy, LD);
            break;
        case 2:
            name = "add";
            cv_be_add(g_cst, ROWS, N, yc, LD, x, LD, g, LD);
            cv_be_add(g_gst, ROWS, N, dy, LD, dx, LD, dg, LD);
            break;
        case 3:
            name = "add a bias";
            cv_be_add(g_cst, ROWS, N, yc, LD, x, LD, w, 0);
            cv_be_add(g_gst, ROWS, N, dy, LD, dx, LD, w, 0);
            break;
        case 4:
            name = "scale";
            cv_be_scale(g_cst, ROWS, N, yc, LD, 0.37f);
            cv_be_scale(g_gst, ROWS, N, dy, LD, 0.37f);
            break;
        case 5: case 6: case 7:
            name = op == 5 ? "swiglu" : op == 6 ? "geglu" : "swiglu clamped";
            cv_be_glu(g_cst, &acts[op - 5], ROWS, N, yc, LD, g, LD, x, LD);
            cv_be_glu(g_gst, &acts[op - 5], ROWS, N, dy, LD, dg, LD, dx, LD);
            break;
        case 8:
            name = "sigmoid_mul, softcap";
            cv_be_sigmoid_mul(g_cst, ROWS, N, yc, LD, x, LD, g, LD);
            cv_be_sigmoid_mul(g_gst, ROWS, N, dy, LD, dx, LD, dg, LD);
            cv_be_softcap(g_cst, ROWS, N, yc, LD, 1.5f);
            cv_be_softcap(g_gst, ROWS, N, dy, LD, 1.5f);
            break;
        }
        if (!from_device(yg, dy, bytes))
            break;
        int bad = 0;
        double worst = 0;
        for (int t = 0; t < ROWS; t++)
            for (int i = 0; i < N; i++) {
                const double c = yc[t * LD + i], e = fabs(yg[t * LD + i] - c);
                bad += !(e <= 4e-6 * fabs(c) + 1e-6);
                worst = e > worst ? e : worst;
            }
        CHECK_MSG(bad == 0, "%s: %d values differ from the CPU's by more than 4e-6 relative (worst %.3g)", name, bad,
                  worst);
    }
    cv_be_rows_free(g_gpu, dx);
    cv_be_rows_free(g_gpu, dg);
    cv_be_rows_free(g_gpu, dy);
    free(x);
    free(g);
    free(w);
    free(yc);
    free(yg);
}

/* ---- the attention rows ---- */

enum { AT_HEADS = 4, AT_KV_HEADS = 2, AT_LAYERS = 2, AT_LAYER = 1, AT_MAX_ROWS = 21 };

/* Decoded K (kv 0) or V of head h at block b, position j, dimension i of a
 * cache whose bytes are in host memory, and the q8_0 factor of its group. */
static float at_get(const kv_pool *p, int kv, int32_t b, int32_t h, int32_t j, int32_t i, float *d)
{
    const void *half = kv ? kv_v(p, b, AT_LAYER, h) : kv_k(p, b, AT_LAYER, h);
    *d = p->type == CV_GGML_Q8_0 ? cv_fp16_to_fp32(kv_q8_scales(p, half)[kv_scale_at(p, j, i)]) : 0;
    return kv ? kv_v_get(p, half, j, i) : kv_k_get(p, half, j, i);
}

/* One case: rows through both backends, compared; false when a device
 * call failed (the case's checks said so). */
static bool attn_case(const cv_rope_params *rope, int32_t hd, int flags, uint32_t type, int32_t n_rows)
{
    const int64_t n_q = (int64_t)AT_HEADS * hd, n_kv = (int64_t)AT_KV_HEADS * hd;
    const int64_t ld = ((flags & 1) ? 2 : 1) * n_q + 2 * n_kv + 3, ldg = n_q;
    float *x = random_rows(n_rows, ld), *par = random_rows(1, 3 * n_q);
    float norm[2][256];
    int32_t pos[AT_MAX_ROWS], blk[AT_MAX_ROWS];
    for (int32_t i = 0; i < hd; i++)
        norm[0][i] = 1.0f + 0.25f * par[i], norm[1][i] = 1.0f - 0.25f * par[n_q + i];
    for (int32_t t = 0; t < n_rows; t++)
        pos[t] = 13 + 3 * t, blk[t] = 1 + 2 * (pos[t] / CV_KV_BLOCK);
    /* one run, or runs of 4 blocks (the rows' blocks in three of them) */
    kv_pool kc = { .n_blocks = blk[n_rows - 1] + 2, .n_layer = AT_LAYERS, .n_head_kv = AT_KV_HEADS, .head_dim = hd,
                   .n_parts = 2, .type = type, .qgroup = kv_q8_group(hd),
                   .elt_bytes = type == CV_GGML_Q8_0 ? 1 : type == CV_GGML_F16 ? 2 : 4,
                   .head_bytes = kv_head_bytes(hd, type), .block_bytes = kv_block_bytes(AT_LAYERS, 2, AT_KV_HEADS, hd, type),
                   .run_shift = n_rows > 1 ? 2 : 0 };
    kv_pool kg = kc, kback = kc;
    const size_t pool_bytes = kv_pool_bytes(&kc), row_bytes = (size_t)(n_rows * ld) * sizeof(float);
    kc.data = cv_xcalloc(1, pool_bytes);
    kback.data = cv_xmalloc(pool_bytes);
    kg.data = to_device(kc.data, pool_bytes);
    float *dx = to_device(x, row_bytes), *dgate = cv_be_rows_alloc(g_gpu, (size_t)(n_rows * ldg) * sizeof(float));
    float *gate = cv_xcalloc((size_t)(n_rows * ldg), sizeof(float)), *back = cv_xmalloc(row_bytes);
    float *gback = cv_xmalloc((size_t)(n_rows * ldg) * sizeof(float));
    cv_batt_rows a = { .n_rows = n_rows, .ld_qkv = ld, .ld_gate = ldg, .n_head = AT_HEADS, .n_head_kv = AT_KV_HEADS,
                       .head_dim = hd, .gated = flags & 1, .v_from_k = flags & 2, .v_norm = flags & 4,
                       .store_kv = flags & 8, .q_bias = (flags & 16) ? par : NULL,
                       .k_bias = (flags & 16) ? par + n_q : NULL, .v_bias = (flags & 16) ? par + 2 * n_q : NULL,
                       .q_norm = (flags & 32) ? norm[0] : NULL, .k_norm = (flags & 32) ? norm[1] : NULL, .eps = 1e-6f,
                       .rope = rope, .pos = pos, .temp_scale = (flags & 64) ? 0.1f : 0.0f, .temp_len = 8,
                       .kv_layer = AT_LAYER, .kv_block = blk };
    bool ok = kg.data && dx && dgate;
    CHECK(ok);
    if (ok) {
        a.qkv = x, a.gate = gate, a.kv = &kc;
        cv_be_attn_rows(g_cst, &a);
        a.qkv = dx, a.gate = dgate, a.kv = &kg;
        cv_be_attn_rows(g_gst, &a);
        ok = from_device(back, dx, row_bytes) && from_device(gback, dgate, (size_t)(n_rows * ldg) * sizeof(float)) &&
             from_device(kback.data, kg.data, pool_bytes);
    }
    if (ok) {
        int bad_q = 0, bad_g = 0, bad_kv = 0;
        for (int32_t t = 0; t < n_rows; t++)
            for (int64_t i = 0; i < n_q; i++) {
                const double c = x[t * ld + i];
                bad_q += !(fabs(back[t * ld + i] - c) <= 1e-5 * (1 + fabs(c)));
                bad_g += (flags & 1) && memcmp(&gback[t * ldg + i], &gate[t * ldg + i], sizeof(float));
            }
        /* every place of the layer's cache: the rows' and the untouched */
        for (int32_t b = 0; b < kc.n_blocks; b++)
            for (int32_t h = 0; h < AT_KV_HEADS; h++)
                for (int kv = 0; kv < 2; kv++)
                    for (int32_t j = 0; j < CV_KV_BLOCK; j++)
                        for (int32_t i = 0; i < hd; i++) {
                            float dc, dg;
                            const double c = at_get(&kc, kv, b, h, j, i, &dc), g = at_get(&kback, kv, b, h, j, i, &dg);
                            const double tol = type == CV_GGML_Q8_0   ? 1.05 * fmax(dc, dg) + 1e-5 * (1 + fabs(c))
                                               : type == CV_GGML_F16 ? 1e-3 * fabs(c) + 1e-5
                                                                     : 1e-5 * (1 + fabs(c));
                            bad_kv += !(fabs(g - c) <= tol);
                        }
        CHECK_MSG(bad_q == 0 && bad_g == 0 && bad_kv == 0,
                  "hd %d, options %#x, type %u, %d rows: %d query values, %d gates and %d cached values differ from "
                  "the CPU's", hd, flags, type, n_rows, bad_q, bad_g, bad_kv);
    }
    cv_cuda_free(g_gpu, kg.data);
    cv_cuda_free(g_gpu, dx);
    cv_be_rows_free(g_gpu, dgate);
    free(kc.data);
    free(kback.data);
    free(x);
    free(par);
    free(gate);
    free(back);
    free(gback);
    return ok;
}

/* Every option (gated, V from K, V norm, K/V stored, biases, norms,
 * temperature: the bits of `flags`), each K/V type, 1 to 21 rows across
 * block edges (a pool of one run for 1 row, in runs of 4 blocks for more); 64-dimension heads rotated whole in NEOX pairs with
 * frequency factors and a YaRN factor, 40-dimension heads with 32
 * dimensions in adjacent pairs. */
TEST(attention_rows_match_the_cpu)
{
    static float ff[32];
    for (int i = 0; i < 32; i++)
        ff[i] = 1.0f + (float)(i % 5) * 0.75f;
    const cv_rope_params ropes[2] = {
        { .style = CV_ROPE_NEOX, .n_rot = 64, .theta = 1e6f, .freq_scale = 1.0f, .freq_factors = ff, .mscale = 1.2f },
        { .style = CV_ROPE_NORM, .n_rot = 32, .theta = 1e4f, .freq_scale = 0.5f },
    };
    static const int32_t hds[2] = { 64, 40 }, rows[] = { 1, 4, AT_MAX_ROWS };
    static const uint32_t types[] = { CV_GGML_F32, CV_GGML_F16, CV_GGML_Q8_0 };
    bool ok = true;
    for (int si = 0; si < 2 && ok; si++)
        for (int flags = 0; flags < 128 && ok; flags++)
            for (size_t ti = 0; ti < CV_ARRAY_LEN(types) && ok; ti++)
                for (size_t ri = 0; ri < CV_ARRAY_LEN(rows) && ok; ri++)
                    ok = attn_case(&ropes[si], hds[si], flags, types[ti], rows[ri]);
}

/* ---- the MoE router ---- */

/* Whether row t's choice hangs on a near tie: the CPU's scores (its
 * logits after the call: the probabilities, or the biased logits, plus
 * the selection bias) of its k-th choice and another expert, or of two
 * neighbouring choices, so close (yet not equal) that the GPU's rounding
 * may order them the other way. */
static bool route_fragile(const cv_bmoe_route *r, const float *after, int64_t t, const int32_t *idx)
{
    float sc[1024];
    for (int32_t e = 0; e < r->n_expert; e++)
        sc[e] = after[t * r->ld_logits + e] + (r->sel_bias && r->kind != CV_BROUTE_TOPK_SOFTMAX ? r->sel_bias[e] : 0);
    for (int32_t e = 0; e < r->n_expert; e++)
        for (int32_t j = 0; j < r->k; j++) {
            const float a = sc[e], b = sc[idx[j]];
            if (e != idx[j] && a != b && fabsf(a - b) <= 1e-4f * (1 + fabsf(b)))
                return true;
        }
    return false;
}

/* Each routing kind, with and without every option, over expert counts
 * of 8 to 128 (groups and none) and 1 to 33 rows; logits with exact ties
 * in half the cases (the GPU must break them as the CPU: lower index). */
TEST(moe_routes_match_the_cpu)
{
    static const struct { int32_t n, k, g, gu; } shapes[] = { { 8, 2, 1, 1 }, { 64, 6, 8, 3 }, { 128, 8, 1, 1 } };
    static const int32_t rows[] = { 1, 4, 33 };
    float bias[128], sel[128], xs[128];
    for (int e = 0; e < 128; e++)
        bias[e] = 0.2f * cv_rng_normal(&g_rng), sel[e] = 0.02f * cv_rng_normal(&g_rng), xs[e] = 1 + cv_rng_f32(&g_rng);
    int bad = 0, fragile = 0, cases = 0;
    for (size_t si = 0; si < CV_ARRAY_LEN(shapes); si++)
        for (int kind = 0; kind < 3; kind++)
            for (int flags = 0; flags < 64; flags++)
                for (size_t ri = 0; ri < CV_ARRAY_LEN(rows); ri++) {
                    const int32_t n = shapes[si].n, k = shapes[si].k, R = rows[ri];
                    const size_t lb = (size_t)(R * n) * sizeof(float), rb = (size_t)(R * k) * sizeof(int32_t);
                    float *x = random_rows(R, n), *after = cv_xmalloc(lb), *wc = cv_xmalloc(rb), *wg = cv_xmalloc(rb);
                    int32_t *ec = cv_xmalloc(rb), *sc = cv_xmalloc(rb), *eg = cv_xmalloc(rb), *sg = cv_xmalloc(rb);
                    for (int64_t i = 0; i < (int64_t)R * n && (flags & 32); i++)
                        x[i] = roundf(x[i] * 2) * 0.5f;
                    float *dx = to_device(x, lb), *dw = cv_be_rows_alloc(g_gpu, rb);
                    int32_t *de = cv_be_rows_alloc(g_gpu, rb), *ds = cv_be_rows_alloc(g_gpu, rb);
                    cv_bmoe_route r = { .n_rows = R, .n_expert = n, .k = k, .logits = x, .ld_logits = n,
                                        .kind = (cv_broute)kind, .bias = (flags & 1) ? bias : NULL,
                                        .sel_bias = (flags & 2) ? sel : NULL, .n_group = shapes[si].g,
                                        .n_group_used = shapes[si].gu, .norm = flags & 4,
                                        .scale = (flags & 8) ? 2.5f : 1.0f, .exp_scale = (flags & 16) ? xs : NULL,
                                        .expert = ec, .src = sc, .weight = wc };
                    bool ok = dx && dw && de && ds;
                    CHECK(ok);
                    if (ok) {
                        cv_be_moe_route(g_cst, &r);
                        memcpy(after, x, lb);
                        r.logits = dx, r.expert = de, r.src = ds, r.weight = dw;
                        cv_be_moe_route(g_gst, &r);
                        ok = from_device(eg, de, rb) && from_device(sg, ds, rb) && from_device(wg, dw, rb);
                    }
                    for (int32_t t = 0; t < R && ok; t++) {
                        if (route_fragile(&r, after, t, ec + t * k)) {
                            fragile++;
                            continue;
                        }
                        for (int32_t j = 0; j < k; j++) {
                            const int64_t i = (int64_t)t * k + j;
                            bad += eg[i] != ec[i] || sg[i] != t || !(fabsf(wg[i] - wc[i]) <= 1e-5f * (1 + fabsf(wc[i])));
                        }
                    }
                    cases++;
                    cv_cuda_free(g_gpu, dx);
                    cv_be_rows_free(g_gpu, dw);
                    cv_be_rows_free(g_gpu, de);
                    cv_be_rows_free(g_gpu, ds);
                    free(x), free(after), free(wc), free(wg), free(ec), free(sc), free(eg), free(sg);
                    if (!ok)
                        return;
                }
    CHECK_MSG(bad == 0, "%d routes of %d cases differ from the CPU's (%d rows with near ties left out)", bad, cases,
              fragile);
    printf("  %d routing cases, %d rows with near ties left out\n", cases, fragile);
}

/* ---- the token embedding ---- */

/* Every weight type: 1 to 40 rows of a 67-row table (repeats, its first
 * and last row), with and without a scale, within a rounding of the
 * row's largest value of the CPU's (a quantized type's x = d q - m may
 * round in two steps on one side and one on the other). */
/* ---- the MoE layer's rows ---- */

/* Values of got within tol (relative, plus tol absolute) of want's. */
static int moe_off(const float *got, const float *want, int64_t n_rows, int64_t n, int64_t ld, double tol)
{
    int bad = 0;
    for (int64_t t = 0; t < n_rows; t++)
        for (int64_t i = 0; i < n; i++) {
            const double c = want[t * ld + i];
            bad += !(fabs(got[t * ld + i] - c) <= tol * (fabs(c) + 1));
        }
    return bad;
}

/* Each activation, 1 to 8 routes a row, with and without every bias, the
 * post-norms and a gated or ungated shared expert, 1 to 33 rows: the GPU's
 * biased gate|up, activations, biased expert outputs, shared rows and sums
 * within a few roundings of the CPU backend's. */
TEST(moe_rows_match_the_cpu)
{
    enum { E = 8, FF = 264, N = 520, LD = N + 4, LDG = 2 * FF + 4 };
    static const cv_bact acts[] = { { .kind = CV_BGLU_SILU }, { .kind = CV_BGLU_GELU_TANH },
                                    { .kind = CV_BGLU_SILU_CLAMPED, .alpha = 1.702f, .limit = 7.0f } };
    static const int32_t ks[] = { 1, 8 }, rows[] = { 1, 4, 33 };
    float *gb = random_rows(E, FF), *ub = random_rows(E, FF), *db = random_rows(E, N), *w = random_rows(3, N);
    for (int i = 0; i < 3 * N; i++)
        w[i] = 1.0f + 0.2f * w[i];
    for (int i = 0; i < N; i++)
        w[2 * N + i] *= 0.05f; /* the shared expert's gate: a moderate dot product */
    int bad = 0, cases = 0;
    for (size_t ai = 0; ai < CV_ARRAY_LEN(acts); ai++)
        for (size_t ki = 0; ki < CV_ARRAY_LEN(ks); ki++)
            for (int flags = 0; flags < 16; flags++)
                for (size_t ri = 0; ri < CV_ARRAY_LEN(rows); ri++) {
                    const int32_t k = ks[ki], R = rows[ri], nr = R * k;
                    int32_t *expert = cv_xmalloc((size_t)nr * sizeof(int32_t));
                    float *weight = cv_xmalloc((size_t)nr * sizeof(float));
                    for (int32_t r = 0; r < nr; r++)
                        expert[r] = (r * 3 + r / 5) % E, weight[r] = 0.1f + cv_rng_f32(&g_rng);
                    const size_t gub = (size_t)nr * LDG * 4, hb = (size_t)nr * FF * 4, yb = (size_t)nr * LD * 4,
                                 rb = (size_t)R * LD * 4;
                    float *gu = random_rows(nr, LDG), *y = random_rows(nr, LD), *sh = random_rows(R, LD);
                    float *x = random_rows(R, LD), *hc = cv_xmalloc(hb), *oc = cv_xmalloc(rb);
                    float *gg = cv_xmalloc(gub), *hg = cv_xmalloc(hb), *yg = cv_xmalloc(yb), *sg = cv_xmalloc(rb),
                          *og = cv_xmalloc(rb);
                    float *dgu = to_device(gu, gub), *dy = to_device(y, yb), *dsh = to_device(sh, rb),
                          *dx = to_device(x, rb), *dh = cv_be_rows_alloc(g_gpu, hb), *dout = cv_be_rows_alloc(g_gpu, rb);
                    int32_t *de = to_device(expert, (size_t)nr * 4);
                    float *dw = to_device(weight, (size_t)nr * 4);
                    bool ok = dgu && dy && dsh && dx && dh && dout && de && dw;
                    CHECK(ok);
                    cv_bmoe_rows m = { .n_rows = R, .k = k, .n_expert = E, .expert = expert, .weight = weight,
                                       .act = &acts[ai], .n_ff = FF, .gu = gu, .ld_gu = LDG,
                                       .gate_bias = (flags & 1) ? gb : NULL, .up_bias = (flags & 1) ? ub : NULL,
                                       .h = hc, .ld_h = FF, .n = N, .y = y, .ldy = LD,
                                       .down_bias = (flags & 1) ? db : NULL, .post_norm = (flags & 2) ? w : NULL,
                                       .eps = 1e-6f, .shared = (flags & 4) ? sh : NULL, .ld_shared = LD,
                                       .sh_post_norm = (flags & 2) ? w + N : NULL,
                                       .sh_gate = (flags & 8) ? w + 2 * N : NULL, .x = x, .ldx = LD, .out = oc,
                                       .ld_out = LD };
                    if (ok) {
                        cv_be_moe_glu(g_cst, &m);
                        cv_be_moe_sum(g_cst, &m);
                        m.expert = de, m.weight = dw, m.gu = dgu, m.h = dh, m.y = dy, m.x = dx, m.out = dout;
                        m.shared = (flags & 4) ? dsh : NULL;
                        cv_be_moe_glu(g_gst, &m);
                        cv_be_moe_sum(g_gst, &m);
                        ok = from_device(gg, dgu, gub) && from_device(hg, dh, hb) && from_device(yg, dy, yb) &&
                             from_device(sg, dsh, rb) && from_device(og, dout, rb);
                    }
                    if (ok)
                        bad += moe_off(gg, gu, nr, 2 * FF, LDG, 1e-6) + moe_off(hg, hc, nr, FF, FF, 4e-6) +
                               moe_off(yg, y, nr, N, LD, 1e-6) + moe_off(sg, sh, R, N, LD, 4e-6) +
                               moe_off(og, oc, R, N, LD, 1e-5);
                    cases++;
                    void *dev[] = { dgu, dy, dsh, dx, de, dw };
                    for (size_t i = 0; i < CV_ARRAY_LEN(dev); i++)
                        cv_cuda_free(g_gpu, dev[i]);
                    cv_be_rows_free(g_gpu, dh);
                    cv_be_rows_free(g_gpu, dout);
                    void *host[] = { expert, weight, gu, y, sh, x, hc, oc, gg, hg, yg, sg, og };
                    for (size_t i = 0; i < CV_ARRAY_LEN(host); i++)
                        free(host[i]);
                    if (!ok)
                        goto done;
                }
done:
    CHECK_MSG(bad == 0, "%d values of %d MoE row cases differ from the CPU's", bad, cases);
    printf("  %d MoE row cases\n", cases);
    free(gb), free(ub), free(db), free(w);
}

TEST(embedding_rows_match_the_cpu)
{
    uint32_t types[CV_GGML_TYPE_COUNT];
    const int n_types = weight_types(types);
    static const int32_t rows[] = { 1, 5, MAX_TOK };
    int32_t tokens[MAX_TOK];
    for (int32_t t = 0; t < MAX_TOK; t++)
        tokens[t] = t == 1 ? N_OUT - 1 : (int32_t)cv_rng_below(&g_rng, 13);
    const int64_t ld = N_IN + 3;
    float *yc = cv_xmalloc((size_t)(MAX_TOK * ld) * sizeof(float)), *yg = cv_xmalloc((size_t)(MAX_TOK * ld) * sizeof(float));
    float *dy = cv_be_rows_alloc(g_gpu, (size_t)(MAX_TOK * ld) * sizeof(float));
    CHECK(dy != NULL);
    for (int ti = 0; ti < n_types && dy; ti++) {
        rmat m;
        if (!rmat_make(types[ti], N_IN, N_OUT, &m))
            continue;
        for (size_t ri = 0; ri < CV_ARRAY_LEN(rows); ri++)
            for (int sc = 0; sc < 2; sc++) {
                const float scale = sc ? 39.19f : 1.0f;
                cv_be_embed_rows(g_cst, m.type, N_IN, m.bytes, N_OUT, rows[ri], tokens, scale, yc, ld);
                cv_be_embed_rows(g_gst, m.type, N_IN, m.bytes, N_OUT, rows[ri], tokens, scale, dy, ld);
                if (!from_device(yg, dy, (size_t)(rows[ri] * ld) * sizeof(float)))
                    break;
                int bad = 0;
                for (int32_t t = 0; t < rows[ri]; t++) {
                    float mx = 0;
                    for (int64_t i = 0; i < N_IN; i++)
                        mx = fmaxf(mx, fabsf(yc[t * ld + i]));
                    for (int64_t i = 0; i < N_IN; i++)
                        bad += !(fabsf(yg[t * ld + i] - yc[t * ld + i]) <= 1e-6f * mx);
                }
                CHECK_MSG(bad == 0, "%s, %d rows, scale %g: %d values differ from the CPU's", cv_dtype_get(m.type)->name,
                          rows[ri], scale, bad);
            }
        rmat_free(&m);
    }
    cv_be_rows_free(g_gpu, dy);
    free(yc);
    free(yg);
}

/* ---- --bench ---- */

/* Seconds a call of fn takes on the GPU stream, the median of `reps`
 * timed batches of `inner` calls. */
typedef struct mm_job {
    cv_bmat **w;
    int n_w;
    int64_t n_tok;
    float *x, *y;
    int64_t ld;
} mm_job;

static void run_job(const mm_job *j)
{
    for (int i = 0; i < j->n_w; i++)
        cv_be_matmul(g_gst, j->w[i], j->n_tok, j->x, j->w[i]->n_in, j->y, j->w[i]->n_out);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double time_job(const mm_job *j, int inner)
{
    double t[5];
    run_job(j);
    cv_bstream_sync(g_gst);
    for (int r = 0; r < 5; r++) {
        const double t0 = cv_now_s();
        for (int i = 0; i < inner; i++)
            run_job(j);
        cv_bstream_sync(g_gst);
        t[r] = (cv_now_s() - t0) / inner;
    }
    qsort(t, 5, sizeof t[0], cmp_double);
    return t[2];
}

static int bench(void)
{
    cv_err err = { 0 };
    cv_cuda_device_info di;
    cv_cuda_device_get(g_gpu, &di);
    /* the ceiling: a device-to-device copy of 1 GiB reads and writes it */
    const size_t big = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    double copy_gbs = 0;
    if (cv_cuda_alloc(g_gpu, big, &a, &err) == 0 && cv_cuda_alloc(g_gpu, big, &b, &err) == 0) {
        cv_cuda_copy(g_gpu, b, a, big, &err);
        double best = 1e9;
        for (int r = 0; r < 5; r++) {
            const double t0 = cv_now_s();
            cv_cuda_copy(g_gpu, b, a, big, &err);
            const double t = cv_now_s() - t0;
            best = t < best ? t : best;
        }
        copy_gbs = 2.0 * (double)big / best / 1e9;
    }
    cv_cuda_free(g_gpu, a);
    cv_cuda_free(g_gpu, b);
    if (err.code) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    /* One llama3.1-8b layer's matrices (Q4_K_M: q, k, o, gate, up in
     * Q4_K, v and down in Q6_K), random; a token's decode reads them all,
     * 32 times a token. */
    struct { const char *name; uint32_t type; int64_t n_in, n_out; } mats[] = {
        { "attn_q", CV_GGML_Q4_K, 4096, 4096 },   { "attn_k", CV_GGML_Q4_K, 4096, 1024 },
        { "attn_v", CV_GGML_Q6_K, 4096, 1024 },   { "attn_output", CV_GGML_Q4_K, 4096, 4096 },
        { "ffn_gate", CV_GGML_Q4_K, 4096, 14336 }, { "ffn_up", CV_GGML_Q4_K, 4096, 14336 },
        { "ffn_down", CV_GGML_Q6_K, 14336, 4096 },
    };
    enum { N_MATS = 7 };
    cv_bmat *w[N_MATS] = { 0 };
    size_t layer_bytes = 0;
    for (int i = 0; i < N_MATS; i++) {
        const cv_dtype *dt = cv_dtype_get(mats[i].type);
        const size_t n = (size_t)(mats[i].n_in / dt->block_elems) * dt->block_bytes * (size_t)mats[i].n_out;
        uint8_t *bytes = cv_xmalloc(n);
        for (size_t k = 0; k < n; k++)
            bytes[k] = (uint8_t)cv_rng_u64(&g_rng);
        /* finite scales: every 2-byte f16 field could be NaN otherwise; the
         * timing does not depend on the values */
        for (size_t k = 0; k + 1 < n; k += 2)
            if ((bytes[k + 1] & 0x7c) == 0x7c)
                bytes[k + 1] &= 0xbb;
        if (cv_bmat_create(g_gpu, mats[i].type, mats[i].n_in, mats[i].n_out, bytes, n, &w[i], &err)) {
            fprintf(stderr, "bench: %s\n", err.msg);
            free(bytes);
            return 1;
        }
        layer_bytes += n;
        free(bytes);
    }
    const int64_t max_tok = 4096;
    float *x = NULL, *y = NULL;
    float *hx = random_rows(max_tok, 14336);
    if (cv_cuda_alloc(g_gpu, (size_t)max_tok * 14336 * sizeof(float), (void **)&x, &err) ||
        cv_cuda_alloc(g_gpu, (size_t)max_tok * 14336 * sizeof(float), (void **)&y, &err) ||
        cv_cuda_upload(g_gpu, x, hx, (size_t)max_tok * 14336 * sizeof(float), &err)) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    free(hx);
    printf("\n%s, sm_%d, %d SMs, %.1f GiB; NVRTC %d.%d, driver %d.%d\n", di.name, di.sm, di.n_sm,
           di.total_bytes / 1073741824.0, di.nvrtc_major, di.nvrtc_minor, di.driver_version / 1000,
           di.driver_version % 1000 / 10);
    printf("device copy: %.0f GB/s (read + write)\n\n", copy_gbs);
    printf("| llama3.1-8b matmuls (Q4_K_M), 32 layers | time a step | rate | of the copy ceiling |\n");
    printf("|---|---|---|---|\n");
    static const int64_t steps[] = { 1, 8, 64, 512, 4096 };
    for (size_t k = 0; k < CV_ARRAY_LEN(steps); k++) {
        const mm_job j = { .w = w, .n_w = N_MATS, .n_tok = steps[k], .x = x, .y = y };
        const double t = 32 * time_job(&j, steps[k] <= 8 ? 20 : steps[k] <= 512 ? 4 : 1);
        if (steps[k] == 1)
            printf("| decode, 1 token | %.2f ms | %.0f GB/s of weights | %.0f%% |\n", t * 1e3,
                   32.0 * layer_bytes / t / 1e9, 100.0 * 32.0 * layer_bytes / t / 1e9 / copy_gbs);
        else
            printf("| %s, %lld tokens | %.2f ms | %.0f tok/s | |\n", steps[k] <= 64 ? "batch" : "prefill",
                   (long long)steps[k], t * 1e3, steps[k] / t);
    }
    cv_bstream_sync(g_gst);
    const int rc = cv_cuda_stream_error(g_gst, &err);
    if (rc)
        fprintf(stderr, "bench: %s\n", err.msg);
    for (int i = 0; i < N_MATS; i++)
        cv_bmat_destroy(g_gpu, w[i]);
    cv_cuda_free(g_gpu, x);
    cv_cuda_free(g_gpu, y);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    cv_err err = { 0 };
    if (cv_backend_open("cuda", &g_gpu, &err)) {
        printf("cuda: no usable GPU here (%s)\n", err.msg);
        return 0;
    }
    cv_rng_seed(&g_rng, 36);
    if (cv_bstream_create(g_gpu, 0, &g_gst, &err) || cv_bstream_create(cv_backend_cpu(), 0, &g_cst, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    cv_cuda_device_info di;
    cv_cuda_device_get(g_gpu, &di);
    printf("cuda:0 %s, sm_%d; kernels as %s_%d\n", di.name, di.sm, di.ptx ? "PTX for compute" : "cubins for sm",
           di.target_sm);
    warm_all_types();
    if (argc > 1 && !strcmp(argv[1], "--bench"))
        return bench();
    RUN(matmul_every_type_matches_the_cpu);
    RUN(expert_matmul_has_the_dense_bits);
    RUN(row_operations_match_the_cpu);
    RUN(attention_rows_match_the_cpu);
    RUN(moe_routes_match_the_cpu);
    RUN(moe_rows_match_the_cpu);
    RUN(embedding_rows_match_the_cpu);
    cv_bstream_destroy(g_gst);
    cv_bstream_destroy(g_cst);
    return test_report();
}
