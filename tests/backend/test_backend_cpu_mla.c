/* test_backend_cpu_mla.c — the CPU backend's multi-head latent attention
 * passes, one thread and two, over a latent pool of each type (f32, f16,
 * q8_0):
 *   - mla_rows, 1 to 21 rows across block edges: the latent rows, the
 *     queries' RoPE'd q_pe, the absorbed queries' last dims and every byte
 *     of the cache equal the loop's (recomputed row by row with the
 *     process level's vector loops and cv_mla_store), and untouched bytes
 *     and the absorbed queries' first C dims stay;
 *   - mla_latent gives each block's rows as cv_mla_rows reads them;
 *   - mla_dec, 130 queries at positions 200.. over their context in
 *     chunks of 256 and of 64, gives the bits of the heads run over the
 *     whole context at once by the kernels layer's form (cv_mla_dec_start,
 *     _piece, _finish) with the process level's GEMMs, and is within
 *     rounding of the same with the scalar GEMMs; the output rows' gaps stay.
 *
 * tests/backend/CMakeLists.txt runs it once more under CORVID_ISA=scalar. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "kernels/mla.h"
#include "test.h"

enum { H = 3, C = 64, ROT = 16, D = C + ROT, NOPE = 32, K_MLA = NOPE + ROT, V = 24, N_LAYER = 2, N_BLOCKS = 24,
       MAX_ROWS = 21, LD_Q = H * K_MLA + 3, LD_QA = H * D + 5, N_Q = 130, POS0 = 200, DEPTH = POS0 + N_Q };

static void fill(float *x, int64_t n, cv_rng *r)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = cv_rng_f32(r) * 2 - 1;
}

static kv_pool pool_make(uint32_t type)
{
    kv_pool p = { .n_blocks = N_BLOCKS, .n_layer = N_LAYER, .n_head_kv = 1, .head_dim = D, .n_parts = 1,
                  .type = type, .qgroup = kv_q8_group(D),
                  .elt_bytes = type == CV_GGML_Q8_0 ? 1 : type == CV_GGML_F16 ? 2 : 4,
                  .head_bytes = kv_head_bytes(D, type), .block_bytes = kv_block_bytes(N_LAYER, 1, 1, D, type) };
    p.data = cv_xmalloc(p.block_bytes * (size_t)N_BLOCKS);
    memset(p.data, 0x5a, p.block_bytes * (size_t)N_BLOCKS);
    return p;
}

static const char *type_name(uint32_t t) { return t == CV_GGML_F32 ? "f32" : t == CV_GGML_F16 ? "f16" : "q8_0"; }

static void rows_case(cv_bstream *s, int threads, uint32_t type, int32_t n_rows)
{
    cv_rng r;
    cv_rng_seed(&r, 11 + (uint64_t)n_rows);
    const cv_vec_ops *vec = cv_vec_ops_for(cv_isa_active());
    const cv_rope_params rope = { .style = CV_ROPE_NEOX, .n_rot = ROT, .theta = 10000, .freq_scale = 1 };
    float norm[C], lat[MAX_ROWS * D], q[MAX_ROWS * LD_Q], qa[MAX_ROWS * LD_QA];
    fill(norm, C, &r);
    fill(lat, MAX_ROWS * D, &r);
    fill(q, MAX_ROWS * LD_Q, &r);
    fill(qa, MAX_ROWS * LD_QA, &r);
    int32_t pos[MAX_ROWS], blk[MAX_ROWS];
    for (int32_t t = 0; t < n_rows; t++)
        pos[t] = 9 + 5 * t, blk[t] = N_BLOCKS - 1 - pos[t] / CV_KV_BLOCK;
    kv_pool got = pool_make(type), want = pool_make(type);
    const size_t pool_bytes = got.block_bytes * (size_t)N_BLOCKS;
    float *g_lat = cv_be_rows_alloc(cv_backend_cpu(), sizeof lat), *g_q = cv_be_rows_alloc(cv_backend_cpu(), sizeof q);
    float *g_qa = cv_be_rows_alloc(cv_backend_cpu(), sizeof qa);
    memcpy(g_lat, lat, sizeof lat);
    memcpy(g_q, q, sizeof q);
    memcpy(g_qa, qa, sizeof qa);
    const cv_bmla_rows a = { .n_rows = n_rows, .latent = g_lat, .ld_latent = D, .q = g_q, .ld_q = LD_Q, .qa = g_qa,
                             .ld_qa = LD_QA, .n_head = H, .C = C, .rot = ROT, .k_mla = K_MLA, .kv_norm = norm,
                             .eps = 1e-6f, .rope = &rope, .pos = pos, .kv = &got, .kv_layer = 1, .kv_block = blk };
    cv_be_mla_rows(s, &a);
    for (int32_t t = 0; t < n_rows; t++) { /* the loop the engine ran */
        float *row = lat + t * D, *qt = q + t * LD_Q, *qat = qa + t * LD_QA;
        vec->rmsnorm(row, row, norm, C, 1e-6f);
        vec->rope(&rope, row + C, 1, ROT, pos[t]);
        for (int32_t h = 0; h < H; h++) {
            vec->rope(&rope, qt + h * K_MLA + NOPE, 1, ROT, pos[t]);
            memcpy(qat + h * D + C, qt + h * K_MLA + NOPE, ROT * sizeof(float));
        }
        cv_mla_store(&want, vec, kv_k(&want, blk[t], 1, 0), pos[t] % CV_KV_BLOCK, row);
    }
    CHECK_MSG(memcmp(g_lat, lat, sizeof lat) == 0 && memcmp(g_q, q, sizeof q) == 0 && memcmp(g_qa, qa, sizeof qa) == 0,
              "mla_rows %s, %d rows, %d threads: the rows are not the loop's", type_name(type), n_rows, threads);
    CHECK_MSG(memcmp(got.data, want.data, pool_bytes) == 0, "mla_rows %s, %d rows, %d threads: the cache is not the "
              "loop's", type_name(type), n_rows, threads);
    /* every stored row read back: mla_latent against cv_mla_rows */
    static float back[N_BLOCKS * CV_KV_BLOCK * D], buf[CV_KV_BLOCK * D];
    const int32_t table[N_BLOCKS] = { N_BLOCKS - 1, N_BLOCKS - 2, N_BLOCKS - 3, N_BLOCKS - 4, N_BLOCKS - 5,
                                      N_BLOCKS - 6, N_BLOCKS - 7 };
    const int32_t n_pos = 7 * CV_KV_BLOCK - 3;
    cv_be_mla_latent(s, &got, 1, table, 0, n_pos, back);
    int bad = 0;
    for (int32_t b = 0; b * CV_KV_BLOCK < n_pos; b++) {
        const int32_t m = CV_MIN(CV_KV_BLOCK, n_pos - b * CV_KV_BLOCK);
        const float *rows = cv_mla_rows(&got, kv_k(&got, table[b], 1, 0), m, buf);
        bad += memcmp(back + (size_t)b * CV_KV_BLOCK * D, rows, (size_t)m * D * sizeof(float)) != 0;
    }
    CHECK_MSG(bad == 0, "mla_latent %s, %d threads: %d blocks not as cv_mla_rows reads them", type_name(type), threads,
              bad);
    cv_be_rows_free(cv_backend_cpu(), g_lat);
    cv_be_rows_free(cv_backend_cpu(), g_q);
    cv_be_rows_free(cv_backend_cpu(), g_qa);
    free(got.data);
    free(want.data);
}

