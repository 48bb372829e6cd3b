/* probe_avx2.c — the inner loops of the machine probes. The int8 loops are
 * inline assembly so the compiler cannot merge or drop the identical
 * multiplies. The peak loop is 8 independent vpmaddubsw per iteration (32
 * u8 x s8 products each, summed in pairs) feeding 4 vpaddw accumulators:
 * the inner loop of the 4/5/6-bit tiles, bounded only by the multiplier's
 * throughput. The i32 loop adds a vpmaddwd per product vector, the step a
 * dot needs when int16 sums could overflow (q8_0 x q8_0). */
#include <immintrin.h>

#include "kernels/kernels_int.h"

uint64_t cv_probe_read_avx2(const void *p, size_t n)
{
    const __m256i *q = p;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 4 <= n / 32; i += 4) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256(q + i));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256(q + i + 1));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256(q + i + 2));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256(q + i + 3));
    }
    __m256i s = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return (uint64_t)_mm256_extract_epi64(s, 0) ^ (uint64_t)_mm256_extract_epi64(s, 3);
}

uint64_t cv_probe_int8_avx2(int64_t iters)
{
    __m256i w0 = _mm256_set1_epi8(3), w1 = _mm256_set1_epi8(5), a0 = _mm256_set1_epi8(-7), a1 = _mm256_set1_epi8(11);
    __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int64_t i = 0; i < iters; i++) {
        __asm__ volatile("vpmaddubsw %[a0], %[w0], %%ymm12\n\t"
                         "vpmaddubsw %[a1], %[w0], %%ymm13\n\t"
                         "vpmaddubsw %[a0], %[w1], %%ymm14\n\t"
                         "vpmaddubsw %[a1], %[w1], %%ymm15\n\t"
                         "vpaddw %%ymm12, %[c0], %[c0]\n\t"
                         "vpaddw %%ymm13, %[c1], %[c1]\n\t"
                         "vpaddw %%ymm14, %[c2], %[c2]\n\t"
                         "vpaddw %%ymm15, %[c3], %[c3]\n\t"
                         "vpmaddubsw %[a1], %[w1], %%ymm12\n\t"
                         "vpmaddubsw %[a0], %[w1], %%ymm13\n\t"
                         "vpmaddubsw %[a1], %[w0], %%ymm14\n\t"
                         "vpmaddubsw %[a0], %[w0], %%ymm15\n\t"
                         "vpaddw %%ymm12, %[c0], %[c0]\n\t"
                         "vpaddw %%ymm13, %[c1], %[c1]\n\t"
                         "vpaddw %%ymm14, %[c2], %[c2]\n\t"
                         "vpaddw %%ymm15, %[c3], %[c3]\n\t"
                         : [c0] "+x"(acc0), [c1] "+x"(acc1), [c2] "+x"(acc2), [c3] "+x"(acc3)
                         : [w0] "x"(w0), [w1] "x"(w1), [a0] "x"(a0), [a1] "x"(a1)
                         : "xmm12", "xmm13", "xmm14", "xmm15");
    }
    __m256i s = _mm256_xor_si256(_mm256_xor_si256(acc0, acc1), _mm256_xor_si256(acc2, acc3));
    return (uint64_t)_mm256_extract_epi64(s, 0);
}

/* The complete int8 dot step with int32 sums: vpmaddubsw, vpmaddwd (pairs
 * to int32) and vpaddd, 8 independent chains, 32 multiply-adds per step. */
uint64_t cv_probe_int8_i32_avx2(int64_t iters)
{
    __m256i w0 = _mm256_set1_epi8(3), w1 = _mm256_set1_epi8(5), a0 = _mm256_set1_epi8(-7), a1 = _mm256_set1_epi8(11);
    __m256i ones = _mm256_set1_epi16(1);
    __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int64_t i = 0; i < iters; i++) {
        __asm__ volatile("vpmaddubsw %[a0], %[w0], %%ymm12\n\t"
                         "vpmaddubsw %[a1], %[w0], %%ymm13\n\t"
                         "vpmaddubsw %[a0], %[w1], %%ymm14\n\t"
                         "vpmaddubsw %[a1], %[w1], %%ymm15\n\t"
                         "vpmaddwd %[one], %%ymm12, %%ymm12\n\t"
                         "vpmaddwd %[one], %%ymm13, %%ymm13\n\t"
                         "vpmaddwd %[one], %%ymm14, %%ymm14\n\t"
                         "vpmaddwd %[one], %%ymm15, %%ymm15\n\t"
                         "vpaddd %%ymm12, %[c0], %[c0]\n\t"
                         "vpaddd %%ymm13, %[c1], %[c1]\n\t"
                         "vpaddd %%ymm14, %[c2], %[c2]\n\t"
                         "vpaddd %%ymm15, %[c3], %[c3]\n\t"
                         "vpmaddubsw %[a1], %[w1], %%ymm12\n\t"
                         "vpmaddubsw %[a0], %[w1], %%ymm13\n\t"
                         "vpmaddubsw %[a1], %[w0], %%ymm14\n\t"
                         "vpmaddubsw %[a0], %[w0], %%ymm15\n\t"
                         "vpmaddwd %[one], %%ymm12, %%ymm12\n\t"
                         "vpmaddwd %[one], %%ymm13, %%ymm13\n\t"
                         "vpmaddwd %[one], %%ymm14, %%ymm14\n\t"
                         "vpmaddwd %[one], %%ymm15, %%ymm15\n\t"
                         "vpaddd %%ymm12, %[c0], %[c0]\n\t"
                         "vpaddd %%ymm13, %[c1], %[c1]\n\t"
                         "vpaddd %%ymm14, %[c2], %[c2]\n\t"
                         "vpaddd %%ymm15, %[c3], %[c3]\n\t"
                         : [c0] "+x"(acc0), [c1] "+x"(acc1), [c2] "+x"(acc2), [c3] "+x"(acc3)
                         : [w0] "x"(w0), [w1] "x"(w1), [a0] "x"(a0), [a1] "x"(a1), [one] "x"(ones)
                         : "xmm12", "xmm13", "xmm14", "xmm15");
    }
    __m256i s = _mm256_xor_si256(_mm256_xor_si256(acc0, acc1), _mm256_xor_si256(acc2, acc3));
    return (uint64_t)_mm256_extract_epi64(s, 0);
}
