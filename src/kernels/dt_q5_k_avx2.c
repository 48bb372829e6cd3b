/* dt_q5_k_avx2.c — q5_K on AVX2: dequantize (bit-exact: d*sc, dmin*m,
 * then d1*q - m1 unfused), the q5_K x q8_K dot, and the matmul tile over
 * weights repacked 16 rows at a time.
 *
 * Packed layout, per group of 16 rows and super-block, 2880 bytes (16 x
 * 180; GGUF has 16 x 176), in reading order (one monotonic stream): q4_K's
 * tile layout plus the fifth bits before each sub-block's nibbles:
 *   u8 sc[8][16] | u8 mn[4][2][8][2] | f16 d[16] | f16 dmin[16] |
 *   8 x { u8 qh[2 halves][32] | u8 qs[4][2 halves][32] }
 * where bit s of qh byte (r, c) of sub-block j is bit 4 of value 4s+c of
 * that sub-block in row r. Levels 0..31: four vpmaddubsw (pairs <=
 * 2*31*127) fit an int16 sum, so each sub-block takes two vpmaddwd with its
 * scales. */
#include "kernels/simd_avx2.h"

#define ROWS 16
#define TOK_TILE 4
#define SB_BYTES 2880

/* Levels (0..31) of the 64 values of chunk c (sub-blocks 2c, 2c+1). */
static inline void q5k_levels(const block_q5_K *x, int c, __m256i *lo, __m256i *hi)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    const __m256i q = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * c));
    const __m256i h = _mm256_loadu_si256((const __m256i *)x->qh);
    /* bit 2c of qh[l] is bit 4 of value l of sub-block 2c; bit 2c+1 of 2c+1 */
    const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(h, 2 * c), one);
    const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(h, 2 * c + 1), one);
    *lo = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(h0, 4));
    *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), _mm256_slli_epi16(h1, 4));
}

void cv_dt_q5_K_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_q5_K *x = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d), min = h2f(x[b].dmin);
        uint8_t sc[8], m[8];
        cv_kq_unpack_scales(x[b].scales, sc, m);
        for (int c = 0; c < 4; c++) {
            __m256i v[2];
            q5k_levels(&x[b], c, &v[0], &v[1]);
            for (int h = 0; h < 2; h++) {
                const __m256 d1 = _mm256_set1_ps(d * sc[2 * c + h]), m1 = _mm256_set1_ps(min * m[2 * c + h]);
                for (int k = 0; k < 4; k++) {
                    __m128i part = k < 2 ? _mm256_castsi256_si128(v[h]) : _mm256_extracti128_si256(v[h], 1);
                    __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part));
                    _mm256_storeu_ps(dst + b * QK_K + 64 * c + 32 * h + 8 * k, _mm256_sub_ps(_mm256_mul_ps(d1, f), m1));
                }
            }
        }
    }
}

void cv_dt_q5_K_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_q5_K *x = w;
    const block_q8_K *y = a;
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        uint8_t sc[8], m[8];
        cv_kq_unpack_scales(x[b].scales, sc, m);
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i lo, hi;
            q5k_levels(&x[b], c, &lo, &hi);
            __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(y[b].qs + 64 * c)));
            __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y[b].qs + 64 * c + 32)));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p0, _mm256_set1_epi16(sc[2 * c])));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p1, _mm256_set1_epi16(sc[2 * c + 1])));
        }
        int mins = 0;
        for (int j = 0; j < 8; j++)
            mins += m[j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
        const float da = y[b].d;
        sum += da * h2f(x[b].d) * (float)hsum_epi32(isum) - da * h2f(x[b].dmin) * (float)mins;
    }
    *out = sum;
}

/* ---- matmul ---- */

static size_t group_bytes(int64_t n_in) { return (size_t)(n_in / QK_K) * SB_BYTES; }
size_t cv_q5_K_pack16_bytes(int64_t n_in, int64_t n_out)
{
    return (size_t)((n_out + ROWS - 1) / ROWS) * group_bytes(n_in);
}

