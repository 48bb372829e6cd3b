/* test_backend_cpu_layer.c — the CPU backend's layer passes.
 *
 * The attention row pass (attn_rows): for every combination of its
 * options (gated q, V from K, V norm, a layer that stores K/V or reads an
 * earlier one's, biases, Q/K norms, the query temperature), each K/V type
 * (f32, f16, q8_0), two head shapes (64 dims rotated whole in NEOX pairs
 * with frequency factors; 40 dims, 32 of them rotated in adjacent pairs)
 * and 1 to 21 rows whose positions cross block edges, with one thread and
 * two:
 *   - the queries, the gates and every byte of the cache have the bits of
 *     the engine's loop at the process level, recomputed here head by head
 *     (each step's vector loop over one head gives the bits it gives over
 *     the row), and the cache bytes no row names and the rows' stride gaps
 *     stay as they were;
 *   - the queries are within rounding of the scalar reference, and the
 *     cache, read back position by position (kv_k_get / kv_v_get), holds
 *     the scalar reference's keys and values within the type's rounding
 *     (f16's half ulp, q8_0's half level of its group) at each row's
 *     block and position.
 *
 * The MoE router (moe_route): each routing kind with and without the
 * router's bias, a selection bias, renormalisation, a weight scale and
 * expert scales, over expert counts of 1 to 128 (with and without
 * group-limited choice), 1 to 33 rows, logits with exact ties and
 * without, with one thread and two: the routes have the bits of a plain
 * reference that sorts every score (ties to the lower index) and weighs
 * with the level's loops, the source of route t k + j is t, and nothing
 * past the rows is touched; and they choose what the scalar reference
 * chooses (tokens whose scores the two levels' rounding could order
 * differently aside), with weights within rounding of its.
 *
 * The MoE layer's rows (moe_glu, moe_sum): each activation (SwiGLU, GeGLU,
 * gpt-oss's clamped SwiGLU), 1, 2 and 4 routes a row naming every expert
 * (some twice in a step), with and without the experts' gate/up and down
 * biases, the routed sum's post-norm, a shared expert, its gate and its
 * post-norm, 1 to 33 rows, one thread and two: each route's biased
 * gate|up and activation, each routed output with its bias, each row's sum
 * and shared row have the bits of the engine's loops at the process level
 * (recomputed here route by route and row by row), within rounding of the
 * scalar reference's, and the rows' stride gaps stay.
 *
 * The token embedding's rows (embed_rows): every weight type, 1 to 33
 * tokens (repeats, the table's first and last row), with and without a
 * scale, one thread and two: each row the bits of its GGUF row dequantized
 * (cv_dequantize_row) times the scale, at the process level's loop and the
 * scalar one alike (both multiply each value once), gaps untouched.
 *
 * tests/backend/CMakeLists.txt runs it once more under CORVID_ISA=scalar. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "test.h"

enum { GAP = 3, MAX_ROWS = 21, N_HEAD = 4, N_HEAD_KV = 2, N_LAYER = 2, LAYER = 1, MAX_HD = 64 };

enum { GATED = 1, V_FROM_K = 2, V_NORM = 4, STORE = 8, BIAS = 16, NORM = 32, TEMP = 64, N_FLAGS = 128 };

typedef struct shape {
    int32_t hd;
    cv_rope_params rope;
} shape;

static float g_ff[MAX_HD / 2];
static shape g_shapes[2];
static cv_bstream *g_streams[2]; /* of one thread and of two */

/* Rows, weights and places of one case. */
typedef struct fixture {
    cv_batt_rows a;
    int64_t width; /* of a row's used values */
    float *in;     /* [n_rows][ld_qkv] the projections, as given */
    float bias_q[N_HEAD * MAX_HD], bias_k[N_HEAD_KV * MAX_HD], bias_v[N_HEAD_KV * MAX_HD];
    float norm_q[MAX_HD], norm_k[MAX_HD];
    int32_t pos[MAX_ROWS], blk[MAX_ROWS];
    int32_t n_blocks;
} fixture;

static void fill(float *x, int64_t n, cv_rng *r, float lo, float hi)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * cv_rng_f32(r);
}

static kv_pool pool_make(int32_t n_blocks, int32_t hd, uint32_t type)
{
    kv_pool p = { .n_blocks = n_blocks, .n_layer = N_LAYER, .n_head_kv = N_HEAD_KV, .head_dim = hd, .n_parts = 2,
                  .type = type, .qgroup = kv_q8_group(hd),
                  .elt_bytes = type == CV_GGML_Q8_0 ? 1 : type == CV_GGML_F16 ? 2 : 4,
                  .head_bytes = kv_head_bytes(hd, type),
                  .block_bytes = kv_block_bytes(N_LAYER, 2, N_HEAD_KV, hd, type) };
    /* bytes that read as finite values of every type (0x5a5a: f16 203.25),
     * which untouched places must keep */
    p.data = cv_xmalloc(p.block_bytes * (size_t)n_blocks);
    memset(p.data, 0x5a, p.block_bytes * (size_t)n_blocks);
    return p;
}

