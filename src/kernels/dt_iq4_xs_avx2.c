/* dt_iq4_xs_avx2.c — iq4_xs on AVX2: dequantize (bit-exact: (d * (ls - 32))
 * * K[q]), the iq4_xs x q8_K dot, and the matmul tile over weights repacked
 * 16 rows at a time. Each sub-block of 32 is iq4_nl's shape: one vpshufb
 * turns nibbles into signed levels, multiplied by the activations with
 * q8_0's sign trick; in the dot each sub-block's products are summed to
 * int32 under its scale by one vpmaddwd.
 *
 * Packed layout, per group of 16 rows (rows past n_out are zero) and per
 * super-block of 256 values, 2208 bytes (16 x 138; GGUF has 16 x 136: the
 * 6-bit scales are kept as bytes), in reading order:
 *   i8 ls[4 pairs][2 halves][8 rows][2]   scales - 32 of sub-blocks 2p, 2p+1
 *   f16 d[16]
 *   u8 qs[8 sub-blocks][4][2 halves][32]  q4_K's nibbles: row 8h + r, bytes
 *        4r..4r+3, values 8i..8i+3 of the sub-block low, 8i+4..8i+7 high
 * K reaches -127, so as in iq4_nl's tile every step is vpsignb + vpmaddubsw
 * + vpmaddwd, whose multiplier here is the rows' sub-block scales instead
 * of ones: the int32 sums carry sum(ls K a) over the super-block (< 2^28).
 * The VNNI tiles (tile_kq_vnni.h) read the same pack. */
#include "kernels/simd_avx2.h"

static inline __m256i levels(const uint8_t *qs, __m256i tbl, __m256i m4)
{
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4));
}

void cv_dt_iq4_xs_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_iq4_xs *x = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cv_iq4_values));
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK_K / 32; j++) {
            const __m256 dl = _mm256_set1_ps(d * (float)iq4_xs_scale(x[b].scales_l, x[b].scales_h, j));
            const __m256i v = levels(x[b].qs + 16 * j, tbl, m4);
            float *y = dst + b * QK_K + 32 * j;
            for (int k = 0; k < 4; k++) {
                __m128i part = k < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
                __m256i w = _mm256_cvtepi8_epi32(k & 1 ? _mm_srli_si128(part, 8) : part);
                _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(dl, _mm256_cvtepi32_ps(w)));
            }
        }
    }
}

/* The 8 sub-block scales of a block minus 32, as int16 in the low 128
 * bits: each 32-bit lane shifts its own nibble of scales_l and its own 2
 * bits of scales_h into place (vpsrlvd), then one pack. */
static inline __m128i iq4_xs_scales(const block_iq4_xs *x)
{
    uint32_t lo;
    memcpy(&lo, x->scales_l, 4);
    const __m256i l = _mm256_srlv_epi32(_mm256_set1_epi32((int)lo), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    const __m256i h = _mm256_srlv_epi32(_mm256_set1_epi32(x->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    const __m256i l4 = _mm256_and_si256(l, _mm256_set1_epi32(0xF)), h2 = _mm256_and_si256(h, _mm256_set1_epi32(3));
    const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(l4, _mm256_slli_epi32(h2, 4)), _mm256_set1_epi32(32));
    return _mm_packs_epi32(_mm256_castsi256_si128(ls), _mm256_extracti128_si256(ls, 1));
}

void cv_dt_iq4_xs_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    const block_iq4_xs *x = w;
    const block_q8_K *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cv_iq4_values));
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++) {
        const __m256i ls = _mm256_broadcastsi128_si256(iq4_xs_scales(&x[b]));
        __m256i isum = _mm256_setzero_si256();
        for (int k = 0; k < QK_K / 64; k++) {
            /* sub-blocks 2k (bytes 0-15) and 2k+1 (16-31) in one load; each
             * takes its low nibbles then its high ones */
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * k));
            const __m256i lo = _mm256_shuffle_epi8(tbl, _mm256_and_si256(q, m4));
            const __m256i hi = _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
            const __m256i wq[2] = { _mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31) };
            for (int e = 0; e < 2; e++) {
                const int j = 2 * k + e;
                const __m256i aq = _mm256_loadu_si256((const __m256i *)(y[b].qs + 32 * j));
                const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wq[e], wq[e]), _mm256_sign_epi8(aq, wq[e]));
                const __m256i sc = _mm256_shuffle_epi8(ls, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(y[b].d * h2f(x[b].d)), acc);
    }
    *out = hsum_ps(acc);
}

/* ---- matmul ---- */

#define ROWS 16
#define SB_BYTES 2208

