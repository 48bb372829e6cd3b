/* mix_mla.c — multi-head latent attention (CV_MIXER_MLA), deepseek2's mixer
 * (DeepSeek-V2/V3, Kimi-K2, GLM-4.7-Flash; arch_deepseek2.c). A position
 * keeps one latent row in the layer's KV cache instead of per-head keys and
 * values, and every head attends over those rows:
 *
 *   q   = W_q_b rmsnorm(W_q_a a)   (or W_q a)      [H][nope | rope]
 *   row = [c, k_pe]:  c = rmsnorm((W_kv_a a)[0:C]),  k_pe = RoPE((W_kv_a a)[C:C+r])
 *   q_abs_h = [k_b_h q_nope_h, RoPE(q_pe_h)]                     [H][D], D = C + r
 *   s_hj = scale (q_abs_h . row_j)                    softmax over j <= i
 *   o_h  = v_b_h (sum_j p_hj c_j)                                [H][v_mla]
 *   out  = W_o concat(o_h)
 *
 * k_b_h (attn_k_b) is head h's key up-projection transposed, so
 * q_nope_h . (W_UK_h c) = (k_b_h q_nope_h) . c: the up-projections are
 * "absorbed" into the query and the output, and attention runs in the
 * latent space, reading D floats a position for all H heads (an MQA of H
 * query heads over one D-wide KV head whose value is the key's first C
 * dims). That is what makes the cache small (576 values a position and
 * layer for DeepSeek-V3's 128 heads, which per-head K/V would store as
 * 128 x 320).
 *
 * Prefill has a second form: decompress the context into each head's keys
 * [W_UK_h c_j, k_pe_j] and values W_UV_h c_j and attend with head size
 * nope + r and value v_mla. It pays H (nope + v_mla) C multiply-adds per
 * context position and call, but per pair of positions H (nope + r +
 * v_mla) instead of H (D + C), and none of the absorbed form's per-token
 * up-projections (k_b into the query, v_b out of it): with many query
 * tokens in one call it is the faster one (docs/PERF.md, "Latent attention
 * in prefill, both forms"). A call's tokens take it where they fill whole
 * groups of CV_MLA_GROUP positions of their sequence (engine_int.h); the
 * rest, and every decode step, take the absorbed form. The two forms round
 * differently, so a sequence's bits depend on how its positions were split
 * into calls, but only off that grid: the engine says so (split_align,
 * step_run), the scheduler cuts prefill chunks on it, and its prefix cache
 * keeps only prompts' whole groups. That costs an agent's replies their
 * place in the cache, so the form is the engine's choice
 * (cv_engine_params.mla_decompress), off unless asked for.
 *
 * The latent cache is a KV pool of one part (kernels/attention.h, "a
 * latent pool"): a block's rows position by position, f32, f16, or q8_0
 * with a factor per 32 dims (per row when D is not a multiple of 32); both
 * forms read it, neither keeps anything per head past a call. The absorbed
 * attention is the engine's plan (attention.c: tiles of a sequence's
 * tokens, chunks of CV_ATT_CHUNK_BLOCKS blocks merged in order, deep
 * contexts cut across threads), run by the backend's attention with a
 * latent workspace, whose tile (kernels/mla.h) takes per block of 16
 * positions, the rows as f32, the scores of every query row by one small
 * GEMM (rows x transposed queries), an online softmax per query row, and
 * the values by a second (probabilities x rows' first C dims), both through
 * the Gated DeltaNet kind's GEMM kernels (scalar, AVX2, AVX-512). The
 * decompressed form is one work item per (sequence, head): the head's
 * up-projections as f32 (dequantized from the file once a call), then per
 * piece of 64 positions from position 0 the piece's keys and values by two
 * GEMMs, the scores of every query that sees the piece by a third, an
 * online softmax, the values by a fourth. In both, every element of every
 * product sums its terms in one order whatever else the tile or the call
 * holds, so a token's bits are the same alone or batched, and chunked on
 * the grid. The absorbed form's up-projections of all heads run as one
 * expert-routed matmul each (a route per token and head), so each head's
 * matrix is read once a call. */
#include <math.h>
#include <stdlib.h>

#include "engine/engine_int.h"

