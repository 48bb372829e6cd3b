/* simd_vnni.h — the vector the VNNI matmul tiles are written in, for the
 * two levels that have vpdpbusd; included only by *_avx512.c and
 * *_avxvnni.c files, each getting its own level's half (chosen by the flags
 * it is compiled with: -mavx512f or -mavxvnni).
 *
 * A 16-row packed group keeps 4 consecutive values of a row in 4 bytes,
 * rows 0-15 in order: 64 bytes, the AVX2 tiles' two 32-byte halves (rows
 * 0-7, 8-15) side by side, so the VNNI tiles read the AVX2 packs. A v16i
 * holds one such k-step, or one int32 sum per row (or an int16 pair per
 * row); a v16f one float per row. At avx512 it is one zmm; at avx-vnni a
 * pair of ymm (rows 0-7, 8-15). A tile written once in v16 operations thus
 * compiles to both levels, the same integers summed in the same groups.
 *
 * The multiply-add is vpdpbusd: u8 weights times a token's 4 int8
 * activations broadcast to every row, the 4 products added to the row's
 * int32 sum in one instruction (AVX2 needs vpmaddubsw, int16 pair sums that
 * overflow past a few steps, vpmaddwd and an add). Its latency is 4 cycles
 * and Zen 4/5 issue two a cycle, so a tile keeps V16_CHAINS independent
 * sums in flight. vpdpwssd (int16 pairs times int16 pairs into int32)
 * applies the small per-row numbers: scales, mins, activation sums.
 * Activation layouts, prefetch_range and the tile runners are
 * simd_avx2.h's (both levels' flags include avx2's), the zmm step
 * simd_avx512.h's. */
#ifndef CV_SIMD_VNNI_H
#define CV_SIMD_VNNI_H

#include "kernels/simd_avx2.h"

#if defined(__AVX512F__) && defined(__AVX512VNNI__) && defined(__AVX512BW__)

/* ---- avx512: one zmm ---- */

#include "kernels/simd_avx512.h"

#define V16_ISA "avx512"
#define CV_VNNI_IMPL(type) cv_mm_##type##_avx512
#define V16_MAX_TOK 8 /* tokens of a tile: 8 sums, 8 f32 results and 8 int32 partials stay in the 32 registers */
#define V16_TILE_NAME "16 rows x 8 tokens"
#define V16_CHAINS 8  /* vpdpbusd sums in flight in a tile */

typedef __m512i v16i;
typedef __m512 v16f;

static inline __attribute__((always_inline)) v16i v16_load(const void *p) { return _mm512_loadu_si512(p); }
static inline __attribute__((always_inline)) v16i v16_zero(void) { return _mm512_setzero_si512(); }
static inline __attribute__((always_inline)) v16i v16_set1_8(int8_t c) { return _mm512_set1_epi8(c); }
static inline __attribute__((always_inline)) v16i v16_set1_32(int32_t c) { return _mm512_set1_epi32(c); }
static inline __attribute__((always_inline)) v16i v16_and(v16i a, v16i b) { return _mm512_and_si512(a, b); }
static inline __attribute__((always_inline)) v16i v16_or(v16i a, v16i b) { return _mm512_or_si512(a, b); }
/* a | (b & m) in one vpternlogd. */
static inline __attribute__((always_inline)) v16i v16_or_and(v16i a, v16i b, v16i m)
{
    return _mm512_ternarylogic_epi32(a, b, m, 0xF8);
}
static inline __attribute__((always_inline)) v16i v16_srli16(v16i a, int n) { return _mm512_srli_epi16(a, n); }
static inline __attribute__((always_inline)) v16i v16_slli16(v16i a, int n) { return _mm512_slli_epi16(a, n); }
static inline __attribute__((always_inline)) v16i v16_srli32(v16i a, int n) { return _mm512_srli_epi32(a, n); }
static inline __attribute__((always_inline)) v16i v16_slli32(v16i a, int n) { return _mm512_slli_epi32(a, n); }
static inline __attribute__((always_inline)) v16i v16_srai32(v16i a, int n) { return _mm512_srai_epi32(a, n); }
static inline __attribute__((always_inline)) v16i v16_add(v16i a, v16i b) { return _mm512_add_epi32(a, b); }
static inline __attribute__((always_inline)) v16i v16_sub(v16i a, v16i b) { return _mm512_sub_epi32(a, b); }
static inline __attribute__((always_inline)) v16i v16_mullo(v16i a, v16i b) { return _mm512_mullo_epi32(a, b); }
static inline __attribute__((always_inline)) v16i v16_xor(v16i a, v16i b) { return _mm512_xor_si512(a, b); }
/* A 16-byte table in every 128-bit lane, and vpshufb: each byte of idx
 * (0..15) picks a byte of it. */
