/* dt_iq4_xs_avx512.c — iq4_xs's matmul tile at the avx512 level: one zmm per
 * 16 rows, 16 rows x 8 tokens (tile_kq_vnni.h). */
#include "kernels/tile_kq_vnni.h"

CV_VNNI_TILE_RUN(run, iq4xs_vnni_tile, iq4xs_group_bytes)
CV_VNNI_KQ_IMPL(iq4_xs, run);