/* This call's tokens of one sequence that take the decompressed form:
 * batch rows att_rows[first..first + n_q), positions pos0.. */
typedef struct mla_run {
    int32_t seq, first, n_q, pos0;
} mla_run;

struct mla_scratch {
    int32_t H, C, D, rot, nope, k_mla, v_mla, q_lora;
    float *qa;       /* [n_batch][q_lora] (q_lora > 0) */
    float *q;        /* [n_batch][H * k_mla] each head's q_nope | q_pe */
    float *kv;       /* [n_batch][D] the latent rows of this call */
    float *o;        /* [n_batch][H * v_mla] the heads' outputs */
    int32_t *head;   /* [n_batch * H] route r's head: r mod H */
    int32_t *kv_block; /* [n_batch] the cache block each row's latent row goes to */
    cv_experts_ws *ws; /* the up-projections' routed matmuls */

    /* The decompressed form (none unless the engine's mla_decompress, with
     * n_batch >= CV_MLA_GROUP). */
    cv_bmat **wuk;   /* [n_layer] the heads' key up-projections W_UK stacked, [H * nope][C]
                        (attn_k_b's slices transposed; NULL for other layers) */
    void **wuk_data; /* [n_layer] their bytes, which the matrices may read */
    int32_t *jsrc;   /* [DEC_CHUNK * H] route r's latent row: r / H */
    cv_experts_ws *dws; /* the values' routed matmul */
    float *lat;      /* [DEC_CHUNK][D] a chunk of the context's latent rows as f32 */
    float *kd;       /* [DEC_CHUNK][H * nope] their keys' W_UK c */
    float *vd;       /* [DEC_CHUNK * H][v_mla] their values */
    cv_mla_ws *mws;  /* the heads' attention over a chunk: their queries and softmax states */
    /* This call's split between the forms (plan_forms). */
    mla_run *runs;   /* [n_seq_max] */
    int32_t n_runs;
    bool *dec;       /* [n_batch] the row takes the decompressed form */
    int32_t *abs_rows, n_abs;  /* [n_batch] the rows that take the absorbed one */
    cv_batt_item *items;       /* [n_batch] the plan's tiles holding one of them, each over its whole context */
    int32_t n_items;
    int32_t *src;    /* [n_batch * H] their routes' rows: abs_rows[k] H + h */
    float *y;        /* [n_batch * H][max(C, v_mla)] their routes' outputs */
};

int32_t eng_mla_tile_tokens(int32_t n_head) { return CV_MAX(1, CV_MIN(16, 48 / n_head)); }

/* Context positions a layer up-projects at a time (a multiple of
 * CV_MLA_PIECE): their keys and values for every head, 5 MiB at GLM-4.7-
 * Flash's sizes, however deep the context. */
#define DEC_CHUNK 256

/* ---- the layer ---- */

/* The latent rows' pass (the backend's mla_rows): per row the latent's
 * norm and k_pe's RoPE, the row into the cache, and each head's RoPE'd
 * q_pe into its absorbed query (whose first C dims the up-projection
 * writes). */
static void latent_rows(cv_engine *e, const cv_batch *b, int32_t il)
{
    mla_scratch *M = e->mla;
    const cv_layer *L = &e->m->layers[il];
    for (int32_t t = 0; t < b->n_tokens; t++)
        M->kv_block[t] = eng_layer_table(e, il, &e->seqs[b->seq[t]])[b->pos[t] / CV_KV_BLOCK];
    const cv_bmla_rows rows = {
        .n_rows = b->n_tokens,
        .latent = M->kv,
        .ld_latent = M->D,
        .q = M->q,
        .ld_q = (int64_t)M->H * M->k_mla,
        .qa = e->qkv,
        .ld_qa = e->ld_qkv,
        .n_head = M->H,
        .C = M->C,
        .rot = M->rot,
        .k_mla = M->k_mla,
        .kv_norm = L->mla_kv_norm,
        .eps = e->m->hp.rms_eps,
        .rope = &L->rope,
        .pos = b->pos,
        .kv = eng_layer_pool(e, il),
        .kv_layer = e->kv_layer[il],
        .kv_block = M->kv_block,
    };
    cv_be_mla_rows(e->st, &rows);
}