static inline __attribute__((always_inline)) v16i v16_table(const int8_t t[16])
{
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)t));
}
static inline __attribute__((always_inline)) v16i v16_shuffle8(v16i table, v16i idx)
{
    return _mm512_shuffle_epi8(table, idx);
}

/* acc += u8 . (the 4 int8 at s8x4, broadcast), in one instruction
 * (simd_avx512.h). */
static inline __attribute__((always_inline)) v16i v16_dpbusd(v16i acc, v16i u8, const void *s8x4)
{
    return dpbusd_bcast(acc, u8, s8x4);
}
/* acc += a . b per int16 pair into int32. */
static inline __attribute__((always_inline)) v16i v16_dpwssd(v16i acc, v16i a, v16i b)
{
    return _mm512_dpwssd_epi32(acc, a, b);
}
/* acc += a . (the int16 pair at p, broadcast). */
static inline __attribute__((always_inline)) v16i v16_dpwssd_b(v16i acc, v16i a, const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_dpwssd_epi32(acc, a, _mm512_set1_epi32(v));
}

/* Widening loads of per-row numbers: 16 u8 -> 16 int32; 32 u8 or i8 -> 32
 * int16 (a pair per row); 16 int16 -> 16 int32 (sign-extended). */
static inline __attribute__((always_inline)) v16i v16_u8_i32(const void *p)
{
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}
static inline __attribute__((always_inline)) v16i v16_u8_i16(const void *p)
{
    return _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p));
}
static inline __attribute__((always_inline)) v16i v16_i8_i16(const void *p)
{
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p));
}
static inline __attribute__((always_inline)) v16i v16_i16_i32(const void *p)
{
    return _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)p));
}

static inline __attribute__((always_inline)) v16f v16f_zero(void) { return _mm512_setzero_ps(); }
/* 16 half floats -> 16 floats (exact). */
static inline __attribute__((always_inline)) v16f v16_f16(const void *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
static inline __attribute__((always_inline)) v16f v16_bcast_f32(const float *p) { return _mm512_set1_ps(*p); }
static inline __attribute__((always_inline)) v16f v16_cvt(v16i a) { return _mm512_cvtepi32_ps(a); }
static inline __attribute__((always_inline)) v16f v16_mul(v16f a, v16f b) { return _mm512_mul_ps(a, b); }
static inline __attribute__((always_inline)) v16f v16_fmadd(v16f a, v16f b, v16f c) { return _mm512_fmadd_ps(a, b, c); }
static inline __attribute__((always_inline)) v16f v16_fnmadd(v16f a, v16f b, v16f c)
{
    return _mm512_fnmadd_ps(a, b, c);
}
static inline __attribute__((always_inline)) void v16_store(float *p, v16f a) { _mm512_storeu_ps(p, a); }
/* mxfp4's scales 2^(e-128) of 16 rows from their exponent bytes, built as
 * e8m0_half_ps builds 8 (simd_avx2.h). */
static inline __attribute__((always_inline)) v16f v16_e8m0_half(const uint8_t *e)
{
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)e));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), v);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(v, _mm512_set1_epi32(2)), normal, sub));
}

/* The run() of a tile of up to 8 tokens (simd_avx2.h). */
#define CV_VNNI_TILE_RUN(name, TILE, GROUP_BYTES) CV_TILE_RUN8(name, TILE, TILE, GROUP_BYTES)

#elif defined(__AVXVNNI__)

