/* dt_q3_k_avx2.c — q3_K on AVX2: dequantize (bit-exact: (d * sc) * (q - 4)),
 * the q3_K x q8_K dot, and the matmul tile over weights repacked 16 rows at
 * a time. In the dot, as for q2_K, one load of qs holds 128 values' low
 * bits and each shift by 2s gives 32 of them; the high bits of the same 32
 * values are bit 4h + s of each byte of hmask. Levels are used unsigned
 * (0..7) and the -4 applied once per super-block through q8_K's sums of
 * each 16 times the scales.
 *
 * Packed layout, per group of 16 rows (rows past n_out are zero) and per
 * super-block of 256 values, 1824 bytes (16 x 114; GGUF has 16 x 110: the
 * 6-bit scales are kept as bytes), in reading order:
 *   i8 sc[8 pairs][2 halves][8 rows][2]   scales - 32 of sub-blocks 2p, 2p+1
 *   f16 d[16]
 *   8 pairs x u8 A, B, C [2 halves][32]   the 8 k-steps k = 4e + s (value
 *        4s + c of sub-block 2p + e in byte 4r + c of row 8h + r) of the
 *        pair, 3 bits each: k = 0, 1, 2 in bits 0-2 of A, B, C; k = 3, 4, 5
 *        in bits 3-5; k = 6 and 7 in the top 2 bits of A and of B, their
 *        third bits in bits 6 and 7 of C
 * (3 bytes per 8 levels of 3 bits, as q6_K's 3 per 4 of 6). A level is a
 * mask, a shift and a mask, or (k = 6, 7) two of those and an or: 19
 * operations a pair's 8 vectors, where planes of 2 and 1 bits take 37. Its
 * 4 vpmaddubsw (pairs <= 2*7*127) add up in int16 and one vpmaddwd applies
 * the scales; the -4 goes through the activation sums of each 16 (act256
 * bsum16) times the scales once per super-block. The VNNI tiles
 * (tile_kq_vnni.h) read the same pack. */
#include "kernels/simd_avx2.h"

/* Levels 0..7 of values 128h + 32s .. +31. */
static inline __m256i q3_levels(__m256i q, __m256i hm, int h, int s)
{
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), _mm256_set1_epi8(3));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + s), _mm256_set1_epi8(1));
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 2));
}

void cv_dt_q3_K_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_q3_K *x = src;
    const __m256i off = _mm256_set1_epi8(4);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x[b].hmask);
        float *y = dst + b * QK_K;
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * h));
            for (int s = 0; s < 4; s++) {
                const __m256i v = _mm256_sub_epi8(q3_levels(q, hm, h, s), off);
                for (int k = 0; k < 4; k++) {
                    const __m256 dl = _mm256_set1_ps(d * (float)q3_k_scale(x[b].scales, 8 * h + 2 * s + k / 2));
                    __m128i part = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
                    __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part));
                    _mm256_storeu_ps(y + 128 * h + 32 * s + 8 * k, _mm256_mul_ps(dl, f));
                }
            }
        }
    }
}

/* The 16 scales of a q3_K block minus 32, as int8 in sub-block order: low
 * nibbles from bytes 0-7 (sub-blocks 0-7) and their high nibbles (8-15),
 * top bits from bytes 8-11 two at a time (kernels_int.h). */
