/* attention_avx512.c — the attention tile on AVX-512 (F, BW, VNNI; see
 * attention.c for the algorithm and the tile's contract, attention_avx2.c
 * for the same tile eight lanes wide). A KV block's 16 positions fill one
 * 512-bit register: per head dimension one key vector (converted from f16
 * on load) serves eight query rows' scores, and per four dimensions of a
 * q8_0 cache one vpdpbusd a row sums int8 keys against int8 queries; a
 * row's online-softmax update is one
 * masked vector; the value rows accumulate into four query rows x 64
 * columns at a time (16 sums in registers). Per multiply-add the AVX2 tile
 * issues twice the instructions and converts each cached element once per
 * four rows; here once per eight (keys) and four (values) rows with half
 * the instructions, which is what decode attention at depth is bound by
 * (docs/PERF.md, "Decode attention at depth"). Scores are summed in the
 * AVX2 tile's order (each dimension in turn), the exp is its (simd_exp.h);
 * only the sums over a block's 16 probabilities are added in another
 * order. The pieces are here, the block loop they run in is
 * attention_tile.h's. Compiled with CV_AVX512_FLAGS; chosen at run time
 * at the avx512 level (cv_isa_active) when head_dim is a multiple of 16. */
#include <immintrin.h>
#include <math.h>

#include "kernels/attention.h"
#include "kernels/simd_exp.h"

/* The cache's element type, a constant after inlining: each tile body is
 * compiled once per type. */
enum { KT_F32, KT_F16, KT_Q8 };

/* Sixteen cached elements as f32 (q8_0 values: the int8, factors apart). */
static inline __m512 load16(const char *p, const int kt)
{
    if (kt == KT_F16)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    if (kt == KT_Q8)
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
    return _mm512_loadu_ps((const float *)p);
}

/* Raw scores of nr (1..8, a constant after inlining) query rows against the
 * 16 keys of a block, from the cache's transposed layout (row i: dimension
 * i of the 16 positions): S[r][16] = q_r . K, one key vector a dimension for
 * all rows (q8_0: qk_rows_q8 below). Positions the block has not written
 * give garbage, which the softmax masks. */
#define QK_FMA(n)                                                                                                      \
    do {                                                                                                               \
        if (nr > (n))                                                                                                  \
            a##n = _mm512_fmadd_ps(_mm512_set1_ps(q##n[i]), k, a##n);                                                  \
    } while (0)
#define QK_OUT(n)                                                                                                      \
    do {                                                                                                               \
        if (nr > (n)) {                                                                                                \
            float *s = S + (n) * CV_KV_BLOCK;                                                                          \
            _mm512_storeu_ps(s, a##n);                                                                                 \
        }                                                                                                              \
    } while (0)

/* acc += u8 . (the four int8 at s8x4, broadcast): the broadcast is the
 * instruction's own memory operand. In assembly because GCC 12 builds each
 * _mm512_dpbusd_epi32 here with two register copies around it and the
 * broadcast through a general register (docs/PERF.md "Decode attention at
 * depth: huge pages, and the AVX-512 q8_0 scores"). */
static inline __m512i dpbusd_bcast(__m512i acc, __m512i u8, const int8_t *s8x4)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u8), "m"(*(const int32_t *)s8x4));
    return acc;
}

/* q8_0: rows r.. of q8 against a block's int8 keys (kv_k8_at: per four
 * dimensions 16 positions x 4 bytes, one register): per four dimensions one
 * vpdpbusd a row, the four int8 of the row broadcast, into 16 int32 sums,
 * alternate fours into two sets (two dependency chains a row: it issues
 * two a cycle with a latency of four; integer sums, so the same bits); per
 * group the sums less the keys' offset (128 x the row's sum), in f32, times
 * the 16 key factors x the row's factor, added into S in group order
 * (attention.h att_q8: the scalar tile's arithmetic to the bit). */