/* Which of the call's tokens take which form: per sequence (its rows in
 * the attention plan's order, by position), those in the whole groups of
 * CV_MLA_GROUP positions it holds the decompressed one. Every layer asks
 * again (a pass over the batch, against a layer's matmuls). */
static void plan_forms(cv_engine *e, const cv_batch *b)
{
    mla_scratch *M = e->mla;
    const int32_t G = CV_MLA_GROUP, T = b->n_tokens, *start = e->att_seq_start, *rows = e->att_rows;
    M->n_runs = 0;
    if (!M->wuk)
        return;
    memset(M->dec, 0, (size_t)T * sizeof *M->dec);
    for (int32_t s = 0, at = 0; s < e->p.n_seq_max; at = start[s++]) {
        if (start[s] - at < G)
            continue;
        const int32_t p0 = b->pos[rows[at]], g0 = (p0 + G - 1) / G * G, g1 = (p0 + start[s] - at) / G * G;
        if (g1 <= g0)
            continue;
        M->runs[M->n_runs++] = (mla_run){ s, at + g0 - p0, g1 - g0, g0 };
        for (int32_t k = at + g0 - p0; k < at + g1 - p0; k++)
            M->dec[rows[k]] = true;
    }
    if (M->n_runs == 0)
        return;
    M->n_abs = M->n_items = 0;
    for (int32_t t = 0; t < T; t++)
        if (!M->dec[t]) {
            for (int32_t h = 0; h < M->H; h++)
                M->src[M->n_abs * M->H + h] = t * M->H + h;
            M->abs_rows[M->n_abs++] = t;
        }
    for (int32_t t = 0; t < e->att_n_tiles; t++) {
        const cv_batt_tile *pt = &e->att_tiles[t];
        bool any = false;
        for (int32_t k = pt->first; k < pt->first + pt->n_tok; k++)
            any |= !M->dec[rows[k]];
        if (any)
            M->items[M->n_items++] = (cv_batt_item){ t, 0, -1, -1 };
    }
}

/* Every head's matrix of an up-projection, counted into the call's bytes:
 * x's rows t H + h (n_out values each into y's) for every token, or, when
 * some take the decompressed form, for the others only (their outputs
 * then pass through M->y). */
static void heads_matmul(cv_engine *e, cv_bmat *const *w, int32_t T, const float *x, int64_t ldx, float *y,
                         int64_t ldy)
{
    mla_scratch *M = e->mla;
    const int64_t n_out = w[0]->n_out;
    e->prof_bytes += (double)M->H * (double)w[0]->bytes;
    if (M->n_runs == 0) {
        eng_matmul_experts(e, w, M->H, (int64_t)T * M->H, x, ldx, (int64_t)T * M->H, M->head, NULL, y, ldy, M->ws);
        return;
    }
    if (M->n_abs == 0)
        return;
    eng_matmul_experts(e, w, M->H, (int64_t)T * M->H, x, ldx, (int64_t)M->n_abs * M->H, M->head, M->src, M->y, n_out,
                       M->ws);
    for (int64_t r = 0; r < (int64_t)M->n_abs * M->H; r++)
        memcpy(y + M->src[r] * ldy, M->y + r * n_out, (size_t)n_out * sizeof(float));
}

/* ---- the decompressed form, per layer ---- */

/* Each run's tokens through the decompressed form, outputs into M->o: the
 * context up to the run's last token DEC_CHUNK positions at a time, its
 * latent rows as f32, every head's keys by one matmul (the stacked W_UK)
 * and values by one routed matmul (attn_v_b, a route per position and
 * head), then each head's attention over them. */
