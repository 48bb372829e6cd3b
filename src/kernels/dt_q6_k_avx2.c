/* dt_q6_k_avx2.c — q6_K on AVX2: dequantize (bit-exact: (d * sc) * q),
 * the q6_K x q8_K dot, and the matmul tiles over weights repacked 16 rows
 * at a time.
 *
 * Packed layout, per group of 16 rows (rows past n_out are zero) and per
 * super-block of 256 values, 3360 bytes (16 x 210, the GGUF size), in
 * reading order (one monotonic stream):
 *   i8 sc[8 pairs][2 halves][8 rows][2]   scales of sub-blocks 2p, 2p+1
 *   f16 d[16]
 *   16 sub-blocks x { u8 A[2 halves][32], B[2 halves][32], C[2 halves][32] }
 * A k-step is 4 values of 8 rows (rows 8h..8h+7 in half h); a sub-block of
 * 16 values is 4 k-steps, held 3 bytes per 4 levels: the low 6 bits of A,
 * B, C are k-steps 0, 1, 2 and their top 2 bits are bits 0-1, 2-3, 4-5 of
 * k-step 3. Unpacking the 4 vectors takes 11 operations (3 masks; 3 masks,
 * 3 shifts and 2 ors), against 17 for GGUF's nibble and bit-pair planes.
 * Levels are used unsigned (0..63): the -32 is applied once per super-block
 * through the activation sums of each 16 (act256 bsum16) times the scales.
 * Two vpmaddubsw (pairs <= 2*63*127) fit an int16 sum before vpmaddwd
 * applies the scale.
 *
 * Two tiles over that layout: 16 rows x up to 4 tokens (each activation
 * broadcast feeds both halves; decode and small batches), and 16 rows x up
 * to 8 tokens, one half at a time per super-block, so each unpacked weight
 * vector feeds 8 tokens (prefill and batches of 5-8). The second is 9-13%
 * faster from 8 tokens on, the first faster for 1-4 (docs/PERF.md). */
#include "kernels/simd_avx2.h"

#define ROWS 16
#define SB_BYTES 3360

void cv_dt_q6_K_to_f32_avx2(const void *src, float *dst, int64_t n)
{
    const block_q6_K *x = src;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03), off = _mm256_set1_epi8(32);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[b].ql + 64 * h, *qh = x[b].qh + 32 * h;
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i hh = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hh, m2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 2), m2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 4), m2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 6), m2), 4));
            for (int k = 0; k < 4; k++) {
                const __m256i v = _mm256_sub_epi8(q[k], off); /* 32 values: 128h + 32k .. +31 */
                for (int e = 0; e < 4; e++) {
                    const int i = 128 * h + 32 * k + 8 * e;
                    __m128i part = e < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
                    __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(e & 1 ? _mm_srli_si128(part, 8) : part));
                    const __m256 dsc = _mm256_set1_ps(d * (float)x[b].scales[i / 16]);
                    _mm256_storeu_ps(dst + b * QK_K + i, _mm256_mul_ps(dsc, f));
                }
            }
        }
    }
}

void cv_dt_q6_K_dot_avx2(int64_t n, const void *w, const void *a, float *out)
{
    /* Reuses the dequantizer's level extraction per 32 values; the scalar
     * sums per 16 are cheap next to the vector products. */
    const block_q6_K *x = w;
    const block_q8_K *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    float sum = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[b].ql + 64 * h, *qh = x[b].qh + 32 * h;
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i hh = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hh, m2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 2), m2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 4), m2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 6), m2), 4));
            for (int k = 0; k < 4; k++) {
                const int i = 128 * h + 32 * k;
                __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(y[b].qs + i)));
                /* scales of the two sub-blocks of 16 in these 32 values */
                const __m256i sc = _mm256_set_m128i(_mm_set1_epi16(x[b].scales[i / 16 + 1]),
                                                    _mm_set1_epi16(x[b].scales[i / 16]));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc));
            }
        }
        int off = 0;
        for (int j = 0; j < 16; j++)
            off += x[b].scales[j] * y[b].bsums[j];
        sum += y[b].d * h2f(x[b].d) * (float)(hsum_epi32(isum) - 32 * off);
    }
    *out = sum;
}

