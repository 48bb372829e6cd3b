/* attention_avx2.c — the AVX2/FMA/F16C attention tile (see attention.c for
 * the algorithm and the tile's contract). Per KV block of 16 positions: the
 * scores of four query rows at a time as a small GEMM over the cache's
 * transposed keys (each key vector loaded once for the four, no horizontal
 * adds), a vectorised exp (kernels/simd_exp.h's, as the vector ops use) for
 * every row's online softmax, then the value rows accumulated into four
 * query rows at a time.
 * f16 caches convert on load; q8_0 caches score in integers (int8 keys
 * against int8 queries, vpmaddubsw) and convert their int8 values on load,
 * applying factors once per group of a row's 16 scores and once per block
 * to the probabilities, not per element. The pieces are here, the
 * block loop they run in is attention_tile.h's. Compiled with
 * CV_AVX2_FLAGS; chosen at run time when the CPU has AVX2 and head_dim is
 * a multiple of 8. */
#include <immintrin.h>
#include <math.h>

#include "kernels/attention.h"
#include "kernels/simd_exp.h"

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

/* The cache's element type, a constant after inlining: each tile body is
 * compiled once per type. */
enum { KT_F32, KT_F16, KT_Q8 };

static inline __m256 load8(const void *p, const int kt)
{
    return kt == KT_F16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)) : _mm256_loadu_ps((const float *)p);
}

/* Eight int8 as f32. */
static inline __m256 i8_to_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

/* Raw scores of nr (1..4, a constant after inlining) query rows against
 * the 16 keys of a block, read straight from the cache's transposed layout
 * (row i: dimension i of the 16 positions; f16 converted on load):
 * S[r][16] = q_r . K. Eight sums in named registers; per dimension two key
 * vectors serve all rows, and no horizontal adds (q8_0: qk_rows_q8 below).
 * Positions the block has not written give garbage scores, which the
 * softmax masks. */
#define QK_FMA(n, a, b)                                                                                                \
    do {                                                                                                               \
        if (nr > (n)) {                                                                                                \
            const __m256 qv = _mm256_broadcast_ss(q##n + i);                                                           \
            a = _mm256_fmadd_ps(qv, k0, a);                                                                            \
            b = _mm256_fmadd_ps(qv, k1, b);                                                                            \
        }                                                                                                              \
    } while (0)
#define QK_OUT(n, a, b)                                                                                                \
    do {                                                                                                               \
        if (nr > (n)) {                                                                                                \
            _mm256_storeu_ps(S + (n) * CV_KV_BLOCK, a);                                                                \
            _mm256_storeu_ps(S + (n) * CV_KV_BLOCK + 8, b);                                                            \
        }                                                                                                              \
    } while (0)

/* q8_0: rows r.. of q8 against a block's int8 keys (kv_k8_at: per four
 * dimensions 16 positions x 4 bytes, two registers), back from their
 * offset to signed: per four dimensions and row, vpmaddubsw of the row's
 * |q| (kept beside q: a broadcast load, not a vpabsb on the multiply
 * ports) against the keys with q's signs (a pair's sum stays below 2^15: both
 * sides within +-127), vpmaddwd into 8 int32 sums a register; per group
 * the sums in f32 times the key factors x the row's factor, added into S
 * in group order (attention.h att_q8: the scalar tile's arithmetic to the
 * bit). */
#define QK8_DP(n, a, b)                                                                                                \
    do {                                                                                                               \
        if (nr > (n)) {                                                                                                \
            int32_t w, wa;                                                                                             \
            memcpy(&w, q8->q + (size_t)(r + (n)) * hd + i, 4);                                                         \
            memcpy(&wa, q8->qa + (size_t)(r + (n)) * hd + i, 4);                                                       \
            const __m256i qb = _mm256_set1_epi32(w), qa = _mm256_set1_epi32(wa);                                      \
            a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(qa, _mm256_sign_epi8(k0, qb)), ones));    \
            b = _mm256_add_epi32(b, _mm256_madd_epi16(_mm256_maddubs_epi16(qa, _mm256_sign_epi8(k1, qb)), ones));    \
        }                                                                                                              \
    } while (0)
