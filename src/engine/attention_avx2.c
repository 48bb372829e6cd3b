/* attention_avx2.c — the AVX2/FMA/F16C attention tile (see attention.c for
 * the algorithm and the tile's contract). Per KV block of 16 positions and
 * per query row: 16 scores from 8-wide dot products folded by a horizontal
 * add tree, a vectorised exp (range reduction by ln 2, degree-6 Taylor
 * polynomial: relative error < 2e-7 on the reduced range); then, in a
 * second pass, the value rows accumulated into two query rows at a time. f16 caches convert on
 * load. Compiled with CV_AVX2_FLAGS; chosen at run time when the CPU has
 * AVX2 and head_dim is a multiple of 8. */
#include <immintrin.h>
#include <math.h>

#include "engine/engine_int.h"

static inline __m256 exp8(__m256 x)
{
    const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
    const __m256 ln2_hi = _mm256_set1_ps(0.693145751953125f);
    const __m256 ln2_lo = _mm256_set1_ps(1.42860676533018708e-6f);
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, ln2_hi, x);
    r = _mm256_fnmadd_ps(n, ln2_lo, r);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __m256 load8(const void *p, bool f16)
{
    return f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)) : _mm256_loadu_ps((const float *)p);
}

/* Scores of q against 8 key rows (row stride `row` bytes): one vector. */
static inline __m256 dot8(const float *q, const char *K, size_t row, int32_t hd, bool f16)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const size_t eb = f16 ? 2 : 4;
    for (int32_t i = 0; i < hd; i += 8) {
        __m256 qv = _mm256_loadu_ps(q + i);
        const char *k = K + i * eb;
        a0 = _mm256_fmadd_ps(qv, load8(k, f16), a0);
        a1 = _mm256_fmadd_ps(qv, load8(k + row, f16), a1);
        a2 = _mm256_fmadd_ps(qv, load8(k + 2 * row, f16), a2);
        a3 = _mm256_fmadd_ps(qv, load8(k + 3 * row, f16), a3);
        a4 = _mm256_fmadd_ps(qv, load8(k + 4 * row, f16), a4);
        a5 = _mm256_fmadd_ps(qv, load8(k + 5 * row, f16), a5);
        a6 = _mm256_fmadd_ps(qv, load8(k + 6 * row, f16), a6);
        a7 = _mm256_fmadd_ps(qv, load8(k + 7 * row, f16), a7);
    }
    __m256 t0 = _mm256_hadd_ps(a0, a1), t1 = _mm256_hadd_ps(a2, a3);
    __m256 t2 = _mm256_hadd_ps(a4, a5), t3 = _mm256_hadd_ps(a6, a7);
    __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* acc row ar0 (and ar1 when two) += P row p0 (p1) x the nv value rows of
 * V, after scaling by the corrections c0 (c1). Two rows share every V load,
 * so the loop is bound by FMAs, not loads. Full chunks of 32 columns keep
 * both rows' sums in 8 named registers (with a loop over an array of sums
 * GCC keeps them in memory and the loop runs at store-forward speed); the
 * tail of hd % 32 columns goes 8 at a time. Always inlined with a constant
 * `two`, so the one-row form carries no second row's work. */
#define PV_FMA(x, y, v)                                                                                                \
    do {                                                                                                               \
        const __m256 v_ = (v);                                                                                         \
        x = _mm256_fmadd_ps(a, v_, x);                                                                                 \
        if (two)                                                                                                       \
            y = _mm256_fmadd_ps(b, v_, y);                                                                             \
    } while (0)