/* ---- matmul ---- */

static size_t group_bytes(int64_t n_in) { return (size_t)(n_in / QK_K) * SB_BYTES; }
size_t cv_q6_K_pack16_bytes(int64_t n_in, int64_t n_out)
{
    return (size_t)((n_out + ROWS - 1) / ROWS) * group_bytes(n_in);
}

/* The 6-bit level of value i of a q6_K block (dt_q6_k.c has the same). */
static inline int level(const block_q6_K *x, int i)
{
    const int half = i / 128, r = i % 128, l = r % 32, quarter = r / 32;
    const uint8_t *ql = x->ql + 64 * half, *qh = x->qh + 32 * half;
    const int lo = (quarter & 1) ? ql[l + 32] : ql[l];
    const int low4 = quarter >= 2 ? lo >> 4 : lo & 0xF;
    return low4 | (((qh[l] >> (2 * quarter)) & 3) << 4);
}

void cv_q6_K_pack16(const void *src, int64_t n_in, int64_t n_out, void *dst)
{
    const int64_t nsb = n_in / QK_K, n_groups = (n_out + ROWS - 1) / ROWS;
    const block_q6_K *w = src;
    memset(dst, 0, cv_q6_K_pack16_bytes(n_in, n_out));
    for (int64_t g = 0; g < n_groups; g++)
        for (int r = 0; r < ROWS && g * ROWS + r < n_out; r++) {
            const block_q6_K *row = w + (g * ROWS + r) * nsb;
            const int h = r / 8, rr = r % 8;
            for (int64_t s = 0; s < nsb; s++) {
                uint8_t *sb = (uint8_t *)dst + ((size_t)g * nsb + s) * SB_BYTES;
                for (int i = 0; i < QK_K; i++) {
                    const int q = level(&row[s], i), ks = i / 4, c = i % 4;
                    /* this value's byte in A of its sub-block; B and C are 64 and 128 on */
                    uint8_t *v = sb + 288 + (ks / 4) * 192 + h * 32 + 4 * rr + c;
                    if (ks % 4 < 3)
                        v[64 * (ks % 4)] |= (uint8_t)q;
                    else
                        for (int p = 0; p < 3; p++)
                            v[64 * p] |= (uint8_t)(((q >> (2 * p)) & 3) << 6);
                }
                for (int j = 0; j < 16; j++)
                    sb[(j / 2) * 32 + h * 16 + 2 * rr + (j & 1)] = (uint8_t)row[s].scales[j];
                ((cv_f16 *)(sb + 256))[r] = row[s].d;
            }
        }
}

static size_t act_row_bytes(const cv_wmat *w) { return act256_row_bytes(w->n_in); }
static void quant_act(const cv_wmat *w, const float *x, void *dst) { cv_act256_quantize_avx2(x, w->n_in, dst); }

/* The fourth k-step of a sub-block: its levels' bit pairs from the top
 * of A, B and C. */
static inline __attribute__((always_inline)) __m256i top_levels(__m256i va, __m256i vb, __m256i vc, __m256i mc0)
{
    return _mm256_or_si256(_mm256_or_si256(_mm256_srli_epi16(_mm256_and_si256(va, mc0), 6),
                                           _mm256_srli_epi16(_mm256_and_si256(vb, mc0), 4)),
                           _mm256_srli_epi16(_mm256_and_si256(vc, mc0), 2));
}

