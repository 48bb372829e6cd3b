/* cpu_int.h — what the CPU backend's files share: its stream (a thread
 * pool and the vector loops of the process's ISA level). */
#ifndef CV_BACKEND_CPU_INT_H
#define CV_BACKEND_CPU_INT_H

#include "backend/backend.h"
#include "kernels/kernels.h"

typedef struct cpu_stream {
    cv_bstream pub;
    cv_pool *pool;
    const cv_vec_ops *vec;
    /* matmul's quantized activation rows, committed (stream_reserve), and
     * the widest row of the matrices reserved for (expert workspaces'
     * rows are committed for it) */
    void *act;
    size_t act_bytes, act_row_max;
} cpu_stream;

static inline cpu_stream *cpu_stream_of(cv_bstream *s) { return (cpu_stream *)s; }
/* The kernels' matrix behind one of the CPU backend's. */
const cv_wmat *cpu_wmat(const cv_bmat *m);

/* Per-row work runs on the calling thread below this many rows (waking
 * the pool costs more than a decode step's few rows take), else on the
 * pool, split by whole rows. */
#define CPU_ROWS_MIN 4
void cpu_run_rows(cv_bstream *s, int32_t n_rows, cv_pool_fn fn, void *ctx);

/* Activation memory and the row operations (cpu_rows.c), which cpu.c puts
 * in its table. */
void *cpu_rows_alloc(cv_backend *be, size_t n_bytes);
void cpu_rows_free(cv_backend *be, void *p);
void cpu_upload(cv_bstream *s, void *dst, const void *src, size_t n_bytes);
void cpu_download(cv_bstream *s, void *dst, const void *src, size_t n_bytes);
void cpu_rmsnorm(cv_bstream *s, int32_t n_rows, int64_t n, const float *x, int64_t ldx, const int32_t *gather,
                 const float *w, float eps, float *y, int64_t ldy);
void cpu_add(cv_bstream *s, int32_t n_rows, int64_t n, float *y, int64_t ldy, const float *a, int64_t lda,
             const float *b, int64_t ldb);
void cpu_scale(cv_bstream *s, int32_t n_rows, int64_t n, float *x, int64_t ldx, float f);
void cpu_glu(cv_bstream *s, const cv_bact *act, int32_t n_rows, int64_t n, float *y, int64_t ldy, const float *g,
             int64_t ldg, const float *u, int64_t ldu);
void cpu_sigmoid_mul(cv_bstream *s, int32_t n_rows, int64_t n, float *y, int64_t ldy, const float *x, int64_t ldx,
                     const float *g, int64_t ldg);
void cpu_softcap(cv_bstream *s, int32_t n_rows, int64_t n, float *x, int64_t ldx, float cap);
/* y = act(g) * u over n values with the level's loop: one row of glu. */
void cpu_glu_row(const cv_vec_ops *vec, const cv_bact *act, float *y, const float *g, const float *u, int64_t n);
/* The layer passes (cpu_layer.c). */
void cpu_attn_rows(cv_bstream *s, const cv_batt_rows *a);
void cpu_moe_route(cv_bstream *s, const cv_bmoe_route *r);
void cpu_moe_glu(cv_bstream *s, const cv_bmoe_rows *m);
void cpu_moe_sum(cv_bstream *s, const cv_bmoe_rows *m);
/* The Gated DeltaNet pass (cpu_deltanet.c). */
cv_dn_ws *cpu_deltanet_ws_create(cv_bstream *s, int64_t max_rows, int32_t H_k, int32_t H_v, int32_t d);
void cpu_deltanet_ws_destroy(cv_bstream *s, cv_dn_ws *ws);
void cpu_deltanet(cv_bstream *s, const cv_bdeltanet *a, cv_dn_ws *ws);
/* Attention over the paged cache (cpu_attention.c). */
cv_att_ws *cpu_attention_ws_create(cv_bstream *s, const cv_att_ws_shape *shape);
void cpu_attention_ws_destroy(cv_bstream *s, cv_att_ws *ws);
void cpu_attention(cv_bstream *s, const cv_batt *a, cv_att_ws *ws);
/* Multi-head latent attention's passes (cpu_mla.c). */
void cpu_mla_rows(cv_bstream *s, const cv_bmla_rows *a);
void cpu_mla_latent(cv_bstream *s, const kv_pool *kv, int32_t layer, const int32_t *table, int32_t base, int32_t n,
                    float *y);
cv_mla_ws *cpu_mla_ws_create(cv_bstream *s, int32_t max_q, int32_t n_head, int32_t nope, int32_t rot, int32_t v);
void cpu_mla_ws_destroy(cv_bstream *s, cv_mla_ws *ws);
void cpu_mla_dec(cv_bstream *s, const cv_bmla_dec *a, cv_mla_ws *ws);
void cpu_embed_rows(cv_bstream *s, uint32_t type, int64_t n, const void *table, int64_t n_vocab, int32_t n_rows,
                    const int32_t *tokens, float scale, float *y, int64_t ldy);

#endif
