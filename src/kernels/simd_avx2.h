/* simd_avx2.h — helpers shared by the *_avx2.c files (and only them: it
 * needs -mavx2 -mfma -mf16c): horizontal sums, and the two activation
 * layouts the AVX2 matmul tiles read.
 *
 * act32 row (legacy quants), for n_in values in nb = n_in / 32 blocks:
 *   int8 q[n_in] | f32 d[nb] | f32 s[nb]      x ~ q * d, s = d * sum(q of block)
 *   (q8_0's quantizer: d = amax / 127, round to nearest; d and s kept in f32)
 *   The VNNI tiles (tile_q32_vnni.h) take s in the form they apply it: ks * s
 *   (q4_0's -8 s, computed as the AVX2 tile computes it in its loop), or the
 *   int32 k_sum * sum(q) in s's four bytes (the offset of a u8 x s8 product
 *   taken back in integers).
 * act256 row (K-quants), nsb = n_in / 256 super-blocks:
 *   int8 q[n_in] | f32 d[nsb] | i16 bsum16[16 nsb] | i16 bsum32[8 nsb]
 *   (q8_K's quantizer: extreme value -> -127, round to nearest even)
 * Levels come first and contiguous so a tile broadcasts any 4 of them with
 * one load; the per-block numbers follow in their own arrays. */
#ifndef CV_SIMD_AVX2_H
#define CV_SIMD_AVX2_H

#include <immintrin.h>

#include "kernels/kernels_int.h"

/* One half float with F16C: exact, and inline (the scalar reference's
 * conversion is a call into dt_f16.c). */
static inline float h2f(cv_f16 h) { return _cvtsh_ss(h); }

/* MXFP4's scales 2^(e-128) of 8 rows from their exponent bytes, as
 * e8m0_half_to_f32 builds them: exponent field e - 1, or for e < 2 the
 * subnormal bits 0x00200000 << e. */
static inline __m256 e8m0_half_ps(const uint8_t *e)
{
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)e));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v);
    const __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, is_sub));
}

static inline float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

