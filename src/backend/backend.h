/* backend — the face of the compute-backend seam: where a model's weights
 * live and where its forward pass runs. Everything above it (model binding,
 * the engine's forward pass and layer kinds) reaches processors only
 * through this table, as SQLite's VFS and ggml's backend interface keep
 * the layers above them from knowing the disk or the device.
 *
 * Two objects:
 *   cv_backend  a device: it prepares weight matrices in its own layout
 *               and owns their memory. The CPU backend is one per process
 *               (cv_backend_cpu); a GPU backend is one per card.
 *   cv_bstream  an ordered queue of work on a backend: the CPU backend's is
 *               a thread pool of its own, a GPU's a stream. An engine
 *               creates one and issues every operation of its forward pass
 *               to it; operations on one stream run in the order issued.
 *
 * Every operation is a row of cv_backend_ops, versioned by CV_BACKEND_ABI
 * (a backend built against another ABI is refused at open). The inline
 * wrappers below are what callers use. The CPU backend (cpu.c) implements
 * each operation over the kernels layer, choosing an ISA level per
 * operation at run time (kernels.h, "ISA levels"). docs/BACKEND.md lists
 * the table's operations, which layer kinds call them, and how a backend
 * is added.
 *
 * Activations and results are rows of f32 (n_tok rows of n values, ld
 * apart) in memory the backend allocates (rows_alloc: host memory on the
 * CPU backend) and callers move in and out with upload / download. The
 * small inputs an operation takes beside its rows (a norm's weight, a
 * bias, a gather map) are host memory: a device backend copies them. */
#ifndef CV_BACKEND_H
#define CV_BACKEND_H

#include "base/base.h"
#include "kernels/attention.h" /* kv_pool: the K/V cache layout attn_rows stores into */

/* Version of the table below: raised whenever an operation is added,
 * removed or changes meaning. */
#define CV_BACKEND_ABI 11

typedef struct cv_backend cv_backend;
typedef struct cv_bstream cv_bstream;
typedef struct cv_experts_ws cv_experts_ws;
typedef struct cv_dn_ws cv_dn_ws;
typedef struct cv_att_ws cv_att_ws;
typedef struct cv_mla_ws cv_mla_ws;

/* A gated activation act(g) * u (the row operation glu). */
typedef enum cv_bglu {
    CV_BGLU_SILU,         /* SwiGLU: silu(g) * u */
    CV_BGLU_GELU_TANH,    /* GeGLU with the tanh GELU */
    CV_BGLU_SILU_CLAMPED, /* gpt-oss: min(g, limit) sigmoid(alpha min(g, limit)) (clamp(u, +-limit) + 1) */
} cv_bglu;

typedef struct cv_bact {
    cv_bglu kind;
    float alpha, limit; /* CV_BGLU_SILU_CLAMPED's slope and clamp */
} cv_bact;

/* The attention mixer's pass between its projections and attention
 * (attn_rows), per row t, in this order: V = K where v_from_k (V as
 * projected is then not read); where gated, the gates out of q (the
 * projection gives each head's query then its gate: the gates go to
 * `gate`, the queries close up to the row's first n_head head_dim values);
 * the biases; each head's RMSNorm of q and of k with their weights and,
 * where v_norm and store_kv, of V without one; RoPE of q at pos[t]; the
 * query temperature; and where store_kv, RoPE of k and each kv head's K
 * and V stored at position pos[t] % CV_KV_BLOCK of block kv_block[t] of
 * layer kv_layer in kv (kernels/attention.h's layout and conversion,
 * kv_store). Rows are independent: no two rows may name the same place
 * in the cache.
 *
 * qkv, gate and the cache's blocks (kv->data) are the backend's memory;
 * the biases, norm weights, RoPE frequency factors, pos and kv_block are
 * host memory, as every operation's small inputs. */
typedef struct cv_batt_rows {
    int32_t n_rows;
    float *qkv;                            /* [n_rows][ld_qkv]: q (2 n_head head_dim values where gated), k, v */
    int64_t ld_qkv;
    float *gate;                           /* [n_rows][ld_gate] where gated: head h's gate at h head_dim */
    int64_t ld_gate;
    int32_t n_head, n_head_kv, head_dim;
    bool gated, v_from_k, v_norm;
    bool store_kv;                         /* false: the layer attends over an earlier layer's cache */
    const float *q_bias;                   /* [n_head head_dim] or NULL */
    const float *k_bias, *v_bias;          /* [n_head_kv head_dim] or NULL */
    const float *q_norm, *k_norm;          /* [head_dim] or NULL */
    float eps;
    const cv_rope_params *rope;
    const int32_t *pos;                    /* [n_rows] each row's position */
    float temp_scale;                      /* > 0: q times log(floor(pos / temp_len) + 1) temp_scale + 1
                                              after RoPE, in f32 (mistral3); 0: none */
    int32_t temp_len;
    const kv_pool *kv;                     /* where store_kv: the cache (its head_dim and n_head_kv those above) */
    int32_t kv_layer;                      /* the layer's index among the pool's layers */
    const int32_t *kv_block;               /* [n_rows] where store_kv: each row's block */
} cv_batt_rows;