static inline __attribute__((always_inline)) void pv_rows(float *ar0, float *ar1, const float *p0, const float *p1,
                                                          float c0, float c1, const char *V, size_t row, int32_t nv,
                                                          int32_t hd, size_t eb, bool f16, const bool two)
{
    const __m256 cv0 = _mm256_set1_ps(c0), cv1 = _mm256_set1_ps(c1);
    const __m256 zero = _mm256_setzero_ps();
    int32_t i0 = 0;
    for (; i0 + 32 <= hd; i0 += 32) {
        __m256 x0 = _mm256_mul_ps(_mm256_loadu_ps(ar0 + i0), cv0);
        __m256 x1 = _mm256_mul_ps(_mm256_loadu_ps(ar0 + i0 + 8), cv0);
        __m256 x2 = _mm256_mul_ps(_mm256_loadu_ps(ar0 + i0 + 16), cv0);
        __m256 x3 = _mm256_mul_ps(_mm256_loadu_ps(ar0 + i0 + 24), cv0);
        __m256 y0 = two ? _mm256_mul_ps(_mm256_loadu_ps(ar1 + i0), cv1) : zero;
        __m256 y1 = two ? _mm256_mul_ps(_mm256_loadu_ps(ar1 + i0 + 8), cv1) : zero;
        __m256 y2 = two ? _mm256_mul_ps(_mm256_loadu_ps(ar1 + i0 + 16), cv1) : zero;
        __m256 y3 = two ? _mm256_mul_ps(_mm256_loadu_ps(ar1 + i0 + 24), cv1) : zero;
        const char *vc = V + (size_t)i0 * eb;
        for (int32_t j = 0; j < nv; j++, vc += row) {
            const __m256 a = _mm256_set1_ps(p0[j]), b = two ? _mm256_set1_ps(p1[j]) : zero;
            PV_FMA(x0, y0, load8(vc, f16));
            PV_FMA(x1, y1, load8(vc + 8 * eb, f16));
            PV_FMA(x2, y2, load8(vc + 16 * eb, f16));
            PV_FMA(x3, y3, load8(vc + 24 * eb, f16));
        }
        _mm256_storeu_ps(ar0 + i0, x0);
        _mm256_storeu_ps(ar0 + i0 + 8, x1);
        _mm256_storeu_ps(ar0 + i0 + 16, x2);
        _mm256_storeu_ps(ar0 + i0 + 24, x3);
        if (two) {
            _mm256_storeu_ps(ar1 + i0, y0);
            _mm256_storeu_ps(ar1 + i0 + 8, y1);
            _mm256_storeu_ps(ar1 + i0 + 16, y2);
            _mm256_storeu_ps(ar1 + i0 + 24, y3);
        }
    }
    for (; i0 < hd; i0 += 8) {
        __m256 x = _mm256_mul_ps(_mm256_loadu_ps(ar0 + i0), cv0);
        __m256 y = two ? _mm256_mul_ps(_mm256_loadu_ps(ar1 + i0), cv1) : zero;
        const char *vc = V + (size_t)i0 * eb;
        for (int32_t j = 0; j < nv; j++, vc += row) {
            const __m256 a = _mm256_set1_ps(p0[j]), b = two ? _mm256_set1_ps(p1[j]) : zero;
            PV_FMA(x, y, load8(vc, f16));
        }
        _mm256_storeu_ps(ar0 + i0, x);
        if (two)
            _mm256_storeu_ps(ar1 + i0, y);
    }
}

/* Per KV block, two passes over the tile's rows: first every row's scores
 * and online-softmax update (short dependency chains, independent between
 * rows, so they overlap), then the value accumulation two rows at a time. */
