/* act_quant_avx2.c — quantizes activation rows into the two layouts the
 * AVX2 and VNNI matmul tiles read (simd_avx2.h): act32 with q8_0's rule
 * per 32 values (its block sum in the form each tile applies it), act256
 * with q8_K's rule per 256. Same levels as the scalar
 * reference quantizers except on exact rounding ties (this rounds ties to
 * even everywhere), and d, s kept in f32 rather than f16. */
#include "kernels/simd_avx2.h"

#define RND (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* The act32 quantizer; the second per-block number o is s (ks == 0), or
 * ks * s, or (isum) the int32 k_sum * sum(q) in its bits: the forms the
 * VNNI tiles fold straight into their sums (simd_avx2.h, act32). */
static inline __attribute__((always_inline)) void act32_quantize(const float *x, int64_t n_in, uint8_t *row, float ks,
                                                                 bool isum, int32_t k_sum)
{
    const int64_t nb = n_in / 32;
    float *d = (float *)(row + n_in), *o = d + nb;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + 32 * b;
        __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
        __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        const float amax = hmax_ps(m);
        const float db = amax / 127;
        const __m256 id = _mm256_set1_ps(db ? 1.0f / db : 0.0f);
        __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, id), RND));
        __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, id), RND));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, id), RND));
        __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, id), RND));
        int sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
        _mm256_storeu_si256((__m256i *)(row + 32 * b), pack_epi32_to_epi8(i0, i1, i2, i3));
        d[b] = db;
        if (isum) {
            const int32_t v = k_sum * sum;
            memcpy(o + b, &v, 4);
        } else {
            const float s = db * (float)sum;
            o[b] = ks != 0 ? ks * s : s;
        }
    }
}

void cv_act32_quantize_avx2(const float *x, int64_t n_in, uint8_t *row) { act32_quantize(x, n_in, row, 0, false, 0); }

void cv_act32_quantize_ks_avx2(const float *x, int64_t n_in, uint8_t *row, float ks)
{
    act32_quantize(x, n_in, row, ks, false, 0);
}

void cv_act32_quantize_isum_avx2(const float *x, int64_t n_in, uint8_t *row, int32_t k_sum)
{
    act32_quantize(x, n_in, row, 0, true, k_sum);
}

/* The sums of 16 levels of four consecutive chunks of 32, in order, from
 * each chunk's h = hadd(v0 + v1, v2 + v3) (its int32 levels, 8 a vector):
 * h holds per 128-bit lane pair sums of the chunk's two sums of 16. */
static inline __m256i act256_sums8(__m256i h0, __m256i h1, __m256i h2, __m256i h3)
{
    const __m256i g0 = _mm256_hadd_epi32(h0, h1), g1 = _mm256_hadd_epi32(h2, h3);
    return _mm256_add_epi32(_mm256_permute2x128_si256(g0, g1, 0x20), _mm256_permute2x128_si256(g0, g1, 0x31));
}

void cv_act256_quantize_avx2(const float *x, int64_t n_in, uint8_t *row)
{
    const int64_t nsb = n_in / 256;
    float *d = (float *)(row + n_in);
    int16_t *bs16 = (int16_t *)(row + n_in + nsb * 4), *bs32 = (int16_t *)(row + n_in + nsb * 36);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < nsb; b++) {
        const float *xb = x + 256 * b;
        /* The value of largest magnitude, with its sign: it maps to -127. */
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 256; i += 8)
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + i)));
        const float amax = hmax_ps(m);
        int8_t *q = (int8_t *)row + 256 * b;
        if (amax == 0) {
            memset(q, 0, 256);
            d[b] = 0;
            memset(bs16 + 16 * b, 0, 32);
            memset(bs32 + 8 * b, 0, 16);
            continue;
        }
        /* the first value (in order) whose magnitude is amax, 8 at a time */
        float max = 0;
        const __m256 vamax = _mm256_set1_ps(amax);
        for (int i = 0; i < 256; i += 8) {
            const int hit = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + i)), vamax, _CMP_EQ_OQ));
            if (hit) {
                max = xb[i + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 vis = _mm256_set1_ps(iscale);
        const __m256i lim = _mm256_set1_epi32(127);
        __m256i h[8]; /* per 32 values: their two sums of 16, as pair sums (act256_sums8) */
        for (int i = 0; i < 256; i += 32) {
            __m256i v[4];
            for (int k = 0; k < 4; k++) {
                v[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + i + 8 * k), vis), RND));
                v[k] = _mm256_min_epi32(v[k], lim);
            }
            h[i / 32] = _mm256_hadd_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3]));
            _mm256_storeu_si256((__m256i *)(q + i), pack_epi32_to_epi8(v[0], v[1], v[2], v[3]));
        }
        /* Sums of each 16 (at most 16 x 127: int16), and of each 32 from them. */
        const __m256i r0 = act256_sums8(h[0], h[1], h[2], h[3]), r1 = act256_sums8(h[4], h[5], h[6], h[7]);
        _mm256_storeu_si256((__m256i *)(bs16 + 16 * b), _mm256_permute4x64_epi64(_mm256_packs_epi32(r0, r1), 0xD8));
        /* hadd gives bs32 0, 1, 4, 5 | 2, 3, 6, 7 */
        const __m256i p =
            _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(r0, r1), _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
        _mm_storeu_si128((__m128i *)(bs32 + 8 * b),
                         _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packs_epi32(p, p), 0xD8)));
        d[b] = 1 / iscale;
    }
}