/* ---- avx-vnni: a pair of ymm, rows 0-7 and 8-15 ---- */

#define V16_ISA "avx-vnni"
#define CV_VNNI_IMPL(type) cv_mm_##type##_avx_vnni
#define V16_MAX_TOK 4 /* 16 ymm: 4 tokens' sums take 8 */
#define V16_TILE_NAME "16 rows x 4 tokens"
#define V16_CHAINS 4  /* v16 sums in flight, two ymm each */

typedef struct { __m256i r[2]; } v16i;
typedef struct { __m256 r[2]; } v16f;

#define V16_EACH(expr_lo, expr_hi) { { expr_lo, expr_hi } }

static inline __attribute__((always_inline)) v16i v16_load(const void *p)
{
    return (v16i)V16_EACH(_mm256_loadu_si256((const __m256i *)p), _mm256_loadu_si256((const __m256i *)p + 1));
}
static inline __attribute__((always_inline)) v16i v16_zero(void)
{
    return (v16i)V16_EACH(_mm256_setzero_si256(), _mm256_setzero_si256());
}
static inline __attribute__((always_inline)) v16i v16_set1_8(int8_t c)
{
    return (v16i)V16_EACH(_mm256_set1_epi8(c), _mm256_set1_epi8(c));
}
static inline __attribute__((always_inline)) v16i v16_set1_32(int32_t c)
{
    return (v16i)V16_EACH(_mm256_set1_epi32(c), _mm256_set1_epi32(c));
}
#define V16_OP2(name, intrin)                                                                                          \
    static inline __attribute__((always_inline)) v16i name(v16i a, v16i b)                                             \
    {                                                                                                                  \
        return (v16i)V16_EACH(intrin(a.r[0], b.r[0]), intrin(a.r[1], b.r[1]));                                        \
    }
#define V16_SHIFT(name, intrin)                                                                                        \
    static inline __attribute__((always_inline)) v16i name(v16i a, int n)                                              \
    {                                                                                                                  \
        return (v16i)V16_EACH(intrin(a.r[0], n), intrin(a.r[1], n));                                                   \
    }
V16_OP2(v16_and, _mm256_and_si256)
V16_OP2(v16_or, _mm256_or_si256)
V16_OP2(v16_xor, _mm256_xor_si256)
V16_OP2(v16_shuffle8, _mm256_shuffle_epi8)
V16_OP2(v16_add, _mm256_add_epi32)
V16_OP2(v16_sub, _mm256_sub_epi32)
V16_OP2(v16_mullo, _mm256_mullo_epi32)
V16_SHIFT(v16_srli16, _mm256_srli_epi16)
V16_SHIFT(v16_slli16, _mm256_slli_epi16)
V16_SHIFT(v16_srli32, _mm256_srli_epi32)
V16_SHIFT(v16_slli32, _mm256_slli_epi32)
V16_SHIFT(v16_srai32, _mm256_srai_epi32)
#undef V16_OP2
#undef V16_SHIFT

static inline __attribute__((always_inline)) v16i v16_or_and(v16i a, v16i b, v16i m)
{
    return v16_or(a, v16_and(b, m));
}
static inline __attribute__((always_inline)) v16i v16_table(const int8_t t[16])
{
    const __m256i tb = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t));
    return (v16i)V16_EACH(tb, tb);
}

/* acc += u8 . (the 4 int8 at s8x4, broadcast). {vex}: AVX-VNNI's encoding;
 * without it the assembler writes the EVEX (AVX-512) form, which CPUs of
 * this level do not run (test_kernels_vex checks the objects). */