static size_t group_bytes(int64_t n_in) { return (size_t)(n_in / QK_K) * SB_BYTES; }
size_t cv_iq4_xs_pack16_bytes(int64_t n_in, int64_t n_out)
{
    return (size_t)((n_out + ROWS - 1) / ROWS) * group_bytes(n_in);
}

void cv_iq4_xs_pack16(const void *src, int64_t n_in, int64_t n_out, void *dst)
{
    const int64_t nsb = n_in / QK_K, n_groups = (n_out + ROWS - 1) / ROWS;
    const block_iq4_xs *w = src;
    memset(dst, 0, cv_iq4_xs_pack16_bytes(n_in, n_out));
    for (int64_t g = 0; g < n_groups; g++)
        for (int r = 0; r < ROWS && g * ROWS + r < n_out; r++) {
            const block_iq4_xs *row = w + (g * ROWS + r) * nsb;
            const int h = r / 8, rr = r % 8;
            for (int64_t s = 0; s < nsb; s++) {
                uint8_t *sb = (uint8_t *)dst + ((size_t)g * nsb + s) * SB_BYTES;
                for (int j = 0; j < 8; j++) {
                    const uint8_t *q = row[s].qs + 16 * j;
                    for (int l = 0; l < 32; l++) {
                        const int idx = l < 16 ? q[l] & 0xF : q[l - 16] >> 4, i = l / 8, c = l % 4;
                        sb[160 + j * 256 + i * 64 + h * 32 + 4 * rr + c] |= (uint8_t)(idx << (l % 8 >= 4 ? 4 : 0));
                    }
                    sb[(j / 2) * 32 + h * 16 + 2 * rr + (j & 1)] =
                        (uint8_t)iq4_xs_scale(row[s].scales_l, row[s].scales_h, j);
                }
                ((cv_f16 *)(sb + 128))[r] = row[s].d;
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
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cv_iq4_values));
    const float *ad = act256_d(act, n_in);
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
        for (int j = 0; j < 8; j++) {
            /* an eighth of the super-block two ahead, spread out */
            prefetch_range(sb + 2 * SB_BYTES + j * (SB_BYTES / 8), SB_BYTES / 8);
            const __m256i sc0 = pair_scales_i8(sb + (j / 2) * 32, j), sc1 = pair_scales_i8(sb + (j / 2) * 32 + 16, j);
            _Pragma("GCC unroll 1")
            for (int i = 0; i < 4; i++) {
                const __m256i *pi = (const __m256i *)(sb + 160 + j * 256 + i * 64);
                /* low nibbles for all tokens, then high: two live weight
                 * vectors and their |w| */
                _Pragma("GCC unroll 2")
                for (int hi = 0; hi < 2; hi++) {
                    __m256i w0 = _mm256_load_si256(pi), w1 = _mm256_load_si256(pi + 1);
                    if (hi) {
                        w0 = _mm256_srli_epi16(w0, 4);
                        w1 = _mm256_srli_epi16(w1, 4);
                    }
                    w0 = _mm256_shuffle_epi8(tbl, _mm256_and_si256(w0, m4));
                    w1 = _mm256_shuffle_epi8(tbl, _mm256_and_si256(w1, m4));
                    const __m256i a0 = _mm256_sign_epi8(w0, w0), a1 = _mm256_sign_epi8(w1, w1);
                    _Pragma("GCC unroll 4")
                    for (int t = 0; t < T; t++) {
                        const __m256i av = bcast32(as + t * stride + 32 * j + 8 * i + 4 * hi);
                        i0[t] = dot_acc32_s8(i0[t], a0, w0, av, sc0);
                        i1[t] = dot_acc32_s8(i1[t], a1, w1, av, sc1);
                    }
                }
            }
        }
        const __m256 d0 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 128)));
        const __m256 d1 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 144)));
        _Pragma("GCC unroll 4")
        for (int t = 0; t < T; t++) {
            const __m256 da = _mm256_broadcast_ss((const float *)((const uint8_t *)(ad + s) + t * stride));
            acc[2 * t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0[t]), _mm256_mul_ps(d0, da), acc[2 * t]);
            acc[2 * t + 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1[t]), _mm256_mul_ps(d1, da), acc[2 * t + 1]);
        }
    }
}

CV_TILE_RUN(run, tile, group_bytes)

const cv_mm_impl cv_mm_iq4_xs_avx2 = {
    .name = "avx2 tile: 16 rows x 4 tokens, weights repacked at load",
    .rows_per_group = ROWS,
    .pack_bytes = cv_iq4_xs_pack16_bytes,
    .pack = cv_iq4_xs_pack16,
    .act_row_bytes = act_row_bytes,
    .quant_act = quant_act,
    .run = run,
};
