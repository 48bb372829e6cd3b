/* dt_q3_k_avx512.c — q3_K's matmul tile at the avx512 level: one zmm per
 * 16 rows, 16 rows x 8 tokens (tile_kq_vnni.h). */
#include "kernels/tile_kq_vnni.h"

CV_VNNI_TILE_RUN(run, q3k_vnni_tile, q3k_group_bytes)
CV_VNNI_KQ_IMPL(q3_K, run);
