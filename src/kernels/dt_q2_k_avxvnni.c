/* dt_q2_k_avxvnni.c — q2_K's matmul tile at the avx-vnni level: two ymm
 * per 16 rows, 16 rows x 4 tokens (tile_kq_vnni.h). */
#include "kernels/tile_kq_vnni.h"

CV_VNNI_TILE_RUN(run, q2k_vnni_tile, q2k_group_bytes)
CV_VNNI_KQ_IMPL(q2_K, run);
