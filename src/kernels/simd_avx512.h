/* simd_avx512.h — helpers shared by the *_avx512.c files (and only them:
 * they are compiled with the AVX2 flags plus -mavx512f/bw/vl/dq/vnni, so
 * simd_avx2.h's activation layouts, quantizers and tile runner are theirs
 * too). What a 512-bit tile adds to the AVX2 ones: its 16 rows fit one
 * zmm. The AVX2 packed layouts put rows 0-7 x 4 values of a k-step in 32
 * bytes and rows 8-15 in the next 32, so one 64-byte load of them is a zmm
 * whose dword r is row r: the AVX-512 tiles read the AVX2 packings as they
 * are. */
#ifndef CV_SIMD_AVX512_H
#define CV_SIMD_AVX512_H

#include "kernels/simd_avx2.h"

/* acc += vpdpbusd(w, the 4 bytes at p broadcast to every dword): u8 w
 * times s8 activations, each dword's 4 products summed into int32 (exact
 * for any operands a tile meets: 4 x 255 x 128 per step). The broadcast
 * rides in the instruction's memory operand ({1to16}), which GCC 12 does
 * not form from _mm512_set1_epi32 (it issues a separate vpbroadcastd). */
static inline __attribute__((always_inline)) __m512i dpbusd_bcast(__m512i acc, __m512i w, const void *p)
{
    __asm__("vpdpbusd %[a]%{1to16%}, %[w], %[acc]"
            : [acc] "+v"(acc)
            : [w] "v"(w), [a] "m"(*(const uint8_t(*)[4])p));
    return acc;
}

#endif