static void dec_forward(cv_engine *e, int32_t il)
{
    mla_scratch *M = e->mla;
    const cv_layer *L = &e->m->layers[il];
    const kv_pool *kv = eng_layer_pool(e, il);
    for (int32_t i = 0; i < M->n_runs; i++) {
        const mla_run *r = &M->runs[i];
        const int32_t *table = eng_layer_table(e, il, &e->seqs[r->seq]), end = r->pos0 + r->n_q;
        cv_bmla_dec d = {
            .n_head = M->H,
            .nope = M->nope,
            .rot = M->rot,
            .v = M->v_mla,
            .n_q = r->n_q,
            .pos0 = r->pos0,
            .rows = e->att_rows + r->first,
            .scale = e->m->hp.attn_scale,
            .q = M->q,
            .ld_q = (int64_t)M->H * M->k_mla,
            .kd = M->kd,
            .ld_kd = (int64_t)M->H * M->nope,
            .pe = M->lat + M->C,
            .ld_pe = M->D,
            .vd = M->vd,
            .ld_vd = (int64_t)M->H * M->v_mla,
            .out = M->o,
            .ld_out = (int64_t)M->H * M->v_mla,
        };
        for (d.base = 0; d.base < end; d.base += DEC_CHUNK) {
            d.n_ctx = CV_MIN(DEC_CHUNK, end - d.base);
            cv_be_mla_latent(e->st, kv, e->kv_layer[il], table, d.base, d.n_ctx, M->lat);
            eng_matmul(e, M->wuk[il], d.n_ctx, M->lat, M->D, M->kd, (int64_t)M->H * M->nope);
            eng_matmul_experts(e, L->mla_v_b, M->H, d.n_ctx, M->lat, M->D, (int64_t)d.n_ctx * M->H, M->head, M->jsrc,
                               M->vd, M->v_mla, M->dws);
            cv_be_mla_dec(e->st, &d, M->mws);
        }
    }
    e->prof_bytes += (double)M->wuk[il]->bytes + (double)M->H * (double)L->mla_v_b[0]->bytes;
}

static void mla_forward(cv_engine *e, const cv_batch *b, int32_t il)
{
    const cv_layer *L = &e->m->layers[il];
    mla_scratch *M = e->mla;
    const int32_t T = b->n_tokens;
    const int64_t ld_q = (int64_t)M->H * M->k_mla;
    if (L->mla_q_b) {
        eng_matmul(e, L->mla_q, T, e->xn, e->ld_x, M->qa, M->q_lora);
        cv_be_rmsnorm(e->st, T, M->q_lora, M->qa, M->q_lora, NULL, L->mla_q_norm, e->m->hp.rms_eps, M->qa, M->q_lora);
        eng_matmul(e, L->mla_q_b, T, M->qa, M->q_lora, M->q, ld_q);
    } else {
        eng_matmul(e, L->mla_q, T, e->xn, e->ld_x, M->q, ld_q);
    }
    eng_matmul(e, L->mla_kv, T, e->xn, e->ld_x, M->kv, M->D);
    latent_rows(e, b, il);
    plan_forms(e, b);
    /* route r = t H + h: q_nope of token t, head h (the first nope values of
     * its k_mla) into the first C dims of its absorbed query */
    heads_matmul(e, L->mla_k_b, T, M->q, M->k_mla, e->qkv, M->D);

    const uint64_t t0 = eng_tick(e);
    if (M->n_runs == 0) {
        cv_engine_attention(e, il);
    } else { /* only the tiles with a token of the absorbed form */
        cv_batt a = eng_att_call(e, il);
        a.items = M->items;
        a.n_items = M->n_items;
        a.n_split = 0;
        cv_be_attention(e->st, &a, e->att_ws);
    }
    e->prof_att_ns += eng_tick(e) - t0;
    e->prof_runs++;
    if (M->n_runs > 0)
        dec_forward(e, il);

    heads_matmul(e, L->mla_v_b, T, e->attn, M->C, M->o, M->v_mla);
    eng_matmul(e, L->wo, T, M->o, (int64_t)M->H * M->v_mla, e->tmp, e->ld_x);
}

/* The decompressed form's key up-projections: each latent layer's
 * attn_k_b slices ([C] rows of nope) transposed into W_UK rows of C, all
 * heads stacked, in q8_0 (f32 when the file's are f32 or the model was
 * dequantized: the reference path stays exact), prepared on the model's
 * backend; its value up-projections are attn_v_b's own matrices. And the
 * scratch of its chunks. */