#define QK8_DP(n)                                                                                                      \
    do {                                                                                                               \
        if (nr > (n)) {                                                                                                \
            const int8_t *qn = q8->q + (size_t)(r + (n)) * hd + i;                                                     \
            a##n = dpbusd_bcast(a##n, k, qn);                                                                          \
            b##n = dpbusd_bcast(b##n, k2, qn + 4);                                                                     \
        }                                                                                                              \
    } while (0)
#define QK8_OUT(n)                                                                                                     \
    do {                                                                                                               \
        if (nr > (n)) {                                                                                                \
            const size_t gi = (size_t)(r + (n)) * ng + g;                                                              \
            const __m512i t = _mm512_add_epi32(a##n, b##n);                                                             \
            const __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(t, _mm512_set1_epi32(128 * q8->sum[gi])));            \
            const __m512 dd = _mm512_mul_ps(dk, _mm512_set1_ps(q8->d[gi]));                                            \
            float *s = S + (n) * CV_KV_BLOCK;                                                                          \
            _mm512_storeu_ps(s, g == 0 ? _mm512_mul_ps(f, dd) : _mm512_fmadd_ps(f, dd, _mm512_loadu_ps(s)));           \
        }                                                                                                              \
    } while (0)

static inline __attribute__((always_inline)) void qk_rows_q8(const att_q8 *q8, int32_t r, const char *K,
                                                             const uint16_t *ks, int32_t hd, int32_t group, float *S,
                                                             const int nr, att_pf *pf)
{
    const int32_t ng = hd / group;
    assert(group % 8 == 0); /* 32, or hd (a multiple of 16 for this tile) */
    for (int32_t g = 0; g < ng; g++) {
        cv_att_pf_takes(pf, (group + 15) / 16);
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
        __m512i b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0, b6 = a0, b7 = a0;
        const char *kp = K + kv_k8_at(0, g * group);
        for (int32_t i = g * group; i < (g + 1) * group; i += 8, kp += 8 * CV_KV_BLOCK) {
            const __m512i k = _mm512_loadu_si512((const void *)kp);
            const __m512i k2 = _mm512_loadu_si512((const void *)(kp + 4 * CV_KV_BLOCK));
            QK8_DP(0);
            QK8_DP(1);
            QK8_DP(2);
            QK8_DP(3);
            QK8_DP(4);
            QK8_DP(5);
            QK8_DP(6);
            QK8_DP(7);
        }
        const __m512 dk = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(ks + g * CV_KV_BLOCK)));
        QK8_OUT(0);
        QK8_OUT(1);
        QK8_OUT(2);
        QK8_OUT(3);
        QK8_OUT(4);
        QK8_OUT(5);
        QK8_OUT(6);
        QK8_OUT(7);
    }
}

static inline __attribute__((always_inline)) void qk_rows(const float *const *q, const char *K, int32_t hd, float *S,
                                                          const int nr, const int kt, att_pf *pf)
{
    const size_t eb = kt == KT_F32 ? 4 : 2;
    const float *q0 = q[0], *q1 = q[1], *q2 = q[2], *q3 = q[3], *q4 = q[4], *q5 = q[5], *q6 = q[6], *q7 = q[7];
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (int32_t i0 = 0; i0 < hd; i0 += 16) {
        cv_att_pf_take(pf);
        for (int32_t i = i0; i < CV_MIN(i0 + 16, hd); i++) {
            const __m512 k = load16(K + kv_k_at(0, i) * eb, kt);
            QK_FMA(0);
            QK_FMA(1);
            QK_FMA(2);
            QK_FMA(3);
            QK_FMA(4);
            QK_FMA(5);
            QK_FMA(6);
            QK_FMA(7);
        }
    }
    QK_OUT(0);
    QK_OUT(1);
    QK_OUT(2);
    QK_OUT(3);
    QK_OUT(4);
    QK_OUT(5);
    QK_OUT(6);
    QK_OUT(7);
}

