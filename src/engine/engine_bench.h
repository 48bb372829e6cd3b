/* engine_bench.h — the engine's benchmark hook, apart from its face: decode
 * attention alone, on the engine's own tiles and a real block pool
 * (attention_bench.c), so bench-kernels --case attention can time the tile
 * without a long prefill; and latent attention's tile (--case mla). */
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

/* Multi-head latent attention alone (`corvid bench-kernels --case mla`),
 * one layer of a shape: n_tok query tokens, the last of depth positions
 * (1: a decode step, its context cut into chunks over the pool's threads
 * as the engine cuts it; more: a prefill chunk), each of n_head heads over
 * latent rows of kv_lora + rope values (f32, f16 or q8_0), in both forms
 * as the engine runs them: absorbed (the latent tile, plus the per-token
 * up-projections into and out of the latent space, one matmul of the
 * tokens' rows by the heads' stacked n_head (nope + v) x kv_lora weights of
 * up_type), and decompressed (the same matmul over the depth positions'
 * latent rows, 256 at a time, giving every head's keys and values, and
 * each head's attention over them, cv_mla_dec_piece; only for n_tok >=
 * CV_MLA_GROUP, as the engine takes it). */
typedef struct cv_mla_bench {
    int32_t n_head, kv_lora, rope, nope, v;
    int32_t depth, n_tok;
    uint32_t kv_type, up_type;
    int repeats;
    double (*clock)(void); /* seconds the passes are timed by (NULL: wall time) */
} cv_mla_bench;

typedef struct cv_mla_bench_result {
    double absorbed_s, decompressed_s;       /* medians; decompressed 0: not run */
    double absorbed_macs, decompressed_macs; /* multiply-adds of each */
    const char *tile;
} cv_mla_bench_result;

int cv_engine_bench_mla(const cv_mla_bench *b, cv_pool *pool, cv_mla_bench_result *res, cv_err *err);

#endif