/* How a router's logits choose and weigh experts (moe_route). */
typedef enum cv_broute {
    CV_BROUTE_SOFTMAX_TOPK, /* a softmax over every expert, the k best */
    CV_BROUTE_TOPK_SOFTMAX, /* the k largest logits, weighted by a softmax over those k alone (gpt-oss) */
    CV_BROUTE_SIGMOID_TOPK, /* the sigmoid of every logit, the k best (DeepSeek-V3) */
} cv_broute;

/* The MoE router's pass (moe_route), per row t of n_expert logits: the
 * router's bias added; then with TOPK_SOFTMAX the k largest logits,
 * weighted by a softmax over those k; otherwise every expert's
 * probability (a softmax, or each logit's sigmoid), the k best by
 * selection score (the probability plus sel_bias, and with groups only
 * within the n_group_used of n_group groups of consecutive experts whose
 * two best scores sum highest), weighted by their probabilities,
 * renormalised to sum 1 where norm (the sum bounded below by 2^-14, as
 * llama.cpp does), times scale; and each weight times its expert's
 * exp_scale. The k best are by descending value, ties to the lower index.
 * Route r = t k + j is row t's j-th choice: expert[r], weight[r], and
 * src[r] = t (what matmul_experts takes).
 *
 * logits and the three route arrays are the backend's memory (the logits
 * are overwritten: scratch after the call); bias, sel_bias and exp_scale
 * are host memory. */
typedef struct cv_bmoe_route {
    int32_t n_rows, n_expert, k;      /* 1 <= k <= n_expert <= CV_MAX_EXPERTS, k <= CV_MAX_EXPERTS_USED */
    float *logits;                    /* [n_rows][ld_logits] */
    int64_t ld_logits;
    cv_broute kind;
    const float *bias;                /* [n_expert] or NULL: the router's bias */
    const float *sel_bias;            /* [n_expert] or NULL: added for the choice only */
    int32_t n_group, n_group_used;    /* n_group <= 1: no groups; else n_group divides n_expert */
    bool norm;
    float scale;
    const float *exp_scale;           /* [n_expert] or NULL */
    int32_t *expert, *src;            /* [n_rows k] */
    float *weight;                    /* [n_rows k] */
} cv_bmoe_route;

/* The MoE layer's rows around its expert matmuls, over moe_route's
 * routes (route r = t k + j: row t's j-th choice, expert[r], weight[r]):
 *   moe_glu, per route r: its expert's gate and up biases (where the
 *     layer has them) added to gu[r]'s halves (the gate's n_ff values, then
 *     the up's), then h[r] = act(gate) * up;
 *   moe_sum, per row t: out[t] = the sum over j, in order of choice, of
 *     weight[r] (y[r] + its expert's down bias; the bias is added into y[r]),
 *     RMSNorm'd with post_norm where there is one (the routed sum's
 *     post-norm, gemma4); then, where the layer has a shared expert
 *     (shared: its output row of n values per row t), that row RMSNorm'd
 *     with sh_post_norm where there is one and added to out[t], times
 *     sigmoid(sh_gate . x[t]) where there is a gate (qwen35moe), as it is
 *     otherwise.
 * Each op reads only its own fields. gu, h, y, out, shared, x, expert and
 * weight are the backend's memory; the biases, norm weights and the gate
 * row are host memory. */
typedef struct cv_bmoe_rows {
    int32_t n_rows, k;                 /* rows (tokens), routes a row */
    int32_t n_expert;                  /* the rows of the bias tables */
    const int32_t *expert;             /* [n_rows k] */
    const float *weight;               /* [n_rows k] */
    /* moe_glu */
    const cv_bact *act;
    int64_t n_ff;                      /* an expert's hidden width */
    float *gu;                         /* [n_rows k][ld_gu]: gate (n_ff) | up (n_ff) */
    int64_t ld_gu;
    const float *gate_bias, *up_bias;  /* [n_expert][n_ff] or NULL */
    float *h;                          /* [n_rows k][ld_h] */
    int64_t ld_h;
    /* moe_sum */
    int64_t n;                         /* values of an output row (n_embd) */
    float *y;                          /* [n_rows k][ldy] each route's expert output */
    int64_t ldy;
    const float *down_bias;            /* [n_expert][n] or NULL */
    const float *post_norm;            /* [n] or NULL */
    float eps;
    float *shared;                     /* [n_rows][ld_shared] or NULL: no shared expert */
    int64_t ld_shared;
    const float *sh_post_norm;         /* [n] or NULL */
    const float *sh_gate;              /* [n] or NULL */
    const float *x;                    /* [n_rows][ldx] where sh_gate: what the gate reads */
    int64_t ldx;
    float *out;                        /* [n_rows][ld_out] */
    int64_t ld_out;
} cv_bmoe_rows;

