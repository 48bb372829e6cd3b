/* dt_q3_k_avxvnni.c — q3_K's matmul tile at the avx-vnni level: two ymm
 * per 16 rows, 16 rows x 4 tokens (tile_kq_vnni.h). */
#include "kernels/tile_kq_vnni.h"

CV_VNNI_TILE_RUN(run, q3k_vnni_tile, q3k_group_bytes)
CV_VNNI_KQ_IMPL(q3_K, run);