static int dec_init(cv_engine *e, cv_err *err)
{
    const cv_model *m = e->m;
    mla_scratch *M = e->mla;
    const int32_t H = M->H, C = M->C, nope = M->nope, n_layer = m->hp.n_layer;
    M->wuk = cv_xcalloc((size_t)n_layer, sizeof *M->wuk);
    M->wuk_data = cv_xcalloc((size_t)n_layer, sizeof *M->wuk_data);
    float *kb = cv_xmalloc((size_t)C * nope * sizeof *kb), *row = cv_xmalloc((size_t)C * sizeof *row);
    int rc = 0;
    for (int32_t il = 0; il < n_layer && rc == 0; il++) {
        if (m->layers[il].mixer != CV_MIXER_MLA)
            continue;
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_k_b.weight", (int)il);
        const cv_gguf_tensor *t = cv_gguf_find_tensor(m->gguf, name);
        if (!t) {
            rc = cv_err_set(err, CV_EINVAL, "engine: latent layer %d has no tensor '%s'", (int)il, name);
            break;
        }
        const uint32_t type = t->type == CV_GGML_F32 || m->dequantized ? CV_GGML_F32 : CV_GGML_Q8_0;
        const size_t in_rb = cv_ggml_row_bytes(t->type, nope), rb = cv_ggml_row_bytes(type, C);
        char *data = M->wuk_data[il] = cv_aligned_alloc(rb * (size_t)H * nope);
        for (int32_t h = 0; h < H && rc == 0; h++) {
            for (int32_t c = 0; c < C && rc == 0; c++)
                rc = cv_dequantize_row(t->type, (const char *)t->data + ((size_t)h * C + c) * in_rb, kb + (size_t)c * nope,
                                       nope, err);
            for (int32_t i = 0; i < nope && rc == 0; i++) {
                for (int32_t c = 0; c < C; c++)
                    row[c] = kb[(size_t)c * nope + i];
                rc = cv_quantize_row(type, row, data + ((size_t)h * nope + i) * rb, C, err);
            }
        }
        if (rc == 0)
            rc = cv_bmat_create(m->be, type, C, (int64_t)H * nope, data, rb * (size_t)H * nope, &M->wuk[il], err);
    }
    free(kb);
    free(row);
    if (rc)
        return rc;
    M->jsrc = cv_xmalloc((size_t)DEC_CHUNK * H * sizeof *M->jsrc);
    for (int32_t r = 0; r < DEC_CHUNK * H; r++)
        M->jsrc[r] = r / H;
    M->dws = cv_be_experts_ws_create(e->st, (int64_t)DEC_CHUNK * H, C, M->v_mla, H);
    M->lat = cv_aligned_alloc((size_t)DEC_CHUNK * M->D * sizeof(float));
    M->kd = cv_aligned_alloc((size_t)DEC_CHUNK * H * nope * sizeof(float));
    M->vd = cv_aligned_alloc((size_t)DEC_CHUNK * H * M->v_mla * sizeof(float));
    if (!(M->mws = cv_be_mla_ws_create(e->st, e->p.n_batch, H, nope, M->rot, M->v_mla)))
        return cv_err_set(err, CV_ENOMEM, "engine: the %s backend made no latent attention workspace",
                          cv_backend_name(m->be));
    const size_t T = (size_t)e->p.n_batch, TH = T * (size_t)H;
    M->runs = cv_xmalloc((size_t)e->p.n_seq_max * sizeof *M->runs);
    M->dec = cv_xmalloc(T * sizeof *M->dec);
    M->abs_rows = cv_xmalloc(T * sizeof *M->abs_rows);
    M->items = cv_xmalloc(T * sizeof *M->items);
    M->src = cv_xmalloc(TH * sizeof *M->src);
    M->y = cv_aligned_alloc(TH * (size_t)CV_MAX(C, M->v_mla) * sizeof(float));
    return 0;
}

