/* test_backend_cpu_attention.c — the CPU backend's attention over the
 * paged cache (attention), by plans made here as the engine makes them, on
 * a pool of K/V blocks (f32, f16, q8_0; full, windowed, with sinks) and on
 * a latent one (multi-head latent attention's rows), one thread and two:
 *   - three sequences in one call (a token decoding at depth 1101 over
 *     two chunks of CV_ATT_CHUNK_BLOCKS blocks, 3 tokens at 37, a prompt
 *     of 20 tokens cut into tiles), their blocks out of order in the pool
 *     and their rows interleaved in the batch: every output row has the
 *     bits of the tile the workspace runs (cv_att_tile_for's for the head
 *     size, the latent one of the process's level) run over its whole
 *     context by cv_att_tile_run, whether the plan runs each pair whole or
 *     cuts the deep pairs into chunks on slots, merged after;
 *   - every row is within rounding of the scalar tile's, and the output
 *     rows' gaps stay as they were.
 *
 * tests/backend/CMakeLists.txt runs it once more under CORVID_ISA=scalar. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "kernels/mla.h"
#include "test.h"

enum { N_LAYER = 2, N_HEAD_KV = 2, N_REP = 3, HD = 64, LAT_C = 64, LAT_D = 80, LAT_H = 5, N_SEQ = 3,
       TILE_TOK = 8, MAX_BLOCKS = 72, N_ROWS = 24, LD_Q = 6 * LAT_D + 5, LD_OUT = 6 * HD + 3, N_SLOTS = 64 };

static const int32_t g_p0[N_SEQ] = { 1100, 37, 0 }, g_n[N_SEQ] = { 1, 3, 20 };

static kv_pool pool_make(bool latent, uint32_t type)
{
    const int32_t hd = latent ? LAT_D : HD, parts = latent ? 1 : 2, heads = latent ? 1 : N_HEAD_KV;
    kv_pool p = { .n_blocks = MAX_BLOCKS * N_SEQ, .n_layer = N_LAYER, .n_head_kv = heads, .head_dim = hd,
                  .n_parts = parts, .type = type, .qgroup = kv_q8_group(hd),
                  .elt_bytes = type == CV_GGML_Q8_0 ? 1 : type == CV_GGML_F16 ? 2 : 4,
                  .head_bytes = kv_head_bytes(hd, type),
                  .block_bytes = kv_block_bytes(N_LAYER, parts, heads, hd, type) };
    p.data = cv_xmalloc(p.block_bytes * (size_t)p.n_blocks);
    return p;
}

/* Sequence s's table: its blocks interleaved with the others' and in
 * reverse within runs of three, so no table reads the pool in order. */
static void tables_make(int32_t tables[N_SEQ][MAX_BLOCKS])
{
    for (int32_t s = 0; s < N_SEQ; s++)
        for (int32_t b = 0; b < MAX_BLOCKS; b++)
            tables[s][b] = ((b / 3) * 3 + 2 - b % 3) * N_SEQ + (N_SEQ - 1 - s);
}

/* Every position each sequence holds, random keys and values (latent rows)
 * of every layer and head. */
static void pool_fill(const kv_pool *p, int32_t tables[N_SEQ][MAX_BLOCKS], cv_rng *r)
{
    const cv_vec_ops *vec = cv_vec_ops_for(cv_isa_active());
    float k[LAT_D], v[LAT_D];
    for (int32_t s = 0; s < N_SEQ; s++)
        for (int32_t pos = 0; pos < g_p0[s] + g_n[s]; pos++)
            for (int32_t l = 0; l < N_LAYER; l++)
                for (int32_t g = 0; g < p->n_head_kv; g++) {
                    for (int32_t i = 0; i < p->head_dim; i++)
                        k[i] = cv_rng_f32(r) * 2 - 1, v[i] = cv_rng_f32(r) * 2 - 1;
                    const int32_t b = tables[s][pos / CV_KV_BLOCK], j = pos % CV_KV_BLOCK;
                    if (p->n_parts == 1)
                        cv_mla_store(p, vec, kv_k(p, b, l, 0), j, k);
                    else
                        kv_store(p, vec, kv_k(p, b, l, g), kv_v(p, b, l, g), j, k, v);
                }
}

/* A call's plan, as the engine's attention.c makes it: rows grouped by
 * sequence (batch row t is token t / N_SEQ of sequence t % N_SEQ while
 * every sequence has one left), tiles of TILE_TOK, and items over tiles x
 * kv heads; with split, each pair of more than one chunk cut into chunks
 * on slots. */
