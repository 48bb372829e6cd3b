/* cmd_bench_serve.c — `corvid bench --serve URL`: the scheduler's load
 * generator. It drives a running `corvid serve` over HTTP (streaming
 * /v1/completions with token-id prompts, so the client needs no tokenizer
 * and every figure is about the server) and prints one line per case,
 * speedtest1's manner: fixed seeds, medians of repeats.
 *
 *   decode   S concurrent streams (S from --streams), each a fresh random
 *            prompt of -p ids and -n generated tokens. Reports the
 *            aggregate decode rate in the window where all S streams are
 *            decoding (from the last first token to the first end), each
 *            stream's own rate, and time to first token.
 *   agents   --agents A simulated agents, interleaved, --turns T each: a
 *            common --system-token system prompt and tool list, then a
 *            private history that grows each turn by the previous reply
 *            (re-sent as new ids, as a template that re-renders the reply
 *            differently would: only the previous prompt is reusable, a
 *            conservative choice) and a tool result of --turn-tokens ids.
 *            Agents send their next turn as soon as their reply ends, or,
 *            with --tool-ms M, after a tool run drawn uniformly from
 *            [0, 2M] ms (one seeded stream per agent), as a real agent that
 *            runs a command or reads files between turns does. With
 *            --in-flight K, at most K turns run at once and turns start in
 *            round-robin order (agent 0's turn 0, agent 1's turn 0, ...,
 *            agent 0's turn 1, ...): K = 1 sends one agent's turn at a time,
 *            which isolates the prefix cache from queueing behind others.
 *            Per turn: time to first token, prompt tokens sent, cached
 *            (the server's usage), computed. Then two references for the
 *            time to "prefill only the new tokens", both on the idle
 *            server after the run: "alone" sends the turn's cached prefix
 *            again followed by as many fresh ids as the turn computed (the
 *            same tokens' work at the same positions, attending to the same
 *            context, with nothing else running: what the turn would cost
 *            if it had the server to itself); "cold" sends just that many
 *            ids as a new prompt (no context to attend to, so with a long
 *            system prompt it is several times cheaper than any turn can
 *            be: attention over 12k cached positions costs more than the
 *            new tokens' matmuls). The ratios to both are printed.
 *   first    one agent's first turn (system prompt + a user message of
 *            --seed): time to first token and cached tokens; run it before
 *            and after a restart for the restart figure (docs/PERF.md).
 *   embed    one POST /v1/embeddings of --inputs token-id inputs of -p ids
 *            each (an embedding model): the prompt tokens per second of the
 *            whole request, the rate to hold against the model's prefill.
 *
 * Every request asks for --model (default "bench": a server of one model
 * answers any name; one of several needs a name it serves), so two runs at
 * once against two models of one server load both.
 *
 * With --session-header NAME each agent sends `NAME: corvid-bench-S-A` (S
 * the seed, A the agent) with its turns and its "alone" reference, as Claude
 * Code sends X-Claude-Code-Session-Id: a balancer in front of several
 * replicas (deploy/haproxy) then keeps every agent on one replica.
 *
 * Generated text is not checked; --ban ID (repeatable) sets a logit bias
 * of -100 on an id (the model's end-of-text) so every stream runs its full
 * length, --favor ID one of +100 (a run of that id: output the server's
 * speculation drafts right every time, its ceiling), --temp T samples
 * (seeded) instead of greedy. Ids are drawn from [3, --id-range). */
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli/cli.h"

#define MAX_STREAMS 64
#define MAX_BANS 16

typedef struct bs_opts {
    const char *url;
    const char *api_key;
    const char *session_header; /* --session-header: each agent's affinity key, or NULL */
    const char *cases;
    const char *model;
    int32_t streams[16];
    int n_streams;
    int32_t n_prompt, n_gen, repeats, id_range;
    int32_t agents, turns, system_tokens, turn_tokens, reply_tokens, tool_ms, in_flight, inputs;
    int32_t bans[MAX_BANS], favors[MAX_BANS];
    int n_bans, n_favors;
    double temp;
    uint64_t seed;
} bs_opts;

/* ---- one streaming request ---- */

typedef struct stream_rec {
    const bs_opts *o;
    const int32_t *prompt;
    const char *session; /* the agent's session id (with --session-header), or NULL */
    int32_t n_prompt, max_tokens;
    double t_start, t_first, t_end;
    double *chunk_t;       /* arrival time of each chunk with text */
    int32_t n_chunks, cap_chunks;
    int32_t completion_tokens, prompt_tokens, cached_tokens;
    long http_status;
    bool done;
    char err[256];
    cv_buf line;
} stream_rec;

