/* dt_q32_avxvnni.c — the AVX-VNNI matmul of the 32-value block types: the
 * tile of tile_q32_vnni.h at 256 bits (rows 0-7 and 8-15 in two ymm, 16 x
 * 4 tokens, VEX vpdpbusd), one implementation per type over that type's
 * AVX2 packing (cv_mm_q4_0_avx_vnni, ...). This file is that header built
 * with the AVX-VNNI flags. */
#include "kernels/tile_q32_vnni.h"
