/* engine_bench.h — the engine's benchmark hook, apart from its face: decode
 * attention alone, on the engine's own tiles and a real block pool
 * (attention_bench.c), so bench-kernels --case attention can time the tile
 * without a long prefill. */
#ifndef CV_ENGINE_BENCH_H
#define CV_ENGINE_BENCH_H

#include "base/base.h"

/* One token at position depth - 1 of one sequence attends over depth
 * positions of random K/V (kv_type: CV_GGML_F16, _F32 or _Q8_0) in each
 * of n_layer layers of n_head_kv heads x n_rep query heads of head_dim,
 * every (layer, head) pair a work item on the pool's threads, through the
 * tile named ("avx512", "avx2", "scalar"; NULL: the one the engine picks).
 * Seconds per pass over every layer: the best and the median of repeats. */
typedef struct cv_att_bench {
    int32_t n_layer, n_head_kv, n_rep, head_dim, depth;
    uint32_t kv_type;
    const char *tile;
    int repeats;
} cv_att_bench;

typedef struct cv_att_bench_result {
    double best_s, median_s;
    double bytes;     /* K/V bytes a pass reads */
    const char *tile; /* the tile's name */
} cv_att_bench_result;

/* CV_EUNSUPPORTED when this CPU cannot run the tile named (or head_dim does
 * not suit it). */
int cv_engine_bench_attention(const cv_att_bench *b, cv_pool *pool, cv_att_bench_result *res, cv_err *err);

#endif