static double now_s(void) { return cv_now_s(); }

static void on_data_line(stream_rec *r, const char *s, size_t len)
{
    if (len == 6 && !memcmp(s, "[DONE]", 6)) {
        r->done = true;
        return;
    }
    json_t *j = cv_json_parse(s, len, NULL);
    if (!j)
        return;
    json_t *choices = json_object_get(j, "choices");
    const char *text = json_string_value(json_object_get(json_array_get(choices, 0), "text"));
    if (text && *text) {
        double t = now_s();
        if (!r->n_chunks)
            r->t_first = t;
        if (r->n_chunks == r->cap_chunks) {
            r->cap_chunks = r->cap_chunks ? 2 * r->cap_chunks : 256;
            r->chunk_t = cv_xrealloc(r->chunk_t, (size_t)r->cap_chunks * sizeof *r->chunk_t);
        }
        r->chunk_t[r->n_chunks++] = t;
    }
    json_t *u = json_object_get(j, "usage");
    if (json_is_object(u)) {
        r->completion_tokens = (int32_t)json_integer_value(json_object_get(u, "completion_tokens"));
        r->prompt_tokens = (int32_t)json_integer_value(json_object_get(u, "prompt_tokens"));
        r->cached_tokens =
            (int32_t)json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
    }
    json_t *e = json_object_get(j, "error");
    if (e)
        snprintf(r->err, sizeof r->err, "%s", json_string_value(json_object_get(e, "message")));
    json_decref(j);
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    stream_rec *r = ud;
    cv_buf_append(&r->line, p, size * n);
    for (;;) {
        char *nl = r->line.data ? memchr(r->line.data, '\n', r->line.len) : NULL;
        if (!nl)
            break;
        size_t len = (size_t)(nl - r->line.data);
        if (len >= 6 && !memcmp(r->line.data, "data: ", 6))
            on_data_line(r, r->line.data + 6, len - 6);
        else if (len > 0 && r->line.data[0] == '{') /* an error body that is not SSE */
            on_data_line(r, r->line.data, len);
        cv_buf_consume(&r->line, len + 1);
    }
    return size * n;
}

/* `{"model":"NAME"` opening a request body. */
static void put_model(cv_buf *body, const bs_opts *o)
{
    json_t *name = json_string(o->model);
    cv_buf_puts(body, "{\"model\":");
    cv_json_dump(body, name);
    json_decref(name);
}

/* A POST of body (JSON) to url with the key, the headers in *h besides
 * (the list grows; the caller frees it), the reply to fn(ud). */
static CURL *post_handle(const bs_opts *o, const char *url, const cv_buf *body, struct curl_slist **h,
                         size_t (*fn)(char *, size_t, size_t, void *), void *ud)
{
    CURL *c = curl_easy_init();
    *h = curl_slist_append(*h, "Content-Type: application/json");
    if (o->api_key) {
        char auth[512];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->api_key);
        *h = curl_slist_append(*h, auth);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)body->len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, fn);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, ud);
    return c;
}

static void run_stream(stream_rec *r)
{
    const bs_opts *o = r->o;
    cv_buf body = { 0 }, url = { 0 };
    put_model(&body, o);
    cv_buf_puts(&body, ",\"prompt\":[");
    for (int32_t i = 0; i < r->n_prompt; i++)
        cv_buf_printf(&body, "%s%d", i ? "," : "", r->prompt[i]);
    cv_buf_printf(&body, "],\"max_tokens\":%d,\"temperature\":%g,\"seed\":%llu,\"stream\":true,"
                  "\"stream_options\":{\"include_usage\":true}", r->max_tokens, o->temp,
                  (unsigned long long)(o->seed + (uint64_t)r->prompt[0]));
    if (o->n_bans || o->n_favors) {
        cv_buf_puts(&body, ",\"logit_bias\":{");
        const char *sep = "";
        for (int i = 0; i < o->n_bans; i++, sep = ",")
            cv_buf_printf(&body, "%s\"%d\":-100", sep, o->bans[i]);
        for (int i = 0; i < o->n_favors; i++, sep = ",")
            cv_buf_printf(&body, "%s\"%d\":100", sep, o->favors[i]);
        cv_buf_putc(&body, '}');
    }
    cv_buf_putc(&body, '}');
    cv_buf_printf(&url, "%s/v1/completions", o->url);

    struct curl_slist *h = NULL;
    char session[256];
    if (o->session_header && r->session) {
        snprintf(session, sizeof session, "%s: %s", o->session_header, r->session);
        h = curl_slist_append(h, session);
    }
    CURL *c = post_handle(o, url.data, &body, &h, on_body, r);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
    r->t_start = now_s();
    CURLcode rc = curl_easy_perform(c);
    r->t_end = now_s();
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->http_status);
    if (rc != CURLE_OK)
        snprintf(r->err, sizeof r->err, "%s", curl_easy_strerror(rc));
    else if (r->http_status != 200 && !r->err[0])
        snprintf(r->err, sizeof r->err, "HTTP %ld", r->http_status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    cv_buf_free(&body);
    cv_buf_free(&url);
    cv_buf_free(&r->line);
}

