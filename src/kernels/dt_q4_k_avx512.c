/* dt_q4_k_avx512.c — q4_K's matmul tile at the avx512 level: one zmm per
 * 16 rows, 16 rows x 8 tokens (tile_q4_k_vnni.h). */
#include "kernels/tile_q4_k_vnni.h"