TEST(latent_rows_give_the_loops_bits_and_read_back_as_the_kernels_read)
{
    const uint32_t types[] = { CV_GGML_F32, CV_GGML_F16, CV_GGML_Q8_0 };
    const int32_t rows[] = { 1, 3, 4, 21 };
    for (int threads = 1; threads <= 2; threads++) {
        cv_bstream *s;
        CHECK_EQ_INT(cv_bstream_create(cv_backend_cpu(), threads, &s, NULL), 0);
        for (size_t ti = 0; ti < CV_ARRAY_LEN(types); ti++)
            for (size_t ri = 0; ri < CV_ARRAY_LEN(rows); ri++)
                rows_case(s, threads, types[ti], rows[ri]);
        cv_bstream_destroy(s);
    }
}

/* The heads over the whole context at once by the kernels' form with kn:
 * what mla_dec must give. */
static void dec_direct(const dn_kernels *kn, const cv_bmla_dec *a, float *out)
{
    float *state = cv_aligned_alloc(cv_mla_dec_state_floats(a->n_q, NOPE, ROT, V) * sizeof(float));
    float *scratch = cv_aligned_alloc(cv_mla_dec_scratch_floats(a->n_q, NOPE, ROT, V) * sizeof(float));
    for (int32_t h = 0; h < H; h++) {
        mla_dec_head hd = { .nope = NOPE, .rot = ROT, .v = V, .n_q = a->n_q, .pos0 = a->pos0, .scale = a->scale };
        cv_mla_dec_start(&hd, state, a->q + h * K_MLA, a->ld_q, a->rows);
        for (int32_t at = 0; at < DEPTH; at += CV_MLA_PIECE) {
            const mla_dec_piece p = { .base = at, .n = CV_MIN(CV_MLA_PIECE, DEPTH - at),
                                      .k = a->kd + at * a->ld_kd + h * NOPE, .ld_k = a->ld_kd,
                                      .pe = a->pe + at * a->ld_pe, .ld_pe = a->ld_pe,
                                      .val = a->vd + at * a->ld_vd + h * V, .ld_v = a->ld_vd };
            cv_mla_dec_piece(kn, &hd, &p, scratch);
        }
        cv_mla_dec_finish(&hd, a->rows, out + h * V, a->ld_out);
    }
    cv_aligned_free(state);
    cv_aligned_free(scratch);
}

