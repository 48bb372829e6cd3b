/* attention.c — the attention of a forward call, planned here and run by
 * the backend (backend.h's cv_batt, attention): the batch cut into tiles
 * (up to att_tile_tokens consecutive tokens of one sequence) once per call
 * (cv_engine_att_plan), each tile x kv head a work item, longest first,
 * because later positions cost more; when a step has few tiles (a few
 * sequences decoding), their deep contexts' chunks become work items of
 * their own, so a deep context's attention spreads over every thread with
 * the bits it gets in one (the tiles and their chunking are the kernels
 * layer's: kernels/attention.h). */
#include <stdlib.h>

#include "engine/engine_int.h"

/* ---- planning: tiles for this batch ---- */

static int cmp_tile(const void *x, const void *y)
{
    const cv_batt_tile *a = x, *b = y;
    int32_t ea = a->pos0 + a->n_tok, eb = b->pos0 + b->n_tok;
    if (ea != eb)
        return ea > eb ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq; /* deterministic order */
}

/* Work items for the tiles x kv heads: one item computes a pair's whole
 * context, longest first. When there are fewer pairs than twice the
 * threads (a few sequences decoding), pairs whose context spans several
 * chunks are cut into one item per chunk, as far as the state slots go;
 * the caller merges their states once all are done. Same bits either way
 * (cv_att_tile_run merges the chunks in the same order). */
static void plan_items(cv_engine *e, att_plan *pl)
{
    const int32_t n_kv = pl->n_head_kv, pairs = e->att_n_tiles * n_kv;
    const bool split = e->n_threads > 1 && pairs < 2 * e->n_threads;
    int32_t ni = 0, ns = 0, slots = 0;
    for (int32_t t = 0; t < e->att_n_tiles; t++)
        for (int32_t g = 0; g < n_kv; g++) {
            const cv_batt_tile *pt = &e->att_tiles[t];
            const int32_t c0 = cv_att_first_block(pt->pos0, pl->window) / CV_ATT_CHUNK_BLOCKS;
            const int32_t nc = cv_att_chunks(pt->pos0 + pt->n_tok - 1) - c0;
            if (split && nc > 1 && slots + nc <= e->att_n_slots) {
                pl->split[ns++] = (cv_batt_split){ t, g, slots, nc };
                slots += nc;
            } else {
                pl->items[ni++] = (cv_batt_item){ t, g, -1, -1 };
            }
        }
    for (int32_t i = 0; i < ns; i++) {
        const cv_batt_split *sp = &pl->split[i];
        const int32_t c0 = cv_att_first_block(e->att_tiles[sp->tile].pos0, pl->window) / CV_ATT_CHUNK_BLOCKS;
        for (int32_t c = 0; c < sp->n_chunks; c++)
            pl->items[ni++] = (cv_batt_item){ sp->tile, sp->g, c0 + c, sp->slot0 + c };
    }
    pl->n_items = ni;
    pl->n_split = ns;
}

void cv_engine_att_plans_init(cv_engine *e)
{
    const cv_model *m = e->m;
    const size_t n_items = (size_t)e->p.n_batch * (size_t)m->hp.n_head_kv + (size_t)e->att_n_slots;
    e->att_plan_of = cv_xmalloc((size_t)m->hp.n_layer * sizeof *e->att_plan_of);
    e->att_plans = cv_xcalloc((size_t)m->hp.n_layer, sizeof *e->att_plans);
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const cv_layer *L = &m->layers[il];
        int32_t k = 0;
        while (k < e->att_n_plans && (e->att_plans[k].window != L->n_swa || e->att_plans[k].n_head_kv != L->n_head_kv))
            k++;
        if (k == e->att_n_plans) {
            att_plan *pl = &e->att_plans[e->att_n_plans++];
            pl->window = L->n_swa;
            pl->n_head_kv = L->n_head_kv;
            pl->items = cv_xmalloc(n_items * sizeof *pl->items);
            pl->split = cv_xmalloc(CV_MAX(1, (size_t)e->att_n_slots) * sizeof *pl->split);
        }
        e->att_plan_of[il] = k;
    }
}

void cv_engine_att_plans_fini(cv_engine *e)
{
    for (int32_t k = 0; k < e->att_n_plans; k++) {
        free(e->att_plans[k].items);
        free(e->att_plans[k].split);
    }
    free(e->att_plans);
    free(e->att_plan_of);
}

void cv_engine_att_plan(cv_engine *e, const cv_batch *b)
{
    /* Group the batch's rows by sequence, keeping batch order inside one
     * (which is position order): a counting sort over the sequences. */
    int32_t *start = e->att_seq_start; /* [n_seq_max + 1] */
    memset(start, 0, ((size_t)e->p.n_seq_max + 1) * sizeof *start);
    for (int32_t i = 0; i < b->n_tokens; i++)
        start[b->seq[i] + 1]++;
    for (int32_t s = 0; s < e->p.n_seq_max; s++)
        start[s + 1] += start[s];
    for (int32_t i = 0; i < b->n_tokens; i++)
        e->att_rows[start[b->seq[i]]++] = i;
    /* start[s] now ends sequence s's run; runs are back to back. */
    int32_t n = 0, at = 0;
    for (int32_t s = 0; s < e->p.n_seq_max; s++) {
        for (int32_t k = at; k < start[s]; k += e->att_tile_tokens) {
            cv_batt_tile *t = &e->att_tiles[n++];
            t->seq = s;
            t->first = k;
            t->n_tok = CV_MIN(e->att_tile_tokens, start[s] - k);
            t->pos0 = b->pos[e->att_rows[k]];
        }
        at = start[s];
    }
    qsort(e->att_tiles, (size_t)n, sizeof *e->att_tiles, cmp_tile);
    e->att_n_tiles = n;
    for (int32_t k = 0; k < e->att_n_plans; k++)
        plan_items(e, &e->att_plans[k]);
}

/* ---- one layer's call ---- */

cv_batt eng_att_call(const cv_engine *e, int32_t il)
{
    const cv_hparams *hp = &e->m->hp;
    const cv_layer *L = &e->m->layers[il];
    const att_plan *pl = &e->att_plans[e->att_plan_of[il]];
    return (cv_batt){
        .kv = eng_layer_pool(e, il),
        .kv_layer = e->kv_layer[il],
        .tables = e->att_tables[e->kv_group[il]],
        .tiles = e->att_tiles,
        .rows = e->att_rows,
        .items = pl->items,
        .n_items = pl->n_items,
        .split = pl->split,
        .n_split = pl->n_split,
        .q = e->qkv,
        .ld_q = e->ld_qkv,
        .out = e->attn,
        .ld_out = e->ld_q,
        .n_rep = hp->n_head / L->n_head_kv,
        .hd = L->head_dim,
        .hd_v = L->head_dim - (hp->head_dim - hp->head_dim_v), /* the key's size but MLA's (its latent part) */
        .scale = hp->attn_scale,
        .window = L->n_swa,
        .sinks = L->sinks,
    };
}

void cv_engine_attention(cv_engine *e, int32_t il)
{
    const cv_batt a = eng_att_call(e, il);
    cv_be_attention(e->st, &a, e->att_ws);
}