static void *stream_thread(void *arg)
{
    run_stream(arg);
    return NULL;
}

static void rec_free(stream_rec *r) { free(r->chunk_t); }

static bool rec_ok(const stream_rec *r)
{
    if (r->err[0] || !r->done) {
        fprintf(stderr, "corvid bench --serve: request failed: %s\n", r->err[0] ? r->err : "stream ended early");
        return false;
    }
    return true;
}

/* ---- helpers ---- */

static void fill_ids(int32_t *ids, int32_t n, uint64_t seed, int32_t range)
{
    cv_rng rng;
    cv_rng_seed(&rng, seed);
    for (int32_t i = 0; i < n; i++)
        ids[i] = 3 + (int32_t)cv_rng_below(&rng, (uint64_t)(range - 3));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    if (n == 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- decode ---- */

static int case_decode(const bs_opts *o)
{
    for (int k = 0; k < o->n_streams; k++) {
        const int S = o->streams[k];
        double agg[32], per[32], ttft[32], window[32];
        int64_t tokens = 0;
        for (int rep = 0; rep < o->repeats; rep++) {
            stream_rec recs[MAX_STREAMS];
            int32_t *prompts = cv_xmalloc((size_t)S * (size_t)o->n_prompt * sizeof *prompts);
            pthread_t th[MAX_STREAMS];
            memset(recs, 0, sizeof recs);
            for (int i = 0; i < S; i++) {
                fill_ids(prompts + (size_t)i * o->n_prompt, o->n_prompt,
                         o->seed * 1000003u + (uint64_t)S * 1009u + (uint64_t)rep * 101u + (uint64_t)i, o->id_range);
                recs[i] = (stream_rec){ .o = o, .prompt = prompts + (size_t)i * o->n_prompt, .n_prompt = o->n_prompt,
                                        .max_tokens = o->n_gen };
                pthread_create(&th[i], NULL, stream_thread, &recs[i]);
            }
            for (int i = 0; i < S; i++)
                pthread_join(th[i], NULL);
            bool ok = true;
            for (int i = 0; i < S; i++)
                ok = ok && rec_ok(&recs[i]);
            if (!ok) {
                for (int i = 0; i < S; i++)
                    rec_free(&recs[i]);
                free(prompts);
                return 1;
            }
            /* The window where all S decode: from the last first token to
             * the first end. Chunks are tokens but for bytes the detokenizer
             * holds back, so each stream's chunks are scaled to its token
             * count. */
            double F = 0, E = INFINITY, ps[MAX_STREAMS], ts[MAX_STREAMS];
            for (int i = 0; i < S; i++) {
                F = fmax(F, recs[i].t_first);
                E = fmin(E, recs[i].chunk_t[recs[i].n_chunks - 1]);
            }
            double in_window = 0;
            for (int i = 0; i < S; i++) {
                const stream_rec *r = &recs[i];
                int32_t c = 0;
                for (int32_t j = 0; j < r->n_chunks; j++)
                    c += r->chunk_t[j] > F && r->chunk_t[j] <= E;
                in_window += (double)c * r->completion_tokens / r->n_chunks;
                double span = r->chunk_t[r->n_chunks - 1] - r->t_first;
                ps[i] = span > 0 ? (r->completion_tokens - 1) / span : NAN;
                ts[i] = r->t_first - r->t_start;
                tokens += r->completion_tokens;
            }
            window[rep] = E - F;
            agg[rep] = E > F ? in_window / (E - F) : NAN;
            per[rep] = median(ps, S);
            ttft[rep] = median(ts, S);
            for (int i = 0; i < S; i++)
                rec_free(&recs[i]);
            free(prompts);
        }
        printf("decode streams=%-2d  aggregate %8.1f tok/s  per-stream %7.1f tok/s  ttft %6.3f s  window %5.2f s  "
               "(%d x %d-token prompts, %d tokens out; median of %d)\n",
               S, median(agg, o->repeats), median(per, o->repeats), median(ttft, o->repeats),
               median(window, o->repeats), S, o->n_prompt, o->n_gen, o->repeats);
        fflush(stdout);
        (void)tokens;
    }
    return 0;
}

/* ---- agents ---- */

typedef struct turn_rec {
    int32_t prompt, cached, computed;
    double ttft;
} turn_rec;

/* --in-flight: turn n (= t * agents + agent) starts once every turn before
 * it has started and fewer than limit are running. */
typedef struct turn_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t next;     /* the turn allowed to start next */
    int32_t running, limit;
    bool abort;       /* an agent failed: the others stop waiting */
} turn_gate;

static bool gate_enter(turn_gate *g, int64_t n)
{
    pthread_mutex_lock(&g->mu);
    while (!g->abort && (g->next != n || g->running >= g->limit))
        pthread_cond_wait(&g->cv, &g->mu);
    bool ok = !g->abort;
    if (ok)
        g->next++, g->running++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return ok;
}

static void gate_leave(turn_gate *g, bool failed)
{
    pthread_mutex_lock(&g->mu);
    g->running--;
    g->abort = g->abort || failed;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

typedef struct agent {
    const bs_opts *o;
    turn_gate *gate; /* NULL: no --in-flight limit */
    int id;
    const int32_t *system;
    turn_rec *turns;
    int32_t *ctx; /* every id the agent sent (each turn's prompt is a prefix) */
    char session[48]; /* corvid-bench-SEED-ID, sent with --session-header */
    bool ok;
} agent;

static void *agent_thread(void *arg)
{
    agent *a = arg;
    const bs_opts *o = a->o;
    int32_t cap = o->system_tokens + o->turns * (o->turn_tokens + o->reply_tokens) + 16;
    int32_t *ctx = cv_xmalloc((size_t)cap * sizeof *ctx);
    memcpy(ctx, a->system, (size_t)o->system_tokens * sizeof *ctx);
    int32_t n = o->system_tokens;
    a->ok = true;
    cv_rng tool;
    cv_rng_seed(&tool, o->seed * 6151u + (uint64_t)a->id);
    for (int t = 0; t < o->turns; t++) {
        if (t > 0 && o->tool_ms > 0) { /* the agent runs its tool */
            const uint64_t ms = cv_rng_below(&tool, 2 * (uint64_t)o->tool_ms + 1);
            const struct timespec ts = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000 };
            nanosleep(&ts, NULL);
        }
        if (t > 0) { /* the previous reply, re-sent */
            fill_ids(ctx + n, o->reply_tokens, o->seed * 7919u + (uint64_t)a->id * 131u + (uint64_t)t * 2u, o->id_range);
            n += o->reply_tokens;
        }
        fill_ids(ctx + n, o->turn_tokens, o->seed * 7919u + (uint64_t)a->id * 131u + (uint64_t)t * 2u + 1u,
                 o->id_range);
        n += o->turn_tokens;
        stream_rec r = { .o = o, .prompt = ctx, .session = a->session, .n_prompt = n,
                         .max_tokens = o->reply_tokens };
        if (a->gate && !gate_enter(a->gate, (int64_t)t * o->agents + a->id)) {
            a->ok = false;
            break;
        }
        run_stream(&r);
        if (a->gate)
            gate_leave(a->gate, !rec_ok(&r));
        if (!rec_ok(&r)) {
            a->ok = false;
            rec_free(&r);
            break;
        }
        a->turns[t] = (turn_rec){ .prompt = r.prompt_tokens, .cached = r.cached_tokens,
                                  .computed = r.prompt_tokens - r.cached_tokens, .ttft = r.t_first - r.t_start };
        rec_free(&r);
    }
    a->ctx = ctx;
    return NULL;
}

/* Time to first token of the turn's cached prefix followed by as many
 * fresh ids as the turn computed, on the idle server; NAN if the server did
 * not find the prefix (evicted) or the request failed. */
static double alone_ttft(const bs_opts *o, const agent *a, const turn_rec *tr, uint64_t seed)
{
    int32_t *ids = cv_xmalloc((size_t)tr->prompt * sizeof *ids);
    memcpy(ids, a->ctx, (size_t)tr->cached * sizeof *ids);
    fill_ids(ids + tr->cached, tr->computed, seed, o->id_range);
    stream_rec r = { .o = o, .prompt = ids, .session = a->session, .n_prompt = tr->prompt, .max_tokens = 1 };
    run_stream(&r);
    double v = rec_ok(&r) && r.n_chunks && r.cached_tokens == tr->cached ? r.t_first - r.t_start : NAN;
    rec_free(&r);
    free(ids);
    return v;
}

/* Time to first token of a cold request of n ids (random: no hits). */
static double cold_ttft(const bs_opts *o, int32_t n, uint64_t seed)
{
    double v[5];
    int k = 0;
    int32_t *ids = cv_xmalloc((size_t)n * sizeof *ids);
    for (int rep = 0; rep < 3; rep++) {
        fill_ids(ids, n, seed + (uint64_t)rep * 7777u, o->id_range);
        stream_rec r = { .o = o, .prompt = ids, .n_prompt = n, .max_tokens = 1 };
        run_stream(&r);
        if (rec_ok(&r) && r.n_chunks)
            v[k++] = r.t_first - r.t_start;
        rec_free(&r);
    }
    free(ids);
    return median(v, k);
}

static int case_agents(const bs_opts *o)
{
    int32_t *system = cv_xmalloc((size_t)o->system_tokens * sizeof *system);
    fill_ids(system, o->system_tokens, o->seed * 31u + 17u, o->id_range);
    agent ag[MAX_STREAMS];
    pthread_t th[MAX_STREAMS];
    turn_gate gate = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .limit = o->in_flight };
    for (int i = 0; i < o->agents; i++) {
        ag[i] = (agent){ .o = o, .gate = o->in_flight ? &gate : NULL, .id = i, .system = system };
        snprintf(ag[i].session, sizeof ag[i].session, "corvid-bench-%llu-%d", (unsigned long long)o->seed, i);
        ag[i].turns = cv_xcalloc((size_t)o->turns, sizeof *ag[i].turns);
        pthread_create(&th[i], NULL, agent_thread, &ag[i]);
    }
    bool ok = true;
    for (int i = 0; i < o->agents; i++) {
        pthread_join(th[i], NULL);
        ok = ok && ag[i].ok;
    }
    free(system);
    if (!ok) {
        for (int i = 0; i < o->agents; i++) {
            free(ag[i].turns);
            free(ag[i].ctx);
        }
        return 1;
    }
    /* Baselines: a cold prefill of each distinct computed count, alone. */
    enum { MAXB = 256 };
    int32_t bn[MAXB];
    double bt[MAXB];
    int nb = 0;
    for (int i = 0; i < o->agents; i++)
        for (int t = 1; t < o->turns; t++) {
            int32_t c = ag[i].turns[t].computed;
            int j = 0;
            while (j < nb && bn[j] != c)
                j++;
            if (j == nb && nb < MAXB && c > 0) {
                bn[nb] = c;
                bt[nb] = cold_ttft(o, c, o->seed * 4099u + (uint64_t)c);
                nb++;
            }
        }
    char in_flight[64] = "all agents' turns at once";
    if (o->in_flight)
        snprintf(in_flight, sizeof in_flight, "at most %d turn%s at once, round robin", o->in_flight,
                 o->in_flight > 1 ? "s" : "");
    printf("agents: %d agents x %d turns, system prompt %d ids, +%d tool ids and a %d-token reply per turn, "
           "tool runs of 0-%d ms between turns, %s\n",
           o->agents, o->turns, o->system_tokens, o->turn_tokens, o->reply_tokens, 2 * o->tool_ms, in_flight);
    printf("agent turn   prompt   cached computed   ttft_s   alone_s  ratio   cold_s  ratio\n");
    int64_t sent = 0, cached = 0, sent_later = 0, cached_later = 0, computed_all = 0;
    double r_cold[4096], r_alone[4096], first_ttft[MAX_STREAMS], later_ttft[4096];
    int nc = 0, na = 0, nl = 0, n_evicted = 0;
    for (int t = 0; t < o->turns; t++)
        for (int i = 0; i < o->agents; i++) {
            const turn_rec *tr = &ag[i].turns[t];
            double cold = NAN, alone = NAN; /* none for first turns */
            for (int j = 0; t > 0 && j < nb; j++)
                if (bn[j] == tr->computed)
                    cold = bt[j];
            if (t > 0 && tr->computed > 0) {
                alone = alone_ttft(o, &ag[i], tr, o->seed * 6151u + (uint64_t)i * 977u + (uint64_t)t);
                n_evicted += !isfinite(alone);
            }
            printf("%5d %4d %8d %8d %8d %8.3f %9.3f %6.2f %8.3f %6.2f\n", i, t + 1, tr->prompt, tr->cached,
                   tr->computed, tr->ttft, alone, tr->ttft / alone, cold, tr->ttft / cold);
            sent += tr->prompt;
            cached += tr->cached;
            computed_all += tr->computed;
            if (t == 0) {
                first_ttft[i] = tr->ttft;
                continue;
            }
            sent_later += tr->prompt;
            cached_later += tr->cached;
            if (nl < 4096)
                later_ttft[nl++] = tr->ttft;
            if (isfinite(cold) && nc < 4096)
                r_cold[nc++] = tr->ttft / cold;
            if (isfinite(alone) && na < 4096)
                r_alone[na++] = tr->ttft / alone;
        }
    double worst_cold = 0, worst_alone = 0;
    for (int i = 0; i < nc; i++)
        worst_cold = fmax(worst_cold, r_cold[i]);
    for (int i = 0; i < na; i++)
        worst_alone = fmax(worst_alone, r_alone[i]);
    printf("agents summary: prompt tokens sent %lld, cached %lld, computed %lld (%.1f%%); hit rate after each "
           "agent's first turn %.2f%% (goal >= 95%%); ttft first turns median %.3f s, later turns median %.3f s\n",
           (long long)sent, (long long)cached, (long long)computed_all, 100.0 * computed_all / (double)sent,
           100.0 * cached_later / (double)(sent_later ? sent_later : 1), median(first_ttft, o->agents),
           median(later_ttft, nl));
    printf("agents ttft / the same new tokens alone (prefix cached, idle server): median %.2f, worst %.2f "
           "(goal <= 2)%s\n",
           na ? median(r_alone, na) : NAN, worst_alone, n_evicted ? " (some prefixes were evicted: not counted)" : "");
    printf("agents ttft / a cold prefill of as many ids (no context): median %.2f, worst %.2f\n",
           nc ? median(r_cold, nc) : NAN, worst_cold);
    for (int i = 0; i < o->agents; i++) {
        free(ag[i].turns);
        free(ag[i].ctx);
    }
    return 0;
}

