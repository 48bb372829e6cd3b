/* dt_q2_k_avx2.c — q2_K on AVX2: dequantize (bit-exact with the scalar
 * reference: d*sc and dmin*m first, then dl*q - ml without fusing), the
 * q2_K x q8_K dot, and the matmul tile over weights repacked 16 rows at a
 * time. In the dot, one 32-byte load of qs holds 128 values; each shift by
 * 2s and mask gives the 32 values 32s..32s+31 of it, i.e. two sub-blocks
 * of 16, whose products vpmaddwd sums with their two scales at once. The
 * mins meet q8_K's sums of each 16 in one more vpmaddwd.
 *
 * Packed layout, per group of 16 rows (rows past n_out are zero) and per
 * super-block of 256 values, 1344 bytes (16 x 84, the GGUF size), in
 * reading order:
 *   u8 scm[8 pairs][2 halves][8 rows][2]  the GGUF scale byte (4-bit scale,
 *                                         4-bit min) of sub-blocks 2p, 2p+1
 *   f16 d[16] | f16 dmin[16]
 *   u8 q[16 sub-blocks][2 halves][32]     bits 2s..2s+1 of byte 4r + c:
 *        value 4s + c of the sub-block in row 8h + r (k-step s)
 * A sub-block's 4 k-steps are one 32-byte vector per half, unpacked by a
 * shift and a mask each. Levels 0..3: the 4 vpmaddubsw of a sub-block
 * (pairs <= 2*3*127) add up in int16, one vpmaddwd applies the scales; the
 * mins meet the activation sums of each 16 (act256 bsum16) once per
 * super-block. The VNNI tiles (tile_kq_vnni.h) read the same pack. */
#include "kernels/simd_avx2.h"

void cv_dt_q2_K_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_q2_K *x = src;
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d), min = h2f(x[b].dmin);
        float *y = dst + b * QK_K;
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * h));
            for (int s = 0; s < 4; s++) {
                const __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), m3);
                for (int k = 0; k < 4; k++) {
                    const uint8_t sc = x[b].scales[8 * h + 2 * s + k / 2];
                    const __m256 dl = _mm256_set1_ps(d * (float)(sc & 0xF));
                    const __m256 ml = _mm256_set1_ps(min * (float)(sc >> 4));
                    __m128i part = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
                    __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part));
                    _mm256_storeu_ps(y + 128 * h + 32 * s + 8 * k, _mm256_sub_ps(_mm256_mul_ps(dl, f), ml));
                }
            }
        }
    }
}

void cv_dt_q2_K_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_q2_K *x = w;
    const block_q8_K *y = a;
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    /* vpshufb mask: int16 lanes holding scale byte 0 (low 128 bits) and
     * byte 1 (high); adding 2p to its low bytes selects sub-blocks 2p, 2p+1 */
    const __m256i pick = _mm256_setr_epi8(0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1,
                                          1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1);
    __m256 acc = _mm256_setzero_ps();
    float acc_min = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[b].scales);
        const __m256i scb = _mm256_broadcastsi128_si256(_mm_and_si128(sc8, m4));
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * h));
            for (int s = 0; s < 4; s++) {
                const __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), m3);
                const int pair = 4 * h + s; /* these 32 values are sub-blocks 2 pair and 2 pair + 1 */
                const __m256i p = _mm256_maddubs_epi16(v, _mm256_loadu_si256((const __m256i *)(y[b].qs + 32 * pair)));
                const __m256i sc = _mm256_shuffle_epi8(scb, _mm256_add_epi8(pick, _mm256_set1_epi16((short)(2 * pair))));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc));
            }
        }
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), m4));
        const int sum_mins = hsum_epi32(_mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)y[b].bsums)));
        const float da = y[b].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(da * h2f(x[b].d)), acc);
        acc_min += da * h2f(x[b].dmin) * (float)sum_mins;
    }
    *out = hsum_ps(acc) - acc_min;
}

/* ---- matmul ---- */

#define ROWS 16
#define SB_BYTES 1344

static size_t group_bytes(int64_t n_in) { return (size_t)(n_in / QK_K) * SB_BYTES; }
size_t cv_q2_K_pack16_bytes(int64_t n_in, int64_t n_out)
{
    return (size_t)((n_out + ROWS - 1) / ROWS) * group_bytes(n_in);
}