/* The Gated DeltaNet mixer's pass between its projections and its output
 * projection (deltanet), over one forward call's rows grouped by sequence:
 * sequence i's rows are rows[begin[i] .. begin[i + 1]) in position order,
 * from its length before the call, p0[i]; row t is of sequence row_seq[t]
 * at position pos[t]. With C = 2 H_k d + H_v d conv channels and inner =
 * H_v d, row t of `in` holds the conv's input (C values), z (inner), beta
 * (H_v) and alpha (H_v). In order:
 *   per row: the causal conv (K taps, conv [C][K]) over its sequence's K
 *     inputs up to its own (rows of this call, else the sequence's conv
 *     state), SiLU, each key head's q and k L2-normalised (eps bounds the
 *     norm below) and q also / sqrt(d); beta becomes sigmoid(beta) and
 *     alpha g = softplus(alpha + dt_bias) a, in place in `in`;
 *   per sequence: its conv state becomes the inputs of its last K - 1
 *     positions;
 *   per sequence and value head j (reading key head j / (H_v / H_k) where
 *     grouped, j mod H_k otherwise): the recurrence over the sequence's rows
 *     in order (kernels/deltanet.h) through its state S_j, in chunks of
 *     positions aligned to CV_DN_CHUNK, a piece of at most step_run tokens
 *     token by token (the step form), a longer one by the chunked form;
 *   per row and value head: out = rmsnorm(o_j; norm, eps) * silu(z_j).
 * A sequence's state (state[i]) is its conv part [K - 1][C], oldest input
 * first, then the heads' S [H_v][d][d]; zero for an empty sequence. in, out
 * and the states are the backend's memory; the layer's vectors and the
 * plan's arrays host memory. */
typedef struct cv_bdeltanet {
    int32_t n_rows;
    float *in;                   /* [n_rows][ld_in] */
    int64_t ld_in;
    float *out;                  /* [n_rows][ld_out]: inner values */
    int64_t ld_out;
    int32_t H_k, H_v, d, K;      /* K <= CV_MAX_SSM_CONV */
    bool grouped;
    const float *conv;           /* [C][K] */
    const float *dt_bias, *a;    /* [H_v] */
    const float *norm;           /* [d] */
    float eps;
    int32_t step_run;
    int32_t n_seqs;
    const int32_t *rows;         /* [n_rows] */
    const int32_t *begin;        /* [n_seqs + 1] */
    const int32_t *p0;           /* [n_seqs] */
    float *const *state;         /* [n_seqs] */
    const int32_t *row_seq;      /* [n_rows] */
    const int32_t *pos;          /* [n_rows] */
} cv_bdeltanet;

/* Attention over the paged KV cache (attention) for one layer of a forward
 * call, by a plan the caller makes once per call and passes as data: the
 * call's rows grouped by sequence (rows: batch rows, each sequence's in
 * position order) and cut into tiles of up to a tile's tokens of one
 * sequence; work items over tiles x kv heads, longest first; and the
 * pairs cut into chunks. An item is tile `tile` against kv head g over its
 * whole context (chunk -1), or chunk `chunk` of it (CV_ATT_CHUNK_BLOCKS
 * blocks, counted from position 0) whose state goes to the workspace's
 * slot `slot`; a split pair's n_chunks states, slots slot0.., are merged
 * in order into its output once every item has run. Either way a row gets
 * the same bits (kernels/attention.h, cv_att_tile_run).
 *
 * Tile t holds rows rows[first .. first + n_tok), positions pos0.. of
 * sequence seq, whose blocks in kv are tables[seq]. Query head h of kv
 * head g reads q at (g n_rep + h) hd of its row and writes hd_v values at
 * (g n_rep + h) hd_v of out. With a window W > 0 a position sees only the
 * W last; with sinks, query head h's softmax has one more logit sinks[h].
 * A latent workspace (cv_att_ws_shape.latent: multi-head latent attention)
 * reads a latent pool, one kv head whose first hd_v dims are the value.
 *
 * q, out and the cache's blocks are the backend's memory; the plan, rows,
 * tables and sinks are host memory. */
typedef struct cv_batt_tile {
    int32_t seq, first, n_tok, pos0;
} cv_batt_tile;