/* Rows acc[r] (hd apart) for r < nr (1..4, a constant after inlining):
 * acc[r] = acc[r] * corr[r] + P[r] (16 apart) x the first nv value rows of
 * V, w (1, 2 or 4, constant) vectors of 16 columns from column i0, every
 * one in one q8_0 group (their probabilities are the same P). Up to 16 sums
 * in registers; each value vector is loaded once for the four rows. */
#define PV_ROW(n, OP)                                                                                                  \
    do {                                                                                                               \
        if (nr > (n)) {                                                                                                \
            OP(n, 0);                                                                                                  \
            if (w > 1)                                                                                                 \
                OP(n, 1);                                                                                              \
            if (w > 2) {                                                                                               \
                OP(n, 2);                                                                                              \
                OP(n, 3);                                                                                              \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)
#define PV_LOAD(n, c) x##n##c = _mm512_mul_ps(_mm512_loadu_ps(acc + (n) * hd + i0 + 16 * (c)), cr##n)
#define PV_FMA(n, c) x##n##c = _mm512_fmadd_ps(p##n, v##c, x##n##c)
#define PV_STORE(n, c) _mm512_storeu_ps(acc + (n) * hd + i0 + 16 * (c), x##n##c)
#define PV_ALL(OP)                                                                                                     \
    do {                                                                                                               \
        PV_ROW(0, OP);                                                                                                 \
        PV_ROW(1, OP);                                                                                                 \
        PV_ROW(2, OP);                                                                                                 \
        PV_ROW(3, OP);                                                                                                 \
    } while (0)

static inline __attribute__((always_inline)) void pv_cols(float *acc, const float *P, const float *corr,
                                                          const char *V, size_t row, int32_t nv, int32_t hd,
                                                          int32_t i0, const int nr, const int w, const int kt)
{
    const size_t eb = kt == KT_F32 ? 4 : kt == KT_F16 ? 2 : 1;
    const __m512 z = _mm512_setzero_ps();
    __m512 x00 = z, x01 = z, x02 = z, x03 = z, x10 = z, x11 = z, x12 = z, x13 = z;
    __m512 x20 = z, x21 = z, x22 = z, x23 = z, x30 = z, x31 = z, x32 = z, x33 = z;
    const __m512 cr0 = _mm512_set1_ps(corr[0]), cr1 = nr > 1 ? _mm512_set1_ps(corr[1]) : z;
    const __m512 cr2 = nr > 2 ? _mm512_set1_ps(corr[2]) : z, cr3 = nr > 3 ? _mm512_set1_ps(corr[3]) : z;
    PV_ALL(PV_LOAD);
    const char *vc = V + (size_t)i0 * eb;
    for (int32_t j = 0; j < nv; j++, vc += row) {
        const __m512 v0 = load16(vc, kt);
        const __m512 v1 = w > 1 ? load16(vc + 16 * eb, kt) : v0;
        const __m512 v2 = w > 2 ? load16(vc + 32 * eb, kt) : v0;
        const __m512 v3 = w > 2 ? load16(vc + 48 * eb, kt) : v0;
        const __m512 p0 = _mm512_set1_ps(P[j]);
        const __m512 p1 = nr > 1 ? _mm512_set1_ps(P[CV_KV_BLOCK + j]) : z;
        const __m512 p2 = nr > 2 ? _mm512_set1_ps(P[2 * CV_KV_BLOCK + j]) : z;
        const __m512 p3 = nr > 3 ? _mm512_set1_ps(P[3 * CV_KV_BLOCK + j]) : z;
        PV_ALL(PV_FMA);
    }
    PV_ALL(PV_STORE);
}

/* Columns 64 at a time, then 32, then 16 (a q8_0 cache with a factor per 32
 * dimensions: 32 at a time, each step in one group, whose probabilities
 * times that group's factors sit at P + group index * gstride), a take of
 * pf per 16. */
static inline __attribute__((always_inline)) void pv_rows(float *acc, const float *P, size_t gstride, int32_t group,
                                                          const float *corr, const char *V, size_t row, int32_t nv,
                                                          int32_t hd, const int nr, const int kt, att_pf *pf)
{
    const int32_t wide = kt == KT_Q8 && group < hd ? 32 : 64;
    int32_t i0 = 0;
    for (; wide == 64 && i0 + 64 <= hd; i0 += 64) {
        cv_att_pf_takes(pf, 4);
        pv_cols(acc, P + (size_t)(i0 / group) * gstride, corr, V, row, nv, hd, i0, nr, 4, kt);
    }
    for (; i0 + 32 <= hd; i0 += 32) {
        cv_att_pf_takes(pf, 2);
        pv_cols(acc, P + (size_t)(i0 / group) * gstride, corr, V, row, nv, hd, i0, nr, 2, kt);
    }
    if (i0 < hd) {
        cv_att_pf_takes(pf, 1);
        pv_cols(acc, P + (size_t)(i0 / group) * gstride, corr, V, row, nv, hd, i0, nr, 1, kt);
    }
}

/* Token k's rows, the scores of a block (base its first position) in P:
 * masked to what the token sees (positions j0..nv-1: causal above, window
 * below; none when its window starts past the block, so its probabilities
 * are 0 and its state unchanged), scaled, and turned into probabilities
 * against the running maximum, which the sum follows. */
static inline __attribute__((always_inline)) void softmax_token(const att_tile *a, float *P, float *mx, float *sum,
                                                                float *corr, int32_t k, int32_t base)
{
    const __m512 scale = _mm512_set1_ps(a->scale), ninf = _mm512_set1_ps(-INFINITY);
    const int32_t p = a->pos0 + k, nv = CV_MIN(CV_KV_BLOCK, p + 1 - base);
    const int32_t j0 = a->window > 0 ? CV_MAX(0, p - a->window + 1 - base) : 0;
    const __mmask16 ok = (__mmask16)(nv > j0 ? ((1u << nv) - 1) & ~((1u << j0) - 1) : 0);
    for (int32_t h = 0; h < a->n_rep; h++) {
        const int32_t r = k * a->n_rep + h;
        float *pr = P + (size_t)r * CV_KV_BLOCK;
        const __m512 s = _mm512_mask_mul_ps(ninf, ok, _mm512_loadu_ps(pr), scale);
        const float bm = _mm512_reduce_max_ps(s);
        float c = 1.0f;
        if (bm > mx[r]) {
            c = expf(mx[r] - bm); /* 0 on the first block of the range */
            mx[r] = bm;
        }
        const __m512 pv = _mm512_maskz_mov_ps(ok, cv_exp16_ps(_mm512_sub_ps(s, _mm512_set1_ps(mx[r]))));
        sum[r] = sum[r] * c + _mm512_reduce_add_ps(pv);
        corr[r] = c;
        _mm512_storeu_ps(pr, pv);
    }
}

/* q8_0: rows r0..R-1 of the probabilities times each group's value factors
 * (group g's rows at Pq + g * gstride). */
static inline void scale_pq(const kv_pool *kv, const char *V, const float *P, float *Pq, size_t gstride, int32_t ng,
                            int32_t r0, int32_t R)
{
    const uint16_t *vs = kv_q8_scales(kv, V);
    for (int32_t g = 0; g < ng; g++) {
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(vs + g * CV_KV_BLOCK)));
        for (int32_t r = r0; r < R; r++)
            _mm512_storeu_ps(Pq + g * gstride + (size_t)r * CV_KV_BLOCK,
                             _mm512_mul_ps(_mm512_loadu_ps(P + (size_t)r * CV_KV_BLOCK), d));
    }
}

#define ATT_QK_ROWS 8
#include "kernels/attention_tile.h"

void cv_att_tile_avx512(const att_tile *a, float *scratch) { att_tile_typed(a, scratch); }