static int case_first(const bs_opts *o)
{
    int32_t n = o->system_tokens + o->turn_tokens;
    int32_t *ids = cv_xmalloc((size_t)n * sizeof *ids);
    fill_ids(ids, o->system_tokens, o->seed * 31u + 17u, o->id_range); /* the agents' system prompt */
    fill_ids(ids + o->system_tokens, o->turn_tokens, cv_now_ns(), o->id_range); /* a new user message */
    stream_rec r = { .o = o, .prompt = ids, .n_prompt = n, .max_tokens = 1 };
    run_stream(&r);
    int rc = rec_ok(&r) ? 0 : 1;
    if (!rc)
        printf("first turn: prompt %d, cached %d, ttft %.3f s\n", r.prompt_tokens, r.cached_tokens,
               r.t_first - r.t_start);
    rec_free(&r);
    free(ids);
    return rc;
}

/* ---- command line ---- */

static int parse_list(const char *s, int32_t *out, int max, int lo, int hi)
{
    int n = 0;
    char *dup = cv_xstrdup(s), *save = NULL;
    for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (*end || v < lo || v > hi || n == max) {
            free(dup);
            return -1;
        }
        out[n++] = (int32_t)v;
    }
    free(dup);
    return n;
}

/* One more token id (--ban, --favor) into ids[*n], MAX_BANS at most. */
static int id_arg(const char *v, int32_t *ids, int *n, cv_err *err)
{
    if (*n == MAX_BANS)
        return cv_err_set(err, CV_ELIMIT, "at most %d ids", MAX_BANS);
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < 0 || x > 1 << 22)
        return cv_err_set(err, CV_EINVAL, "'%s' must be a token id from 0 to %d", v, 1 << 22);
    ids[(*n)++] = (int32_t)x;
    return 0;
}

