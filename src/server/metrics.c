/* metrics.c — the server's counters and histograms, and their Prometheus
 * text exposition (format 0.0.4: `# HELP`, `# TYPE`, one sample a line,
 * histograms as cumulative `_bucket{le=..}` plus `_sum` and `_count`).
 * One mutex guards everything: updates are a few per request or token, far
 * below any contention that would matter next to a forward pass. */
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

static void histogram(cv_buf *out, const char *name, const char *help, const int64_t *counts, const double *bounds,
                      int n, double sum, int64_t total)
{
    cv_buf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    int64_t cum = 0;
    for (int i = 0; i < n; i++) {
        cum += counts[i];
        cv_buf_printf(out, "%s_bucket{le=\"%g\"} %lld\n", name, bounds[i], (long long)cum);
    }
    cum += counts[n];
    cv_buf_printf(out, "%s_bucket{le=\"+Inf\"} %lld\n%s_sum %.6f\n%s_count %lld\n", name, (long long)cum, name,
                  sum, name, (long long)total);
}

static void gauge(cv_buf *out, const char *name, const char *help, const char *type, long long v)
{
    cv_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n%s %lld\n", name, help, name, type, name, v);
}

void cv_metrics_render(cv_metrics *m, const cv_server_load *load, int active_streams, cv_buf *out)
{
    pthread_mutex_lock(&m->mu);
    cv_buf_puts(out, "# HELP corvid_http_requests_total HTTP requests answered, by route and status.\n"
                     "# TYPE corvid_http_requests_total counter\n");
    for (int i = 0; i < m->n_by_status; i++) {
        int r = m->by_status[i].route;
        cv_buf_printf(out, "corvid_http_requests_total{route=\"%s\",status=\"%d\"} %lld\n",
                      r >= 0 && r < cv_n_routes ? cv_routes[r].name : "unknown", m->by_status[i].status,
                      (long long)m->by_status[i].n);
    }
    gauge(out, "corvid_prompt_tokens_total", "Prompt tokens of finished generations.", "counter", m->prompt_tokens);
    gauge(out, "corvid_cached_prompt_tokens_total", "Prompt tokens served from the prefix cache.", "counter",
          m->cached_tokens);
    gauge(out, "corvid_generated_tokens_total", "Tokens generated.", "counter", m->generated_tokens);
    gauge(out, "corvid_client_cancels_total", "Generations cancelled because the client disconnected.", "counter",
          m->client_cancels);
    histogram(out, "corvid_time_to_first_token_seconds", "From submit to the first generated token.",
              m->ttft_counts, ttft_bounds, CV_TTFT_BUCKETS, m->ttft_sum, m->ttft_n);
    histogram(out, "corvid_time_per_output_token_seconds", "Between consecutive generated tokens of a request.",
              m->tpot_counts, tpot_bounds, CV_TPOT_BUCKETS, m->tpot_sum, m->tpot_n);
    pthread_mutex_unlock(&m->mu);
    gauge(out, "corvid_active_generations", "Generations an HTTP thread is serving now.", "gauge", active_streams);
    gauge(out, "corvid_queue_depth", "Requests submitted and waiting to run.", "gauge", load->queue_depth);
    gauge(out, "corvid_running_sequences", "Sequences being generated.", "gauge", load->running);
    gauge(out, "corvid_kv_blocks_used", "KV cache blocks in use.", "gauge", load->kv_blocks_used);
    gauge(out, "corvid_kv_blocks_free", "KV cache blocks free.", "gauge", load->kv_blocks_free);
}