static inline __m128i q3_scales(const uint8_t *q)
{
    uint32_t a0, a1, a2;
    memcpy(&a0, q, 4);
    memcpy(&a1, q + 4, 4);
    memcpy(&a2, q + 8, 4);
    const uint32_t m4 = 0x0F0F0F0Fu, m2 = 0x03030303u;
    const __m128i v = _mm_setr_epi32((int)((a0 & m4) | ((a2 & m2) << 4)), (int)((a1 & m4) | (((a2 >> 2) & m2) << 4)),
                                     (int)(((a0 >> 4) & m4) | (((a2 >> 4) & m2) << 4)),
                                     (int)(((a1 >> 4) & m4) | (((a2 >> 6) & m2) << 4)));
    return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

void cv_dt_q3_K_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_q3_K *x = w;
    const block_q8_K *y = a;
    /* even sub-blocks' scales to the low 8 bytes, odd ones to the high */
    const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++) {
        const __m128i sc8 = q3_scales(x[b].scales);
        /* int16 scales: sub-block 2p in lane p of the low 128 bits, 2p+1 in
         * lane p of the high 128, so one vpshufb spreads the pair p over the
         * two halves of a product vector */
        const __m256i sc_pairs = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, even_odd));
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x[b].hmask);
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * h));
            for (int s = 0; s < 4; s++) {
                const int p = 4 * h + s; /* these 32 values are sub-blocks 2p and 2p+1 */
                const __m256i prod = _mm256_maddubs_epi16(q3_levels(q, hm, h, s),
                                                          _mm256_loadu_si256((const __m256i *)(y[b].qs + 32 * p)));
                const __m256i scv = _mm256_shuffle_epi8(sc_pairs, _mm256_set1_epi16((short)(0x0100 + 0x0202 * p)));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(prod, scv));
            }
        }
        /* the -4 of every level: 4 * sum_j sc_j * (sum of the activations of sub-block j) */
        const __m256i off =
            _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8), _mm256_loadu_si256((const __m256i *)y[b].bsums));
        isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(off, 2));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(y[b].d * h2f(x[b].d)), acc);
    }
    *out = hsum_ps(acc);
}

/* ---- matmul ---- */

#define ROWS 16
#define SB_BYTES 1824

static size_t group_bytes(int64_t n_in) { return (size_t)(n_in / QK_K) * SB_BYTES; }
size_t cv_q3_K_pack16_bytes(int64_t n_in, int64_t n_out)
{
    return (size_t)((n_out + ROWS - 1) / ROWS) * group_bytes(n_in);
}

void cv_q3_K_pack16(const void *src, int64_t n_in, int64_t n_out, void *dst)
{
    const int64_t nsb = n_in / QK_K, n_groups = (n_out + ROWS - 1) / ROWS;
    const block_q3_K *w = src;
    memset(dst, 0, cv_q3_K_pack16_bytes(n_in, n_out));
    for (int64_t g = 0; g < n_groups; g++)
        for (int r = 0; r < ROWS && g * ROWS + r < n_out; r++) {
            const block_q3_K *row = w + (g * ROWS + r) * nsb;
            const int h = r / 8, rr = r % 8;
            for (int64_t s = 0; s < nsb; s++) {
                uint8_t *sb = (uint8_t *)dst + ((size_t)g * nsb + s) * SB_BYTES;
                for (int i = 0; i < QK_K; i++) {
                    const int j = i / 16, k = 4 * (j & 1) + i % 16 / 4, q = q3_k_level(&row[s], i);
                    uint8_t *abc = sb + 288 + (j / 2) * 192 + h * 32 + 4 * rr + i % 4; /* A; B, C 64 on */
                    if (k < 6) {
                        abc[64 * (k % 3)] |= (uint8_t)(q << (3 * (k / 3)));
                    } else {
                        abc[64 * (k - 6)] |= (uint8_t)((q & 3) << 6);
                        abc[128] |= (uint8_t)((q >> 2) << k);
                    }
                }
                for (int j = 0; j < 16; j++)
                    sb[(j / 2) * 32 + h * 16 + 2 * rr + (j & 1)] = (uint8_t)q3_k_scale(row[s].scales, j);
                ((cv_f16 *)(sb + 256))[r] = row[s].d;
            }
        }
}

static size_t act_row_bytes(const cv_wmat *w) { return act256_row_bytes(w->n_in); }
static void quant_act(const cv_wmat *w, const float *x, void *dst) { cv_act256_quantize_avx2(x, w->n_in, dst); }

/* The levels of k-step k (0..7) of a sub-block pair from one half's A
 * (B, C two vectors on). The 16-bit shifts bring the next byte's bits in
 * above the field, which the masks drop. */