void cv_att_tile_avx2(const att_tile *a, float *scratch)
{
    const kv_pool *kv = a->kv;
    const int32_t hd = a->hd, n_rep = a->n_rep, R = a->n_tok * n_rep;
    const bool f16 = kv->type == CV_GGML_F16;
    const size_t eb = kv->elt_bytes, row = (size_t)hd * eb;
    float *acc = scratch, *mx = acc + (size_t)R * hd, *sum = mx + R, *corr = sum + R, *P = corr + R;
    memset(acc, 0, (size_t)R * hd * sizeof(float));
    for (int32_t r = 0; r < R; r++)
        mx[r] = -INFINITY, sum[r] = 0;
    const __m256 scale = _mm256_set1_ps(a->scale);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const int32_t last = a->pos0 + a->n_tok - 1;
    for (int32_t blk = 0; blk * CV_KV_BLOCK <= last; blk++) {
        const int32_t base = blk * CV_KV_BLOCK;
        const char *K = kv_k(kv, a->blocks[blk], a->layer, a->g);
        const char *V = kv_v(kv, a->blocks[blk], a->layer, a->g);
        for (int32_t k = 0; k < a->n_tok; k++) {
            const int32_t nv = CV_MIN(CV_KV_BLOCK, a->pos0 + k + 1 - base);
            if (nv <= 0)
                continue;
            const __m256i nvv = _mm256_set1_epi32(nv);
            const __m256i ok0 = _mm256_cmpgt_epi32(nvv, lane);
            const __m256i ok1 = _mm256_cmpgt_epi32(nvv, _mm256_add_epi32(lane, _mm256_set1_epi32(8)));
            for (int32_t h = 0; h < n_rep; h++) {
                const int32_t r = k * n_rep + h;
                const float *q = a->qkv + (int64_t)a->rows[k] * a->ld_qkv + (int64_t)(a->g * n_rep + h) * hd;
                __m256 s0 = _mm256_blendv_ps(ninf, _mm256_mul_ps(dot8(q, K, row, hd, f16), scale),
                                             _mm256_castsi256_ps(ok0));
                __m256 s1 = nv > 8 ? _mm256_blendv_ps(ninf, _mm256_mul_ps(dot8(q, K + 8 * row, row, hd, f16), scale),
                                                      _mm256_castsi256_ps(ok1))
                                   : ninf;
                const float bm = hmax8(_mm256_max_ps(s0, s1));
                float c = 1.0f;
                if (bm > mx[r]) {
                    c = expf(mx[r] - bm); /* 0 on the first block */
                    mx[r] = bm;
                }
                const __m256 m = _mm256_set1_ps(mx[r]);
                __m256 p0 = _mm256_and_ps(exp8(_mm256_sub_ps(s0, m)), _mm256_castsi256_ps(ok0));
                __m256 p1 = _mm256_and_ps(exp8(_mm256_sub_ps(s1, m)), _mm256_castsi256_ps(ok1));
                sum[r] = sum[r] * c + hsum8(_mm256_add_ps(p0, p1));
                corr[r] = c;
                _mm256_storeu_ps(P + (size_t)r * CV_KV_BLOCK, p0);
                _mm256_storeu_ps(P + (size_t)r * CV_KV_BLOCK + 8, p1);
            }
        }
        for (int32_t k = 0; k < a->n_tok; k++) {
            const int32_t nv = CV_MIN(CV_KV_BLOCK, a->pos0 + k + 1 - base);
            if (nv <= 0)
                continue;
            for (int32_t h = 0; h < n_rep; h += 2) {
                const int32_t r = k * n_rep + h;
                float *ar = acc + (size_t)r * hd;
                const float *pr = P + (size_t)r * CV_KV_BLOCK;
                if (h + 1 < n_rep)
                    pv_rows(ar, ar + hd, pr, pr + CV_KV_BLOCK, corr[r], corr[r + 1], V, row, nv, hd, eb, f16, true);
                else
                    pv_rows(ar, NULL, pr, NULL, corr[r], 1.0f, V, row, nv, hd, eb, f16, false);
            }
        }
    }
    for (int32_t k = 0; k < a->n_tok; k++)
        for (int32_t h = 0; h < n_rep; h++) {
            const int32_t r = k * n_rep + h;
            float *o = a->out + (int64_t)a->rows[k] * a->ld_out + (int64_t)(a->g * n_rep + h) * hd;
            const __m256 inv = _mm256_set1_ps(1.0f / sum[r]);
            for (int32_t i = 0; i < hd; i += 8)
                _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_loadu_ps(acc + (size_t)r * hd + i), inv));
        }
}
