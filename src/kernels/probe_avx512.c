/* probe_avx512.c — the int8 peak of the avx512 level: independent 512-bit
 * vpdpbusd chains (64 u8 x s8 products, summed by fours into int32 and
 * accumulated in the same instruction), the whole inner step of the VNNI
 * matmul tiles. Twelve accumulators cover the instruction's latency on
 * every core with two VNNI pipes. Inline assembly, as probe_avx2.c's, so
 * the compiler cannot merge or drop identical multiplies. */
#include <immintrin.h>

#include "kernels/kernels_int.h"

uint64_t cv_probe_int8_vnni_avx512(int64_t iters)
{
    const __m512i w0 = _mm512_set1_epi8(3), w1 = _mm512_set1_epi8(5), a0 = _mm512_set1_epi8(-7);
    /* twelve named sums, not an array: GCC keeps an array's elements in
     * memory across the asm statement, a store and a reload per chain and
     * iteration, which held the loop to a third of the peak */
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
    __m512i c6 = c0, c7 = c0, c8 = c0, c9 = c0, c10 = c0, c11 = c0;
    for (int64_t i = 0; i < iters; i++) {
        __asm__ volatile("vpdpbusd %[a0], %[w0], %[c0]\n\t"
                         "vpdpbusd %[a0], %[w1], %[c1]\n\t"
                         "vpdpbusd %[a0], %[w0], %[c2]\n\t"
                         "vpdpbusd %[a0], %[w1], %[c3]\n\t"
                         "vpdpbusd %[a0], %[w0], %[c4]\n\t"
                         "vpdpbusd %[a0], %[w1], %[c5]\n\t"
                         "vpdpbusd %[a0], %[w0], %[c6]\n\t"
                         "vpdpbusd %[a0], %[w1], %[c7]\n\t"
                         "vpdpbusd %[a0], %[w0], %[c8]\n\t"
                         "vpdpbusd %[a0], %[w1], %[c9]\n\t"
                         "vpdpbusd %[a0], %[w0], %[c10]\n\t"
                         "vpdpbusd %[a0], %[w1], %[c11]\n\t"
                         : [c0] "+v"(c0), [c1] "+v"(c1), [c2] "+v"(c2), [c3] "+v"(c3), [c4] "+v"(c4),
                           [c5] "+v"(c5), [c6] "+v"(c6), [c7] "+v"(c7), [c8] "+v"(c8), [c9] "+v"(c9),
                           [c10] "+v"(c10), [c11] "+v"(c11)
                         : [w0] "v"(w0), [w1] "v"(w1), [a0] "v"(a0));
    }
    const __m512i c[12] = { c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11 };
    __m512i s = c[0];
    for (int k = 1; k < 12; k++)
        s = _mm512_xor_si512(s, c[k]);
    return (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(s));
}
