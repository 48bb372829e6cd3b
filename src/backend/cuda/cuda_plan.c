/* cuda_plan.c — where a model's parts go when it is served from a GPU
 * that may be too small for it: the memory planner behind --gpu-memory,
 * --gpu-layers and --cpu-moe (cuda.h says the conventions). It only does
 * arithmetic on what the caller measured (the model's bytes per layer, the
 * device's free memory), so it runs and is tested on any machine.
 *
 * What a device part costs: the weights of its layers (their routed
 * experts unless kept in RAM), the output matrix when it is there, the KV
 * of its attention layers (full layers keep n_ctx positions a sequence,
 * window layers at most their window), the recurrent state of its Gated
 * DeltaNet layers, and scratch: activation rows for a step's batch,
 * the logit rows a step copies back, split-K attention partials per
 * decoding sequence. What stays on the host is counted the same way. */
#include <stdio.h>

#include "backend/cuda/cuda.h"

static void evaluate(const cv_offload_need *nd, const cv_offload_opts *o, int32_t first, int32_t n_cpu_moe,
                     bool output_on, cv_offload_plan *p)
{
    const int32_t n = nd->n_layer;
    *p = (cv_offload_plan){ .n_layer = n, .gpu_first = first, .n_cpu_moe = n_cpu_moe, .output_on_device = output_on };
    for (int32_t il = 0; il < n; il++) {
        const cv_offload_layer *L = &nd->layers[il];
        const int64_t per_seq = L->kv_window > 0 ? CV_MIN(L->kv_window, o->n_ctx) : o->n_ctx;
        const size_t kv = L->kv_pos_bytes * (size_t)per_seq * (size_t)o->n_seq;
        const size_t state = L->state_bytes * (size_t)o->n_seq;
        const size_t experts_host = il < n_cpu_moe ? L->experts : 0;
        if (il >= first) {
            p->dev_weights += L->weights + L->experts - experts_host;
            p->host_weights += experts_host;
            p->dev_kv += kv;
            p->dev_state += state;
        } else {
            p->host_weights += L->weights + L->experts;
            p->host_kv += kv;
            p->host_state += state;
        }
    }
    p->host_weights += nd->embd_bytes;
    if (output_on)
        p->dev_weights += nd->output_bytes;
    else /* a tied output is the embedding the host already holds */
        p->host_weights += nd->output_bytes - (nd->tied ? nd->embd_bytes : 0);
    if (first < n || output_on)
        p->dev_scratch = nd->act_bytes_per_token * (size_t)o->batch_tokens +
                         (output_on ? nd->logit_row_bytes * (size_t)o->logit_rows : 0) +
                         nd->attn_bytes_per_seq * (size_t)o->n_seq;
    p->dev_total = p->dev_weights + p->dev_kv + p->dev_state + p->dev_scratch;
}

/* The most layers (the last ones) that fit with experts of layers
 * [0, n_cpu_moe) in RAM: every layer with the output, then without it,
 * then one layer fewer at a time (none always fits). */
static void most_layers(const cv_offload_need *nd, const cv_offload_opts *o, int32_t n_cpu_moe, size_t budget,
                        cv_offload_plan *p)
{
    const int32_t n = nd->n_layer;
    evaluate(nd, o, 0, n_cpu_moe, true, p);
    if (p->dev_total <= budget)
        return;
    for (int32_t k = n; k > 0; k--) {
        evaluate(nd, o, n - k, n_cpu_moe, false, p);
        if (p->dev_total <= budget)
            return;
    }
    evaluate(nd, o, n, 0, false, p);
}

int cv_offload_plan_make(const cv_offload_need *nd, const cv_offload_opts *o, cv_offload_plan *out, cv_err *err)
{
    const int32_t n = nd->n_layer;
    if (o->gpu_layers < -1 || o->gpu_layers > n)
        return cv_err_set(err, CV_EINVAL, "--gpu-layers %d: the model has %d layers (give 0 to %d)", o->gpu_layers, n,
                          n);
    size_t budget;
    if (o->budget > 0) {
        budget = CV_MIN(o->budget, o->device_free);
    } else {
        const size_t keep = CV_MAX(CV_OFFLOAD_RESERVE, o->device_total / 20);
        budget = o->device_free > keep ? o->device_free - keep : 0;
    }
    size_t experts = 0;
    for (int32_t il = 0; il < n; il++)
        experts += nd->layers[il].experts;
    if (o->gpu_layers >= 0) {
        evaluate(nd, o, n - o->gpu_layers, o->cpu_moe ? n : 0, o->gpu_layers == n, out);
    } else if (o->cpu_moe || experts == 0) {
        most_layers(nd, o, experts ? n : 0, budget, out);
    } else {
        /* An MoE model: every layer on the device, with the experts of the
         * fewest first layers in RAM that make it fit (the CPU computes those
         * while the device runs the rest); else as many layers as fit with
         * every expert in RAM. */
        for (int32_t k = 0; k <= n; k++) {
            evaluate(nd, o, 0, k, true, out);
            if (out->dev_total <= budget)
                break;
        }
        if (out->dev_total > budget)
            most_layers(nd, o, n, budget, out);
    }
    out->auto_chosen = o->gpu_layers < 0;
    out->budget = budget;
    out->fits = out->dev_total <= budget;
    return 0;
}

static double gib(size_t b) { return (double)b / 1073741824.0; }

void cv_offload_plan_describe(const cv_offload_plan *p, cv_buf *out)
{
    const int32_t n = p->n_layer, on = n - p->gpu_first;
    cv_buf_puts(out, p->auto_chosen ? "chosen: " : "as asked: ");
    if (on == 0 && !p->output_on_device)
        cv_buf_puts(out, "nothing on the device");
    else if (on == n)
        cv_buf_printf(out, "all %d layers%s on the device", n, p->output_on_device ? " and the output" : "");
    else
        cv_buf_printf(out, "layers %d-%d of %d on the device (--gpu-layers %d), the first %d and the output on the CPU",
                      p->gpu_first, n - 1, n, on, p->gpu_first);
    const int32_t moe_on = CV_MIN(p->n_cpu_moe, n) - CV_MIN(p->n_cpu_moe, p->gpu_first);
    if (moe_on > 0)
        cv_buf_printf(out, moe_on == on ? ", their routed experts in host RAM (--cpu-moe)"
                                        : ", the routed experts of layers 0-%d in host RAM (the CPU computes them)",
                      p->n_cpu_moe - 1);
    cv_buf_printf(out, "; device: weights %.2f GiB, KV %.2f GiB", gib(p->dev_weights), gib(p->dev_kv));
    if (p->dev_state)
        cv_buf_printf(out, ", recurrent state %.2f GiB", gib(p->dev_state));
    cv_buf_printf(out, ", scratch %.2f GiB = %.2f of %.2f GiB%s; host: weights %.2f GiB", gib(p->dev_scratch),
                  gib(p->dev_total), gib(p->budget), p->fits ? "" : ": DOES NOT FIT", gib(p->host_weights));
    if (p->host_kv || p->host_state)
        cv_buf_printf(out, ", KV and state %.2f GiB", gib(p->host_kv + p->host_state));
}
