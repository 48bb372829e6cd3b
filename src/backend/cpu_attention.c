/* cpu_attention.c — the CPU backend's attention over the paged KV cache
 * (backend.h's cv_batt, attention): the runner the engine's attention.c
 * had, moved here whole so its bits are the same. The caller's plan names
 * the work items (a tile x kv head over its whole context, or one chunk of
 * it), handed out longest first through the pool's work queue
 * (cv_pool_run_items), because later positions cost more; the chunks of a
 * pair cut apart leave their states in the workspace's slots, merged in
 * order once all have run, so a deep context's attention spreads over
 * every thread with the bits it gets in one. The tiles are the kernels
 * layer's, which picks their ISA level: kernels/attention.h for K/V pools,
 * kernels/mla.h's latent tile for multi-head latent attention's. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_int.h"
#include "kernels/mla.h"

struct cv_att_ws {
    cv_att_ws_shape shape;
    att_tile_fn tile;     /* the one tile every head size of the shape takes */
    float *scratch;       /* per thread */
    size_t scratch_floats;
    float *slots;         /* [n_slots][slot_floats] cut pairs' chunk states */
    size_t slot_floats;
};

/* Committed at creation (cv_aligned_alloc_committed): every forward call
 * writes it, and a model's first request should not pay its first touch. */
cv_att_ws *cpu_attention_ws_create(cv_bstream *s, const cv_att_ws_shape *shape)
{
    cv_att_ws *ws = cv_xcalloc(1, sizeof *ws);
    ws->shape = *shape;
    if (shape->latent) {
        ws->tile = cv_mla_tile_for();
        ws->scratch_floats = cv_mla_scratch_floats(shape->max_rows, shape->max_hd);
    } else {
        ws->tile = cv_att_tile_for(shape->hd_div);
        /* the q8_0 query rows' room is not monotone in the head size: the
         * largest over every head size the shape allows */
        for (int32_t hd = shape->hd_div; hd <= shape->max_hd; hd += shape->hd_div)
            ws->scratch_floats = CV_MAX(ws->scratch_floats, cv_att_scratch_floats(shape->max_rows, hd));
    }
    ws->scratch_floats = (ws->scratch_floats + 15) & ~(size_t)15;
    ws->slot_floats = (cv_att_state_floats(shape->max_rows, shape->max_hd_v) + 15) & ~(size_t)15;
    ws->scratch = cv_aligned_alloc_committed(ws->scratch_floats * sizeof(float) *
                                             (size_t)cv_pool_size(cpu_stream_of(s)->pool));
    ws->slots = cv_aligned_alloc_committed(CV_MAX(1, (size_t)shape->n_slots * ws->slot_floats) * sizeof(float));
    return ws;
}

void cpu_attention_ws_destroy(cv_bstream *s, cv_att_ws *ws)
{
    (void)s;
    cv_aligned_free(ws->scratch);
    cv_aligned_free(ws->slots);
    free(ws);
}

typedef struct att_job {
    const cv_batt *a;
    cv_att_ws *ws;
} att_job;

static inline float *slot(const cv_att_ws *ws, int32_t i) { return ws->slots + (size_t)i * ws->slot_floats; }

/* Tile t of the plan against kv head g, as the kernels take it. */
static att_tile tile_of(const cv_batt *a, int32_t t, int32_t g)
{
    const cv_batt_tile *pt = &a->tiles[t];
    return (att_tile){
        .kv = a->kv,
        .blocks = a->tables[pt->seq],
        .layer = a->kv_layer,
        .g = g,
        .n_tok = pt->n_tok,
        .pos0 = pt->pos0,
        .rows = a->rows + pt->first,
        .qkv = a->q,
        .ld_qkv = a->ld_q,
        .out = a->out,
        .ld_out = a->ld_out,
        .n_rep = a->n_rep,
        .hd = a->hd,
        .hd_v = a->hd_v,
        .scale = a->scale,
        .window = a->window,
        .sinks = a->sinks,
    };
}

static void tile_item(void *ctx, int64_t i, int ith)
{
    const att_job *j = ctx;
    cv_att_ws *ws = j->ws;
    float *scr = ws->scratch + (size_t)ith * ws->scratch_floats;
    const cv_batt_item *it = &j->a->items[i];
    att_tile a = tile_of(j->a, it->tile, it->g);
    if (it->chunk < 0) {
        cv_att_tile_run(ws->tile, &a, scr);
        return;
    }
    a.blk0 = it->chunk * CV_ATT_CHUNK_BLOCKS;
    a.blk1 = a.blk0 + CV_ATT_CHUNK_BLOCKS;
    ws->tile(&a, scr);
    memcpy(slot(ws, it->slot), scr, cv_att_state_floats(a.n_tok * a.n_rep, a.hd_v) * sizeof(float));
}

void cpu_attention(cv_bstream *s, const cv_batt *a, cv_att_ws *ws)
{
    assert(a->hd <= ws->shape.max_hd && a->hd_v <= ws->shape.max_hd_v && a->hd % ws->shape.hd_div == 0 &&
           (a->kv->n_parts == 1) == ws->shape.latent);
    att_job j = { .a = a, .ws = ws };
    cv_pool_run_items(cpu_stream_of(s)->pool, a->n_items, tile_item, &j);
    for (int32_t i = 0; i < a->n_split; i++) {
        const cv_batt_split *sp = &a->split[i];
        const att_tile t = tile_of(a, sp->tile, sp->g);
        float *st = slot(ws, sp->slot0);
        assert(sp->slot0 + sp->n_chunks <= ws->shape.n_slots);
        for (int32_t c = 1; c < sp->n_chunks; c++)
            cv_att_state_merge(st, slot(ws, sp->slot0 + c), t.n_tok * t.n_rep, t.hd_v);
        cv_att_state_write(&t, st);
    }
}