TEST(decompressed_attention_gives_the_kernels_bits_in_any_chunking)
{
    enum { LD_OUT = H * V + 2, LD_KD = H * NOPE + 1, LD_VD = H * V + 3 };
    cv_rng r;
    cv_rng_seed(&r, 5);
    float *q = cv_aligned_alloc((size_t)N_Q * H * K_MLA * sizeof(float));
    float *kd = cv_aligned_alloc((size_t)DEPTH * LD_KD * sizeof(float));
    float *pe = cv_aligned_alloc((size_t)DEPTH * D * sizeof(float));
    float *vd = cv_aligned_alloc((size_t)DEPTH * LD_VD * sizeof(float));
    fill(q, (int64_t)N_Q * H * K_MLA, &r);
    fill(kd, (int64_t)DEPTH * LD_KD, &r);
    fill(pe, (int64_t)DEPTH * D, &r);
    fill(vd, (int64_t)DEPTH * LD_VD, &r);
    /* the queries' rows out of order in the batch */
    int32_t rows[N_Q];
    for (int32_t t = 0; t < N_Q; t++)
        rows[t] = (t * 7) % N_Q;
    const size_t out_bytes = (size_t)N_Q * LD_OUT * sizeof(float);
    float *got = cv_xmalloc(out_bytes), *want = cv_xmalloc(out_bytes), *ref = cv_xmalloc(out_bytes);
    for (size_t i = 0; i < out_bytes / sizeof(float); i++)
        want[i] = ref[i] = -9.0f;
    cv_bmla_dec a = { .n_head = H, .nope = NOPE, .rot = ROT, .v = V, .n_q = N_Q, .pos0 = POS0, .rows = rows,
                      .scale = 0.125f, .q = q, .ld_q = H * K_MLA, .kd = kd, .ld_kd = LD_KD, .pe = pe + C,
                      .ld_pe = D, .vd = vd, .ld_vd = LD_VD, .out = got, .ld_out = LD_OUT };
    dec_direct(cv_dn_kernels_for(16), &a, want);
    dec_direct(&cv_dn_kernels_scalar, &a, ref);
    const int32_t chunks[] = { 256, 64 };
    for (int threads = 1; threads <= 2; threads++) {
        cv_bstream *s;
        CHECK_EQ_INT(cv_bstream_create(cv_backend_cpu(), threads, &s, NULL), 0);
        cv_mla_ws *ws = cv_be_mla_ws_create(s, N_Q, H, NOPE, ROT, V);
        CHECK(ws != NULL);
        for (size_t ci = 0; ci < CV_ARRAY_LEN(chunks); ci++) {
            for (size_t i = 0; i < out_bytes / sizeof(float); i++)
                got[i] = -9.0f;
            for (a.base = 0; a.base < DEPTH; a.base += chunks[ci]) {
                cv_bmla_dec c = a;
                c.n_ctx = CV_MIN(chunks[ci], DEPTH - a.base);
                c.kd = kd + (size_t)a.base * LD_KD, c.pe = pe + (size_t)a.base * D + C;
                c.vd = vd + (size_t)a.base * LD_VD;
                cv_be_mla_dec(s, &c, ws);
            }
            CHECK_MSG(memcmp(got, want, out_bytes) == 0, "mla_dec, chunks of %d, %d threads: not the kernels' bits",
                      chunks[ci], threads);
            int bad = 0;
            for (size_t i = 0; i < out_bytes / sizeof(float); i++)
                bad += !(fabsf(got[i] - ref[i]) <= 2e-5f * (1 + fabsf(ref[i])));
            CHECK_MSG(bad == 0, "mla_dec, chunks of %d, %d threads: %d values off the scalar GEMMs' or a gap written",
                      chunks[ci], threads, bad);
        }
        cv_be_mla_ws_destroy(s, ws);
        cv_bstream_destroy(s);
    }
    cv_aligned_free(q);
    cv_aligned_free(kd);
    cv_aligned_free(pe);
    cv_aligned_free(vd);
    free(got);
    free(want);
    free(ref);
}

int main(void)
{
    printf("  latent GEMMs at %s\n", cv_dn_kernels_name(cv_dn_kernels_for(16)));
    RUN(latent_rows_give_the_loops_bits_and_read_back_as_the_kernels_read);
    RUN(decompressed_attention_gives_the_kernels_bits_in_any_chunking);
    return test_report();
}