#define QK8_OUT(n, a, b)                                                                                               \
    do {                                                                                                               \
        if (nr > (n)) {                                                                                                \
            const __m256 dq = _mm256_set1_ps(q8->d[(size_t)(r + (n)) * ng + g]);                                       \
            const __m256 fa = _mm256_cvtepi32_ps(a), fb = _mm256_cvtepi32_ps(b);                                       \
            const __m256 da = _mm256_mul_ps(d0, dq), db = _mm256_mul_ps(d1, dq);                                       \
            float *s = S + (n) * CV_KV_BLOCK;                                                                          \
            _mm256_storeu_ps(s, g == 0 ? _mm256_mul_ps(fa, da) : _mm256_fmadd_ps(fa, da, _mm256_loadu_ps(s)));         \
            _mm256_storeu_ps(s + 8, g == 0 ? _mm256_mul_ps(fb, db) : _mm256_fmadd_ps(fb, db, _mm256_loadu_ps(s + 8)));\
        }                                                                                                              \
    } while (0)

static inline __attribute__((always_inline)) void qk_rows_q8(const att_q8 *q8, int32_t r, const char *K,
                                                             const uint16_t *ks, int32_t hd, int32_t group, float *S,
                                                             const int nr, att_pf *pf)
{
    const int32_t ng = hd / group;
    const __m256i ones = _mm256_set1_epi16(1), off = _mm256_set1_epi8((char)0x80);
    for (int32_t g = 0; g < ng; g++) {
        cv_att_pf_takes(pf, (group + 15) / 16);
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        const char *kp = K + kv_k8_at(0, g * group);
        for (int32_t i = g * group; i < (g + 1) * group; i += 4, kp += 4 * CV_KV_BLOCK) {
            const __m256i k0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)kp), off);
            const __m256i k1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(kp + 32)), off);
            QK8_DP(0, a0, b0);
            QK8_DP(1, a1, b1);
            QK8_DP(2, a2, b2);
            QK8_DP(3, a3, b3);
        }
        const __m256 d0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(ks + g * CV_KV_BLOCK)));
        const __m256 d1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(ks + g * CV_KV_BLOCK + 8)));
        QK8_OUT(0, a0, b0);
        QK8_OUT(1, a1, b1);
        QK8_OUT(2, a2, b2);
        QK8_OUT(3, a3, b3);
    }
}

static inline __attribute__((always_inline)) void qk_rows(const float *const *q, const char *K, int32_t hd, float *S,
                                                          const int nr, const int kt, att_pf *pf)
{
    const size_t eb = kt == KT_F32 ? 4 : 2;
    const float *q0 = q[0], *q1 = q[1], *q2 = q[2], *q3 = q[3];
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int32_t i0 = 0; i0 < hd; i0 += 16) {
        cv_att_pf_take(pf);
        for (int32_t i = i0; i < CV_MIN(i0 + 16, hd); i++) {
            const char *ki = K + kv_k_at(0, i) * eb;
            const __m256 k0 = load8(ki, kt), k1 = load8(ki + 8 * eb, kt);
            QK_FMA(0, a0, b0);
            QK_FMA(1, a1, b1);
            QK_FMA(2, a2, b2);
            QK_FMA(3, a3, b3);
        }
    }
    QK_OUT(0, a0, b0);
    QK_OUT(1, a1, b1);
    QK_OUT(2, a2, b2);
    QK_OUT(3, a3, b3);
}

/* Rows acc[r] (hd apart) for r < nr (1..4, a constant after inlining):
 * acc[r] = acc[r] * corr[r] + P[r] (16 apart) x the first nv value rows of
 * V, w (1 or 2, constant) vectors of 8 columns at a time from column i0.
 * Up to eight sums in named registers; each value vector is loaded (and
 * converted from f16) once for the four rows. P is 0 past a row's own
 * causal limit, and nv never exceeds the positions the tile has written. */