static void fixture_make(fixture *f, const shape *sh, int flags, int32_t n_rows, uint64_t seed)
{
    cv_rng r;
    cv_rng_seed(&r, seed);
    const int32_t hd = sh->hd;
    const int64_t n_q = (int64_t)N_HEAD * hd, n_kv = (int64_t)N_HEAD_KV * hd;
    memset(f, 0, sizeof *f);
    f->width = ((flags & GATED) ? 2 : 1) * n_q + 2 * n_kv;
    const int64_t ld = f->width + GAP;
    f->in = cv_xmalloc((size_t)(n_rows * ld) * sizeof(float));
    fill(f->in, n_rows * ld, &r, -4, 4);
    fill(f->bias_q, n_q, &r, -1, 1);
    fill(f->bias_k, n_kv, &r, -1, 1);
    fill(f->bias_v, n_kv, &r, -1, 1);
    fill(f->norm_q, hd, &r, 0.5f, 1.5f);
    fill(f->norm_k, hd, &r, 0.5f, 1.5f);
    /* positions 13, 16, 19, ...: rows in one block and rows across its
     * edges; block b of the positions in cache block 1 + b, so a block
     * before and one after stay untouched */
    for (int32_t t = 0; t < n_rows; t++) {
        f->pos[t] = 13 + 3 * t;
        f->blk[t] = 1 + f->pos[t] / CV_KV_BLOCK;
        f->n_blocks = f->blk[t] + 2;
    }
    f->a = (cv_batt_rows){
        .n_rows = n_rows, .ld_qkv = ld, .ld_gate = n_q + GAP, .n_head = N_HEAD, .n_head_kv = N_HEAD_KV,
        .head_dim = hd, .gated = flags & GATED, .v_from_k = flags & V_FROM_K, .v_norm = flags & V_NORM,
        .store_kv = flags & STORE, .q_bias = (flags & BIAS) ? f->bias_q : NULL,
        .k_bias = (flags & BIAS) ? f->bias_k : NULL, .v_bias = (flags & BIAS) ? f->bias_v : NULL,
        .q_norm = (flags & NORM) ? f->norm_q : NULL, .k_norm = (flags & NORM) ? f->norm_k : NULL, .eps = 1e-6f,
        .rope = &sh->rope, .pos = f->pos, .temp_scale = (flags & TEMP) ? 0.1f : 0.0f, .temp_len = 8,
        .kv_layer = LAYER, .kv_block = f->blk,
    };
}

/* What the pass makes of row t, head by head with one level's loops:
 * queries q [n_head hd], gates g, and keys and values k, v [n_head_kv hd]
 * as stored (into kv, when not NULL). */
static void reference(const cv_vec_ops *vec, const fixture *f, int32_t t, float *q, float *g, float *k, float *v,
                      const kv_pool *kv)
{
    const cv_batt_rows *a = &f->a;
    const int32_t hd = a->head_dim, pos = a->pos[t];
    const int64_t n_q = (int64_t)a->n_head * hd, n_kv = (int64_t)a->n_head_kv * hd;
    const float *row = f->in + t * a->ld_qkv, *rk = row + (a->gated ? 2 : 1) * n_q;
    const float temp = logf(floorf((float)pos / (float)a->temp_len) + 1.0f) * a->temp_scale + 1.0f;
    for (int32_t h = 0; h < a->n_head; h++) {
        float *x = q + h * hd;
        memcpy(x, row + (a->gated ? 2 * h : h) * hd, (size_t)hd * sizeof(float));
        if (a->gated)
            memcpy(g + h * hd, row + (2 * h + 1) * hd, (size_t)hd * sizeof(float));
        if (a->q_bias)
            vec->add(x, x, a->q_bias + h * hd, hd);
        if (a->q_norm)
            vec->rmsnorm(x, x, a->q_norm, hd, a->eps);
        vec->rope(a->rope, x, 1, hd, pos);
        if (a->temp_scale > 0)
            vec->scale(x, temp, hd);
    }
    for (int32_t h = 0; h < a->n_head_kv; h++) {
        float *kh = k + h * hd, *vh = v + h * hd;
        memcpy(kh, rk + h * hd, (size_t)hd * sizeof(float));
        memcpy(vh, (a->v_from_k ? rk : rk + n_kv) + h * hd, (size_t)hd * sizeof(float));
        if (a->k_bias)
            vec->add(kh, kh, a->k_bias + h * hd, hd);
        if (a->v_bias)
            vec->add(vh, vh, a->v_bias + h * hd, hd);
        if (a->k_norm)
            vec->rmsnorm(kh, kh, a->k_norm, hd, a->eps);
        if (a->v_norm && a->store_kv)
            vec->rmsnorm(vh, vh, NULL, hd, a->eps);
        if (!a->store_kv)
            continue;
        vec->rope(a->rope, kh, 1, hd, pos);
        if (kv)
            kv_store(kv, vec, kv_k(kv, a->kv_block[t], LAYER, h), kv_v(kv, a->kv_block[t], LAYER, h),
                     pos % CV_KV_BLOCK, kh, vh);
    }
}

/* got, read from position j, dimension i of a head's half of p, within
 * rounding of the cache's type of want: q8_0 by its group's factor as
 * stored. */
static bool kv_close(const kv_pool *p, const void *half, int32_t j, int32_t i, float got, float want)
{
    const double e = fabs((double)got - want), rel = 2e-5 * (1 + fabs((double)want));
    if (p->type == CV_GGML_Q8_0)
        return e <= 0.6 * cv_fp16_to_fp32(kv_q8_scales(p, half)[kv_scale_at(p, j, i)]) + rel;
    return e <= (p->type == CV_GGML_F16 ? 1e-3 * fabs((double)want) : 0) + rel;
}

