/* dt_q32_avx512.c — the AVX-512 matmul of the 32-value block types: the
 * tile of tile_q32_vnni.h at 512 bits (16 rows in one zmm, 16 x 8
 * tokens), one implementation per type over that type's AVX2 packing
 * (cv_mm_q4_0_avx512, ...). This file is that header built with the
 * AVX-512 flags. */
#include "kernels/tile_q32_vnni.h"