#define PV_FMA(n)                                                                                                      \
    do {                                                                                                               \
        if (nr > (n)) {                                                                                                \
            const __m256 p = _mm256_broadcast_ss(P + (n) * CV_KV_BLOCK + j);                                           \
            x##n = _mm256_fmadd_ps(p, v0, x##n);                                                                       \
            if (w > 1)                                                                                                 \
                y##n = _mm256_fmadd_ps(p, v1, y##n);                                                                   \
        }                                                                                                              \
    } while (0)
#define PV_LOAD(n)                                                                                                     \
    do {                                                                                                               \
        if (nr > (n)) {                                                                                                \
            const __m256 c = _mm256_broadcast_ss(corr + (n));                                                          \
            x##n = _mm256_mul_ps(_mm256_loadu_ps(acc + (n) * hd + i0), c);                                             \
            if (w > 1)                                                                                                 \
                y##n = _mm256_mul_ps(_mm256_loadu_ps(acc + (n) * hd + i0 + 8), c);                                     \
        }                                                                                                              \
    } while (0)
#define PV_STORE(n)                                                                                                    \
    do {                                                                                                               \
        if (nr > (n)) {                                                                                                \
            _mm256_storeu_ps(acc + (n) * hd + i0, x##n);                                                               \
            if (w > 1)                                                                                                 \
                _mm256_storeu_ps(acc + (n) * hd + i0 + 8, y##n);                                                       \
        }                                                                                                              \
    } while (0)

static inline __attribute__((always_inline)) void pv_cols(float *acc, const float *P, const float *corr,
                                                          const char *V, size_t row, int32_t nv, int32_t hd,
                                                          int32_t i0, const int nr, const int w, const int kt)
{
    const size_t eb = kt == KT_F32 ? 4 : kt == KT_F16 ? 2 : 1;
    __m256 x0, x1, x2, x3, y0, y1, y2, y3;
    x0 = x1 = x2 = x3 = y0 = y1 = y2 = y3 = _mm256_setzero_ps();
    PV_LOAD(0);
    PV_LOAD(1);
    PV_LOAD(2);
    PV_LOAD(3);
    const char *vc = V + (size_t)i0 * eb;
    for (int32_t j = 0; j < nv; j++, vc += row) {
        __m256 v0, v1;
        if (kt == KT_Q8) {
            v0 = i8_to_ps(_mm_loadl_epi64((const __m128i *)vc));
            v1 = w > 1 ? i8_to_ps(_mm_loadl_epi64((const __m128i *)(vc + 8))) : v0;
        } else {
            v0 = load8(vc, kt);
            v1 = w > 1 ? load8(vc + 8 * eb, kt) : v0;
        }
        PV_FMA(0);
        PV_FMA(1);
        PV_FMA(2);
        PV_FMA(3);
    }
    PV_STORE(0);
    PV_STORE(1);
    PV_STORE(2);
    PV_STORE(3);
}

/* Columns 16 at a time (8 for a tail), a take of pf each. A q8_0 block's
 * values are its int8 ones, so the probabilities come already times each
 * position's factor of the columns' group: group g's rows at P + g *
 * gstride (a group, 32 columns or the whole head, never splits a 16-column
 * step). */
static inline __attribute__((always_inline)) void pv_rows(float *acc, const float *P, size_t gstride, int32_t group,
                                                          const float *corr, const char *V, size_t row, int32_t nv,
                                                          int32_t hd, const int nr, const int kt, att_pf *pf)
{
    int32_t i0 = 0;
    for (; i0 + 16 <= hd; i0 += 16) {
        cv_att_pf_take(pf);
        pv_cols(acc, P + (size_t)(i0 / group) * gstride, corr, V, row, nv, hd, i0, nr, 2, kt);
    }
    if (i0 < hd) {
        cv_att_pf_take(pf);
        pv_cols(acc, P + (size_t)(i0 / group) * gstride, corr, V, row, nv, hd, i0, nr, 1, kt);
    }
}

/* Token k's rows, the scores of a block (base its first position) in P:
 * masked to what the token sees (positions j0..nv-1: causal above, window
 * below; none when its window starts past the block, so its probabilities
 * are 0 and its state unchanged), scaled, and turned into probabilities
 * against the running maximum, which the sum follows (short dependency
 * chains, independent between rows, so they overlap). */
static inline __attribute__((always_inline)) void softmax_token(const att_tile *a, float *P, float *mx, float *sum,
                                                                float *corr, int32_t k, int32_t base)
{
    const __m256 scale = _mm256_set1_ps(a->scale), ninf = _mm256_set1_ps(-INFINITY);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), lane8 = _mm256_add_epi32(lane, _mm256_set1_epi32(8));
    const int32_t p = a->pos0 + k, nv = CV_MIN(CV_KV_BLOCK, p + 1 - base);
    const int32_t j0 = a->window > 0 ? CV_MAX(0, p - a->window + 1 - base) : 0;
    const __m256i nvv = _mm256_set1_epi32(nv), j0v = _mm256_set1_epi32(j0 - 1);
    const __m256i ok0 = _mm256_and_si256(_mm256_cmpgt_epi32(nvv, lane), _mm256_cmpgt_epi32(lane, j0v));
    const __m256i ok1 = _mm256_and_si256(_mm256_cmpgt_epi32(nvv, lane8), _mm256_cmpgt_epi32(lane8, j0v));
    for (int32_t h = 0; h < a->n_rep; h++) {
        const int32_t r = k * a->n_rep + h;
        float *pr = P + (size_t)r * CV_KV_BLOCK;
        __m256 s0 = _mm256_blendv_ps(ninf, _mm256_mul_ps(_mm256_loadu_ps(pr), scale), _mm256_castsi256_ps(ok0));
        __m256 s1 = _mm256_blendv_ps(ninf, _mm256_mul_ps(_mm256_loadu_ps(pr + 8), scale), _mm256_castsi256_ps(ok1));
        const float bm = hmax8(_mm256_max_ps(s0, s1));
        float c = 1.0f;
        if (bm > mx[r]) {
            c = expf(mx[r] - bm); /* 0 on the first block of the range */
            mx[r] = bm;
        }
        const __m256 m = _mm256_set1_ps(mx[r]);
        __m256 p0 = _mm256_and_ps(cv_exp8_ps(_mm256_sub_ps(s0, m)), _mm256_castsi256_ps(ok0));
        __m256 p1 = _mm256_and_ps(cv_exp8_ps(_mm256_sub_ps(s1, m)), _mm256_castsi256_ps(ok1));
        sum[r] = sum[r] * c + hsum8(_mm256_add_ps(p0, p1));
        corr[r] = c;
        _mm256_storeu_ps(pr, p0);
        _mm256_storeu_ps(pr + 8, p1);
    }
}

/* q8_0: rows r0..R-1 of the probabilities times each group's value factors
 * (group g's rows at Pq + g * gstride). */
static inline void scale_pq(const kv_pool *kv, const char *V, const float *P, float *Pq, size_t gstride, int32_t ng,
                            int32_t r0, int32_t R)
{
    const uint16_t *vs = kv_q8_scales(kv, V);
    for (int32_t g = 0; g < ng; g++) {
        const __m256 d0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(vs + g * CV_KV_BLOCK)));
        const __m256 d1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(vs + g * CV_KV_BLOCK + 8)));
        for (int32_t r = r0; r < R; r++) {
            const float *pr = P + (size_t)r * CV_KV_BLOCK;
            float *qr = Pq + g * gstride + (size_t)r * CV_KV_BLOCK;
            _mm256_storeu_ps(qr, _mm256_mul_ps(_mm256_loadu_ps(pr), d0));
            _mm256_storeu_ps(qr + 8, _mm256_mul_ps(_mm256_loadu_ps(pr + 8), d1));
        }
    }
}

#define ATT_QK_ROWS 4
#include "kernels/attention_tile.h"

void cv_att_tile_avx2(const att_tile *a, float *scratch) { att_tile_typed(a, scratch); }