static void run_case(cv_bstream *s, int threads, const shape *sh, int flags, uint32_t type, int32_t n_rows)
{
    fixture f;
    fixture_make(&f, sh, flags, n_rows, (uint64_t)(flags * 131 + n_rows * 7 + sh->hd + type));
    cv_batt_rows *a = &f.a;
    const int32_t hd = sh->hd;
    const int64_t n_q = (int64_t)N_HEAD * hd, ld = a->ld_qkv;
    kv_pool got = pool_make(f.n_blocks, hd, type), want = pool_make(f.n_blocks, hd, type);
    const size_t pool_bytes = got.block_bytes * (size_t)got.n_blocks;
    float *qkv = cv_be_rows_alloc(cv_backend_cpu(), (size_t)(n_rows * ld) * sizeof(float));
    float *gate = cv_be_rows_alloc(cv_backend_cpu(), (size_t)(n_rows * a->ld_gate) * sizeof(float));
    memcpy(qkv, f.in, (size_t)(n_rows * ld) * sizeof(float));
    for (int64_t i = 0; i < n_rows * a->ld_gate; i++)
        gate[i] = -7.0f;
    a->qkv = qkv;
    a->gate = (flags & GATED) ? gate : NULL;
    a->kv = &got;
    cv_be_attn_rows(s, a);

    const cv_vec_ops *level = cv_vec_ops_for(cv_isa_active()), *scalar = cv_vec_ops_for(CV_ISA_SCALAR);
    float q[N_HEAD * MAX_HD], g[N_HEAD * MAX_HD], k[N_HEAD_KV * MAX_HD], v[N_HEAD_KV * MAX_HD];
    int bad_bits = 0, bad_ref = 0, bad_kv = 0, bad_gap = 0;
    double worst = 0;
    for (int32_t t = 0; t < n_rows; t++) {
        const float *row = qkv + t * ld, *grow = gate + t * a->ld_gate;
        reference(level, &f, t, q, g, k, v, &want);
        bad_bits += memcmp(row, q, (size_t)n_q * sizeof(float)) != 0;
        if (flags & GATED)
            bad_bits += memcmp(grow, g, (size_t)n_q * sizeof(float)) != 0;
        for (int i = 0; i < GAP; i++) {
            bad_gap += memcmp(&row[f.width + i], &f.in[t * ld + f.width + i], sizeof(float)) != 0;
            bad_gap += grow[n_q + i] != -7.0f || (!(flags & GATED) && grow[i] != -7.0f);
        }
        reference(scalar, &f, t, q, g, k, v, NULL);
        for (int64_t i = 0; i < n_q; i++) {
            const double e = fabs((double)row[i] - q[i]) / (1 + fabs((double)q[i]));
            worst = fmax(worst, e);
            bad_ref += !(e <= 2e-5);
        }
        if (!(flags & STORE))
            continue;
        const int32_t j = f.pos[t] % CV_KV_BLOCK;
        for (int32_t h = 0; h < N_HEAD_KV; h++) {
            const void *K = kv_k(&got, f.blk[t], LAYER, h), *V = kv_v(&got, f.blk[t], LAYER, h);
            for (int32_t i = 0; i < hd; i++) {
                bad_kv += !kv_close(&got, K, j, i, kv_k_get(&got, K, j, i), k[h * hd + i]);
                bad_kv += !kv_close(&got, V, j, i, kv_v_get(&got, V, j, i), v[h * hd + i]);
            }
        }
    }
    /* the whole cache: the rows' places as the loop stores them, the rest
     * as it was */
    bad_bits += memcmp(got.data, want.data, pool_bytes) != 0;
    const char *tn = cv_dtype_get(type)->name;
    CHECK_MSG(bad_bits == 0 && bad_gap == 0,
              "hd %d, options %#x, %s, %d rows, %d threads: %d rows (or the cache) differ from the loop's bits, %d "
              "gap values changed", hd, flags, tn, n_rows, threads, bad_bits, bad_gap);
    CHECK_MSG(bad_ref == 0 && bad_kv == 0,
              "hd %d, options %#x, %s, %d rows: %d query values off the scalar reference (worst relative %g), %d "
              "cached values off it", hd, flags, tn, n_rows, bad_ref, worst, bad_kv);
    cv_be_rows_free(cv_backend_cpu(), qkv);
    cv_be_rows_free(cv_backend_cpu(), gate);
    free(got.data);
    free(want.data);
    free(f.in);
}

TEST(attention_rows_give_the_loops_bits_for_every_option_type_and_row_count)
{
    printf("  row loops at %s\n", cv_isa_name(cv_vec_ops_level(cv_isa_active())));
    static const uint32_t types[] = { CV_GGML_F32, CV_GGML_F16, CV_GGML_Q8_0 };
    static const int32_t rows[] = { 1, 3, 4, 7, MAX_ROWS };
    for (int threads = 1; threads <= 2; threads++) {
        cv_bstream *s = g_streams[threads - 1];
        for (size_t si = 0; si < CV_ARRAY_LEN(g_shapes); si++)
            for (int flags = 0; flags < N_FLAGS; flags++)
                for (size_t ti = 0; ti < CV_ARRAY_LEN(types); ti++)
                    for (size_t ri = 0; ri < CV_ARRAY_LEN(rows); ri++)
                        run_case(s, threads, &g_shapes[si], flags, types[ti], rows[ri]);
    }
}