void cv_q5_K_pack16(const void *src, int64_t n_in, int64_t n_out, void *dst)
{
    const int64_t nsb = n_in / QK_K, n_groups = (n_out + ROWS - 1) / ROWS;
    const block_q5_K *w = src;
    memset(dst, 0, cv_q5_K_pack16_bytes(n_in, n_out));
    for (int64_t g = 0; g < n_groups; g++)
        for (int r = 0; r < ROWS && g * ROWS + r < n_out; r++) {
            const block_q5_K *row = w + (g * ROWS + r) * nsb;
            const int half = r / 8, rr = r % 8;
            for (int64_t s = 0; s < nsb; s++) {
                uint8_t *sb = (uint8_t *)dst + ((size_t)g * nsb + s) * SB_BYTES;
                uint8_t sc[8], m[8];
                cv_kq_unpack_scales(row[s].scales, sc, m);
                for (int j = 0; j < 8; j++) {
                    for (int l = 0; l < 32; l++) {
                        const uint8_t b = row[s].qs[32 * (j / 2) + l];
                        const int lo = (j & 1) ? b >> 4 : b & 0xF, hb = (row[s].qh[l] >> j) & 1;
                        const int ks = l / 4, c = l % 4, i = ks / 2;
                        sb[320 + j * 320 + 64 + i * 64 + half * 32 + 4 * rr + c] |= (uint8_t)(lo << (4 * (ks & 1)));
                        sb[320 + j * 320 + half * 32 + 4 * rr + c] |= (uint8_t)(hb << ks);
                    }
                    sb[j * 16 + r] = sc[j];
                }
                for (int p = 0; p < 4; p++) {
                    sb[128 + p * 32 + half * 16 + 2 * rr] = m[2 * p];
                    sb[128 + p * 32 + half * 16 + 2 * rr + 1] = m[2 * p + 1];
                }
                ((cv_f16 *)(sb + 256))[r] = row[s].d;
                ((cv_f16 *)(sb + 288))[r] = row[s].dmin;
            }
        }
}

static size_t act_row_bytes(const cv_wmat *w) { return act256_row_bytes(w->n_in); }
static void quant_act(const cv_wmat *w, const float *x, void *dst) { cv_act256_quantize_avx2(x, w->n_in, dst); }

/* Bit 4 of the levels of k-step s (0..7) from the qh vector h. */
static inline __m256i hbit(__m256i h, int s, __m256i m10)
{
    switch (s) {
    case 0: return _mm256_and_si256(_mm256_slli_epi16(h, 4), m10);
    case 1: return _mm256_and_si256(_mm256_slli_epi16(h, 3), m10);
    case 2: return _mm256_and_si256(_mm256_slli_epi16(h, 2), m10);
    case 3: return _mm256_and_si256(_mm256_slli_epi16(h, 1), m10);
    case 4: return _mm256_and_si256(h, m10);
    case 5: return _mm256_and_si256(_mm256_srli_epi16(h, 1), m10);
    case 6: return _mm256_and_si256(_mm256_srli_epi16(h, 2), m10);
    default: return _mm256_and_si256(_mm256_srli_epi16(h, 3), m10);
    }
}