void cv_q2_K_pack16(const void *src, int64_t n_in, int64_t n_out, void *dst)
{
    const int64_t nsb = n_in / QK_K, n_groups = (n_out + ROWS - 1) / ROWS;
    const block_q2_K *w = src;
    memset(dst, 0, cv_q2_K_pack16_bytes(n_in, n_out));
    for (int64_t g = 0; g < n_groups; g++)
        for (int r = 0; r < ROWS && g * ROWS + r < n_out; r++) {
            const block_q2_K *row = w + (g * ROWS + r) * nsb;
            const int h = r / 8, rr = r % 8;
            for (int64_t s = 0; s < nsb; s++) {
                uint8_t *sb = (uint8_t *)dst + ((size_t)g * nsb + s) * SB_BYTES;
                for (int i = 0; i < QK_K; i++) {
                    const int j = i / 16, ks = i % 16 / 4, c = i % 4;
                    sb[320 + j * 64 + h * 32 + 4 * rr + c] |= (uint8_t)(q2_k_level(&row[s], i) << (2 * ks));
                }
                for (int j = 0; j < 16; j++)
                    sb[(j / 2) * 32 + h * 16 + 2 * rr + (j & 1)] = row[s].scales[j];
                ((cv_f16 *)(sb + 256))[r] = row[s].d;
                ((cv_f16 *)(sb + 288))[r] = row[s].dmin;
            }
        }
}

static size_t act_row_bytes(const cv_wmat *w) { return act256_row_bytes(w->n_in); }
static void quant_act(const cv_wmat *w, const float *x, void *dst) { cv_act256_quantize_avx2(x, w->n_in, dst); }

/* 16 rows x T <= 4 tokens over all super-blocks: out[t][16]. */
static inline __attribute__((always_inline)) void tile(const uint8_t *wp, const uint8_t *act, size_t stride,
                                                       int64_t n_in, int T, float *out)
{
    const int64_t nsb = n_in / QK_K;
    const __m256i m3 = _mm256_set1_epi8(3);
    const float *ad = act256_d(act, n_in);
    const int16_t *bs = act256_bsum16(act, n_in);
    __m256 *acc = (__m256 *)(void *)out;
    _Pragma("GCC unroll 8")
    for (int t = 0; t < 2 * T; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *sb = wp + s * SB_BYTES, *as = act + s * QK_K;
        __m256i i0[4], i1[4];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++)
            i0[t] = i1[t] = _mm256_setzero_si256();
        _Pragma("GCC unroll 1")
        for (int j = 0; j < 16; j++) {
            /* a sixteenth of the super-block four ahead (5.4 KB), spread out */
            prefetch_range(sb + 4 * SB_BYTES + j * (SB_BYTES / 16), SB_BYTES / 16);
            const __m256i *q = (const __m256i *)(sb + 320 + j * 64);
            const __m256i q0 = _mm256_load_si256(q), q1 = _mm256_load_si256(q + 1);
            __m256i s0[4], s1[4];
            _Pragma("GCC unroll 4")
            for (int ks = 0; ks < 4; ks++) {
                const __m256i w0 = _mm256_and_si256(_mm256_srli_epi16(q0, 2 * ks), m3);
                const __m256i w1 = _mm256_and_si256(_mm256_srli_epi16(q1, 2 * ks), m3);
                _Pragma("GCC unroll 4")
                for (int t = 0; t < T; t++) {
                    const __m256i av = bcast32(as + t * stride + 16 * j + 4 * ks);
                    if (ks == 0) {
                        s0[t] = _mm256_maddubs_epi16(w0, av);
                        s1[t] = _mm256_maddubs_epi16(w1, av);
                    } else {
                        s0[t] = dot_acc16(s0[t], w0, av);
                        s1[t] = dot_acc16(s1[t], w1, av);
                    }
                }
            }
            const uint8_t *scp = sb + (j / 2) * 32;
            const __m256i sc0 = pair_scales_u4(scp, j), sc1 = pair_scales_u4(scp + 16, j);
            _Pragma("GCC unroll 4")
            for (int t = 0; t < T; t++) {
                i0[t] = madd_acc32(i0[t], s0[t], sc0);
                i1[t] = madd_acc32(i1[t], s1[t], sc1);
            }
        }
        const __m256 d0 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 256)));
        const __m256 d1 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 272)));
        const __m256 m0 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 288)));
        const __m256 m1 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 304)));
        /* mins (the high nibbles) as int16 pairs per row, shared by the tokens */
        __m256i mn[16];
        _Pragma("GCC unroll 16")
        for (int k = 0; k < 16; k++)
            mn[k] = _mm256_srli_epi16(_mm256_cvtepu8_epi16(_mm_load_si128((const __m128i *)(sb + k * 16))), 4);
        _Pragma("GCC unroll 4")
        for (int t = 0; t < T; t++) {
            const int16_t *bst = (const int16_t *)((const uint8_t *)(bs + 16 * s) + t * stride);
            __m256i mi0 = _mm256_setzero_si256(), mi1 = _mm256_setzero_si256();
            _Pragma("GCC unroll 8")
            for (int p = 0; p < 8; p++) {
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

const cv_mm_impl cv_mm_q2_K_avx2 = {
    .name = "avx2 tile: 16 rows x 4 tokens, weights repacked at load",
    .rows_per_group = ROWS,
    .pack_bytes = cv_q2_K_pack16_bytes,
    .pack = cv_q2_K_pack16,
    .act_row_bytes = act_row_bytes,
    .quant_act = quant_act,
    .run = run,
};