static inline __attribute__((always_inline)) v16i v16_dpbusd(v16i acc, v16i u8, const void *s8x4)
{
    int32_t v;
    memcpy(&v, s8x4, 4);
    const __m256i a = _mm256_set1_epi32(v);
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc.r[0]) : "x"(u8.r[0]), "x"(a));
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc.r[1]) : "x"(u8.r[1]), "x"(a));
    return acc;
}
static inline __attribute__((always_inline)) v16i v16_dpwssd(v16i acc, v16i a, v16i b)
{
    return (v16i)V16_EACH(_mm256_dpwssd_avx_epi32(acc.r[0], a.r[0], b.r[0]),
                          _mm256_dpwssd_avx_epi32(acc.r[1], a.r[1], b.r[1]));
}
static inline __attribute__((always_inline)) v16i v16_dpwssd_b(v16i acc, v16i a, const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    const __m256i b = _mm256_set1_epi32(v);
    return (v16i)V16_EACH(_mm256_dpwssd_avx_epi32(acc.r[0], a.r[0], b), _mm256_dpwssd_avx_epi32(acc.r[1], a.r[1], b));
}

static inline __attribute__((always_inline)) v16i v16_u8_i32(const void *p)
{
    return (v16i)V16_EACH(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)),
                          _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)((const uint8_t *)p + 8))));
}
static inline __attribute__((always_inline)) v16i v16_u8_i16(const void *p)
{
    return (v16i)V16_EACH(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p)),
                          _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p + 1)));
}
static inline __attribute__((always_inline)) v16i v16_i8_i16(const void *p)
{
    return (v16i)V16_EACH(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p)),
                          _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p + 1)));
}
static inline __attribute__((always_inline)) v16i v16_i16_i32(const void *p)
{
    return (v16i)V16_EACH(_mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)p)),
                          _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)p + 1)));
}

static inline __attribute__((always_inline)) v16f v16f_zero(void)
{
    return (v16f)V16_EACH(_mm256_setzero_ps(), _mm256_setzero_ps());
}
static inline __attribute__((always_inline)) v16f v16_f16(const void *p)
{
    return (v16f)V16_EACH(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)),
                          _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p + 1)));
}
static inline __attribute__((always_inline)) v16f v16_bcast_f32(const float *p)
{
    return (v16f)V16_EACH(_mm256_broadcast_ss(p), _mm256_broadcast_ss(p));
}
static inline __attribute__((always_inline)) v16f v16_cvt(v16i a)
{
    return (v16f)V16_EACH(_mm256_cvtepi32_ps(a.r[0]), _mm256_cvtepi32_ps(a.r[1]));
}
static inline __attribute__((always_inline)) v16f v16_mul(v16f a, v16f b)
{
    return (v16f)V16_EACH(_mm256_mul_ps(a.r[0], b.r[0]), _mm256_mul_ps(a.r[1], b.r[1]));
}
static inline __attribute__((always_inline)) v16f v16_fmadd(v16f a, v16f b, v16f c)
{
    return (v16f)V16_EACH(_mm256_fmadd_ps(a.r[0], b.r[0], c.r[0]), _mm256_fmadd_ps(a.r[1], b.r[1], c.r[1]));
}
static inline __attribute__((always_inline)) v16f v16_fnmadd(v16f a, v16f b, v16f c)
{
    return (v16f)V16_EACH(_mm256_fnmadd_ps(a.r[0], b.r[0], c.r[0]), _mm256_fnmadd_ps(a.r[1], b.r[1], c.r[1]));
}
static inline __attribute__((always_inline)) void v16_store(float *p, v16f a)
{
    _mm256_storeu_ps(p, a.r[0]);
    _mm256_storeu_ps(p + 8, a.r[1]);
}
static inline __attribute__((always_inline)) v16f v16_e8m0_half(const uint8_t *e)
{
    return (v16f)V16_EACH(e8m0_half_ps(e), e8m0_half_ps(e + 8));
}

#define CV_VNNI_TILE_RUN(name, TILE, GROUP_BYTES) CV_TILE_RUN(name, TILE, GROUP_BYTES)

#else
#error "simd_vnni.h: compile with CV_AVX512_FLAGS or CV_AVXVNNI_FLAGS"
#endif

/* Sub-blocks a tile of T tokens works on at once, of a super-block of n:
 * enough that J x T sums are in flight (V16_CHAINS), a power of two. */
static inline __attribute__((always_inline)) int v16_subs(int T, int n)
{
    int j = 1;
    while (2 * j * T <= V16_CHAINS && 2 * j <= n)
        j *= 2;
    return j;
}

#endif