typedef struct cv_batt_item {
    int32_t tile, g, chunk, slot;
} cv_batt_item;

typedef struct cv_batt_split {
    int32_t tile, g, slot0, n_chunks;
} cv_batt_split;

typedef struct cv_batt {
    const kv_pool *kv;
    int32_t kv_layer;                   /* the layer's index among the pool's layers */
    const int32_t *const *tables;       /* [seq] each sequence's block table */
    const cv_batt_tile *tiles;
    const int32_t *rows;
    const cv_batt_item *items;
    int32_t n_items;
    const cv_batt_split *split;
    int32_t n_split;                    /* their slots within the workspace's n_slots */
    const float *q;                     /* [rows][ld_q] */
    int64_t ld_q;
    float *out;                         /* [rows][ld_out] */
    int64_t ld_out;
    int32_t n_rep, hd, hd_v;            /* rows of a tile: n_tok n_rep <= the workspace's max_rows */
    float scale;
    int32_t window;                     /* 0: every earlier position */
    const float *sinks;                 /* [n_rep x kv heads] or NULL */
} cv_batt;

/* What an attention workspace serves: tiles of up to max_rows query rows
 * over heads of up to max_hd dims (values max_hd_v), every head size a
 * multiple of hd_div (the CPU backend runs one tile for all of them), and
 * n_slots chunk states; K/V pools, or latent ones. */
typedef struct cv_att_ws_shape {
    bool latent;
    int32_t max_rows, max_hd, max_hd_v, hd_div;
    int32_t n_slots;
} cv_att_ws_shape;

/* Multi-head latent attention's pass between its projections and
 * attention (mla_rows), per row t at position pos[t], with D = C + rot:
 * the latent row's first C values RMSNorm'd with kv_norm, its last rot
 * (k_pe) RoPE'd; per head h, q_pe (the rot values after the nope ones of
 * the head's k_mla in q) RoPE'd in place and copied to the last rot values
 * of the head's absorbed query (h D + C in qa, whose first C values the
 * up-projection writes); and the latent row stored at position
 * pos[t] % CV_KV_BLOCK of block kv_block[t] of layer kv_layer in the
 * latent pool kv (kernels/mla.h's cv_mla_store). Rows are independent: no
 * two rows may name the same place in the cache. latent, q, qa and the
 * cache's blocks are the backend's memory; kv_norm, the RoPE factors, pos
 * and kv_block host memory. */
typedef struct cv_bmla_rows {
    int32_t n_rows;
    float *latent;                /* [n_rows][ld_latent]: c (C) | k_pe (rot) */
    int64_t ld_latent;
    float *q;                     /* [n_rows][ld_q]: head h's q_nope | q_pe at h k_mla */
    int64_t ld_q;
    float *qa;                    /* [n_rows][ld_qa]: head h's absorbed query at h (C + rot) */
    int64_t ld_qa;
    int32_t n_head, C, rot, k_mla;
    const float *kv_norm;         /* [C] */
    float eps;
    const cv_rope_params *rope;
    const int32_t *pos;           /* [n_rows] */
    const kv_pool *kv;            /* the latent pool (its head_dim C + rot) */
    int32_t kv_layer;
    const int32_t *kv_block;      /* [n_rows] */
} cv_bmla_rows;

/* The latent attention's decompressed form (mla_dec): the n_q queries of
 * one sequence at positions pos0.. (rows rows[0..n_q) of q: head h's
 * q_nope | q_pe at h (nope + rot)) attend, every head on its own, to the
 * chunk of the context's positions base..base + n_ctx - 1, decompressed
 * by the caller: position base + j's key for head h is kd's row j at h
 * nope (W_UK c) with pe's row j (k_pe, rot), its value vd's row j at h v.
 * A query sees the positions up to its own. The chunk at base 0 starts
 * each head's online softmax from its queries; chunks follow in order of
 * position (multiples of CV_MLA_PIECE apart from 0), each in pieces of
 * CV_MLA_PIECE positions (kernels/mla.h); the chunk that ends at the last
 * query's position writes head h's output (v values) to out at h v of each
 * query's row. The state between chunks is the workspace's. q, kd, pe, vd
 * and out are the backend's memory, rows host memory. */
typedef struct cv_bmla_dec {
    int32_t n_head, nope, rot, v;
    int32_t n_q, pos0;
    const int32_t *rows;          /* [n_q] */
    float scale;
    const float *q;
    int64_t ld_q;
    int32_t base, n_ctx;
    const float *kd, *pe, *vd;
    int64_t ld_kd, ld_pe, ld_vd;
    float *out;
    int64_t ld_out;
} cv_bmla_dec;