static int mla_init(cv_engine *e, cv_err *err)
{
    const cv_hparams *hp = &e->m->hp;
    if (e->kinds_used[0] >> CV_MIXER_ATTN & 1)
        return cv_err_set(err, CV_EUNSUPPORTED, "engine: a model with both latent and plain attention layers");
    mla_scratch *M = e->mla = cv_xcalloc(1, sizeof *M);
    M->H = hp->n_head;
    M->C = hp->n_lora_kv;
    M->rot = hp->n_rot;
    M->D = M->C + M->rot;
    M->k_mla = hp->k_mla;
    M->nope = hp->k_mla - hp->n_rot;
    M->v_mla = hp->v_mla;
    M->q_lora = hp->n_lora_q;
    const size_t T = (size_t)e->p.n_batch, TH = T * (size_t)M->H;
    if (M->q_lora > 0)
        M->qa = cv_aligned_alloc(T * (size_t)M->q_lora * sizeof(float));
    M->q = cv_aligned_alloc(TH * (size_t)M->k_mla * sizeof(float));
    M->kv = cv_aligned_alloc(T * (size_t)M->D * sizeof(float));
    M->o = cv_aligned_alloc(TH * (size_t)M->v_mla * sizeof(float));
    /* (the decompressed form routes a chunk's positions by it too) */
    const size_t n_routes = CV_MAX(T, (size_t)DEC_CHUNK) * (size_t)M->H;
    M->head = cv_xmalloc(n_routes * sizeof *M->head);
    M->kv_block = cv_xmalloc(T * sizeof *M->kv_block);
    for (size_t r = 0; r < n_routes; r++)
        M->head[r] = (int32_t)(r % (size_t)M->H);
    M->ws = cv_be_experts_ws_create(e->st, (int64_t)TH, CV_MAX(M->nope, M->C), CV_MAX(M->C, M->v_mla), M->H);
    /* The attention reads the absorbed queries and writes the heads'
     * latent outputs where the plain attention kind keeps q and its output. */
    e->ld_qkv = (int64_t)M->H * M->D;
    e->ld_q = (int64_t)M->H * M->C;
    e->qkv = cv_aligned_alloc(T * (size_t)e->ld_qkv * sizeof(float));
    e->attn = cv_aligned_alloc(T * (size_t)e->ld_q * sizeof(float));
    if (e->p.mla_decompress && e->p.n_batch >= CV_MLA_GROUP) {
        const int rc = dec_init(e, err);
        if (rc)
            return rc;
    }
    /* The tile's size is the kind's, and the backend's latent workspace
     * follows it: one kv head of D, its value the first C dims. */
    e->att_tile_tokens = eng_mla_tile_tokens(M->H);
    const cv_att_ws_shape shape = { .latent = true, .max_rows = e->att_tile_tokens * M->H, .max_hd = M->D,
                                    .max_hd_v = M->C, .hd_div = M->D, .n_slots = e->att_n_slots };
    if (!(e->att_ws = cv_be_attention_ws_create(e->st, &shape)))
        return cv_err_set(err, CV_ENOMEM, "engine: the %s backend made no latent attention workspace",
                          cv_backend_name(e->m->be));
    return 0;
}

static void mla_fini(cv_engine *e)
{
    mla_scratch *M = e->mla;
    if (!M)
        return;
    cv_aligned_free(M->qa);
    cv_aligned_free(M->q);
    cv_aligned_free(M->kv);
    cv_aligned_free(M->o);
    free(M->head);
    free(M->kv_block);
    cv_be_experts_ws_destroy(e->st, M->ws);
    for (int32_t il = 0; M->wuk && il < e->m->hp.n_layer; il++) {
        cv_bmat_destroy(e->m->be, M->wuk[il]);
        cv_aligned_free(M->wuk_data[il]);
    }
    free(M->wuk);
    free(M->wuk_data);
    free(M->jsrc);
    if (M->dws)
        cv_be_experts_ws_destroy(e->st, M->dws);
    cv_aligned_free(M->lat);
    cv_aligned_free(M->kd);
    cv_aligned_free(M->vd);
    cv_be_mla_ws_destroy(e->st, M->mws);
    free(M->runs);
    free(M->dec);
    free(M->abs_rows);
    free(M->items);
    free(M->src);
    cv_aligned_free(M->y);
    cv_aligned_free(e->qkv);
    cv_aligned_free(e->attn);
    cv_be_attention_ws_destroy(e->st, e->att_ws);
    free(M);
    e->mla = NULL;
}

const eng_kind eng_mix_mla = {
    .name = "multi-head latent attention",
    .init = mla_init,
    .fini = mla_fini,
    .forward = mla_forward,
};

bool eng_mla_decompresses(const cv_engine *e) { return e->mla && e->mla->wuk; }