static inline float hmax_ps(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* Packs four vectors of 8 int32 (values 0..31 in order) into 32 int8. */
static inline __m256i pack_epi32_to_epi8(__m256i a, __m256i b, __m256i c, __m256i d)
{
    __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    __m256i v = _mm256_packs_epi16(ab, cd);
    /* packs works per 128-bit lane: restore the order of the 8 dwords. */
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static inline size_t act32_row_bytes(int64_t n_in) { return (size_t)n_in + (size_t)(n_in / 32) * 8; }
static inline const float *act32_d(const uint8_t *row, int64_t n_in) { return (const float *)(row + n_in); }
static inline const float *act32_s(const uint8_t *row, int64_t n_in) { return (const float *)(row + n_in) + n_in / 32; }

static inline size_t act256_row_bytes(int64_t n_in) { return (size_t)n_in + (size_t)(n_in / 256) * (4 + 32 + 16); }
static inline const float *act256_d(const uint8_t *row, int64_t n_in) { return (const float *)(row + n_in); }
static inline const int16_t *act256_bsum16(const uint8_t *row, int64_t n_in)
{
    return (const int16_t *)(row + n_in + (n_in / 256) * 4);
}
static inline const int16_t *act256_bsum32(const uint8_t *row, int64_t n_in)
{
    return (const int16_t *)(row + n_in + (n_in / 256) * 36);
}

/* act_quant_avx2.c */
void cv_act32_quantize_avx2(const float *x, int64_t n_in, uint8_t *row);
void cv_act32_quantize_ks_avx2(const float *x, int64_t n_in, uint8_t *row, float ks);
void cv_act32_quantize_isum_avx2(const float *x, int64_t n_in, uint8_t *row, int32_t k_sum);
void cv_act256_quantize_avx2(const float *x, int64_t n_in, uint8_t *row);

/* acc += vpmaddubsw(w, a): u8 w times s8 a, pairs summed, added to int16
 * sums (the caller guarantees no overflow). Inline asm so the compiler
 * cannot reassociate a tile's chain of these into extra temporaries,
 * which costs spills when all 16 registers hold sums and weights. */
static inline __attribute__((always_inline)) __m256i dot_acc16(__m256i acc, __m256i w, __m256i a)
{
    __m256i t;
    __asm__("vpmaddubsw %[a], %[w], %[t]\n\tvpaddw %[t], %[acc], %[acc]"
            : [acc] "+x"(acc), [t] "=&x"(t)
            : [w] "x"(w), [a] "x"(a));
    return acc;
}

/* acc += madd(maddubs(|w|, sign(a, w)), 1): one signed 4-value step of the
 * tiles whose weights are signed bytes (q8_0, iq4_nl), where a pair of
 * products may reach 2*127*127 and so goes to int32 at once; in asm for
 * the same reason as dot_acc16. */
static inline __attribute__((always_inline)) __m256i dot_acc32_s8(__m256i acc, __m256i wabs, __m256i w, __m256i a,
                                                                  __m256i ones)
{
    __m256i t;
    __asm__("vpsignb %[w], %[a], %[t]\n\t"
            "vpmaddubsw %[t], %[wabs], %[t]\n\t"
            "vpmaddwd %[ones], %[t], %[t]\n\t"
            "vpaddd %[t], %[acc], %[acc]"
            : [acc] "+x"(acc), [t] "=&x"(t)
            : [wabs] "x"(wabs), [w] "x"(w), [a] "x"(a), [ones] "x"(ones));
    return acc;
}

/* acc += vpmaddwd(s, sc) (s is clobbered), as one chain: for the same
 * reason as dot_acc16, GCC would otherwise add two products' vpmaddwd
 * together first and keep a tile's sums on the stack. */
static inline __attribute__((always_inline)) __m256i madd_acc32(__m256i acc, __m256i s, __m256i sc)
{
    __asm__("vpmaddwd %[sc], %[s], %[s]\n\tvpaddd %[s], %[acc], %[acc]" : [acc] "+x"(acc), [s] "+x"(s) : [sc] "x"(sc));
    return acc;
}

/* Per-row scales of the 16-row packs that keep a sub-block pair's scales
 * as [8 rows][2] bytes per 8-row half (q6_K, q3_K, iq4_xs signed; q2_K's
 * scale-and-min bytes): those of sub-block 2k + (j & 1) for the half whose
 * 16 bytes are at p, as int16 in both lanes of each row's pair of
 * vpmaddubsw sums, ready for vpmaddwd. vpshufb moves row r's byte (index
 * 2r + (j & 1)) into both int16 lanes of row r (rows 0-3 in the low 128
 * bits, 4-7 in the high); i8: into the high bytes, vpsraw 8 sign-extends;
 * u4 (q2_K): into the low bytes, the high nibble (the min) masked off. */
static inline __attribute__((always_inline)) __m256i pair_scales_i8(const uint8_t *p, int j)
{
    const __m256i sx0 = _mm256_setr_epi8(-1, 0, -1, 0, -1, 2, -1, 2, -1, 4, -1, 4, -1, 6, -1, 6, -1, 8, -1, 8, -1, 10,
                                         -1, 10, -1, 12, -1, 12, -1, 14, -1, 14);
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    return _mm256_srai_epi16(_mm256_shuffle_epi8(b, _mm256_add_epi8(sx0, _mm256_set1_epi16((short)((j & 1) << 8)))),
                             8);
}
static inline __attribute__((always_inline)) __m256i pair_scales_u4(const uint8_t *p, int j)
{
    const __m256i sx0 = _mm256_setr_epi8(0, -1, 0, -1, 2, -1, 2, -1, 4, -1, 4, -1, 6, -1, 6, -1, 8, -1, 8, -1, 10, -1,
                                         10, -1, 12, -1, 12, -1, 14, -1, 14, -1);
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    return _mm256_and_si256(_mm256_shuffle_epi8(b, _mm256_add_epi8(sx0, _mm256_set1_epi16((short)(j & 1)))),
                            _mm256_set1_epi16(0x0F));
}

/* Prefetch [p, p + bytes) into L1, a line at a time. The tiles stream
 * their weights at a few uops per byte, so the out-of-order window alone
 * keeps too few cache misses in flight for a single core to reach its read
 * bandwidth in decode; prefetching ~2-5 KB ahead does (prefetching past
 * the end of the weights is harmless: prefetches never fault).
 * always_inline is load-bearing: GCC 12 at -O1 and above judges a plain
 * static helper around _mm_prefetch free of side effects and deletes its
 * calls, so until 2026-12-01 no tile prefetched anything (objdump of the
 * library showed no prefetch instruction; test_kernels_prefetch checks). */
static inline __attribute__((always_inline)) void prefetch_range(const void *p, size_t bytes)
{
    for (size_t i = 0; i < bytes; i += 64)
        _mm_prefetch((const char *)p + i, _MM_HINT_T0);
}

/* Broadcast 4 bytes from an unaligned address. */
static inline __m256i bcast32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* The run() of a 16-row tile implementation: tokens in chunks of 128 (their
 * activations stay in L2 while each group of rows is reused across them;
 * longer chunks mean fewer passes over the weights, 128 measured best of
 * 16..512 for 512-token prefills),
 * groups of rows in order (each thread streams its own slice of weights),
 * tiles of 4 tokens and a 1..3-token tail. TILE(wp, act, stride, n_in, T,
 * out) computes out[t][16] for one group whose packed weights start at wp;
 * GROUP_BYTES(n_in) is a group's packed size. */
#define CV_TILE_RUN(name, TILE, GROUP_BYTES) CV_TILE_RUN_STEP(name, TILE, TILE, GROUP_BYTES, 4)

/* The same with steps of 8 tokens for a type with a second tile for 5-8
 * (TILE8, out[t][16] for t < 8) beside TILE4's 1-4: 5-8 tokens of a step
 * go to TILE8, a step of 1-4 to TILE4. */
#define CV_TILE_RUN8(name, TILE4, TILE8, GROUP_BYTES) CV_TILE_RUN_STEP(name, TILE4, TILE8, GROUP_BYTES, 8)

#define CV_TILE_RUN_STEP(name, TILE4, TILE8, GROUP_BYTES, STEP)                                       \
    static void name(const cv_mm_job *job, int64_t g0, int64_t g1, int64_t t0, int64_t t1)           \
    {                                                                                                 \
        const int64_t n_in = job->n_in;                                                               \
        const uint8_t *base = job->w->data;                                                           \
        const size_t stride = job->act_row_bytes, gbytes = GROUP_BYTES(n_in);                         \
        _Alignas(64) float out[(STEP) * 16];                                                          \
        for (int64_t tc = t0; tc < t1; tc += 128) {                                                    \
            const int64_t te = CV_MIN(t1, tc + 128);                                                   \
            for (int64_t g = g0; g < g1; g++) {                                                       \
                const uint8_t *wp = base + (size_t)g * gbytes;                                        \
                const int64_t rows = CV_MIN(16, job->n_out - g * 16);                                 \
                for (int64_t t = tc; t < te; t += (STEP)) {                                           \
                    const int n = (int)CV_MIN((STEP), te - t);                                        \
                    const uint8_t *act = job->act + (size_t)t * stride;                               \
                    if ((STEP) == 8 && n > 4) {                                                       \
                        switch (n) {                                                                  \
                        case 8: TILE8(wp, act, stride, n_in, 8, out); break;                          \
                        case 7: TILE8(wp, act, stride, n_in, 7, out); break;                          \
                        case 6: TILE8(wp, act, stride, n_in, 6, out); break;                          \
                        default: TILE8(wp, act, stride, n_in, 5, out); break;                         \
                        }                                                                             \
                    } else {                                                                          \
                        switch (n) {                                                                  \
                        case 4: TILE4(wp, act, stride, n_in, 4, out); break;                          \
                        case 3: TILE4(wp, act, stride, n_in, 3, out); break;                          \
                        case 2: TILE4(wp, act, stride, n_in, 2, out); break;                          \
                        default: TILE4(wp, act, stride, n_in, 1, out); break;                         \
                        }                                                                             \
                    }                                                                                 \
                    /* a whole group's 16 floats: two vector moves, not a library     \
                     * call per token (the size is a constant then) */                \
                    for (int k = 0; k < n; k++) {                                                     \
                        float *dst = cv_mm_y_row(job, t + k) + g * 16;                                \
                        if (rows == 16)                                                               \
                            memcpy(dst, out + 16 * k, 16 * sizeof(float));                            \
                        else                                                                          \
                            memcpy(dst, out + 16 * k, (size_t)rows * sizeof(float));                  \
                    }                                                                                 \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
    }

#endif