static inline __attribute__((always_inline)) void tile(const uint8_t *wp, const uint8_t *act, size_t stride,
                                                       int64_t n_in, int T, float *out)
{
    const int64_t nsb = n_in / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10);
    /* vpshufb masks: int16 lanes (sc_r, sc_r) for rows 0-3 | 4-7 and 8-11 | 12-15 */
    const __m256i dup0 = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1, 4, -1, 4, -1, 5,
                                          -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
    const __m256i dup1 = _mm256_add_epi8(dup0, _mm256_setr_epi8(8, 0, 8, 0, 8, 0, 8, 0, 8, 0, 8, 0, 8, 0, 8, 0, 8, 0,
                                                                 8, 0, 8, 0, 8, 0, 8, 0, 8, 0, 8, 0, 8, 0));
    const float *ad = act256_d(act, n_in);
    const int16_t *bs = act256_bsum32(act, n_in);
    __m256 *acc = (__m256 *)(void *)out;
    _Pragma("GCC unroll 8")
    for (int t = 0; t < 2 * T; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *sb = wp + s * SB_BYTES, *as = act + s * QK_K;
        __m256i i0[TOK_TILE], i1[TOK_TILE];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++)
            i0[t] = i1[t] = _mm256_setzero_si256();
        _Pragma("GCC unroll 1")
        for (int j = 0; j < 8; j++) {
            /* an eighth of the super-block two ahead, spread out */
            prefetch_range(sb + 2 * SB_BYTES + j * (SB_BYTES / 8), SB_BYTES / 8);
            __m256i s0[TOK_TILE], s1[TOK_TILE];
            const __m256i scb = _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *)(sb + j * 16)));
            const __m256i sc0 = _mm256_shuffle_epi8(scb, dup0), sc1 = _mm256_shuffle_epi8(scb, dup1);
            const __m256i *hp = (const __m256i *)(sb + 320 + j * 320);
            _Pragma("GCC unroll 2")
            for (int q = 0; q < 2; q++) { /* k-steps 4q..4q+3: one int16 round */
                _Pragma("GCC unroll 8")
                for (int t = 0; t < T; t++)
                    s0[t] = s1[t] = _mm256_setzero_si256();
                _Pragma("GCC unroll 4")
                for (int k = 0; k < 4; k++) {
                    const int ks = 4 * q + k; /* k-step in the sub-block: values 4ks..4ks+3 */
                    const __m256i *pi = (const __m256i *)(sb + 320 + j * 320 + 64 + (ks / 2) * 64);
                    __m256i w0 = (ks & 1) ? _mm256_srli_epi16(_mm256_load_si256(pi), 4) : _mm256_load_si256(pi);
                    __m256i w1 = (ks & 1) ? _mm256_srli_epi16(_mm256_load_si256(pi + 1), 4) : _mm256_load_si256(pi + 1);
                    w0 = _mm256_or_si256(_mm256_and_si256(w0, m4), hbit(_mm256_load_si256(hp), ks, m10));
                    w1 = _mm256_or_si256(_mm256_and_si256(w1, m4), hbit(_mm256_load_si256(hp + 1), ks, m10));
                    _Pragma("GCC unroll 8")
                    for (int t = 0; t < T; t++) {
                        const __m256i av = bcast32(as + t * stride + 32 * j + 4 * ks);
                        s0[t] = dot_acc16(s0[t], w0, av);
                        s1[t] = dot_acc16(s1[t], w1, av);
                    }
                }
                _Pragma("GCC unroll 8")
                for (int t = 0; t < T; t++) {
                    i0[t] = _mm256_add_epi32(i0[t], _mm256_madd_epi16(s0[t], sc0));
                    i1[t] = _mm256_add_epi32(i1[t], _mm256_madd_epi16(s1[t], sc1));
                }
            }
        }
        const __m256 d0 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 256)));
        const __m256 d1 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 272)));
        const __m256 m0 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 288)));
        const __m256 m1 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 304)));
        /* mins widened once per super-block, shared by the tokens */
        __m256i mn[8];
        _Pragma("GCC unroll 8")
        for (int k = 0; k < 8; k++)
            mn[k] = _mm256_cvtepu8_epi16(_mm_load_si128((const __m128i *)(sb + 128 + k * 16)));
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            const int16_t *bst = (const int16_t *)((const uint8_t *)(bs + 8 * s) + t * stride);
            __m256i mi0 = _mm256_setzero_si256(), mi1 = _mm256_setzero_si256();
            _Pragma("GCC unroll 4")
            for (int p = 0; p < 4; p++) {
                const __m256i b2 = bcast32(bst + 2 * p);
                mi0 = _mm256_add_epi32(mi0, _mm256_madd_epi16(mn[2 * p], b2));
                mi1 = _mm256_add_epi32(mi1, _mm256_madd_epi16(mn[2 * p + 1], b2));
            }
            const __m256 da = _mm256_broadcast_ss((const float *)((const uint8_t *)(ad + s) + t * stride));
            acc[2 * t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0[t]), _mm256_mul_ps(d0, da), acc[2 * t]);
            acc[2 * t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mi0), _mm256_mul_ps(m0, da), acc[2 * t]);
            acc[2 * t + 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1[t]), _mm256_mul_ps(d1, da), acc[2 * t + 1]);
            acc[2 * t + 1] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mi1), _mm256_mul_ps(m1, da), acc[2 * t + 1]);
        }
    }
}

CV_TILE_RUN(run, tile, group_bytes)

const cv_mm_impl cv_mm_q5_K_avx2 = {
    .name = "avx2 tile: 16 rows x 4 tokens, weights repacked at load",
    .rows_per_group = ROWS,
    .pack_bytes = cv_q5_K_pack16_bytes,
    .pack = cv_q5_K_pack16,
    .act_row_bytes = act_row_bytes,
    .quant_act = quant_act,
    .run = run,
};
