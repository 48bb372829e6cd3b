/* probe_avxvnni.c — the int8 peak of the avx-vnni level: independent
 * 256-bit VEX vpdpbusd chains (32 u8 x s8 products into int32 each), the
 * inner step of that level's matmul tiles; twelve accumulators, inline
 * assembly, as probe_avx512.c. */
#include <immintrin.h>

#include "kernels/kernels_int.h"

uint64_t cv_probe_int8_vnni_avxvnni(int64_t iters)
{
    const __m256i w0 = _mm256_set1_epi8(3), w1 = _mm256_set1_epi8(5), a0 = _mm256_set1_epi8(-7);
    /* twelve named sums, not an array: GCC keeps an array's elements in
     * memory across the asm statement, a store and a reload per chain and
     * iteration, which held the loop to a third of the peak */
    __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
    __m256i c6 = c0, c7 = c0, c8 = c0, c9 = c0, c10 = c0, c11 = c0;
    for (int64_t i = 0; i < iters; i++) {
        __asm__ volatile("%{vex%} vpdpbusd %[a0], %[w0], %[c0]\n\t"
                         "%{vex%} vpdpbusd %[a0], %[w1], %[c1]\n\t"
                         "%{vex%} vpdpbusd %[a0], %[w0], %[c2]\n\t"
                         "%{vex%} vpdpbusd %[a0], %[w1], %[c3]\n\t"
                         "%{vex%} vpdpbusd %[a0], %[w0], %[c4]\n\t"
                         "%{vex%} vpdpbusd %[a0], %[w1], %[c5]\n\t"
                         "%{vex%} vpdpbusd %[a0], %[w0], %[c6]\n\t"
                         "%{vex%} vpdpbusd %[a0], %[w1], %[c7]\n\t"
                         "%{vex%} vpdpbusd %[a0], %[w0], %[c8]\n\t"
                         "%{vex%} vpdpbusd %[a0], %[w1], %[c9]\n\t"
                         "%{vex%} vpdpbusd %[a0], %[w0], %[c10]\n\t"
                         "%{vex%} vpdpbusd %[a0], %[w1], %[c11]\n\t"
                         : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [c4] "+x"(c4),
                           [c5] "+x"(c5), [c6] "+x"(c6), [c7] "+x"(c7), [c8] "+x"(c8), [c9] "+x"(c9),
                           [c10] "+x"(c10), [c11] "+x"(c11)
                         : [w0] "x"(w0), [w1] "x"(w1), [a0] "x"(a0));
    }
    const __m256i c[12] = { c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11 };
    __m256i s = c[0];
    for (int k = 1; k < 12; k++)
        s = _mm256_xor_si256(s, c[k]);
    return (uint64_t)_mm256_extract_epi64(s, 0);
}