/* ---- embed ---- */

static size_t on_plain(char *p, size_t size, size_t n, void *ud)
{
    cv_buf_append(ud, p, size * n);
    return size * n;
}

static int case_embed(const bs_opts *o)
{
    const int32_t N = o->inputs;
    double rate[32];
    int64_t tokens = 0;
    for (int rep = 0; rep < o->repeats; rep++) {
        int32_t *ids = cv_xmalloc((size_t)o->n_prompt * sizeof *ids);
        cv_buf body = { 0 }, url = { 0 }, out = { 0 };
        put_model(&body, o);
        cv_buf_puts(&body, ",\"encoding_format\":\"base64\",\"input\":[");
        for (int32_t i = 0; i < N; i++) {
            fill_ids(ids, o->n_prompt, o->seed * 1000003u + (uint64_t)rep * 101u + (uint64_t)i, o->id_range);
            cv_buf_puts(&body, i ? ",[" : "[");
            for (int32_t j = 0; j < o->n_prompt; j++)
                cv_buf_printf(&body, "%s%d", j ? "," : "", ids[j]);
            cv_buf_putc(&body, ']');
        }
        cv_buf_puts(&body, "]}");
        cv_buf_printf(&url, "%s/v1/embeddings", o->url);
        struct curl_slist *h = NULL;
        CURL *c = post_handle(o, url.data, &body, &h, on_plain, &out);
        const double t0 = now_s();
        CURLcode rc = curl_easy_perform(c);
        const double dt = now_s() - t0;
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        json_t *j = rc == CURLE_OK ? cv_json_parse(out.data, out.len, NULL) : NULL;
        const json_int_t n_tok = json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens"));
        if (status != 200 || n_tok <= 0) {
            fprintf(stderr, "corvid bench --serve: embeddings failed: %s\n",
                    rc != CURLE_OK ? curl_easy_strerror(rc) : out.data ? out.data : "no body");
            json_decref(j);
            cv_buf_free(&body), cv_buf_free(&url), cv_buf_free(&out), free(ids);
            return 1;
        }
        rate[rep] = (double)n_tok / dt;
        tokens = n_tok;
        json_decref(j);
        cv_buf_free(&body), cv_buf_free(&url), cv_buf_free(&out), free(ids);
    }
    printf("embed inputs=%-3d  %8.1f tok/s  (%d x %d-token inputs, %lld tokens a request; median of %d)\n", N,
           median(rate, o->repeats), N, o->n_prompt, (long long)tokens, o->repeats);
    fflush(stdout);
    return 0;
}

