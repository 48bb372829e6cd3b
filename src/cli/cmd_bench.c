/* cmd_bench.c — `corvid bench MODEL`: end-to-end speed of the engine, each
 * figure set against its physical ceiling (speedtest1's manner: numbered
 * cases, fixed inputs, medians of repeats, a hash of the generated ids so a
 * speed-up that changes the output shows).
 *
 *   ceilings (the kernels' probes, all threads): read bandwidth B (bytes/s)
 *   and the int8 multiply-add peak P (per second), measured before every
 *   repeat of every case and after the last one. A shared machine's
 *   bandwidth moves by 30% from one minute to the next (other tenants'
 *   memory traffic), so each repeat is set against the mean of the probes
 *   on either side of it, and a case's fraction is the median of its
 *   repeats' fractions (its tok/s is the median of its repeats');
 *   prefill of p tokens (one forward call, after --depth D tokens held by
 *     the sequence: an agent's turn deep in its context): tok/s, and the
 *     MACs of p tokens through every layer plus one through the output
 *     layer (only the last token's logits are computed) / time / P;
 *   decode at batch b (b sequences, each from a one-token prompt, n steps of
 *     one forward call over all b; greedy argmax): aggregate tok/s, then
 *     the weight bytes the steps read / time / B (every step reads every
 *     matrix once; of an MoE layer's experts, only those its tokens were
 *     routed to, as the engine counts them) and tok/s x MACs per token / P. Batch 1 is single-stream decode. With
 *     --depth D each sequence first holds D tokens, so the steps attend to
 *     D.. positions (decode speed at a context depth): the D tokens are
 *     prefilled once, untimed, into one sequence, which every prefill
 *     repeat goes back to and a single decoding sequence forks from; b
 *     sequences of their own are each filled, untimed, per repeat, and
 *     with --shared they all fork from it, holding the same blocks (agents
 *     with one system prompt). The ids, so the hash, are the same either
 *     way;
 *   with --depth, decode at depth against depth 0: single steps of a deep
 *     sequence and of a fresh one in turn, n of each a repeat, and the
 *     ratio of their times (decode_alternated).
 * MACs per token are the matmuls' (attention is not counted; an MoE token's
 * routed experts only); weight bytes are the matrices' GGUF sizes. Inputs are ids i*7919 mod n_vocab. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "cli/cli_int.h"
#include "engine/engine.h"

#define MAX_BATCHES 16
#define BENCH_DEPTH_MAX (1 << 20)

typedef struct bench_opts {
    const char *model;
    int32_t n_prompt, n_gen, threads, repeats, depth;
    int32_t batches[MAX_BATCHES];
    int n_batches;
    bool json, exact, no_probe, shared, mla_decompress;
    uint32_t kv_type; /* CV_GGML_F32 (default), CV_GGML_F16 or CV_GGML_Q8_0 */
} bench_opts;

typedef struct phase {
    double matmul, attention, other;
    double bytes; /* weight bytes the calls read (an MoE step: its tokens' experts only) */
} phase;

