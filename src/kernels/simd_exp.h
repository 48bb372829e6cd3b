/* simd_exp.h — e^x in vector registers: the one exp polynomial of every file
 * that needs a vector exp (the vector ops of vec_avx2.c, the attention
 * tiles' online softmax), 8 lanes wide and, in files built with
 * CV_AVX512_FLAGS, 16 (as two 8s), so a lane's result is the same bits at
 * either width.
 *
 * x is clamped to [-87, 88], reduced to x = n ln2 + r with |r| <= ln2/2 (ln2
 * split in two so that n ln2 is exact), e^r is the degree-6 Taylor
 * polynomial (relative error < 2e-7 on that range, below the f32 rounding
 * of the sums it feeds) and 2^n goes in through the exponent bits (n stays
 * within [-126, 127] after the clamp). Below -87 the result is e^-87
 * (~1.6e-38), not 0: a caller that needs exp(-inf) = 0 masks those lanes
 * (vec_avx2.c's softmax does; the attention tiles mask invalid positions
 * themselves). Include only from files built with CV_AVX2_FLAGS. */
#ifndef CV_SIMD_EXP_H
#define CV_SIMD_EXP_H

#include <immintrin.h>

#define CV_EXP_LO -87.0f
#define CV_EXP_HI 88.0f
#define CV_EXP_LOG2E 1.44269504088896341f
#define CV_EXP_LN2_HI 0.693145751953125f
#define CV_EXP_LN2_LO 1.42860676533018708e-6f

static inline __m256 cv_exp8_ps(__m256 x)
{
    x = _mm256_max_ps(x, _mm256_set1_ps(CV_EXP_LO));
    x = _mm256_min_ps(x, _mm256_set1_ps(CV_EXP_HI));
    const __m256 n =
        _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(CV_EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(CV_EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(CV_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

#ifdef __AVX512F__
/* Sixteen lanes as two eights: one body for both widths. The extra
 * shuffles are a small cost where it is used: an attention tile takes one
 * exp per score and head_dim multiply-adds for it. */
static inline __m512 cv_exp16_ps(__m512 x)
{
    const __m256 lo = cv_exp8_ps(_mm512_castps512_ps256(x));
    const __m256 hi = cv_exp8_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
}
#endif

#endif
