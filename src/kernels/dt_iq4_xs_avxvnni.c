/* dt_iq4_xs_avxvnni.c — iq4_xs's matmul tile at the avx-vnni level: two ymm
 * per 16 rows, 16 rows x 4 tokens (tile_kq_vnni.h). */
#include "kernels/tile_kq_vnni.h"

CV_VNNI_TILE_RUN(run, iq4xs_vnni_tile, iq4xs_group_bytes)
CV_VNNI_KQ_IMPL(iq4_xs, run);