static int ban(void *opts, const char *v, cv_err *err)
{
    bs_opts *o = opts;
    return id_arg(v, o->bans, &o->n_bans, err);
}

static int favor(void *opts, const char *v, cv_err *err)
{
    bs_opts *o = opts;
    return id_arg(v, o->favors, &o->n_favors, err);
}

static int streams(void *opts, const char *v, cv_err *err)
{
    bs_opts *o = opts;
    if ((o->n_streams = parse_list(v, o->streams, 16, 1, MAX_STREAMS)) < 1)
        return cv_err_set(err, CV_EINVAL, "'%s' must be a list like 1,2,4 (each 1..%d)", v, MAX_STREAMS);
    return 0;
}

#define O(field) offsetof(bs_opts, field)
static const cv_flag flags[] = {
    CV_FLAG_ROW("--serve", NULL, CV_FLAG_STR, O(url), 0, 0, "URL",
      "the server to load (http://127.0.0.1:8000; required)"),
    CV_FLAG_ROW("--case", NULL, CV_FLAG_STR, O(cases), 0, 0, "decode,agents,first,embed",
      "the cases to run (default decode,agents)"),
    CV_FLAG_ROW("--model", NULL, CV_FLAG_STR, O(model), 0, 0, "NAME", "the model every request names (default bench)"),
    CV_FLAG_ROW("--inputs", NULL, CV_FLAG_I32, O(inputs), 1, CV_MAX_EMBED_INPUTS, "N",
      "embed: inputs of one request, -p ids each (default 32)"),
    CV_FLAG_FN_ROW("--streams", NULL, "1,2,4,8,16", "decode: concurrent streams per row (default 1,2,4,8,16)", streams,
      false),
    CV_FLAG_ROW("--prompt", "-p", CV_FLAG_I32, O(n_prompt), 1, 1 << 20, "N", "decode: prompt tokens (default 128)"),
    CV_FLAG_ROW("--n-gen", "-n", CV_FLAG_I32, O(n_gen), 2, 1 << 20, "N", "decode: tokens per stream (default 128)"),
    CV_FLAG_ROW("--repeats", NULL, CV_FLAG_I32, O(repeats), 1, 32, "R", "repeats of each row (default 1)"),
    CV_FLAG_ROW("--agents", NULL, CV_FLAG_I32, O(agents), 1, MAX_STREAMS, "N", "agents: conversations (default 4)"),
    CV_FLAG_ROW("--turns", NULL, CV_FLAG_I32, O(turns), 1, 1000, "N", "agents: turns each (default 10)"),
    CV_FLAG_ROW("--system", NULL, CV_FLAG_I32, O(system_tokens), 1, 1 << 20, "N",
      "agents: shared system prompt tokens (default 12000)"),
    CV_FLAG_ROW("--turn-tokens", NULL, CV_FLAG_I32, O(turn_tokens), 1, 1 << 20, "N",
      "agents: new tokens a turn (default 300)"),
    CV_FLAG_ROW("--reply", NULL, CV_FLAG_I32, O(reply_tokens), 1, 1 << 20, "N", "agents: tokens a reply (default 64)"),
    CV_FLAG_ROW("--tool-ms", NULL, CV_FLAG_I32, O(tool_ms), 0, 600000, "MS",
      "agents: simulated tool time between turns (default 0)"),
    CV_FLAG_ROW("--in-flight", NULL, CV_FLAG_I32, O(in_flight), 0, MAX_STREAMS, "K",
      "agents: at most K turns at once, round robin (default 0: all)"),
    CV_FLAG_ROW("--session-header", NULL, CV_FLAG_STR, O(session_header), 0, 0, "NAME",
      "agents: send NAME: corvid-bench-SEED-AGENT with each agent's turns\n(a balancer's affinity key, e.g. "
      "X-Claude-Code-Session-Id)"),
    CV_FLAG_ROW("--id-range", NULL, CV_FLAG_I32, O(id_range), 4, 1 << 22, "N",
      "prompt token ids drawn from [0, N) (default 500)"),
    CV_FLAG_FN_ROW("--ban", NULL, "ID", "a token id the sampler may not choose (logit bias)", ban, true),
    CV_FLAG_FN_ROW("--favor", NULL, "ID", "a token id the sampler prefers (logit bias)", favor, true),
    CV_FLAG_ROW("--temp", NULL, CV_FLAG_F64, O(temp), 0, 2, "T", "sampling temperature (default 0: greedy)"),
    CV_FLAG_ROW("--seed", NULL, CV_FLAG_U64, O(seed), 0, INT32_MAX, "S",
      "seed of the prompts and the sampler (default 1)"),
    CV_FLAG_ROW("--api-key", NULL, CV_FLAG_STR, O(api_key), 0, 0, "KEY",
      "the server's key (default: env CORVID_API_KEY)"),

};
#undef O
const cv_cli_spec cv_bench_serve_spec = { .name = "bench --serve URL", .flags = flags + 1,
                                          .n_flags = CV_ARRAY_LEN(flags) - 1 };
