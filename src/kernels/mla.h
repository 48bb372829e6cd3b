/* mla.h — multi-head latent attention's kernels on the CPU (mla.c): the
 * rows of a latent pool (kernels/attention.h, "a latent pool") stored and
 * read as f32, the absorbed form's tile (an att_tile_fn over a latent
 * pool, run by the same chunked runner as the K/V tiles), and the
 * decompressed form's attention of one head over pieces of the context.
 * Both forms' products are the Gated DeltaNet kind's GEMM loops
 * (kernels/deltanet.h) of one ISA level. */
#ifndef CV_KERNELS_MLA_H
#define CV_KERNELS_MLA_H

#include "kernels/attention.h"
#include "kernels/deltanet.h"

/* Position j's latent row (head_dim floats) into a latent pool's block
 * piece (kv_k of its layer, head 0), converted to the pool's type. */
void cv_mla_store(const kv_pool *p, const cv_vec_ops *vec, void *piece, int32_t j, const float *row);
/* The first n rows of a block's piece as f32: the piece itself when it is
 * f32, else converted into buf [n][head_dim]. */
const float *cv_mla_rows(const kv_pool *p, const void *piece, int32_t n, float *buf);
/* The latent attention tile (an att_tile_fn over a latent pool: hd the
 * row, hd_v its value part, n_rep the query heads), its two GEMMs by one
 * level's loops; the one of the level those loops run at in this process,
 * and its name ("avx512 gemm", "avx2 gemm", "scalar gemm"). */
void cv_mla_tile_scalar(const att_tile *a, float *scratch);
void cv_mla_tile_avx2(const att_tile *a, float *scratch);
void cv_mla_tile_avx512(const att_tile *a, float *scratch);
att_tile_fn cv_mla_tile_for(void);
const char *cv_mla_tile_name(att_tile_fn fn);
/* Floats of scratch one thread needs for those tiles of R query rows over
 * rows of D: the generic tile scratch (cv_att_tile_run's running state at
 * its end), then the tile's own temporaries. */
size_t cv_mla_scratch_floats(int32_t R, int32_t D);

/* Context positions the decompressed form's attention takes at a time:
 * whole blocks from position 0, so that a query meets the same pieces in
 * any call. */
#define CV_MLA_PIECE 64
/* One head of the decompressed form over the n_q consecutive positions
 * pos0.. of one sequence: its queries [q_nope, q_pe] (q, [n_q][nope +
 * rot]) and each query's online-softmax state (acc [n_q][v], not yet
 * divided by sum; mx, sum [n_q]), in the caller's memory
 * (cv_mla_dec_state_floats). */
typedef struct mla_dec_head {
    int32_t nope, rot, v;
    int32_t n_q, pos0;
    float scale;
    float *q, *acc, *mx, *sum;
} mla_dec_head;
/* A piece of the context decompressed for that head: positions
 * base..base + n - 1 (base a multiple of CV_MLA_PIECE, n <= CV_MLA_PIECE),
 * position base + j's key [W_UK c, k_pe] at k + j ld_k (nope) and
 * pe + j ld_pe (rot), its value W_UV c at val + j ld_v (v). */
typedef struct mla_dec_piece {
    int32_t base, n;
    const float *k, *pe, *val;
    int64_t ld_k, ld_pe, ld_v;
} mla_dec_piece;
size_t cv_mla_dec_state_floats(int32_t n_q, int32_t nope, int32_t rot, int32_t v);
/* Lays the head's state out at mem (q, acc, mx, sum), its queries (query
 * t at q + rows[t] ld_q) copied in and the softmax fresh. */
void cv_mla_dec_start(mla_dec_head *h, float *mem, const float *q, int64_t ld_q, const int32_t *rows);
/* The queries that see piece p attend to it (scores, online softmax,
 * values by the GEMMs of kn); scratch holds cv_mla_dec_scratch_floats.
 * Pieces go in position order; a query's bits depend on its position and
 * the pieces only, not on the other queries. */
void cv_mla_dec_piece(const dn_kernels *kn, mla_dec_head *h, const mla_dec_piece *p, float *scratch);
size_t cv_mla_dec_scratch_floats(int32_t n_q, int32_t nope, int32_t rot, int32_t v);
/* Each query's output (acc / sum, v floats) to out + rows[t] ld_out. */
void cv_mla_dec_finish(const mla_dec_head *h, const int32_t *rows, float *out, int64_t ld_out);

#endif
