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

/* labels: "" or a `k="v",...` list without braces. */
static void histogram(cv_buf *out, const char *name, const char *help, const char *labels, const int64_t *counts,
                      const double *bounds, int n, double sum, int64_t total)
{
    const char *sep = *labels ? "," : "", *open = *labels ? "{" : "", *close = *labels ? "}" : "";
    cv_buf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
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

/* One sample with labels (a `k="v",...` list without braces, or "") and a
 * real value: whole numbers (counters, timestamps) in full, others to six
 * digits. */
static void sample(cv_buf *out, const char *name, const char *help, const char *type, const char *labels, double v)
{
    cv_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n%s%s%s%s ", name, help, name, type, name, *labels ? "{" : "",
                  labels, *labels ? "}" : "");
    if (v == floor(v) && fabs(v) < 1e15)
        cv_buf_printf(out, "%.0f\n", v);
    else
        cv_buf_printf(out, "%.6g\n", v);
}

void cv_metrics_render(cv_server *s, const cv_server_load *load, cv_buf *out)
{
    cv_metrics *m = &s->metrics;
    const bool ready = !s->be->ready || s->be->ready(s->be->ctx), draining = atomic_load(&s->stopping);
    /* The KV pool's blocks not free, the prefix cache's included: vLLM counts
     * a cached block no running request holds as free, so a warm replica
     * reads higher here than it would there (docs/server.md). */
    const int64_t kv_total = load->kv_blocks_used + load->kv_blocks_free;
    const double kv_usage = kv_total > 0 ? (double)load->kv_blocks_used / (double)kv_total : 0;

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
    const double hit_ratio = m->prompt_tokens > 0 ? (double)m->cached_tokens / (double)m->prompt_tokens : 0;
    sample(out, "corvid_prefix_cache_hit_ratio",
           "Prompt tokens served from the prefix cache over prompt tokens, since start (0-1).", "gauge", "", hit_ratio);
    histogram(out, "corvid_time_to_first_token_seconds", "From submit to the first generated token.", "",
              m->ttft_counts, ttft_bounds, CV_TTFT_BUCKETS, m->ttft_sum, m->ttft_n);
    histogram(out, "corvid_time_per_output_token_seconds", "Between consecutive generated tokens of a request.", "",
              m->tpot_counts, tpot_bounds, CV_TPOT_BUCKETS, m->tpot_sum, m->tpot_n);
    sample(out, "corvid_active_generations", "Generations an HTTP thread is serving now.", "gauge", "",
           atomic_load(&s->active_streams));
    sample(out, "corvid_queue_depth", "Requests submitted and waiting to run.", "gauge", "", load->queue_depth);
    sample(out, "corvid_running_sequences", "Sequences being generated.", "gauge", "", load->running);
    sample(out, "corvid_kv_blocks_used", "KV cache blocks in use.", "gauge", "", (double)load->kv_blocks_used);
    sample(out, "corvid_kv_blocks_free", "KV cache blocks free.", "gauge", "", (double)load->kv_blocks_free);
    sample(out, "corvid_kv_usage_ratio", "KV cache blocks in use over all blocks, the prefix cache's included (0-1).",
           "gauge", "", kv_usage);
    sample(out, "corvid_kv_block_tokens", "Positions one KV cache block holds.", "gauge", "", CV_KV_BLOCK);
    sample(out, "corvid_ready", "1 when the model is loaded and the server is not draining (GET /health/ready).",
           "gauge", "", ready && !draining);
    sample(out, "corvid_draining", "1 from SIGTERM until exit: requests for the model get 503 + Retry-After.",
           "gauge", "", draining);

    /* The names gateways and routers read by default, as aliases: the same
     * values again under vLLM's names, never a second set of counters. The
     * Gateway API Inference Extension's endpoint picker (llm-d's) reads
     * num_requests_waiting, num_requests_running, kv_cache_usage_perc,
     * lora_requests_info and cache_config_info; vLLM's production-stack
     * router and dashboards built for vLLM read the older
     * gpu_cache_usage_perc and gpu_prefix_cache_hit_rate, the token
     * counters and the two latency histograms. Every vLLM series carries
     * model_name. */
    cv_buf lb = { 0 };
    cv_buf_puts(&lb, "model_name=\"");
    put_label_value(&lb, s->be->model_id);
    cv_buf_puts(&lb, "\"");
    const char *ml = lb.data;
    sample(out, "vllm:prompt_tokens_total", "Alias of corvid_prompt_tokens_total.", "counter", ml,
           (double)m->prompt_tokens);
    sample(out, "vllm:generation_tokens_total", "Alias of corvid_generated_tokens_total.", "counter", ml,
           (double)m->generated_tokens);
    sample(out, "vllm:prefix_cache_queries_total", "Alias of corvid_prompt_tokens_total (tokens looked up).",
           "counter", ml, (double)m->prompt_tokens);
    sample(out, "vllm:prefix_cache_hits_total", "Alias of corvid_cached_prompt_tokens_total (tokens found).",
           "counter", ml, (double)m->cached_tokens);
    sample(out, "vllm:gpu_prefix_cache_hit_rate", "Alias of corvid_prefix_cache_hit_ratio.", "gauge", ml, hit_ratio);
    histogram(out, "vllm:time_to_first_token_seconds", "Alias of corvid_time_to_first_token_seconds.", ml,
              m->ttft_counts, ttft_bounds, CV_TTFT_BUCKETS, m->ttft_sum, m->ttft_n);
    histogram(out, "vllm:time_per_output_token_seconds", "Alias of corvid_time_per_output_token_seconds.", ml,
              m->tpot_counts, tpot_bounds, CV_TPOT_BUCKETS, m->tpot_sum, m->tpot_n);
    pthread_mutex_unlock(&m->mu);
    sample(out, "vllm:num_requests_waiting", "Alias of corvid_queue_depth.", "gauge", ml, load->queue_depth);
    sample(out, "vllm:num_requests_running", "Alias of corvid_running_sequences.", "gauge", ml, load->running);
    sample(out, "vllm:kv_cache_usage_perc", "Alias of corvid_kv_usage_ratio (0-1).", "gauge", ml, kv_usage);
    sample(out, "vllm:gpu_cache_usage_perc", "Alias of corvid_kv_usage_ratio (0-1), vLLM's older name.", "gauge", ml,
           kv_usage);
    /* An info series: its labels are the facts, its value 1. */
    cv_buf info = { 0 };
    cv_buf_printf(&info, "block_size=\"%d\",num_gpu_blocks=\"%lld\"", CV_KV_BLOCK, (long long)kv_total);
    sample(out, "vllm:cache_config_info", "Alias of corvid_kv_block_tokens and the pool's blocks, as labels.",
           "gauge", info.data, 1);
    /* No LoRA adapters: none loaded, none possible; the value is when the
     * figure was last updated (the start), as vLLM's. */
    sample(out, "vllm:lora_requests_info", "No LoRA adapters (corvid serves none).", "gauge",
           "max_lora=\"0\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"", (double)s->be->created);
    cv_buf_free(&info);
    cv_buf_free(&lb);
}
