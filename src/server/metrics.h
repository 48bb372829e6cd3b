/* metrics.h — the server's counters and their Prometheus text
 * (metrics.c), private to src/server/: the HTTP layer counts requests, the
 * generation pipeline tokens and latencies, /metrics renders them. */
#ifndef CV_SERVER_METRICS_H
#define CV_SERVER_METRICS_H

#include <pthread.h>

#include "server/server.h"

#define CV_METRIC_STATUS_SLOTS 256
#define CV_TTFT_BUCKETS 12
#define CV_TPOT_BUCKETS 12

typedef struct cv_metrics {
    pthread_mutex_t mu;
    struct { int16_t route; int16_t status; int64_t n; } by_status[CV_METRIC_STATUS_SLOTS];
    int n_by_status;
    int64_t prompt_tokens, generated_tokens, cached_tokens;
    int64_t client_cancels, stop_cancels;
    int64_t ttft_counts[CV_TTFT_BUCKETS + 1];
    double ttft_sum;
    int64_t ttft_n;
    int64_t tpot_counts[CV_TPOT_BUCKETS + 1];
    double tpot_sum;
    int64_t tpot_n;
} cv_metrics;

void cv_metrics_init(cv_metrics *m);
void cv_metrics_fini(cv_metrics *m);
void cv_metrics_request(cv_metrics *m, int route, int status);
void cv_metrics_tokens(cv_metrics *m, int64_t prompt, int64_t cached, int64_t generated);
void cv_metrics_ttft(cv_metrics *m, double seconds);
void cv_metrics_tpot(cv_metrics *m, double seconds);
void cv_metrics_client_cancel(cv_metrics *m);
/* The loaded models' load, summed (api_health.c). */
void cv_server_loads(cv_server *s, cv_server_load *out);
/* Appends key="value" to out, the value escaped as the text format wants. */
void cv_metrics_label(cv_buf *out, const char *key, const char *value);
/* Prometheus text exposition (version 0.0.4) of the server s: its counters,
 * the loaded models' load (summed, and per model), its readiness, each
 * model's life (loaded, memory, idle time, loads), the schedulers'
 * figures, and the same figures under the names gateways and routers read
 * by default (vllm:*, one sample per loaded model). */
void cv_metrics_render(cv_server *s, cv_buf *out);

#endif