static inline __attribute__((always_inline)) __m256i levels(const __m256i *a, int k)
{
    const __m256i m7 = _mm256_set1_epi8(7);
    if (k < 3)
        return _mm256_and_si256(_mm256_load_si256(a + 2 * k), m7);
    if (k < 6)
        return _mm256_and_si256(_mm256_srli_epi16(_mm256_load_si256(a + 2 * (k - 3)), 3), m7);
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(_mm256_load_si256(a + 2 * (k - 6)), 6), _mm256_set1_epi8(3));
    const __m256i hi = _mm256_srli_epi16(_mm256_load_si256(a + 4), k - 2); /* bit k of C to bit 2 */
    return _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi8(4)));
}

/* 16 rows x T <= 4 tokens over all super-blocks: out[t][16]. */
static inline __attribute__((always_inline)) void tile(const uint8_t *wp, const uint8_t *act, size_t stride,
                                                       int64_t n_in, int T, float *out)
{
    const int64_t nsb = n_in / QK_K;
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
        for (int p = 0; p < 8; p++) {
            /* an eighth of the super-block three ahead (5.5 KB), spread out */
            prefetch_range(sb + 3 * SB_BYTES + p * (SB_BYTES / 8), SB_BYTES / 8);
            const __m256i *v = (const __m256i *)(sb + 288 + p * 192);
            _Pragma("GCC unroll 2")
            for (int e = 0; e < 2; e++) {
                const int j = 2 * p + e;
                __m256i s0[4], s1[4];
                _Pragma("GCC unroll 4")
                for (int ks = 0; ks < 4; ks++) {
                    const __m256i w0 = levels(v, 4 * e + ks), w1 = levels(v + 1, 4 * e + ks);
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
                const __m256i sc0 = pair_scales_i8(sb + p * 32, j), sc1 = pair_scales_i8(sb + p * 32 + 16, j);
                _Pragma("GCC unroll 4")
                for (int t = 0; t < T; t++) {
                    i0[t] = madd_acc32(i0[t], s0[t], sc0);
                    i1[t] = madd_acc32(i1[t], s1[t], sc1);
                }
            }
        }
        const __m256 d0 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 256)));
        const __m256 d1 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 272)));
        /* scales as int16 pairs per row, shared by the tokens */
        __m256i sw[16];
        _Pragma("GCC unroll 16")
        for (int k = 0; k < 16; k++)
            sw[k] = _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(sb + k * 16)));
        _Pragma("GCC unroll 4")
        for (int t = 0; t < T; t++) {
            /* -4 * sum_j sc_j * bsum16_j, two sub-blocks per vpmaddwd */
            const int16_t *bst = (const int16_t *)((const uint8_t *)(bs + 16 * s) + t * stride);
            __m256i o0 = _mm256_setzero_si256(), o1 = _mm256_setzero_si256();
            _Pragma("GCC unroll 8")
            for (int p = 0; p < 8; p++) {
                const __m256i b2 = bcast32(bst + 2 * p);
                o0 = _mm256_add_epi32(o0, _mm256_madd_epi16(sw[2 * p], b2));
                o1 = _mm256_add_epi32(o1, _mm256_madd_epi16(sw[2 * p + 1], b2));
            }
            const __m256i v0 = _mm256_sub_epi32(i0[t], _mm256_slli_epi32(o0, 2));
            const __m256i v1 = _mm256_sub_epi32(i1[t], _mm256_slli_epi32(o1, 2));
            const __m256 da = _mm256_broadcast_ss((const float *)((const uint8_t *)(ad + s) + t * stride));
            acc[2 * t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v0), _mm256_mul_ps(d0, da), acc[2 * t]);
            acc[2 * t + 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v1), _mm256_mul_ps(d1, da), acc[2 * t + 1]);
        }
    }
}

CV_TILE_RUN(run, tile, group_bytes)

const cv_mm_impl cv_mm_q3_K_avx2 = {
    .name = "avx2 tile: 16 rows x 4 tokens, weights repacked at load",
    .rows_per_group = ROWS,
    .pack_bytes = cv_q3_K_pack16_bytes,
    .pack = cv_q3_K_pack16,
    .act_row_bytes = act_row_bytes,
    .quant_act = quant_act,
    .run = run,
};