/* ---- the MoE router ---- */

static const float *g_score; /* what by_score orders */

/* Index a before b: a higher score, or the same and a lower index. */
static int by_score(const void *x, const void *y)
{
    const int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    if (g_score[a] != g_score[b])
        return g_score[a] > g_score[b] ? -1 : 1;
    return a < b ? -1 : 1;
}

/* The n indices of s sorted by score into order; whether two neighbours
 * among the first `upto` are so close (yet not equal) that another
 * level's rounding could swap them. */
static bool sort_scores(const float *s, int32_t n, int32_t *order, int32_t upto)
{
    for (int32_t i = 0; i < n; i++)
        order[i] = i;
    g_score = s;
    qsort(order, (size_t)n, sizeof *order, by_score);
    bool close = false;
    for (int32_t i = 0; i + 1 < CV_MIN(upto + 1, n); i++) {
        const float a = s[order[i]], b = s[order[i + 1]];
        close |= a != b && fabsf(a - b) <= 1e-4f * (1 + fabsf(a));
    }
    return close;
}

/* Row `in` routed the plain way with one level's loops: experts idx[k]
 * and weights w[k]; returns whether a near tie made the choice fragile. */
static bool route_reference(const cv_vec_ops *vec, const cv_bmoe_route *r, const float *in, int32_t *idx, float *w)
{
    const int32_t n = r->n_expert, k = r->k;
    float p[CV_MAX_EXPERTS], sel[CV_MAX_EXPERTS];
    int32_t order[CV_MAX_EXPERTS];
    bool fragile = false;
    memcpy(p, in, (size_t)n * sizeof(float));
    if (r->bias)
        vec->add(p, p, r->bias, n);
    if (r->kind == CV_BROUTE_TOPK_SOFTMAX) {
        fragile = sort_scores(p, n, order, k);
        for (int32_t j = 0; j < k; j++)
            idx[j] = order[j], w[j] = p[order[j]];
        vec->softmax(w, k);
    } else {
        if (r->kind == CV_BROUTE_SIGMOID_TOPK)
            for (int32_t e = 0; e < n; e++)
                p[e] = 1.0f / (1.0f + expf(-p[e]));
        else
            vec->softmax(p, n);
        for (int32_t e = 0; e < n; e++)
            sel[e] = r->sel_bias ? p[e] + r->sel_bias[e] : p[e];
        if (r->n_group > 1) {
            /* a group's score: its two best; the n_group_used best groups
             * keep their experts */
            const int32_t per = n / r->n_group;
            float gs[CV_MAX_EXPERTS];
            int32_t gorder[CV_MAX_EXPERTS];
            for (int32_t g = 0; g < r->n_group; g++) {
                fragile |= sort_scores(sel + g * per, per, order, 2);
                gs[g] = sel[g * per + order[0]] + sel[g * per + order[1]];
            }
            fragile |= sort_scores(gs, r->n_group, gorder, r->n_group_used);
            for (int32_t i = r->n_group_used; i < r->n_group; i++)
                for (int32_t e = gorder[i] * per; e < (gorder[i] + 1) * per; e++)
                    sel[e] = -INFINITY;
        }
        fragile |= sort_scores(sel, n, order, k);
        float sum = 0;
        for (int32_t j = 0; j < k; j++) {
            idx[j] = order[j];
            w[j] = p[order[j]];
            sum += w[j];
        }
        for (int32_t j = 0; j < k && r->norm; j++)
            w[j] *= 1.0f / fmaxf(sum, 6.103515625e-5f);
        for (int32_t j = 0; j < k && r->scale != 1.0f; j++)
            w[j] *= r->scale;
    }
    for (int32_t j = 0; j < k && r->exp_scale; j++)
        w[j] *= r->exp_scale[idx[j]];
    return fragile;
}

typedef struct route_shape {
    int32_t n_expert, k, n_group, n_group_used;
} route_shape;

enum { R_BIAS = 1, R_SEL = 2, R_NORM = 4, R_SCALE = 8, R_EXP_SCALE = 16, R_TIES = 32, R_FLAGS = 64,
       R_MAX_ROWS = 33, R_GAP = 2 };