/* The parser's own spec also reads --serve itself. */
static const cv_cli_spec spec = { .name = "bench", .flags = flags, .n_flags = CV_ARRAY_LEN(flags) };

int cv_cmd_bench_serve(int argc, char **argv)
{
    bs_opts o = { .cases = "decode,agents", .n_prompt = 128, .n_gen = 128, .repeats = 1, .id_range = 500,
                  .agents = 4, .turns = 10, .system_tokens = 12000, .turn_tokens = 300, .reply_tokens = 64,
                  .seed = 1, .model = "bench", .inputs = 32 };
    o.api_key = getenv("CORVID_API_KEY");
    o.n_streams = parse_list("1,2,4,8,16", o.streams, 16, 1, MAX_STREAMS);
    int n, st;
    if (!cv_cli_parse(&spec, &o, argc, argv, &n, &st))
        return st;
    if (!o.url)
        return cv_cli_usage_error(&spec, "--serve needs the server's URL (http://127.0.0.1:8000)");
    size_t ul = strlen(o.url);
    char *url = cv_xstrdup(o.url);
    while (ul > 0 && url[ul - 1] == '/')
        url[--ul] = 0;
    o.url = url;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = 0;
    char *cases = cv_xstrdup(o.cases), *save = NULL;
    for (char *k = strtok_r(cases, ",", &save); k && rc == 0; k = strtok_r(NULL, ",", &save)) {
        if (!strcmp(k, "decode"))
            rc = case_decode(&o);
        else if (!strcmp(k, "agents"))
            rc = case_agents(&o);
        else if (!strcmp(k, "first"))
            rc = case_first(&o);
        else if (!strcmp(k, "embed"))
            rc = case_embed(&o);
        else
            rc = cv_cli_usage_error(&spec, "--case '%s': the cases are decode, agents, first, embed", k);
    }
    free(cases);
    free(url);
    curl_global_cleanup();
    return rc;
}