/* A weight matrix W [n_out][n_in] of GGUF type `type`, prepared by a
 * backend (a backend allocates a larger struct that starts with this one).
 * Immutable after creation: any number of streams may read it. */
typedef struct cv_bmat {
    uint32_t type;
    int64_t n_in, n_out;
    size_t bytes;    /* GGUF bytes of W: what one full matmul reads */
    bool owns_data;  /* prepared into the backend's own memory: the bytes it was made from may go */
} cv_bmat;

typedef struct cv_backend_ops {
    uint32_t abi;     /* CV_BACKEND_ABI */
    const char *name; /* "cpu" */

    /* ---- weights ---- */
    /* Prepares W from n_bytes of `type` rows at data (any alignment;
     * n_bytes must be n_out rows). The backend may read data in place for
     * the matrix's lifetime unless it reports owns_data. CV_EUNSUPPORTED
     * for a type it cannot multiply, CV_EINVAL / CV_ELIMIT for a shape. */
    int (*mat_create)(cv_backend *be, uint32_t type, int64_t n_in, int64_t n_out, const void *data, size_t n_bytes,
                      cv_bmat **out, cv_err *err);
    void (*mat_destroy)(cv_backend *be, cv_bmat *m);
    /* How a matmul with m runs, in words (corvid doctor). */
    const char *(*mat_path)(const cv_bmat *m);

    /* ---- streams ---- */
    /* A stream of up to n_threads compute threads (<= 0: every CPU); a
     * device backend may ignore the count. */
    int (*stream_create)(cv_backend *be, int32_t n_threads, cv_bstream **out, cv_err *err);
    void (*stream_destroy)(cv_bstream *s);
    /* Host threads the stream computes with (1 for a device's). */
    int (*stream_threads)(const cv_bstream *s);
    /* Operations from now on compute with at most n of the stream's
     * threads (clamped to 1..created), with the same results: the streams
     * of several engines in one process share the machine's cores this way
     * (sched.h, cv_sched_share). A device's stream may ignore it. Called
     * between operations, from the thread that issues them. */
    void (*stream_set_threads)(cv_bstream *s, int32_t n);
    /* Returns once everything issued to s has finished. */
    void (*sync)(cv_bstream *s);
    /* s will multiply the n_mats matrices (matmul, matmul_experts) with
     * up to max_tok rows a call: the backend sets up the scratch that takes
     * now (the CPU's quantized activation rows, committed; a device's
     * activation buffer), so that a model's first request does not pay for
     * fresh memory (docs/PERF.md, "Several models in one server"). Larger
     * calls and other matrices still work, growing the scratch. */
    void (*stream_reserve)(cv_bstream *s, const cv_bmat *const *mats, int32_t n_mats, int64_t max_tok);

    /* ---- matrix products ---- */
    /* Y[t][o] = sum_i W[o][i] X[t][i] for t < n_tok (kernels.h,
     * cv_matmul_strided: the same bits, rows ldx / ldy apart). */
    void (*matmul)(cv_bstream *s, const cv_bmat *w, int64_t n_tok, const float *x, int64_t ldx, float *y,
                   int64_t ldy);
    /* A workspace for matmul_experts sized as kernels.h's cv_mm_ws_create
     * says; one call at a time per workspace. */
    cv_experts_ws *(*experts_ws_create)(cv_bstream *s, int64_t max_rows, int64_t max_n_in, int64_t max_n_out,
                                        int32_t n_expert);
    void (*experts_ws_destroy)(cv_bstream *s, cv_experts_ws *ws);
    /* Y[r] = W[expert[r]] X[src[r]] for each route r (kernels.h,
     * cv_matmul_experts: the same contract and bits; w[e] may be NULL for
     * an expert no route names). */
    void (*matmul_experts)(cv_bstream *s, const cv_bmat *const *w, int32_t n_expert, int64_t n_x, const float *x,
                           int64_t ldx, int64_t n_rows, const int32_t *expert, const int32_t *src, float *y,
                           int64_t ldy, cv_experts_ws *ws);

    /* ---- activation memory ---- */
    /* n_bytes the backend's operations address, aligned for its widest
     * loads; NULL when the backend is out of memory. */
    void *(*rows_alloc)(cv_backend *be, size_t n_bytes);
    void (*rows_free)(cv_backend *be, void *p);
    /* Host memory into the backend's, in stream order (src may be reused
     * once the call returns). */
    void (*upload)(cv_bstream *s, void *dst, const void *src, size_t n_bytes);
    /* The backend's memory into the host's, after everything issued
     * before it: returns with dst written. */
    void (*download)(cv_bstream *s, void *dst, const void *src, size_t n_bytes);

    /* ---- row operations (n_rows rows of n values; y may be x) ---- */
    /* y[t] = RMSNorm(x[gather[t]]) * w (gather NULL: row t; w NULL: no
     * weight), kernels.h's cv_rmsnorm per row. */
    void (*rmsnorm)(cv_bstream *s, int32_t n_rows, int64_t n, const float *x, int64_t ldx, const int32_t *gather,
                    const float *w, float eps, float *y, int64_t ldy);
    /* y[t] = a[t] + b[t]; ldb 0 adds the one row b to every row (a bias). */
    void (*add)(cv_bstream *s, int32_t n_rows, int64_t n, float *y, int64_t ldy, const float *a, int64_t lda,
                const float *b, int64_t ldb);
    /* x[t] *= f */
    void (*scale)(cv_bstream *s, int32_t n_rows, int64_t n, float *x, int64_t ldx, float f);
    /* y[t] = act(g[t]) * u[t] */
    void (*glu)(cv_bstream *s, const cv_bact *act, int32_t n_rows, int64_t n, float *y, int64_t ldy, const float *g,
                int64_t ldg, const float *u, int64_t ldu);
    /* y[t] = x[t] * sigmoid(g[t]) */
    void (*sigmoid_mul)(cv_bstream *s, int32_t n_rows, int64_t n, float *y, int64_t ldy, const float *x, int64_t ldx,
                        const float *g, int64_t ldg);
    /* x[t] = cap tanh(x[t] / cap) (logit soft-capping) */
    void (*softcap)(cv_bstream *s, int32_t n_rows, int64_t n, float *x, int64_t ldx, float cap);

    /* ---- layer passes ---- */
    /* The attention mixer's rows from its projections to attention, the
     * K/V cache write included (cv_batt_rows above). */
    void (*attn_rows)(cv_bstream *s, const cv_batt_rows *a);
    /* The MoE router's choice of experts and their weights (cv_bmoe_route
     * above). */
    void (*moe_route)(cv_bstream *s, const cv_bmoe_route *r);
    /* The MoE layer's per-route biases and activation between its expert
     * matmuls, and the weighted sum of each row's experts after them, with
     * the shared expert (cv_bmoe_rows above). */
    void (*moe_glu)(cv_bstream *s, const cv_bmoe_rows *m);
    void (*moe_sum)(cv_bstream *s, const cv_bmoe_rows *m);
    /* A workspace for deltanet calls of up to max_rows rows of a layer of
     * those head counts and size (NULL: no memory); one call at a time. */
    cv_dn_ws *(*deltanet_ws_create)(cv_bstream *s, int64_t max_rows, int32_t H_k, int32_t H_v, int32_t d);
    void (*deltanet_ws_destroy)(cv_bstream *s, cv_dn_ws *ws);
    /* The Gated DeltaNet mixer's conv, recurrence and gated norm
     * (cv_bdeltanet above). */
    void (*deltanet)(cv_bstream *s, const cv_bdeltanet *a, cv_dn_ws *ws);
    /* A workspace for attention calls of that shape (NULL: no memory or
     * no kernels); one call at a time. */
    cv_att_ws *(*attention_ws_create)(cv_bstream *s, const cv_att_ws_shape *shape);
    void (*attention_ws_destroy)(cv_bstream *s, cv_att_ws *ws);
    /* One layer's attention over the paged cache by the call's plan
     * (cv_batt above). */
    void (*attention)(cv_bstream *s, const cv_batt *a, cv_att_ws *ws);
    /* The latent attention kind's rows from its projections to attention,
     * the latent cache write included (cv_bmla_rows above). */
    void (*mla_rows)(cv_bstream *s, const cv_bmla_rows *a);
    /* The latent rows positions base..base + n - 1 (base a multiple of
     * CV_KV_BLOCK) of a sequence hold in a latent pool's layer, as f32 in y
     * [n][head_dim] (the sequence's blocks are table's, host memory): what
     * the decompressed form multiplies. */
    void (*mla_latent)(cv_bstream *s, const kv_pool *kv, int32_t layer, const int32_t *table, int32_t base,
                       int32_t n, float *y);
    /* A workspace for mla_dec calls of up to max_q queries of heads of
     * those sizes (NULL: no memory or no kernels); one run at a time. */
    cv_mla_ws *(*mla_ws_create)(cv_bstream *s, int32_t max_q, int32_t n_head, int32_t nope, int32_t rot,
                                int32_t v);
    void (*mla_ws_destroy)(cv_bstream *s, cv_mla_ws *ws);
    /* The decompressed form's attention over one chunk (cv_bmla_dec above). */
    void (*mla_dec)(cv_bstream *s, const cv_bmla_dec *a, cv_mla_ws *ws);
    /* y[t] = row tokens[t] (< n_vocab) of a table of n_vocab rows of n
     * values of GGUF type `type`, dequantized (kernels.h,
     * cv_dequantize_row), times scale (1: as it is). The table and tokens
     * are host memory: a model keeps its token embedding in RAM, and a
     * device backend copies in the rows a call names. */
    void (*embed_rows)(cv_bstream *s, uint32_t type, int64_t n, const void *table, int64_t n_vocab, int32_t n_rows,
                       const int32_t *tokens, float scale, float *y, int64_t ldy);
} cv_backend_ops;

