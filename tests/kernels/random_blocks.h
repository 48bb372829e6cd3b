/* random_blocks.h — weight blocks of any quantized dtype filled with random
 * bytes, for the kernel tests: a file may hold any bit pattern of levels,
 * scales and mins, not just what our quantizers write. Only the f16 scale
 * fields are steered (never NaN or infinity, which no real file has) and,
 * per block, drawn from one of four regimes: ordinary, zero, subnormal, or
 * the largest half floats; mxfp4's exponent byte likewise (all 256 codes,
 * or up to 200 where a test needs finite products). Included by
 * test_kernels_dtypes.c and test_kernels_matmul.c. */
#ifndef CV_TEST_RANDOM_BLOCKS_H
#define CV_TEST_RANDOM_BLOCKS_H

#include <stddef.h>

#include "kernels/kernels_int.h"

/* Byte offsets of a dtype's f16 scale fields in its block; returns how many. */
static int rb_f16_fields(uint32_t type, size_t off[2])
{
    switch (type) {
    case CV_GGML_Q4_0: off[0] = offsetof(block_q4_0, d); return 1;
    case CV_GGML_Q4_1: off[0] = offsetof(block_q4_1, d); off[1] = offsetof(block_q4_1, m); return 2;
    case CV_GGML_Q5_0: off[0] = offsetof(block_q5_0, d); return 1;
    case CV_GGML_Q5_1: off[0] = offsetof(block_q5_1, d); off[1] = offsetof(block_q5_1, m); return 2;
    case CV_GGML_Q8_0: off[0] = offsetof(block_q8_0, d); return 1;
    case CV_GGML_Q2_K: off[0] = offsetof(block_q2_K, d); off[1] = offsetof(block_q2_K, dmin); return 2;
    case CV_GGML_Q3_K: off[0] = offsetof(block_q3_K, d); return 1;
    case CV_GGML_Q4_K: off[0] = offsetof(block_q4_K, d); off[1] = offsetof(block_q4_K, dmin); return 2;
    case CV_GGML_Q5_K: off[0] = offsetof(block_q5_K, d); off[1] = offsetof(block_q5_K, dmin); return 2;
    case CV_GGML_Q6_K: off[0] = offsetof(block_q6_K, d); return 1;
    case CV_GGML_IQ4_NL: off[0] = offsetof(block_iq4_nl, d); return 1;
    case CV_GGML_IQ4_XS: off[0] = offsetof(block_iq4_xs, d); return 1;
    default: return 0;
    }
}

/* A finite half float of the given regime (0 ordinary, 1 zero, 2 subnormal,
 * 3 near the largest), random sign. */
static uint16_t rb_half(cv_rng *r, int regime)
{
    const uint16_t sign = (uint16_t)(cv_rng_below(r, 2) << 15);
    switch (regime) {
    case 1: return sign;
    case 2: return (uint16_t)(sign | (1 + cv_rng_below(r, 0x3FF)));
    case 3: return (uint16_t)(sign | (0x7B00 + cv_rng_below(r, 0x100)));
    default: return (uint16_t)(sign | (0x1800 + cv_rng_below(r, 0x3000))); /* 2^-9 .. 2^3 */
    }
}

/* n_blocks random blocks of weight dtype `type` into dst. finite_products:
 * keep mxfp4 exponents <= 200 so that dots and matmuls stay finite. */
static void random_blocks(uint32_t type, void *dst, int64_t n_blocks, cv_rng *r, bool finite_products)
{
    const cv_dtype *dt = cv_dtype_get(type);
    uint8_t *p = dst;
    for (size_t i = 0; i < (size_t)n_blocks * dt->block_bytes; i++)
        p[i] = (uint8_t)cv_rng_below(r, 256);
    size_t off[2];
    const int nf = rb_f16_fields(type, off);
    for (int64_t b = 0; b < n_blocks; b++) {
        uint8_t *blk = p + (size_t)b * dt->block_bytes;
        const int regime = (int)cv_rng_below(r, 4);
        for (int f = 0; f < nf; f++) {
            const uint16_t h = rb_half(r, regime);
            memcpy(blk + off[f], &h, 2);
        }
        if (type == CV_GGML_MXFP4) {
            const uint8_t e[4] = { (uint8_t)(110 + cv_rng_below(r, 30)), 0, (uint8_t)cv_rng_below(r, 3),
                                   (uint8_t)(finite_products ? 200 - cv_rng_below(r, 8) : 248 + cv_rng_below(r, 8)) };
            ((block_mxfp4 *)(void *)blk)->e = e[regime];
        }
    }
}

#endif