static void route_case(cv_bstream *s, int threads, const route_shape *sh, cv_broute kind, int flags, int32_t n_rows)
{
    const int32_t n = sh->n_expert, k = sh->k;
    const int64_t ld = n + R_GAP, n_routes = (int64_t)n_rows * k;
    cv_rng rng;
    cv_rng_seed(&rng, (uint64_t)(n * 1000 + flags * 10 + (int)kind + n_rows * 7919));
    float *in = cv_xmalloc((size_t)(n_rows * ld) * sizeof(float)), bias[128], sel[128], xs[128];
    for (int64_t i = 0; i < n_rows * ld; i++) {
        const float v = cv_rng_normal(&rng) * 3;
        in[i] = (flags & R_TIES) ? roundf(v) * 0.5f : v; /* ties: few distinct values */
    }
    fill(bias, n, &rng, -0.5f, 0.5f);
    fill(sel, n, &rng, -0.05f, 0.05f);
    fill(xs, n, &rng, 0.5f, 2.0f);
    float *logits = cv_be_rows_alloc(cv_backend_cpu(), (size_t)(n_rows * ld) * sizeof(float));
    float *weight = cv_be_rows_alloc(cv_backend_cpu(), (size_t)(n_routes + 1) * sizeof(float));
    int32_t *expert = cv_be_rows_alloc(cv_backend_cpu(), (size_t)(n_routes + 1) * sizeof(int32_t));
    int32_t *src = cv_be_rows_alloc(cv_backend_cpu(), (size_t)(n_routes + 1) * sizeof(int32_t));
    memcpy(logits, in, (size_t)(n_rows * ld) * sizeof(float));
    weight[n_routes] = -3.0f, expert[n_routes] = src[n_routes] = -3;
    const cv_bmoe_route r = { .n_rows = n_rows, .n_expert = n, .k = k, .logits = logits, .ld_logits = ld,
                              .kind = kind, .bias = (flags & R_BIAS) ? bias : NULL,
                              .sel_bias = (flags & R_SEL) ? sel : NULL, .n_group = sh->n_group,
                              .n_group_used = sh->n_group_used, .norm = flags & R_NORM,
                              .scale = (flags & R_SCALE) ? 2.5f : 1.0f, .exp_scale = (flags & R_EXP_SCALE) ? xs : NULL,
                              .expert = expert, .src = src, .weight = weight };
    cv_be_moe_route(s, &r);
    const cv_vec_ops *level = cv_vec_ops_for(cv_isa_active()), *scalar = cv_vec_ops_for(CV_ISA_SCALAR);
    int bad_bits = 0, bad_ref = 0, fragile = 0;
    for (int32_t t = 0; t < n_rows; t++) {
        int32_t idx[64];
        float w[64];
        route_reference(level, &r, in + t * ld, idx, w);
        bad_bits += memcmp(idx, expert + t * k, (size_t)k * sizeof(int32_t)) != 0 ||
                    memcmp(w, weight + t * k, (size_t)k * sizeof(float)) != 0;
        for (int32_t j = 0; j < k; j++)
            bad_bits += src[t * k + j] != t;
        for (int g = 0; g < R_GAP; g++)
            bad_bits += memcmp(&logits[t * ld + n + g], &in[t * ld + n + g], sizeof(float)) != 0;
        if (route_reference(scalar, &r, in + t * ld, idx, w)) {
            fragile++;
            continue;
        }
        for (int32_t j = 0; j < k; j++)
            bad_ref += idx[j] != expert[t * k + j] ||
                       !(fabsf(w[j] - weight[t * k + j]) <= 1e-5f * (1 + fabsf(w[j])));
    }
    bad_bits += weight[n_routes] != -3.0f || expert[n_routes] != -3 || src[n_routes] != -3;
    CHECK_MSG(bad_bits == 0, "routing %d, %d experts (k %d, %d groups), options %#x, %d rows, %d threads: %d routes "
              "differ from the reference's bits", (int)kind, n, k, sh->n_group, flags, n_rows, threads, bad_bits);
    CHECK_MSG(bad_ref == 0, "routing %d, %d experts (k %d, %d groups), options %#x, %d rows: %d routes off the "
              "scalar reference (%d near ties left out)", (int)kind, n, k, sh->n_group, flags, n_rows, bad_ref,
              fragile);
    cv_be_rows_free(cv_backend_cpu(), logits);
    cv_be_rows_free(cv_backend_cpu(), weight);
    cv_be_rows_free(cv_backend_cpu(), expert);
    cv_be_rows_free(cv_backend_cpu(), src);
    free(in);
}

TEST(moe_routes_give_the_references_bits_for_every_kind_option_and_shape)
{
    static const route_shape shapes[] = { { 1, 1, 1, 1 }, { 8, 2, 1, 1 }, { 32, 4, 4, 2 }, { 64, 6, 8, 3 },
                                          { 128, 8, 1, 1 } };
    static const int32_t rows[] = { 1, 3, 4, R_MAX_ROWS };
    for (int threads = 1; threads <= 2; threads++) {
        cv_bstream *s = g_streams[threads - 1];
        for (size_t si = 0; si < CV_ARRAY_LEN(shapes); si++)
            for (int kind = 0; kind < 3; kind++)
                for (int flags = 0; flags < R_FLAGS; flags++)
                    for (size_t ri = 0; ri < CV_ARRAY_LEN(rows); ri++)
                        route_case(s, threads, &shapes[si], (cv_broute)kind, flags, rows[ri]);
    }
}

/* ---- the MoE layer's rows ---- */

enum { M_EXPERTS = 8, M_FF = 72, M_N = 100, M_GAP = 3, M_MAX_K = 4 };
enum { M_GU_BIAS = 1, M_DOWN_BIAS = 2, M_POST_NORM = 4, M_SHARED = 8, M_SH_GATE = 16, M_SH_NORM = 32,
       M_FLAGS = 64 };

/* One case's inputs: the routes, gate|up rows, expert outputs, the shared
 * expert's rows and x, and the layer's vectors. */
typedef struct moe_fixture {
    cv_bmoe_rows m;
    cv_bact act;
    int32_t expert[R_MAX_ROWS * M_MAX_K];
    float weight[R_MAX_ROWS * M_MAX_K];
    float *gu, *y, *sh, *x;  /* as given */
    float gate_bias[M_EXPERTS * M_FF], up_bias[M_EXPERTS * M_FF], down_bias[M_EXPERTS * M_N];
    float post_norm[M_N], sh_norm[M_N], sh_gate[M_N];
} moe_fixture;