struct cv_backend {
    const cv_backend_ops *ops;
};

struct cv_bstream {
    cv_backend *be;
};

/* The process's CPU backend (created on first use, never freed). */
cv_backend *cv_backend_cpu(void);
/* A backend by name: "cpu" (the one above). CV_EUNSUPPORTED names what is
 * missing for another. */
int cv_backend_open(const char *name, cv_backend **out, cv_err *err);
const char *cv_backend_name(const cv_backend *be);

/* ---- the table, called ---- */

static inline int cv_bmat_create(cv_backend *be, uint32_t type, int64_t n_in, int64_t n_out, const void *data,
                                 size_t n_bytes, cv_bmat **out, cv_err *err)
{
    return be->ops->mat_create(be, type, n_in, n_out, data, n_bytes, out, err);
}
static inline void cv_bmat_destroy(cv_backend *be, cv_bmat *m)
{
    if (m)
        be->ops->mat_destroy(be, m);
}
static inline int cv_bstream_create(cv_backend *be, int32_t n_threads, cv_bstream **out, cv_err *err)
{
    return be->ops->stream_create(be, n_threads, out, err);
}
static inline void cv_bstream_destroy(cv_bstream *s)
{
    if (s)
        s->be->ops->stream_destroy(s);
}
static inline int cv_bstream_threads(const cv_bstream *s) { return s->be->ops->stream_threads(s); }
static inline void cv_bstream_set_threads(cv_bstream *s, int32_t n) { s->be->ops->stream_set_threads(s, n); }
static inline void cv_bstream_sync(cv_bstream *s) { s->be->ops->sync(s); }
static inline void cv_bstream_reserve(cv_bstream *s, const cv_bmat *const *mats, int32_t n_mats, int64_t max_tok)
{
    s->be->ops->stream_reserve(s, mats, n_mats, max_tok);
}
static inline void cv_be_matmul(cv_bstream *s, const cv_bmat *w, int64_t n_tok, const float *x, int64_t ldx, float *y,
                                int64_t ldy)
{
    s->be->ops->matmul(s, w, n_tok, x, ldx, y, ldy);
}
static inline cv_experts_ws *cv_be_experts_ws_create(cv_bstream *s, int64_t max_rows, int64_t max_n_in,
                                                     int64_t max_n_out, int32_t n_expert)
{
    return s->be->ops->experts_ws_create(s, max_rows, max_n_in, max_n_out, n_expert);
}
static inline void cv_be_experts_ws_destroy(cv_bstream *s, cv_experts_ws *ws)
{
    if (ws)
        s->be->ops->experts_ws_destroy(s, ws);
}
static inline void cv_be_matmul_experts(cv_bstream *s, const cv_bmat *const *w, int32_t n_expert, int64_t n_x,
                                        const float *x, int64_t ldx, int64_t n_rows, const int32_t *expert,
                                        const int32_t *src, float *y, int64_t ldy, cv_experts_ws *ws)
{
    s->be->ops->matmul_experts(s, w, n_expert, n_x, x, ldx, n_rows, expert, src, y, ldy, ws);
}