typedef struct plan {
    cv_batt_tile tiles[N_ROWS];
    int32_t n_tiles;
    int32_t rows[N_ROWS], pos[N_ROWS], seq[N_ROWS];
    cv_batt_item items[N_ROWS * N_HEAD_KV + N_SLOTS];
    int32_t n_items;
    cv_batt_split split[N_SLOTS];
    int32_t n_split;
} plan;

static void plan_make(plan *pl, int32_t n_kv, int32_t window, bool split)
{
    int32_t next[N_SEQ] = { 0 }, t = 0;
    while (t < N_ROWS)
        for (int32_t s = 0; s < N_SEQ; s++)
            if (next[s] < g_n[s])
                pl->seq[t] = s, pl->pos[t] = g_p0[s] + next[s]++, t++;
    int32_t k = 0;
    pl->n_tiles = 0;
    for (int32_t s = 0; s < N_SEQ; s++) {
        const int32_t first = k;
        for (int32_t r = 0; r < N_ROWS; r++)
            if (pl->seq[r] == s)
                pl->rows[k++] = r;
        for (int32_t at = first; at < k; at += TILE_TOK)
            pl->tiles[pl->n_tiles++] = (cv_batt_tile){ s, at, CV_MIN(TILE_TOK, k - at), pl->pos[pl->rows[at]] };
    }
    int32_t ni = 0, slots = 0;
    pl->n_split = 0;
    for (int32_t i = 0; i < pl->n_tiles; i++)
        for (int32_t g = 0; g < n_kv; g++) {
            const cv_batt_tile *pt = &pl->tiles[i];
            const int32_t c0 = cv_att_first_block(pt->pos0, window) / CV_ATT_CHUNK_BLOCKS;
            const int32_t nc = cv_att_chunks(pt->pos0 + pt->n_tok - 1) - c0;
            if (split && nc > 1) {
                pl->split[pl->n_split++] = (cv_batt_split){ i, g, slots, nc };
                for (int32_t c = 0; c < nc; c++)
                    pl->items[ni++] = (cv_batt_item){ i, g, c0 + c, slots + c };
                slots += nc;
            } else {
                pl->items[ni++] = (cv_batt_item){ i, g, -1, -1 };
            }
        }
    pl->n_items = ni;
}

/* What the op must give: each (tile, kv head) through cv_att_tile_run
 * with fn, into out. */
static void direct(att_tile_fn fn, const cv_batt *a, const plan *pl, float *out, float *scratch)
{
    for (int32_t i = 0; i < pl->n_tiles; i++)
        for (int32_t g = 0; g < a->kv->n_head_kv; g++) {
            const cv_batt_tile *pt = &pl->tiles[i];
            att_tile t = { .kv = a->kv, .blocks = a->tables[pt->seq], .layer = a->kv_layer, .g = g,
                           .n_tok = pt->n_tok, .pos0 = pt->pos0, .rows = pl->rows + pt->first, .qkv = a->q,
                           .ld_qkv = a->ld_q, .out = out, .ld_out = a->ld_out, .n_rep = a->n_rep, .hd = a->hd,
                           .hd_v = a->hd_v, .scale = a->scale, .window = a->window, .sinks = a->sinks };
            cv_att_tile_run(fn, &t, scratch);
        }
}

