/* dt_q4_k_avx2.c — q4_K on AVX2: dequantize (bit-exact with the scalar
 * reference: d*sc and dmin*m first, then d1*q - m1 without fusing), the
 * q4_K x q8_K dot, and the matmul tile over weights repacked 16 rows at a
 * time.
 *
 * Packed layout, per group of 16 rows (rows past n_out are zero) and per
 * super-block of 256 values, 2368 bytes (16 x 148; GGUF has 16 x 144), laid
 * out in the order the tile reads it (one monotonic stream per thread is
 * what the hardware prefetchers follow at full speed from DRAM):
 *   u8 sc[8][16]                          6-bit scale of sub-block j, row r
 *   u8 mn[4][2 halves][8 rows][2]         mins of sub-blocks 2p, 2p+1
 *   f16 d[16] | f16 dmin[16]
 *   u8 qs[8 sub-blocks][4][2 halves][32]  as q4_0's tile: rows 8h..8h+7,
 *        values 8i..8i+3 of the sub-block in low nibbles, 8i+4..8i+7 in high
 * Per sub-block the int16 sums of 8 vpmaddubsw (<= 30480) are multiplied by
 * the scales and summed to int32 in one vpmaddwd; the mins meet the
 * activation block sums (act256 bsum32) in four more; one conversion to
 * f32 per super-block and token. */
#include "kernels/simd_avx2.h"

#define ROWS 16
#define TOK_TILE 4
#define SB_BYTES 2368

void cv_kq_unpack_scales(const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    for (int j = 0; j < 8; j++)
        k_scale_min(j, q, &sc[j], &m[j]);
}

void cv_dt_q4_K_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_q4_K *x = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d), min = h2f(x[b].dmin);
        uint8_t sc[8], m[8];
        cv_kq_unpack_scales(x[b].scales, sc, m);
        float *y = dst + b * QK_K;
        for (int c = 0; c < 4; c++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            for (int h = 0; h < 2; h++) {
                const __m256 d1 = _mm256_set1_ps(d * sc[2 * c + h]), m1 = _mm256_set1_ps(min * m[2 * c + h]);
                __m256i v = h ? hi : lo;
                for (int k = 0; k < 4; k++) {
                    __m128i part = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
                    __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part));
                    _mm256_storeu_ps(y + 64 * c + 32 * h + 8 * k, _mm256_sub_ps(_mm256_mul_ps(d1, f), m1));
                }
            }
        }
    }
}

void cv_dt_q4_K_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_q4_K *x = w;
    const block_q8_K *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        uint8_t sc[8], m[8];
        cv_kq_unpack_scales(x[b].scales, sc, m);
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
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

size_t cv_q4_K_pack16_bytes(int64_t n_in, int64_t n_out)
{
    return (size_t)((n_out + ROWS - 1) / ROWS) * (size_t)(n_in / QK_K) * SB_BYTES;
}

void cv_q4_K_pack16(const void *src, int64_t n_in, int64_t n_out, void *dst)
{
    const int64_t nsb = n_in / QK_K, n_groups = (n_out + ROWS - 1) / ROWS;
    const block_q4_K *w = src;
    memset(dst, 0, cv_q4_K_pack16_bytes(n_in, n_out));
    for (int64_t g = 0; g < n_groups; g++)
        for (int r = 0; r < ROWS && g * ROWS + r < n_out; r++) {
            const block_q4_K *row = w + (g * ROWS + r) * nsb;
            const int half = r / 8, rr = r % 8;
            for (int64_t s = 0; s < nsb; s++) {
                uint8_t *sb = (uint8_t *)dst + ((size_t)g * nsb + s) * SB_BYTES;
                uint8_t v[QK_K], sc[8], m[8];
                for (int c = 0; c < 4; c++)
                    for (int l = 0; l < 32; l++) {
                        v[64 * c + l] = row[s].qs[32 * c + l] & 0x0F;
                        v[64 * c + 32 + l] = row[s].qs[32 * c + l] >> 4;
                    }
                cv_kq_unpack_scales(row[s].scales, sc, m);
                for (int j = 0; j < 8; j++) {
                    for (int i = 0; i < 4; i++)
                        for (int c = 0; c < 4; c++)
                            sb[320 + j * 256 + i * 64 + half * 32 + 4 * rr + c] =
                                (uint8_t)(v[32 * j + 8 * i + c] | (v[32 * j + 8 * i + 4 + c] << 4));
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

/* 16 rows x T tokens over all super-blocks: out[t][16]. */
static inline __attribute__((always_inline)) void tile(const uint8_t *wp, const uint8_t *act, size_t stride,
                                                       int64_t n_in, int T, float *out)
{
    const int64_t nsb = n_in / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
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
            /* an eighth of the super-block two ahead: spread, so the miss
             * queue never sees a burst */
            prefetch_range(sb + 2 * SB_BYTES + j * (SB_BYTES / 8), SB_BYTES / 8);
            __m256i s0[TOK_TILE], s1[TOK_TILE];
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++)
                s0[t] = s1[t] = _mm256_setzero_si256();
            _Pragma("GCC unroll 1")
            for (int i = 0; i < 4; i++) {
                /* low nibbles for all tokens, then high: 2 live weight vectors */
                const __m256i *pi = (const __m256i *)(sb + 320 + j * 256 + i * 64);
                __m256i w0 = _mm256_and_si256(_mm256_load_si256(pi), m4);
                __m256i w1 = _mm256_and_si256(_mm256_load_si256(pi + 1), m4);
                _Pragma("GCC unroll 8")
                for (int t = 0; t < T; t++) {
                    const __m256i av = bcast32(as + t * stride + 32 * j + 8 * i);
                    s0[t] = dot_acc16(s0[t], w0, av);
                    s1[t] = dot_acc16(s1[t], w1, av);
                }
                w0 = _mm256_and_si256(_mm256_srli_epi16(_mm256_load_si256(pi), 4), m4);
                w1 = _mm256_and_si256(_mm256_srli_epi16(_mm256_load_si256(pi + 1), 4), m4);
                _Pragma("GCC unroll 8")
                for (int t = 0; t < T; t++) {
                    const __m256i av = bcast32(as + t * stride + 32 * j + 8 * i + 4);
                    s0[t] = dot_acc16(s0[t], w0, av);
                    s1[t] = dot_acc16(s1[t], w1, av);
                }
            }
            const __m256i scb = _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *)(sb + j * 16)));
            const __m256i sc0 = _mm256_shuffle_epi8(scb, dup0), sc1 = _mm256_shuffle_epi8(scb, dup1);
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++) {
                i0[t] = _mm256_add_epi32(i0[t], _mm256_madd_epi16(s0[t], sc0));
                i1[t] = _mm256_add_epi32(i1[t], _mm256_madd_epi16(s1[t], sc1));
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

static size_t group_bytes(int64_t n_in) { return (size_t)(n_in / QK_K) * SB_BYTES; }
CV_TILE_RUN(run, tile, group_bytes)

const cv_mm_impl cv_mm_q4_K_avx2 = {
    .name = "avx2 tile: 16 rows x 4 tokens, weights repacked at load",
    .rows_per_group = ROWS,
    .pack_bytes = cv_q4_K_pack16_bytes,
    .pack = cv_q4_K_pack16,
    .act_row_bytes = act_row_bytes,
    .quant_act = quant_act,
    .run = run,
};