static void add_stats(phase *ph, const cv_engine *e)
{
    const cv_engine_stats *st = cv_engine_last_stats(e);
    ph->matmul += st->t_matmul;
    ph->attention += st->t_attention;
    ph->other += st->t_other;
    ph->bytes += st->weight_bytes;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t fnv(uint64_t h, int32_t v)
{
    for (int i = 0; i < 4; i++) {
        h ^= (uint8_t)(v >> (8 * i));
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Feeds sequence seq positions from..n-1 (ids i*7919+1), n_batch per
 * forward call. */
static int fill_range(cv_engine *e, int32_t seq, int32_t from, int32_t n, int32_t n_batch, cv_err *err)
{
    const int32_t V = cv_engine_model(e)->hp.n_vocab;
    int32_t *tok = cv_xmalloc((size_t)n_batch * sizeof *tok), *pos = cv_xmalloc((size_t)n_batch * sizeof *pos),
            *sq = cv_xmalloc((size_t)n_batch * sizeof *sq);
    int rc = 0;
    for (int32_t at = from; at < n && rc == 0; at += n_batch) {
        const int32_t k = CV_MIN(n_batch, n - at);
        for (int32_t i = 0; i < k; i++)
            tok[i] = (int32_t)(((int64_t)(at + i) * 7919 + 1) % V), pos[i] = at + i, sq[i] = seq;
        const float *lg;
        int32_t nl;
        rc = cv_engine_forward(e, &(cv_batch){ k, tok, sq, pos, NULL }, &lg, &nl, err);
    }
    free(tok);
    free(pos);
    free(sq);
    return rc;
}

/* One forward call over n tokens of seq after its depth tokens, which it
 * then forgets: a checkpoint at depth first, so that the truncate reaches
 * depth on any model (a recurrent state goes back only to its checkpoint;
 * window layers keep what the length before the call sees). */
static int prefill_once(cv_engine *e, int32_t seq, int32_t depth, int32_t n, double *secs, phase *ph, cv_err *err)
{
    cv_engine_seq_checkpoint(e, seq);
    double t0 = cv_now_s();
    int rc = fill_range(e, seq, depth, depth + n, n, err);
    *secs = cv_now_s() - t0;
    add_stats(ph, e);
    const int32_t kept = cv_engine_seq_truncate(e, seq, depth);
    if (rc == 0 && kept != depth)
        rc = cv_err_set(err, CV_EINVAL, "bench: the sequence went back to %d positions, not the depth %d", kept,
                        depth);
    return rc;
}

/* One decode step of b sequences: tok[s] at pos[s] in, each one's greedy
 * next token out in tok[s]; the step's phase times added to ph. */
static int decode_step(cv_engine *e, int32_t b, int32_t *tok, int32_t *seq, int32_t *pos, bool *want, phase *ph,
                       cv_err *err)
{
    const int32_t V = cv_engine_model(e)->hp.n_vocab;
    const float *lg;
    int32_t nl;
    const int rc = cv_engine_forward(e, &(cv_batch){ b, tok, seq, pos, want }, &lg, &nl, err);
    if (rc)
        return rc;
    add_stats(ph, e);
    for (int32_t s = 0; s < b; s++)
        tok[s] = cv_argmax(lg + (size_t)s * V, V);
    return 0;
}

/* b sequences at `depth` tokens, then n timed steps of one token each.
 * A single sequence, or shared ones, fork from base (the bench's one
 * sequence filled to depth, untimed, once for every case and repeat); b
 * sequences of their own are each filled (untimed) here. */
static int decode_once(cv_engine *e, int32_t base, int32_t b, int32_t depth, bool shared, int32_t n_batch, int32_t n,
                       double *secs, uint64_t *hash, phase *ph, cv_err *err)
{
    const int32_t V = cv_engine_model(e)->hp.n_vocab;
    int32_t seq[MAX_BATCHES * 64], tok[MAX_BATCHES * 64], pos[MAX_BATCHES * 64];
    bool want[MAX_BATCHES * 64];
    int rc = 0;
    int32_t opened = 0;
    if (depth > 0 && (shared || b == 1)) {
        while (rc == 0 && opened < b)
            if ((rc = cv_engine_seq_fork(e, base, &seq[opened], err)) == 0)
                opened++;
    } else {
        while (rc == 0 && opened < b)
            if ((rc = cv_engine_seq_open(e, &seq[opened], err)) == 0)
                opened++;
        for (int32_t s = 0; s < b && rc == 0; s++)
            rc = fill_range(e, seq[s], 0, depth, n_batch, err);
    }
    if (rc)
        goto out;
    for (int32_t s = 0; s < b; s++)
        tok[s] = (int32_t)((1 + (int64_t)s * 7919) % V), want[s] = true;
    uint64_t h = 0xcbf29ce484222325ull;
    double t0 = cv_now_s();
    for (int32_t step = 0; step < n && rc == 0; step++) {
        for (int32_t s = 0; s < b; s++)
            pos[s] = depth + step;
        if ((rc = decode_step(e, b, tok, seq, pos, want, ph, err)))
            break;
        for (int32_t s = 0; s < b; s++)
            h = fnv(h, tok[s]);
    }
    *secs = cv_now_s() - t0;
    *hash = h;
out:
    for (int32_t s = 0; s < opened; s++)
        cv_engine_seq_close(e, seq[s]);
    return rc;
}

/* Decode at depth against decode at depth 0, one step of each in turn:
 * a sequence of its own from position 0 and one forked from base (at
 * depth), n steps each, so the host's swings (a minute when the two vCPUs
 * get one core's worth) fall on both alike and their ratio holds still
 * where two separate runs' does not. secs[k] and ph[k]: k = 0 the depth-0
 * steps, 1 the deep ones. */
static int decode_alternated(cv_engine *e, int32_t base, int32_t depth, int32_t n, double secs[2], phase ph[2],
                             cv_err *err)
{
    int32_t seq[2], tok[2] = { 1, 1 }, opened = 0;
    int rc = cv_engine_seq_open(e, &seq[0], err);
    if (rc == 0) {
        opened = 1;
        if ((rc = cv_engine_seq_fork(e, base, &seq[1], err)) == 0)
            opened = 2;
    }
    secs[0] = secs[1] = 0;
    for (int32_t step = 0; step < n && rc == 0; step++)
        for (int k = 0; k < 2 && rc == 0; k++) {
            int32_t pos = (k ? depth : 0) + step;
            bool want = true;
            const double t0 = cv_now_s();
            rc = decode_step(e, 1, &tok[k], &seq[k], &pos, &want, &ph[k], err);
            secs[k] += cv_now_s() - t0;
        }
    for (int32_t k = 0; k < opened; k++)
        cv_engine_seq_close(e, seq[k]);
    return rc;
}

/* The ceilings around a case's repeats: c[r] is measured before repeat r,
 * c[repeats] after the last. */
typedef struct ceiling {
    double bw, peak; /* bytes/s, multiply-adds/s (0 when not measured) */
} ceiling;

static int measure_ceiling(cv_pool *pool, bool probe, ceiling *c, cv_err *err)
{
    *c = (ceiling){ 0 };
    if (!probe)
        return 0;
    cv_probe_result bw, peak;
    int rc = cv_probe_read_bandwidth(pool, &bw, err);
    if (rc)
        return rc;
    c->bw = bw.value * 1e9;
    rc = cv_probe_int8_peak(pool, cv_isa_active(), &peak, err);
    if (rc == 0)
        c->peak = peak.value;
    return rc == CV_EUNSUPPORTED ? 0 : rc;
}

/* One case's result: median seconds, median fractions of the ceilings
 * around each repeat, and the range of the ceilings it saw. */
typedef struct case_result {
    double secs, f_bw, f_peak;
    double bw_lo, bw_hi, peak_lo, peak_hi;
} case_result;

/* secs[r] is repeat r's time; work_bytes / work_macs what one repeat
 * read and multiplied. */
static case_result summarize(double *secs, const ceiling *c, int repeats, double work_bytes, double work_macs)
{
    case_result res = { .bw_lo = c[0].bw, .bw_hi = c[0].bw, .peak_lo = c[0].peak, .peak_hi = c[0].peak };
    double fb[100], fp[100];
    for (int r = 0; r < repeats; r++) {
        const double B = 0.5 * (c[r].bw + c[r + 1].bw), P = 0.5 * (c[r].peak + c[r + 1].peak);
        fb[r] = B > 0 ? work_bytes / secs[r] / B : 0;
        fp[r] = P > 0 ? work_macs / secs[r] / P : 0;
    }
    for (int r = 1; r <= repeats; r++) {
        res.bw_lo = CV_MIN(res.bw_lo, c[r].bw), res.bw_hi = CV_MAX(res.bw_hi, c[r].bw);
        res.peak_lo = CV_MIN(res.peak_lo, c[r].peak), res.peak_hi = CV_MAX(res.peak_hi, c[r].peak);
    }
    res.f_bw = median(fb, repeats);
    res.f_peak = median(fp, repeats);
    res.secs = median(secs, repeats);
    return res;
}

static void print_ceilings(const case_result *r)
{
    if (r->bw_hi > 0)
        printf("  (%.1f-%.1f GB/s, %.0f-%.0f G int8/s)", r->bw_lo * 1e-9, r->bw_hi * 1e-9, r->peak_lo * 1e-9,
               r->peak_hi * 1e-9);
    printf("\n");
}

static int bench(const bench_opts *o)
{
    cv_err err = { 0 };
    cv_model *m = NULL;
    cv_engine *e = NULL;
    int rc;
    cv_model_params mp = { .dequantize = o->exact };
    if ((rc = cv_model_open(o->model, &mp, &m, &err)))
        goto fail;
    int32_t max_b = 1;
    for (int i = 0; i < o->n_batches; i++)
        max_b = CV_MAX(max_b, o->batches[i]);
    cv_engine_params ep = {
        .n_threads = o->threads,
        .n_ctx = o->depth + CV_MAX(o->n_prompt, o->n_gen) + 1,
        /* and the sequence at depth they fork from; with --depth, two for the
         * alternated case */
        .n_seq_max = (o->depth ? CV_MAX(max_b, 2) : max_b) + 1,
        .n_batch = CV_MAX(o->n_prompt, max_b),
        .n_logits = max_b,
        .kv_type = o->kv_type,
        .mla_decompress = o->mla_decompress,
    };
    if ((rc = cv_engine_create(m, &ep, &e, &err)))
        goto fail;
    cv_engine_set_profiling(e, true);
    cv_pool *pool = cv_engine_pool(e);
    const int nth = cv_pool_size(pool);
    const bool probe = !o->no_probe;
    const double bytes = (double)m->matmul_bytes, macs = (double)m->matmul_macs;
    cv_buf desc = { 0 };
    cv_model_describe(m, &desc);

    double *t = cv_xmalloc((size_t)o->repeats * sizeof *t);
    ceiling *c = cv_xmalloc((size_t)(o->repeats + 1) * sizeof *c);
    phase pph = { 0 };
    int32_t seq;
    if ((rc = cv_engine_seq_open(e, &seq, &err)) || (rc = fill_range(e, seq, 0, o->depth, ep.n_batch, &err)))
        goto fail_t;
    /* What the KV holds at depth (one sequence of depth positions), per
     * layer group, against all layers keeping every position. */
    cv_mem_info mi;
    cv_engine_mem_info(e, &mi);
    const int32_t n_kg = mi.n_groups;
    const cv_mem_group_info *kg = mi.group;
    double kv_bytes = 0;
    for (int32_t g = 0; g < n_kg; g++)
        kv_bytes += (double)(kg[g].n_blocks - kg[g].n_free) * (double)kg[g].format.block_bytes;
    const double kv_full_bytes = (double)(kg[0].n_blocks - kg[0].n_free) * (double)mi.block_bytes;
    for (int r = 0; r < o->repeats && rc == 0; r++)
        if ((rc = measure_ceiling(pool, probe, &c[r], &err)) == 0)
            rc = prefill_once(e, seq, o->depth, o->n_prompt, &t[r], &pph, &err);
    if (rc == 0)
        rc = measure_ceiling(pool, probe, &c[o->repeats], &err);
    if (rc)
        goto fail_t;
    /* A prefill computes the output layer for its last token only. */
    const double out_macs = (double)m->output_macs, pre_macs = (macs - out_macs) * o->n_prompt + out_macs;
    const case_result pre = summarize(t, c, o->repeats, bytes, pre_macs);
    const double pre_tps = o->n_prompt / pre.secs;
    if (o->json) {
        printf("{\"model\":");
        cv_buf js = { 0 };
        cv_buf_put_json_str(&js, o->model, strlen(o->model));
        printf("%s,\"describe\":", js.data);
        cv_buf_reset(&js);
        cv_buf_put_json_str(&js, desc.data, desc.len);
        printf("%s,\"isa\":\"%s\",\"threads\":%d,\"repeats\":%d,\"weight_bytes\":%.0f,\"active_bytes\":%.0f,"
               "\"macs_per_token\":%.0f,",
               js.data, cv_isa_name(cv_isa_active()), nth, o->repeats, bytes, (double)m->active_bytes, macs);
        cv_buf_free(&js);
        printf("\"kv\":{\"depth\":%d,\"bytes\":%.0f,\"all_full_bytes\":%.0f,\"groups\":[", o->depth, kv_bytes,
               kv_full_bytes);
        for (int32_t g = 0; g < n_kg; g++)
            printf("%s{\"window\":%d,\"layers\":%d,\"blocks\":%d,\"bytes\":%.0f}", g ? "," : "", kg[g].window,
                   kg[g].format.n_layer, kg[g].n_blocks - kg[g].n_free,
                   (double)(kg[g].n_blocks - kg[g].n_free) * (double)kg[g].format.block_bytes);
        printf("]},");
        printf("\"prefill\":{\"tokens\":%d,\"depth\":%d,\"macs\":%.0f,\"seconds\":%.6f,\"tok_s\":%.3f,", o->n_prompt,
               o->depth, pre_macs, pre.secs, pre_tps);
        if (probe)
            printf("\"frac_int8_peak\":%.4f,\"int8_peak_macs\":[%.4g,%.4g]},", pre.f_peak, pre.peak_lo, pre.peak_hi);
        else
            printf("\"frac_int8_peak\":null,\"int8_peak_macs\":null},");
        printf("\"decode\":[");
    } else {
        printf("corvid bench: %s\n  %s\n", o->model, desc.data);
        if (m->active_bytes != m->matmul_bytes)
            printf("  %d threads, medians of %d repeats; weights %.1f MiB, of which a token reads %.1f MiB (its "
                   "routed experts), %.3g MACs per token; %s KV\n",
                   nth, o->repeats, bytes / 1048576, (double)m->active_bytes / 1048576, macs,
                   cv_engine_kv_type_name(o->kv_type));
        else
            printf("  %d threads, medians of %d repeats; weights %.1f MiB read per step, %.3g MACs per token; %s KV\n",
                   nth, o->repeats, bytes / 1048576, macs, cv_engine_kv_type_name(o->kv_type));
        if (probe)
            printf("  each repeat against the mean of the ceilings measured just before and after it (read "
                   "bandwidth,\n  int8 multiply-add peak of the %s level: %s); the range each case saw is in "
                   "parentheses\n", cv_isa_name(cv_isa_active()), cv_probe_int8_what(cv_isa_active()));
        if (o->depth) {
            printf("  KV at depth %d: %.1f MiB, %.0f%% of the %.1f MiB every layer keeping every position would take",
                   o->depth, kv_bytes / 1048576, 100 * kv_bytes / kv_full_bytes, kv_full_bytes / 1048576);
            for (int32_t g = 0; g < n_kg; g++)
                printf("%s %d %s layers %.2f MiB", g ? "," : ":", kg[g].format.n_layer,
                       kg[g].window ? "window" : "full",
                       (double)(kg[g].n_blocks - kg[g].n_free) * (double)kg[g].format.block_bytes / 1048576);
            if (n_kg > 1)
                printf(" (window %d)", kg[1].window);
            printf("\n");
        }
        double tot = pph.matmul + pph.attention + pph.other;
        char at_depth[32] = "";
        if (o->depth)
            snprintf(at_depth, sizeof at_depth, " at depth %d", o->depth);
        printf("%2d prefill %4d tokens%s: %9.2f tok/s", 1, o->n_prompt, at_depth, pre_tps);
        if (probe)
            printf("  %5.1f%% of int8 peak ", 100 * pre.f_peak);
        printf("  [matmul %2.0f%%, attention %2.0f%%, other %2.0f%%]", 100 * pph.matmul / tot,
               100 * pph.attention / tot, 100 * pph.other / tot);
        print_ceilings(&pre);
    }
    for (int i = 0; i < o->n_batches && rc == 0; i++) {
        int32_t b = o->batches[i];
        uint64_t hash = 0, h0 = 0;
        phase ph = { 0 };
        for (int r = 0; r < o->repeats && rc == 0; r++) {
            if ((rc = measure_ceiling(pool, probe, &c[r], &err)))
                break;
            rc = decode_once(e, seq, b, o->depth, o->shared, ep.n_batch, o->n_gen, &t[r], &hash, &ph, &err);
            if (r == 0)
                h0 = hash;
            else if (hash != h0)
                fprintf(stderr, "corvid bench: warning: repeat %d generated other ids (hash %016llx vs %016llx)\n",
                        r, (unsigned long long)hash, (unsigned long long)h0);
        }
        if (rc == 0)
            rc = measure_ceiling(pool, probe, &c[o->repeats], &err);
        if (rc)
            break;
        /* Every repeat generates the same ids, so reads the same experts. */
        const case_result dec = summarize(t, c, o->repeats, ph.bytes / o->repeats, macs * o->n_gen * b);
        const double tps = b * o->n_gen / dec.secs;
        char depth_note[48] = "";
        if (o->depth)
            snprintf(depth_note, sizeof depth_note, " at depth %d%s", o->depth, o->shared ? " (shared)" : "");
        /* A step's time and its attention part: at depth, attention's own
         * time is the figure to compare, since the matmuls' moves with the
         * machine's bandwidth. */
        const double tot = ph.matmul + ph.attention + ph.other, step_ms = 1e3 * dec.secs / o->n_gen;
        const double att_ms = tot > 0 ? step_ms * ph.attention / tot : 0;
        if (o->json) {
            printf("%s{\"batch\":%d,\"tokens\":%d,\"seconds\":%.6f,\"tok_s\":%.3f,\"step_ms\":%.3f,"
                   "\"attention_ms\":%.3f,\"weight_bytes_per_step\":%.0f,",
                   i ? "," : "", b, o->n_gen, dec.secs, tps, step_ms, att_ms, ph.bytes / o->repeats / o->n_gen);
            if (probe)
                printf("\"frac_bandwidth\":%.4f,\"frac_int8_peak\":%.4f,\"read_bandwidth_gbs\":[%.3f,%.3f],"
                       "\"int8_peak_macs\":[%.4g,%.4g],",
                       dec.f_bw, dec.f_peak, dec.bw_lo * 1e-9, dec.bw_hi * 1e-9, dec.peak_lo, dec.peak_hi);
            else
                printf("\"frac_bandwidth\":null,\"frac_int8_peak\":null,\"read_bandwidth_gbs\":null,"
                       "\"int8_peak_macs\":null,");
            printf("\"hash\":\"%016llx\"}", (unsigned long long)h0);
        } else {
            printf("%2d decode b=%-2d %4d steps%s: %9.2f tok/s", i + 2, b, o->n_gen, depth_note, tps);
            if (m->active_bytes != m->matmul_bytes)
                printf("  %.1f MiB read/step", ph.bytes / o->repeats / o->n_gen / 1048576);
            if (probe)
                printf("  %5.1f%% of bandwidth  %5.1f%% of int8 peak", 100 * dec.f_bw, 100 * dec.f_peak);
            printf("  %.2f ms/step (attention %.2f)  hash %016llx  [matmul %2.0f%%, attention %2.0f%%, "
                   "other %2.0f%%]",
                   step_ms, att_ms, (unsigned long long)h0, 100 * ph.matmul / tot, 100 * ph.attention / tot,
                   100 * ph.other / tot);
            print_ceilings(&dec);
        }
    }
    if (o->json && rc == 0)
        printf("]");
    if (o->depth && rc == 0) {
        /* the deep steps against depth-0 steps taken in turn with them (in
         * the JSON, each pair is [depth 0, depth D]) */
        double s[2] = { 0, 0 }, att[2] = { 0, 0 };
        for (int r = 0; r < o->repeats && rc == 0; r++) {
            double sr[2];
            phase ph[2] = { 0 };
            if ((rc = decode_alternated(e, seq, o->depth, o->n_gen, sr, ph, &err)))
                break;
            for (int k = 0; k < 2; k++) {
                const double tot = ph[k].matmul + ph[k].attention + ph[k].other;
                s[k] += sr[k];
                att[k] += tot > 0 ? sr[k] * ph[k].attention / tot : 0;
            }
        }
        if (rc == 0) {
            const double steps = (double)o->n_gen * o->repeats, ratio = s[0] / s[1];
            if (o->json)
                printf(",\"alternated\":{\"depth\":%d,\"steps\":%.0f,\"step_ms\":[%.3f,%.3f],"
                       "\"attention_ms\":[%.3f,%.3f],\"ratio\":%.4f}",
                       o->depth, steps, 1e3 * s[0] / steps, 1e3 * s[1] / steps, 1e3 * att[0] / steps,
                       1e3 * att[1] / steps, ratio);
            else
                printf("%2d decode b=1 at depth %d against depth 0, %.0f steps of each in turn: %.2f against %.2f "
                       "tok/s, ratio %.3f  (%.2f against %.2f ms/step, attention %.2f against %.2f)\n",
                       o->n_batches + 2, o->depth, steps, steps / s[1], steps / s[0], ratio, 1e3 * s[1] / steps,
                       1e3 * s[0] / steps, 1e3 * att[1] / steps, 1e3 * att[0] / steps);
        }
    }
    cv_engine_seq_close(e, seq);
    if (rc == 0 && o->json)
        printf("}\n");
fail_t:
    free(t);
    free(c);
    cv_buf_free(&desc);
fail:
    if (rc)
        fprintf(stderr, "corvid bench: %s\n", err.msg);
    cv_engine_destroy(e);
    cv_model_close(m);
    return rc == 0 ? 0 : 1;
}

static int parse_batches(const char *s, bench_opts *o)
{
    o->n_batches = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 1 || v > MAX_BATCHES * 4 || o->n_batches == MAX_BATCHES)
            return -1;
        o->batches[o->n_batches++] = (int32_t)v;
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return o->n_batches ? 0 : -1;
}

static int batches(void *opts, const char *v, cv_err *err)
{
    if (parse_batches(v, opts))
        return cv_err_set(err, CV_EINVAL, "'%s' must be a list like 1,2,4,8 (each 1..%d, at most %d)", v,
                          MAX_BATCHES * 4, MAX_BATCHES);
    return 0;
}

static int kv_type(void *opts, const char *v, cv_err *err)
{
    return cv_engine_kv_type_parse(v, &((bench_opts *)opts)->kv_type, err);
}

#define O(field) offsetof(bench_opts, field)
static const cv_flag flags[] = {
    CV_FLAG_ROW("--prompt", "-p", CV_FLAG_I32, O(n_prompt), 1, 65536, "N", "prompt tokens prefilled (default 512)"),
    CV_FLAG_ROW("--n-gen", "-n", CV_FLAG_I32, O(n_gen), 1, 65536, "N", "tokens decoded (default 128)"),
    CV_FLAG_FN_ROW("--batch", "-b", "1,2,4,8", "batch sizes of the batched decode (default 1,2,4,8)", batches, false),
    CV_FLAG_ROW("--depth", NULL, CV_FLAG_I32, O(depth), 0, BENCH_DEPTH_MAX, "D",
      "measure after D tokens of context, as an agent's turn deep in its conversation (default 0)"),
    CV_FLAG_ROW("--shared", NULL, CV_FLAG_BOOL, O(shared), 0, 0, NULL,
      "with --depth: the batch forks from one context"),
    CV_FLAG_FN_ROW("--kv-type", NULL, "f32|f16|q8_0", "KV cache precision (default f32)", kv_type, false),
    CV_FLAG_ROW("--threads", "-t", CV_FLAG_I32, O(threads), 1, 1024, "N", "compute threads (default: every CPU)"),
    CV_FLAG_ROW("--repeats", "-r", CV_FLAG_I32, O(repeats), 1, 100, "R", "repeats of each case (default 3)"),
    CV_FLAG_ROW("--json", NULL, CV_FLAG_BOOL, O(json), 0, 0, NULL, "one JSON document instead of the table"),
    CV_FLAG_ROW("--exact", NULL, CV_FLAG_BOOL, O(exact), 0, 0, NULL, "dequantize every weight to f32 at load"),
    CV_FLAG_ROW("--mla-decompress", NULL, CV_FLAG_BOOL, O(mla_decompress), 0, 0, NULL,
      "latent attention: prefill's whole groups of 128 positions in the decompressed form"),
    CV_FLAG_ROW("--no-probe", NULL, CV_FLAG_BOOL, O(no_probe), 0, 0, NULL,
      "skip the bandwidth and int8 probes (and the fractions of them)"),

};
#undef O
static const cv_cli_spec spec = { .name = "bench", .args = "MODEL", .min_args = 1, .max_args = 1, .flags = flags,
                                  .n_flags = CV_ARRAY_LEN(flags), .also = &cv_bench_serve_spec };

int cv_cmd_bench(int argc, char **argv)
{
    /* --serve URL: the scheduler's load generator against a running server
     * (cmd_bench_serve.c), not this engine benchmark. */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--serve") || !strncmp(argv[i], "--serve=", 8))
            return cv_cmd_bench_serve(argc, argv);
    bench_opts o = { .n_prompt = 512, .n_gen = 128, .repeats = 3, .batches = { 1, 2, 4, 8 }, .n_batches = 4 };
    int n, st;
    if (!cv_cli_parse(&spec, &o, argc, argv, &n, &st))
        return st;
    if (o.n_prompt > CV_MAX_BATCH_TOKENS)
        return cv_cli_usage_error(&spec, "-p %d exceeds the %d tokens of one forward call", o.n_prompt,
                                  CV_MAX_BATCH_TOKENS);
    o.model = argv[1];
    return bench(&o);
}
