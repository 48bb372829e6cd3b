/* dt_act_avx2.c — the activation types' AVX2 quantizers (q8_1, q8_K),
 * which the generic matmul driver calls once per token row for the q4_1,
 * q5_1 and q5_K dots. Same levels as the references except on exact
 * rounding ties (q8_1 rounds ties to even here); q8_K is identical. */
#include "kernels/simd_avx2.h"

void cv_dt_q8_1_from_f32_avx2(const float *src, void *dst, int64_t n)
{
    block_q8_1 *y = dst;
    uint8_t row[32 + 8];
    for (int64_t b = 0; b < n / QK8_1; b++) {
        cv_act32_quantize_avx2(src + b * QK8_1, QK8_1, row);
        memcpy(y[b].qs, row, 32);
        float d, s;
        memcpy(&d, row + 32, 4);
        memcpy(&s, row + 36, 4);
        y[b].d = f32_to_f16(d);
        y[b].s = f32_to_f16(s);
    }
}

void cv_dt_q8_K_from_f32_avx2(const float *src, void *dst, int64_t n)
{
    block_q8_K *y = dst;
    uint8_t row[256 + 52];
    for (int64_t b = 0; b < n / QK_K; b++) {
        cv_act256_quantize_avx2(src + b * QK_K, QK_K, row);
        memcpy(y[b].qs, row, 256);
        memcpy(&y[b].d, row + 256, 4);
        memcpy(y[b].bsums, row + 260, 32);
    }
}