static void run_case(bool latent, uint32_t type, int32_t window, bool sinks)
{
    cv_rng r;
    cv_rng_seed(&r, 7 + type);
    kv_pool kv = pool_make(latent, type);
    static int32_t tables[N_SEQ][MAX_BLOCKS];
    tables_make(tables);
    pool_fill(&kv, tables, &r);
    const int32_t *tp[N_SEQ] = { tables[0], tables[1], tables[2] };
    float *q = cv_be_rows_alloc(cv_backend_cpu(), (size_t)N_ROWS * LD_Q * sizeof(float));
    for (int64_t i = 0; i < (int64_t)N_ROWS * LD_Q; i++)
        q[i] = cv_rng_f32(&r) * 2 - 1;
    float sink[N_HEAD_KV * N_REP];
    for (int32_t h = 0; h < N_HEAD_KV * N_REP; h++)
        sink[h] = cv_rng_f32(&r) * 4 - 2;
    const int32_t n_kv = latent ? 1 : N_HEAD_KV, n_rep = latent ? LAT_H : N_REP, hd = latent ? LAT_D : HD;
    const int32_t hd_v = latent ? LAT_C : HD;
    const cv_att_ws_shape shape = { .latent = latent, .max_rows = TILE_TOK * n_rep, .max_hd = hd, .max_hd_v = hd_v,
                                    .hd_div = hd, .n_slots = N_SLOTS };
    const att_tile_fn fn = latent ? cv_mla_tile_for() : cv_att_tile_for(hd);
    const att_tile_fn ref_fn = latent ? cv_mla_tile_scalar : cv_att_tile_scalar;
    const size_t scr_floats = latent ? cv_mla_scratch_floats(TILE_TOK * n_rep, hd)
                                     : cv_att_scratch_floats(TILE_TOK * n_rep, hd);
    float *scratch = cv_aligned_alloc(scr_floats * sizeof(float));
    const size_t out_bytes = (size_t)N_ROWS * LD_OUT * sizeof(float);
    float *want = cv_xmalloc(out_bytes), *ref = cv_xmalloc(out_bytes);
    float *got = cv_be_rows_alloc(cv_backend_cpu(), out_bytes);
    char what[96];
    snprintf(what, sizeof what, "%s %s, window %d%s", latent ? "latent" : "k/v",
             type == CV_GGML_F32 ? "f32" : type == CV_GGML_F16 ? "f16" : "q8_0", window,
             sinks ? ", sinks" : "");
    for (int threads = 1; threads <= 2; threads++) {
        cv_bstream *s;
        CHECK_EQ_INT(cv_bstream_create(cv_backend_cpu(), threads, &s, NULL), 0);
        cv_att_ws *ws = cv_be_attention_ws_create(s, &shape);
        CHECK(ws != NULL);
        for (int split = 0; split < 2; split++)
            for (int32_t layer = 0; layer < N_LAYER; layer++) {
                plan pl;
                plan_make(&pl, n_kv, window, split);
                const cv_batt a = { .kv = &kv, .kv_layer = layer, .tables = tp, .tiles = pl.tiles, .rows = pl.rows,
                                    .items = pl.items, .n_items = pl.n_items, .split = pl.split,
                                    .n_split = pl.n_split, .q = q, .ld_q = LD_Q, .out = got, .ld_out = LD_OUT,
                                    .n_rep = n_rep, .hd = hd, .hd_v = hd_v, .scale = 1.0f / sqrtf((float)hd),
                                    .window = window, .sinks = sinks ? sink : NULL };
                CHECK_MSG(!split || pl.n_split == n_kv, "%s: the deep pairs were not cut", what);
                for (size_t i = 0; i < out_bytes / sizeof(float); i++)
                    got[i] = want[i] = ref[i] = -9.0f;
                cv_be_attention(s, &a, ws);
                direct(fn, &a, &pl, want, scratch);
                direct(ref_fn, &a, &pl, ref, scratch);
                CHECK_MSG(memcmp(got, want, out_bytes) == 0,
                          "%s, layer %d, %d threads, %s: not the bits of the tiles run whole", what, layer, threads,
                          split ? "deep pairs cut into chunks" : "every pair whole");
                int bad = 0;
                double worst = 0;
                for (int32_t t = 0; t < N_ROWS; t++)
                    for (int32_t i = 0; i < LD_OUT; i++) {
                        const double w = ref[t * LD_OUT + i], e = fabs(got[t * LD_OUT + i] - w);
                        if (i >= n_kv * n_rep * hd_v) {
                            bad += got[t * LD_OUT + i] != -9.0f;
                            continue;
                        }
                        worst = fmax(worst, e / (1 + fabs(w)));
                        bad += !(e <= 2e-4 * (1 + fabs(w)));
                    }
                CHECK_MSG(bad == 0, "%s, layer %d, %d threads: %d values off the scalar tile's or a gap written "
                          "(worst relative %g)", what, layer, threads, bad, worst);
            }
        cv_be_attention_ws_destroy(s, ws);
        cv_bstream_destroy(s);
    }
    cv_aligned_free(scratch);
    free(want);
    free(ref);
    cv_be_rows_free(cv_backend_cpu(), got);
    cv_be_rows_free(cv_backend_cpu(), q);
    free(kv.data);
}

TEST(attention_gives_the_tiles_bits_for_every_plan_type_and_thread_count)
{
    const uint32_t types[] = { CV_GGML_F32, CV_GGML_F16, CV_GGML_Q8_0 };
    for (size_t i = 0; i < CV_ARRAY_LEN(types); i++) {
        run_case(false, types[i], 0, false);
        run_case(false, types[i], 0, true);
        run_case(false, types[i], 100, false);
        run_case(true, types[i], 0, false);
    }
}

int main(void)
{
    printf("  k/v tile %s, latent tile %s\n", cv_att_tile_name(cv_att_tile_for(HD)),
           cv_mla_tile_name(cv_mla_tile_for()));
    RUN(attention_gives_the_tiles_bits_for_every_plan_type_and_thread_count);
    return test_report();
}
