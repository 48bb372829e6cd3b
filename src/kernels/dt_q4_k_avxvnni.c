/* dt_q4_k_avxvnni.c — q4_K's matmul tile at the avx-vnni level: two ymm per
 * 16 rows, 16 rows x 4 tokens (tile_q4_k_vnni.h). */
#include "kernels/tile_q4_k_vnni.h"