/* 16 rows x T <= 4 tokens. */
static inline __attribute__((always_inline)) void tile4(const uint8_t *wp, const uint8_t *act, size_t stride,
                                                       int64_t n_in, int T, float *out)
{
    const int64_t nsb = n_in / QK_K;
    const __m256i m3f = _mm256_set1_epi8(0x3F), mc0 = _mm256_set1_epi8((char)0xC0);
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
            /* a sixteenth of the super-block two ahead, spread out */
            prefetch_range(sb + 2 * SB_BYTES + j * (SB_BYTES / 16), SB_BYTES / 16);
            const __m256i sc0 = pair_scales_i8(sb + (j / 2) * 32, j), sc1 = pair_scales_i8(sb + (j / 2) * 32 + 16, j);
            const __m256i *v = (const __m256i *)(sb + 288 + j * 192); /* A, B, C 64 bytes apart */
            _Pragma("GCC unroll 2")
            for (int i = 0; i < 2; i++) {
                /* k-steps 4j+2i and 4j+2i+1 of both halves */
                __m256i w[2], x[2];
                for (int h = 0; h < 2; h++) {
                    const __m256i va = _mm256_load_si256(v + h), vb = _mm256_load_si256(v + 2 + h),
                                  vc = _mm256_load_si256(v + 4 + h);
                    w[h] = _mm256_and_si256(i ? vc : va, m3f);
                    x[h] = i ? top_levels(va, vb, vc, mc0) : _mm256_and_si256(vb, m3f);
                }
                _Pragma("GCC unroll 8")
                for (int t = 0; t < T; t++) {
                    const uint8_t *a = as + t * stride + 16 * j + 8 * i;
                    const __m256i alo = bcast32(a), ahi = bcast32(a + 4);
                    __m256i s0 = _mm256_maddubs_epi16(w[0], alo), s1 = _mm256_maddubs_epi16(w[1], alo);
                    s0 = dot_acc16(s0, x[0], ahi);
                    s1 = dot_acc16(s1, x[1], ahi);
                    i0[t] = _mm256_add_epi32(i0[t], _mm256_madd_epi16(s0, sc0));
                    i1[t] = _mm256_add_epi32(i1[t], _mm256_madd_epi16(s1, sc1));
                }
            }
        }
        const __m256 d0 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 256)));
        const __m256 d1 = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 272)));
        /* scales widened once per super-block, shared by the tokens */
        __m256i sw[16];
        _Pragma("GCC unroll 16")
        for (int k = 0; k < 16; k++)
            sw[k] = _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(sb + k * 16)));
        _Pragma("GCC unroll 8")
        for (int t = 0; t < T; t++) {
            /* -32 * sum_j sc_j * bsum16_j, two sub-blocks per vpmaddwd */
            const int16_t *bst = (const int16_t *)((const uint8_t *)(bs + 16 * s) + t * stride);
            __m256i o0 = _mm256_setzero_si256(), o1 = _mm256_setzero_si256();
            _Pragma("GCC unroll 8")
            for (int p = 0; p < 8; p++) {
                const __m256i b2 = bcast32(bst + 2 * p);
                o0 = _mm256_add_epi32(o0, _mm256_madd_epi16(sw[2 * p], b2));
                o1 = _mm256_add_epi32(o1, _mm256_madd_epi16(sw[2 * p + 1], b2));
            }
            const __m256i v0 = _mm256_sub_epi32(i0[t], _mm256_slli_epi32(o0, 5));
            const __m256i v1 = _mm256_sub_epi32(i1[t], _mm256_slli_epi32(o1, 5));
            const __m256 da = _mm256_broadcast_ss((const float *)((const uint8_t *)(ad + s) + t * stride));
            acc[2 * t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v0), _mm256_mul_ps(d0, da), acc[2 * t]);
            acc[2 * t + 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v1), _mm256_mul_ps(d1, da), acc[2 * t + 1]);
        }
    }
}

/* 16 rows x T <= 8 tokens: each half of 8 rows in turn per super-block
 * (its 3360 bytes stay in L1 for the second half), so one weight vector
 * feeds 8 tokens and the level unpacking is paid once per 8. out[t][16]
 * as tile4's. */