static inline void *cv_be_rows_alloc(cv_backend *be, size_t n_bytes) { return be->ops->rows_alloc(be, n_bytes); }
static inline void cv_be_rows_free(cv_backend *be, void *p)
{
    if (p)
        be->ops->rows_free(be, p);
}
static inline void cv_be_upload(cv_bstream *s, void *dst, const void *src, size_t n_bytes)
{
    s->be->ops->upload(s, dst, src, n_bytes);
}
static inline void cv_be_download(cv_bstream *s, void *dst, const void *src, size_t n_bytes)
{
    s->be->ops->download(s, dst, src, n_bytes);
}
static inline void cv_be_rmsnorm(cv_bstream *s, int32_t n_rows, int64_t n, const float *x, int64_t ldx,
                                 const int32_t *gather, const float *w, float eps, float *y, int64_t ldy)
{
    s->be->ops->rmsnorm(s, n_rows, n, x, ldx, gather, w, eps, y, ldy);
}
static inline void cv_be_add(cv_bstream *s, int32_t n_rows, int64_t n, float *y, int64_t ldy, const float *a,
                             int64_t lda, const float *b, int64_t ldb)
{
    s->be->ops->add(s, n_rows, n, y, ldy, a, lda, b, ldb);
}
static inline void cv_be_scale(cv_bstream *s, int32_t n_rows, int64_t n, float *x, int64_t ldx, float f)
{
    s->be->ops->scale(s, n_rows, n, x, ldx, f);
}
static inline void cv_be_glu(cv_bstream *s, const cv_bact *act, int32_t n_rows, int64_t n, float *y, int64_t ldy,
                             const float *g, int64_t ldg, const float *u, int64_t ldu)
{
    s->be->ops->glu(s, act, n_rows, n, y, ldy, g, ldg, u, ldu);
}
static inline void cv_be_sigmoid_mul(cv_bstream *s, int32_t n_rows, int64_t n, float *y, int64_t ldy, const float *x,
                                     int64_t ldx, const float *g, int64_t ldg)
{
    s->be->ops->sigmoid_mul(s, n_rows, n, y, ldy, x, ldx, g, ldg);
}
static inline void cv_be_softcap(cv_bstream *s, int32_t n_rows, int64_t n, float *x, int64_t ldx, float cap)
{
    s->be->ops->softcap(s, n_rows, n, x, ldx, cap);
}
static inline void cv_be_attn_rows(cv_bstream *s, const cv_batt_rows *a) { s->be->ops->attn_rows(s, a); }
static inline void cv_be_moe_route(cv_bstream *s, const cv_bmoe_route *r) { s->be->ops->moe_route(s, r); }
static inline void cv_be_moe_glu(cv_bstream *s, const cv_bmoe_rows *m) { s->be->ops->moe_glu(s, m); }
static inline void cv_be_moe_sum(cv_bstream *s, const cv_bmoe_rows *m) { s->be->ops->moe_sum(s, m); }
static inline cv_dn_ws *cv_be_deltanet_ws_create(cv_bstream *s, int64_t max_rows, int32_t H_k, int32_t H_v,
                                                  int32_t d)
{
    return s->be->ops->deltanet_ws_create(s, max_rows, H_k, H_v, d);
}
static inline void cv_be_deltanet_ws_destroy(cv_bstream *s, cv_dn_ws *ws)
{
    if (ws)
        s->be->ops->deltanet_ws_destroy(s, ws);
}
static inline void cv_be_deltanet(cv_bstream *s, const cv_bdeltanet *a, cv_dn_ws *ws)
{
    s->be->ops->deltanet(s, a, ws);
}
static inline cv_att_ws *cv_be_attention_ws_create(cv_bstream *s, const cv_att_ws_shape *shape)
{
    return s->be->ops->attention_ws_create(s, shape);
}
static inline void cv_be_attention_ws_destroy(cv_bstream *s, cv_att_ws *ws)
{
    if (ws)
        s->be->ops->attention_ws_destroy(s, ws);
}
static inline void cv_be_attention(cv_bstream *s, const cv_batt *a, cv_att_ws *ws)
{
    s->be->ops->attention(s, a, ws);
}
static inline void cv_be_mla_rows(cv_bstream *s, const cv_bmla_rows *a) { s->be->ops->mla_rows(s, a); }
static inline void cv_be_mla_latent(cv_bstream *s, const kv_pool *kv, int32_t layer, const int32_t *table,
                                    int32_t base, int32_t n, float *y)
{
    s->be->ops->mla_latent(s, kv, layer, table, base, n, y);
}
static inline cv_mla_ws *cv_be_mla_ws_create(cv_bstream *s, int32_t max_q, int32_t n_head, int32_t nope,
                                             int32_t rot, int32_t v)
{
    return s->be->ops->mla_ws_create(s, max_q, n_head, nope, rot, v);
}
static inline void cv_be_mla_ws_destroy(cv_bstream *s, cv_mla_ws *ws)
{
    if (ws)
        s->be->ops->mla_ws_destroy(s, ws);
}
static inline void cv_be_mla_dec(cv_bstream *s, const cv_bmla_dec *a, cv_mla_ws *ws) { s->be->ops->mla_dec(s, a, ws); }
static inline void cv_be_embed_rows(cv_bstream *s, uint32_t type, int64_t n, const void *table, int64_t n_vocab,
                                    int32_t n_rows, const int32_t *tokens, float scale, float *y, int64_t ldy)
{
    s->be->ops->embed_rows(s, type, n, table, n_vocab, n_rows, tokens, scale, y, ldy);
}

/* The CPU stream's thread pool, for corvid bench's attention probe (a
 * benchmark of the CPU's tiles, engine/attention_bench.c; nothing in the
 * forward pass uses it); NULL for a stream of another backend. */
cv_pool *cv_bstream_cpu_pool(cv_bstream *s);

#endif
