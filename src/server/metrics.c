/* metrics.c — the server's counters and histograms, and their Prometheus
 * text exposition (format 0.0.4: `# HELP`, `# TYPE`, one sample a line,
 * histograms as cumulative `_bucket{le=..}` plus `_sum` and `_count`).
 * One mutex guards everything: updates are a few per request or token, far
 * below any contention that would matter next to a forward pass. */
#include <math.h>
#include <stdio.h>

#include "server/server_int.h"

/* Time to first token spans prefix-cache hits (ms) to long prefills (a
 * minute on CPU); per-token latency spans batched decode on small models
 * (ms) to large models on CPU (~1 s). Upper bounds in seconds. */
static const double ttft_bounds[CV_TTFT_BUCKETS] = { 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120 };
static const double tpot_bounds[CV_TPOT_BUCKETS] = { 0.002, 0.005, 0.01, 0.02, 0.04, 0.08,
                                                     0.15,  0.3,   0.6,  1.2,  2.5,  5 };

void cv_metrics_init(cv_metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void cv_metrics_fini(cv_metrics *m) { pthread_mutex_destroy(&m->mu); }

void cv_metrics_request(cv_metrics *m, int route, int status)
{
    pthread_mutex_lock(&m->mu);
    int i = 0;
    for (; i < m->n_by_status; i++)
        if (m->by_status[i].route == route && m->by_status[i].status == status)
            break;
    if (i == m->n_by_status && m->n_by_status < CV_METRIC_STATUS_SLOTS) {
        m->by_status[i].route = (int16_t)route;
        m->by_status[i].status = (int16_t)status;
        m->by_status[i].n = 0;
        m->n_by_status++;
    }
    if (i < m->n_by_status)
        m->by_status[i].n++;
    pthread_mutex_unlock(&m->mu);
}

void cv_metrics_tokens(cv_metrics *m, int64_t prompt, int64_t cached, int64_t generated)
{
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += prompt;
    m->cached_tokens += cached;
    m->generated_tokens += generated;
    pthread_mutex_unlock(&m->mu);
}

static void observe(int64_t *counts, const double *bounds, int n, double v)
{
    int i = 0;
    while (i < n && v > bounds[i])
        i++;
    counts[i]++;
}

void cv_metrics_ttft(cv_metrics *m, double s)
{
    pthread_mutex_lock(&m->mu);
    observe(m->ttft_counts, ttft_bounds, CV_TTFT_BUCKETS, s);
    m->ttft_sum += s;
    m->ttft_n++;
    pthread_mutex_unlock(&m->mu);
}

void cv_metrics_tpot(cv_metrics *m, double s)
{
    pthread_mutex_lock(&m->mu);
    observe(m->tpot_counts, tpot_bounds, CV_TPOT_BUCKETS, s);
    m->tpot_sum += s;
    m->tpot_n++;
    pthread_mutex_unlock(&m->mu);
}

void cv_metrics_client_cancel(cv_metrics *m)
{
    pthread_mutex_lock(&m->mu);
    m->client_cancels++;
    pthread_mutex_unlock(&m->mu);
}

/* A label value as the text format escapes it (\\, \", \n). */
static void put_label_value(cv_buf *out, const char *v)
{
    for (; v && *v; v++) {
        if (*v == '\\' || *v == '"')
            cv_buf_putc(out, '\\');
        if (*v == '\n')
            cv_buf_puts(out, "\\n");
        else
            cv_buf_putc(out, *v);
    }
}

void cv_metrics_label(cv_buf *out, const char *key, const char *value)
{
    cv_buf_printf(out, "%s=\"", key);
    put_label_value(out, value);
    cv_buf_putc(out, '"');
}

static void head(cv_buf *out, const char *name, const char *help, const char *type)
{
    cv_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample line with labels (a `k="v",...` list without braces, or "")
 * and a real value: whole numbers (counters, timestamps) in full, others to
 * six digits. */
static void value(cv_buf *out, const char *name, const char *labels, double v)
{
    cv_buf_printf(out, "%s%s%s%s ", name, *labels ? "{" : "", labels, *labels ? "}" : "");
    if (v == floor(v) && fabs(v) < 1e15)
        cv_buf_printf(out, "%.0f\n", v);
    else
        cv_buf_printf(out, "%.6g\n", v);
}

static void sample(cv_buf *out, const char *name, const char *help, const char *type, const char *labels, double v)
{
    head(out, name, help, type);
    value(out, name, labels, v);
}

/* A histogram's samples (cumulative buckets, sum, count); labels as value's. */
static void hist_values(cv_buf *out, const char *name, const char *labels, const int64_t *counts,
                        const double *bounds, int n, double sum, int64_t total)
{
    const char *sep = *labels ? "," : "", *open = *labels ? "{" : "", *close = *labels ? "}" : "";
    int64_t cum = 0;
    for (int i = 0; i < n; i++) {
        cum += counts[i];
        cv_buf_printf(out, "%s_bucket{%s%sle=\"%g\"} %lld\n", name, labels, sep, bounds[i], (long long)cum);
    }
    cum += counts[n];
    cv_buf_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %lld\n", name, labels, sep, (long long)cum);
    cv_buf_printf(out, "%s_sum%s%s%s %.6f\n%s_count%s%s%s %lld\n", name, open, labels, close, sum, name, open, labels,
                  close, (long long)total);
}

/* ---- the page ---- */

/* What the page shows of one model, gathered first so each metric's
 * samples come together under its one HELP line. */
typedef struct model_row {
    cv_buf name_label;  /* model_name="..." (vLLM's) */
    cv_buf model_label; /* model="..." (ours) */
    cv_metrics *m;      /* its own counters */
    bool loaded;
    cv_server_load load;
    bool has_stats;
    cv_sched_stats st;
} model_row;

typedef struct rows {
    model_row *r;
    int n;
} rows;

static void gather(void *ud, cv_model_slot *slot, const cv_server_backend *be)
{
    rows *rs = ud;
    rs->r = cv_xrealloc(rs->r, (size_t)(rs->n + 1) * sizeof *rs->r);
    model_row *r = &rs->r[rs->n++];
    memset(r, 0, sizeof *r);
    cv_metrics_label(&r->name_label, "model_name", cv_model_slot_name(slot));
    cv_metrics_label(&r->model_label, "model", cv_model_slot_name(slot));
    r->m = cv_model_slot_metrics(slot);
    r->loaded = be != NULL;
    if (be && be->load)
        be->load(be->ctx, &r->load);
    if (be && be->stats) {
        be->stats(be->ctx, &r->st);
        r->has_stats = true;
    }
}

static double kv_usage_of(const cv_server_load *l)
{
    /* The KV pool's blocks not free, the prefix cache's included: vLLM
     * counts a cached block no running request holds as free, so a warm
     * replica reads higher here than it would there (docs/server.md). */
    const int64_t total = l->kv_blocks_used + l->kv_blocks_free;
    return total > 0 ? (double)l->kv_blocks_used / (double)total : 0;
}

static double hit_ratio_of(const cv_metrics *m)
{
    return m->prompt_tokens > 0 ? (double)m->cached_tokens / (double)m->prompt_tokens : 0;
}

/* The per-model figures, each under its name once: ours labelled model=,
 * the schedulers' (cv_sched_metrics), and vLLM's aliases labelled
 * model_name=. */
static void per_model(cv_server *s, const rows *rs, cv_buf *out)
{
    static const struct {
        const char *name, *help;
        int what; /* 0 queue, 1 running, 2 kv usage */
    } loads[] = {
        { "corvid_model_queue_depth", "The model's requests waiting to run.", 0 },
        { "corvid_model_running_sequences", "The model's sequences being computed.", 1 },
        { "corvid_model_kv_usage_ratio", "The model's KV blocks in use over its pool (0-1).", 2 },
    };
    for (size_t k = 0; k < CV_ARRAY_LEN(loads); k++) {
        head(out, loads[k].name, loads[k].help, "gauge");
        for (int i = 0; i < rs->n; i++) {
            const cv_server_load *l = &rs->r[i].load;
            value(out, loads[k].name, rs->r[i].model_label.data,
                  loads[k].what == 0 ? l->queue_depth : loads[k].what == 1 ? l->running : kv_usage_of(l));
        }
    }
    cv_model_set_metrics(s->models, out);
    /* the schedulers of the loaded models; a single model's unlabelled, as
     * a one-model server has always shown them */
    const cv_sched_stats **st = cv_xcalloc((size_t)CV_MAX(rs->n, 1), sizeof *st);
    const char **labels = cv_xcalloc((size_t)CV_MAX(rs->n, 1), sizeof *labels);
    int n = 0;
    for (int i = 0; i < rs->n; i++)
        if (rs->r[i].has_stats) {
            st[n] = &rs->r[i].st;
            labels[n++] = rs->r[i].model_label.data;
        }
    if (n)
        cv_sched_metrics(st, cv_model_set_single(s->models) ? NULL : labels, n, out);
    free(st);
    free(labels);

    /* The names gateways and routers read by default, as aliases: the same
     * values again under vLLM's names, never a second set of counters. The
     * Gateway API Inference Extension's endpoint picker (llm-d's) reads
     * num_requests_waiting, num_requests_running, kv_cache_usage_perc,
     * lora_requests_info and cache_config_info; vLLM's production-stack
     * router and dashboards built for vLLM read the older
     * gpu_cache_usage_perc and gpu_prefix_cache_hit_rate, the token
     * counters and the two latency histograms. Every vLLM series carries
     * model_name: one sample per model. */
    enum { PROMPT, GENERATED, QUERIES, HITS, HIT_RATE, WAITING, RUNNING, KV, KV_OLD };
    static const struct {
        const char *name, *help, *type;
    } al[] = {
        [PROMPT] = { "vllm:prompt_tokens_total", "Alias of corvid_prompt_tokens_total.", "counter" },
        [GENERATED] = { "vllm:generation_tokens_total", "Alias of corvid_generated_tokens_total.", "counter" },
        [QUERIES] = { "vllm:prefix_cache_queries_total", "Alias of corvid_prompt_tokens_total (tokens looked up).",
                      "counter" },
        [HITS] = { "vllm:prefix_cache_hits_total", "Alias of corvid_cached_prompt_tokens_total (tokens found).",
                   "counter" },
        [HIT_RATE] = { "vllm:gpu_prefix_cache_hit_rate", "Alias of corvid_prefix_cache_hit_ratio.", "gauge" },
        [WAITING] = { "vllm:num_requests_waiting", "Alias of corvid_queue_depth.", "gauge" },
        [RUNNING] = { "vllm:num_requests_running", "Alias of corvid_running_sequences.", "gauge" },
        [KV] = { "vllm:kv_cache_usage_perc", "Alias of corvid_kv_usage_ratio (0-1).", "gauge" },
        [KV_OLD] = { "vllm:gpu_cache_usage_perc", "Alias of corvid_kv_usage_ratio (0-1), vLLM's older name.",
                     "gauge" },
    };
    for (size_t k = 0; k < CV_ARRAY_LEN(al); k++) {
        head(out, al[k].name, al[k].help, al[k].type);
        for (int i = 0; i < rs->n; i++) {
            const model_row *r = &rs->r[i];
            pthread_mutex_lock(&r->m->mu);
            const double v = k == PROMPT || k == QUERIES ? (double)r->m->prompt_tokens
                           : k == GENERATED              ? (double)r->m->generated_tokens
                           : k == HITS                   ? (double)r->m->cached_tokens
                           : k == HIT_RATE               ? hit_ratio_of(r->m)
                           : k == WAITING                ? r->load.queue_depth
                           : k == RUNNING                ? r->load.running
                                                         : kv_usage_of(&r->load);
            pthread_mutex_unlock(&r->m->mu);
            value(out, al[k].name, r->name_label.data, v);
        }
    }
    head(out, "vllm:time_to_first_token_seconds", "Alias of corvid_time_to_first_token_seconds.", "histogram");
    for (int i = 0; i < rs->n; i++) {
        cv_metrics *m = rs->r[i].m;
        pthread_mutex_lock(&m->mu);
        hist_values(out, "vllm:time_to_first_token_seconds", rs->r[i].name_label.data, m->ttft_counts, ttft_bounds,
                    CV_TTFT_BUCKETS, m->ttft_sum, m->ttft_n);
        pthread_mutex_unlock(&m->mu);
    }
    head(out, "vllm:time_per_output_token_seconds", "Alias of corvid_time_per_output_token_seconds.", "histogram");
    for (int i = 0; i < rs->n; i++) {
        cv_metrics *m = rs->r[i].m;
        pthread_mutex_lock(&m->mu);
        hist_values(out, "vllm:time_per_output_token_seconds", rs->r[i].name_label.data, m->tpot_counts,
                    tpot_bounds, CV_TPOT_BUCKETS, m->tpot_sum, m->tpot_n);
        pthread_mutex_unlock(&m->mu);
    }
    /* An info series: its labels are the facts, its value 1. */
    head(out, "vllm:cache_config_info", "Alias of corvid_kv_block_tokens and the pool's blocks, as labels.", "gauge");
    for (int i = 0; i < rs->n; i++) {
        cv_buf info = { 0 };
        cv_buf_printf(&info, "block_size=\"%d\",num_gpu_blocks=\"%lld\",%s", CV_KV_BLOCK,
                      (long long)(rs->r[i].load.kv_blocks_used + rs->r[i].load.kv_blocks_free),
                      rs->r[i].name_label.data);
        value(out, "vllm:cache_config_info", info.data, 1);
        cv_buf_free(&info);
    }
}

void cv_metrics_render(cv_server *s, cv_buf *out)
{
    cv_metrics *m = &s->metrics;
    const bool ready = cv_model_set_ready(s->models), draining = atomic_load(&s->stopping);
    cv_server_load load;
    cv_server_loads(s, &load);
    rows rs = { 0 };
    cv_model_set_visit(s->models, gather, &rs);

    pthread_mutex_lock(&m->mu);
    cv_buf_puts(out, "# HELP corvid_http_requests_total HTTP requests answered, by route and status.\n"
                     "# TYPE corvid_http_requests_total counter\n");
    for (int i = 0; i < m->n_by_status; i++) {
        int r = m->by_status[i].route;
        cv_buf_printf(out, "corvid_http_requests_total{route=\"%s\",status=\"%d\"} %lld\n",
                      r >= 0 && r < cv_n_routes ? cv_routes[r].name : "unknown", m->by_status[i].status,
                      (long long)m->by_status[i].n);
    }
    sample(out, "corvid_prompt_tokens_total", "Prompt tokens of finished generations.", "counter", "",
           (double)m->prompt_tokens);
    sample(out, "corvid_cached_prompt_tokens_total", "Prompt tokens served from the prefix cache.", "counter", "",
           (double)m->cached_tokens);
    sample(out, "corvid_generated_tokens_total", "Tokens generated.", "counter", "", (double)m->generated_tokens);
    sample(out, "corvid_client_cancels_total", "Generations cancelled because the client disconnected.", "counter",
           "", (double)m->client_cancels);
    sample(out, "corvid_prefix_cache_hit_ratio",
           "Prompt tokens served from the prefix cache over prompt tokens, since start (0-1).", "gauge", "",
           hit_ratio_of(m));
    head(out, "corvid_time_to_first_token_seconds", "From submit to the first generated token.", "histogram");
    hist_values(out, "corvid_time_to_first_token_seconds", "", m->ttft_counts, ttft_bounds, CV_TTFT_BUCKETS,
                m->ttft_sum, m->ttft_n);
    head(out, "corvid_time_per_output_token_seconds", "Between consecutive generated tokens of a request.",
         "histogram");
    hist_values(out, "corvid_time_per_output_token_seconds", "", m->tpot_counts, tpot_bounds, CV_TPOT_BUCKETS,
                m->tpot_sum, m->tpot_n);
    pthread_mutex_unlock(&m->mu);
    sample(out, "corvid_active_generations", "Generations an HTTP thread is serving now.", "gauge", "",
           atomic_load(&s->active_streams));
    sample(out, "corvid_queue_depth", "Requests submitted and waiting to run (every loaded model's).", "gauge", "",
           load.queue_depth);
    sample(out, "corvid_running_sequences", "Sequences being generated (every loaded model's).", "gauge", "",
           load.running);
    sample(out, "corvid_kv_blocks_used", "KV cache blocks in use (every loaded model's).", "gauge", "",
           (double)load.kv_blocks_used);
    sample(out, "corvid_kv_blocks_free", "KV cache blocks free (every loaded model's).", "gauge", "",
           (double)load.kv_blocks_free);
    sample(out, "corvid_kv_usage_ratio", "KV cache blocks in use over all blocks, the prefix cache's included (0-1).",
           "gauge", "", kv_usage_of(&load));
    sample(out, "corvid_kv_block_tokens", "Positions one KV cache block holds.", "gauge", "", CV_KV_BLOCK);
    sample(out, "corvid_ready", "1 when the models started with are loaded and the server is not draining "
           "(GET /health/ready).", "gauge", "", ready && !draining);
    sample(out, "corvid_draining", "1 from SIGTERM until exit: requests for a model get 503 + Retry-After.",
           "gauge", "", draining);
    per_model(s, &rs, out);
    /* No LoRA adapters: none loaded, none possible; the value is when the
     * figure was last updated (the start), as vLLM's. */
    sample(out, "vllm:lora_requests_info", "No LoRA adapters (corvid serves none).", "gauge",
           "max_lora=\"0\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"", (double)s->started);
    for (int i = 0; i < rs.n; i++) {
        cv_buf_free(&rs.r[i].name_label);
        cv_buf_free(&rs.r[i].model_label);
    }
    free(rs.r);
}