static inline __attribute__((always_inline)) void tile8(const uint8_t *wp, const uint8_t *act, size_t stride,
                                                       int64_t n_in, int T, float *out)
{
    const int64_t nsb = n_in / QK_K;
    const __m256i m3f = _mm256_set1_epi8(0x3F), mc0 = _mm256_set1_epi8((char)0xC0);
    const float *ad = act256_d(act, n_in);
    const int16_t *bs = act256_bsum16(act, n_in);
    __m256 *acc = (__m256 *)(void *)out; /* token t, half h: acc[2t + h] */
    _Pragma("GCC unroll 16")
    for (int t = 0; t < 2 * T; t++)
        acc[t] = _mm256_setzero_ps();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *sb = wp + s * SB_BYTES, *as = act + s * QK_K;
        _Pragma("GCC unroll 1")
        for (int h = 0; h < 2; h++) {
            __m256i ii[8];
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++)
                ii[t] = _mm256_setzero_si256();
            _Pragma("GCC unroll 1")
            for (int j = 0; j < 16; j++) {
                if (h == 0)
                    prefetch_range(sb + 2 * SB_BYTES + j * (SB_BYTES / 16), SB_BYTES / 16);
                const __m256i sc = pair_scales_i8(sb + (j / 2) * 32 + h * 16, j);
                const __m256i *v = (const __m256i *)(sb + 288 + j * 192 + h * 32); /* A, B, C 64 bytes apart */
                _Pragma("GCC unroll 2")
                for (int i = 0; i < 2; i++) {
                    /* k-steps 4j+2i and 4j+2i+1: A and B, or C and the top bits */
                    const __m256i va = _mm256_load_si256(v), vb = _mm256_load_si256(v + 2), vc = _mm256_load_si256(v + 4);
                    const __m256i w0 = _mm256_and_si256(i ? vc : va, m3f);
                    const __m256i x0 = i ? top_levels(va, vb, vc, mc0) : _mm256_and_si256(vb, m3f);
                    _Pragma("GCC unroll 8")
                    for (int t = 0; t < T; t++) {
                        const uint8_t *a = as + t * stride + 16 * j + 8 * i;
                        __m256i s0 = _mm256_maddubs_epi16(w0, bcast32(a));
                        s0 = dot_acc16(s0, x0, bcast32(a + 4));
                        ii[t] = madd_acc32(ii[t], s0, sc);
                    }
                }
            }
            const __m256 d = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 256 + h * 16)));
            _Pragma("GCC unroll 8")
            for (int t = 0; t < T; t++) {
                const int16_t *bst = (const int16_t *)((const uint8_t *)(bs + 16 * s) + t * stride);
                __m256i o = _mm256_setzero_si256();
                _Pragma("GCC unroll 8")
                for (int p = 0; p < 8; p++)
                    o = _mm256_add_epi32(o, _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(sb + p * 32 + h * 16))),
                                                              bcast32(bst + 2 * p)));
                const __m256i v = _mm256_sub_epi32(ii[t], _mm256_slli_epi32(o, 5));
                const __m256 da = _mm256_broadcast_ss((const float *)((const uint8_t *)(ad + s) + t * stride));
                acc[2 * t + h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_mul_ps(d, da), acc[2 * t + h]);
            }
        }
    }
}

CV_TILE_RUN8(run, tile4, tile8, group_bytes)

const cv_mm_impl cv_mm_q6_K_avx2 = {
    .name = "avx2 tiles: 16 rows x 4 or 8 tokens, weights repacked at load",
    .rows_per_group = ROWS,
    .pack_bytes = cv_q6_K_pack16_bytes,
    .pack = cv_q6_K_pack16,
    .act_row_bytes = act_row_bytes,
    .quant_act = quant_act,
    .run = run,
};