static void moe_fixture_make(moe_fixture *f, const cv_bact *act, int32_t k, int flags, int32_t n_rows)
{
    cv_rng r;
    cv_rng_seed(&r, (uint64_t)(flags * 977 + k * 31 + n_rows + (int)act->kind * 7));
    memset(f, 0, sizeof *f);
    f->act = *act;
    const int64_t n_routes = (int64_t)n_rows * k, ld_gu = 2 * M_FF + M_GAP, ld = M_N + M_GAP;
    for (int64_t i = 0; i < n_routes; i++) /* every expert, some twice in a step */
        f->expert[i] = (int32_t)((i * 5 + i / 3) % M_EXPERTS), f->weight[i] = 0.1f + cv_rng_f32(&r);
    f->gu = cv_xmalloc((size_t)(n_routes * ld_gu) * sizeof(float));
    f->y = cv_xmalloc((size_t)(n_routes * ld) * sizeof(float));
    f->sh = cv_xmalloc((size_t)(n_rows * ld) * sizeof(float));
    f->x = cv_xmalloc((size_t)(n_rows * ld) * sizeof(float));
    fill(f->gu, n_routes * ld_gu, &r, -6, 6); /* past gpt-oss's clamp of 7 once biased */
    fill(f->y, n_routes * ld, &r, -2, 2);
    fill(f->sh, n_rows * ld, &r, -2, 2);
    fill(f->x, n_rows * ld, &r, -1, 1);
    fill(f->gate_bias, M_EXPERTS * M_FF, &r, -1.5f, 1.5f);
    fill(f->up_bias, M_EXPERTS * M_FF, &r, -1.5f, 1.5f);
    fill(f->down_bias, M_EXPERTS * M_N, &r, -0.5f, 0.5f);
    fill(f->post_norm, M_N, &r, 0.5f, 1.5f);
    fill(f->sh_norm, M_N, &r, 0.5f, 1.5f);
    fill(f->sh_gate, M_N, &r, -0.3f, 0.3f);
    f->m = (cv_bmoe_rows){
        .n_rows = n_rows, .k = k, .n_expert = M_EXPERTS, .expert = f->expert, .weight = f->weight, .act = &f->act,
        .n_ff = M_FF, .ld_gu = ld_gu, .gate_bias = (flags & M_GU_BIAS) ? f->gate_bias : NULL,
        .up_bias = (flags & M_GU_BIAS) ? f->up_bias : NULL, .ld_h = M_FF + M_GAP, .n = M_N, .ldy = ld,
        .down_bias = (flags & M_DOWN_BIAS) ? f->down_bias : NULL,
        .post_norm = (flags & M_POST_NORM) ? f->post_norm : NULL, .eps = 1e-6f, .ld_shared = ld,
        .sh_post_norm = (flags & M_SH_NORM) ? f->sh_norm : NULL, .sh_gate = (flags & M_SH_GATE) ? f->sh_gate : NULL,
        .x = f->x, .ldx = ld, .ld_out = ld,
    };
}

static void moe_fixture_free(moe_fixture *f)
{
    free(f->gu), free(f->y), free(f->sh), free(f->x);
}

/* Route r's h [M_FF] and biased gate|up g [2 M_FF] with one level's loops,
 * as the engine's per-route loop made them. */
static void glu_reference(const cv_vec_ops *vec, const moe_fixture *f, int64_t r, float *g, float *h)
{
    const cv_bmoe_rows *m = &f->m;
    const int64_t e = m->expert[r];
    memcpy(g, f->gu + r * m->ld_gu, 2 * M_FF * sizeof(float));
    if (m->gate_bias)
        vec->add(g, g, m->gate_bias + e * M_FF, M_FF);
    if (m->up_bias)
        vec->add(g + M_FF, g + M_FF, m->up_bias + e * M_FF, M_FF);
    switch (m->act->kind) {
    case CV_BGLU_SILU: vec->swiglu(h, g, g + M_FF, M_FF); break;
    case CV_BGLU_GELU_TANH: vec->geglu(h, g, g + M_FF, M_FF); break;
    case CV_BGLU_SILU_CLAMPED: vec->swiglu_clamped(h, g, g + M_FF, M_FF, m->act->alpha, m->act->limit); break;
    }
}

/* Row t's sum out [M_N], its routes' biased outputs y [k][M_N] and its
 * shared row sh [M_N] with one level's loops, as the engine's combine and
 * shared-expert loops made them. */
static void sum_reference(const cv_vec_ops *vec, const moe_fixture *f, int32_t t, float *out, float *y, float *sh)
{
    const cv_bmoe_rows *m = &f->m;
    memset(out, 0, M_N * sizeof(float));
    for (int32_t j = 0; j < m->k; j++) {
        const int64_t r = (int64_t)t * m->k + j;
        float *yr = y + j * M_N;
        memcpy(yr, f->y + r * m->ldy, M_N * sizeof(float));
        if (m->down_bias)
            vec->add(yr, yr, m->down_bias + (int64_t)m->expert[r] * M_N, M_N);
        vec->axpy(out, m->weight[r], yr, M_N);
    }
    if (m->post_norm)
        vec->rmsnorm(out, out, m->post_norm, M_N, m->eps);
    memcpy(sh, f->sh + t * m->ld_shared, M_N * sizeof(float));
    if (!m->shared)
        return;
    if (m->sh_post_norm)
        vec->rmsnorm(sh, sh, m->sh_post_norm, M_N, m->eps);
    if (m->sh_gate)
        vec->axpy(out, 1.0f / (1.0f + expf(-vec->dot_f32(m->sh_gate, f->x + t * m->ldx, M_N))), sh, M_N);
    else
        vec->add(out, out, sh, M_N);
}

static int count_off(const float *got, const float *want, int64_t n, float tol)
{
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += !(fabsf(got[i] - want[i]) <= tol * (1 + fabsf(want[i])));
    return bad;
}

static void moe_rows_case(cv_bstream *s, int threads, const cv_bact *act, int32_t k, int flags, int32_t n_rows)
{
    moe_fixture f;
    moe_fixture_make(&f, act, k, flags, n_rows);
    cv_bmoe_rows *m = &f.m;
    const int64_t n_routes = (int64_t)n_rows * k, ld = m->ldy;
    const size_t gu_bytes = (size_t)(n_routes * m->ld_gu) * sizeof(float), y_bytes = (size_t)(n_routes * ld) * 4;
    const size_t h_bytes = (size_t)(n_routes * m->ld_h) * sizeof(float), row_bytes = (size_t)(n_rows * ld) * 4;
    cv_backend *be = cv_backend_cpu();
    float *gu = cv_be_rows_alloc(be, gu_bytes), *h = cv_be_rows_alloc(be, h_bytes), *y = cv_be_rows_alloc(be, y_bytes);
    float *sh = cv_be_rows_alloc(be, row_bytes), *out = cv_be_rows_alloc(be, row_bytes);
    memcpy(gu, f.gu, gu_bytes);
    memcpy(y, f.y, y_bytes);
    memcpy(sh, f.sh, row_bytes);
    for (int64_t i = 0; i < n_routes * m->ld_h; i++)
        h[i] = -9.0f;
    for (int64_t i = 0; i < n_rows * ld; i++)
        out[i] = -9.0f;
    m->gu = gu, m->h = h, m->y = y, m->out = out, m->shared = (flags & M_SHARED) ? sh : NULL;
    cv_be_moe_glu(s, m);
    cv_be_moe_sum(s, m);

    const cv_vec_ops *level = cv_vec_ops_for(cv_isa_active()), *scalar = cv_vec_ops_for(CV_ISA_SCALAR);
    float g[2 * M_FF], hr[M_FF], o[M_N], yr[M_MAX_K * M_N], shr[M_N];
    int bad_bits = 0, bad_ref = 0, bad_gap = 0;
    for (int64_t r = 0; r < n_routes; r++) {
        const float *gr = gu + r * m->ld_gu, *hh = h + r * m->ld_h;
        glu_reference(level, &f, r, g, hr);
        bad_bits += memcmp(gr, g, sizeof g) != 0 || memcmp(hh, hr, sizeof hr) != 0;
        glu_reference(scalar, &f, r, g, hr);
        bad_ref += count_off(hh, hr, M_FF, 2e-5f) + count_off(gr, g, 2 * M_FF, 2e-6f);
        for (int i = 0; i < M_GAP; i++)
            bad_gap += memcmp(&gr[2 * M_FF + i], &f.gu[r * m->ld_gu + 2 * M_FF + i], 4) != 0 || hh[M_FF + i] != -9.0f;
    }
    for (int32_t t = 0; t < n_rows; t++) {
        const float *ot = out + t * ld, *st = sh + t * ld;
        sum_reference(level, &f, t, o, yr, shr);
        bad_bits += memcmp(ot, o, sizeof o) != 0 || memcmp(st, shr, sizeof shr) != 0;
        for (int32_t j = 0; j < k; j++)
            bad_bits += memcmp(y + ((int64_t)t * k + j) * ld, yr + j * M_N, M_N * sizeof(float)) != 0;
        sum_reference(scalar, &f, t, o, yr, shr);
        bad_ref += count_off(ot, o, M_N, 2e-5f) + count_off(st, shr, M_N, 2e-5f);
        for (int i = 0; i < M_GAP; i++)
            bad_gap += ot[M_N + i] != -9.0f || memcmp(&st[M_N + i], &f.sh[t * ld + M_N + i], 4) != 0;
    }
    CHECK_MSG(bad_bits == 0 && bad_gap == 0,
              "activation %d, k %d, options %#x, %d rows, %d threads: %d routes or rows differ from the loops' bits, "
              "%d gap values changed", (int)act->kind, k, flags, n_rows, threads, bad_bits, bad_gap);
    CHECK_MSG(bad_ref == 0, "activation %d, k %d, options %#x, %d rows: %d values off the scalar reference",
              (int)act->kind, k, flags, n_rows, bad_ref);
    float *rows[] = { gu, h, y, sh, out };
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++)
        cv_be_rows_free(be, rows[i]);
    moe_fixture_free(&f);
}

TEST(moe_rows_give_the_loops_bits_for_every_activation_option_and_row_count)
{
    static const cv_bact acts[] = { { .kind = CV_BGLU_SILU }, { .kind = CV_BGLU_GELU_TANH },
                                    { .kind = CV_BGLU_SILU_CLAMPED, .alpha = 1.702f, .limit = 7.0f } };
    static const int32_t ks[] = { 1, 2, M_MAX_K }, rows[] = { 1, 3, 4, 9, R_MAX_ROWS };
    for (int threads = 1; threads <= 2; threads++)
        for (size_t ai = 0; ai < CV_ARRAY_LEN(acts); ai++)
            for (size_t ki = 0; ki < CV_ARRAY_LEN(ks); ki++)
                for (int flags = 0; flags < M_FLAGS; flags++)
                    for (size_t ri = 0; ri < CV_ARRAY_LEN(rows); ri++)
                        moe_rows_case(g_streams[threads - 1], threads, &acts[ai], ks[ki], flags, rows[ri]);
}

/* ---- the token embedding ---- */

enum { E_VOCAB = 37, E_N = 512, E_GAP = 3 };

static void embed_case(cv_bstream *s, int threads, uint32_t type, const uint8_t *table, int32_t n_rows, float scale)
{
    const cv_dtype *dt = cv_dtype_get(type);
    const size_t row_bytes = (size_t)(E_N / dt->block_elems) * dt->block_bytes;
    const int64_t ld = E_N + E_GAP;
    int32_t tokens[R_MAX_ROWS];
    for (int32_t t = 0; t < n_rows; t++) /* 0, the last, repeats */
        tokens[t] = t == 1 ? E_VOCAB - 1 : (t * 7) % 11;
    float *y = cv_be_rows_alloc(cv_backend_cpu(), (size_t)(n_rows * ld) * sizeof(float));
    for (int64_t i = 0; i < n_rows * ld; i++)
        y[i] = -5.0f;
    cv_be_embed_rows(s, type, E_N, table, E_VOCAB, n_rows, tokens, scale, y, ld);
    float want[E_N], ref[E_N];
    int bad = 0;
    for (int32_t t = 0; t < n_rows; t++) {
        CHECK_EQ_INT(cv_dequantize_row(type, table + (size_t)tokens[t] * row_bytes, want, E_N, NULL), 0);
        memcpy(ref, want, sizeof want);
        if (scale != 1.0f) {
            cv_vec_ops_for(cv_isa_active())->scale(want, scale, E_N);
            cv_vec_ops_for(CV_ISA_SCALAR)->scale(ref, scale, E_N);
        }
        bad += memcmp(y + t * ld, want, sizeof want) != 0 || memcmp(want, ref, sizeof want) != 0;
        for (int g = 0; g < E_GAP; g++)
            bad += y[t * ld + E_N + g] != -5.0f;
    }
    CHECK_MSG(bad == 0, "%s, %d rows, scale %g, %d threads: %d rows differ from the dequantized table's", dt->name,
              n_rows, scale, threads, bad);
    cv_be_rows_free(cv_backend_cpu(), y);
}

TEST(embedding_rows_give_the_tables_bits_for_every_type)
{
    static const int32_t rows[] = { 1, 3, 4, 9, R_MAX_ROWS };
    cv_rng rng;
    cv_rng_seed(&rng, 35);
    float src[E_N];
    cv_err err = { 0 };
    for (int threads = 1; threads <= 2; threads++) {
        cv_bstream *s = g_streams[threads - 1];
        for (uint32_t type = 0; type < CV_GGML_TYPE_COUNT; type++) {
            const cv_dtype *dt = cv_dtype_get(type);
            if (!dt || !dt->is_weight)
                continue;
            const size_t row_bytes = (size_t)(E_N / dt->block_elems) * dt->block_bytes;
            uint8_t *table = cv_xmalloc(row_bytes * E_VOCAB);
            for (int32_t v = 0; v < E_VOCAB; v++) {
                for (int i = 0; i < E_N; i++)
                    src[i] = cv_rng_normal(&rng) * 0.05f;
                CHECK_MSG(cv_quantize_row(type, src, table + (size_t)v * row_bytes, E_N, &err) == 0, "%s: %s",
                          dt->name, err.msg);
            }
            for (size_t ri = 0; ri < CV_ARRAY_LEN(rows); ri++) {
                embed_case(s, threads, type, table, rows[ri], 1.0f);
                embed_case(s, threads, type, table, rows[ri], 39.19f);
            }
            free(table);
        }
    }
}

int main(void)
{
    for (int i = 0; i < MAX_HD / 2; i++)
        g_ff[i] = 1.0f + (float)(i % 5) * 0.75f;
    g_shapes[0] = (shape){ 64, { .style = CV_ROPE_NEOX, .n_rot = 64, .theta = 1e6f, .freq_scale = 1.0f,
                                 .freq_factors = g_ff, .mscale = 1.2f } };
    g_shapes[1] = (shape){ 40, { .style = CV_ROPE_NORM, .n_rot = 32, .theta = 10000.0f, .freq_scale = 0.5f } };
    cv_err err = { 0 };
    for (int i = 0; i < 2; i++)
        if (cv_bstream_create(cv_backend_cpu(), i + 1, &g_streams[i], &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
    RUN(attention_rows_give_the_loops_bits_for_every_option_type_and_row_count);
    RUN(moe_routes_give_the_references_bits_for_every_kind_option_and_shape);
    RUN(moe_rows_give_the_loops_bits_for_every_activation_option_and_row_count);
    RUN(embedding_rows_give_the_tables_bits_for_every_type);
    for (int i = 0; i < 2; i++)
        cv_bstream_destroy(g_streams[i]);
    return test_report();
}
