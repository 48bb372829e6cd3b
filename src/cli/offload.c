/* offload.c — a model's needs for the memory planner, from its file: the
 * bytes of each layer's tensors (routed experts apart), its KV bytes a
 * position and recurrent state, the global tensors, and the per-token,
 * per-logit-row and per-sequence scratch the CUDA backend's forward pass
 * keeps (docs/CUDA.md, "Memory planning", writes the formulas out). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/offload.h"

/* Which layers keep only a window: the architecture's period rule (layer
 * il is local iff il mod p < p - 1), kept when it yields the summary's
 * count of window layers; otherwise (a per-layer pattern in the file) the
 * first n_window_layers attention layers, which gives the right total. */
static void mark_windows(const cv_model_summary *s, bool *window)
{
    const int32_t n = s->hp.n_layer, p = s->arch->swa_period;
    int32_t count = 0;
    for (int32_t il = 0; il < n; il++) {
        const bool rec = s->recurrent[il / 8] >> (il % 8) & 1;
        window[il] = !rec && p > 0 && s->hp.n_swa > 0 && il % p < p - 1;
        count += window[il];
    }
    if (count == s->n_window_layers)
        return;
    count = 0;
    for (int32_t il = 0; il < n; il++) {
        const bool rec = s->recurrent[il / 8] >> (il % 8) & 1;
        window[il] = !rec && count < s->n_window_layers;
        count += window[il];
    }
}

int cv_offload_need_from_model(const cv_gguf *g, const cv_model_summary *s, uint32_t kv_type, cv_offload_need *out,
                               cv_err *err)
{
    const cv_hparams *hp = &s->hp;
    const int32_t n = hp->n_layer;
    const bool tied = !cv_gguf_find_tensor(g, "output.weight");
    *out = (cv_offload_need){ .n_layer = n, .layers = cv_xcalloc((size_t)n, sizeof *out->layers), .tied = tied };
    for (int64_t i = 0; i < cv_gguf_n_tensors(g); i++) {
        const cv_gguf_tensor *t = cv_gguf_tensor_at(g, i);
        int il = -1, len = 0;
        if (sscanf(t->name, "blk.%d.%n", &il, &len) == 1 && len > 0) {
            if (il < 0 || il >= n) {
                free(out->layers);
                out->layers = NULL;
                return CV_CORRUPT(err, "%s: tensor '%s' names layer %d of a %d-layer model", cv_gguf_path(g), t->name,
                                  il, n);
            }
            /* routed experts and their biases (gpt-oss): what --cpu-moe
             * keeps in RAM, as llama.cpp's "exps=CPU" does */
            const bool experts = strstr(t->name, "_exps.") ||
                                 (t->n_dims == 3 && hp->n_expert > 0 && t->ne[2] == hp->n_expert);
            if (experts)
                out->layers[il].experts += t->n_bytes;
            else
                out->layers[il].weights += t->n_bytes;
        } else if (!strcmp(t->name, "token_embd.weight")) {
            /* tied: the output matmul reads it, so the device needs it too */
            out->embd_bytes += t->n_bytes;
            if (tied)
                out->output_bytes += t->n_bytes;
        } else {
            out->output_bytes += t->n_bytes;
        }
    }
    bool *window = cv_xcalloc((size_t)n, sizeof *window);
    mark_windows(s, window);
    const size_t kv_part = cv_ggml_row_bytes(kv_type, (int64_t)hp->n_head_kv * hp->head_dim);
    for (int32_t il = 0; il < n; il++) {
        cv_offload_layer *L = &out->layers[il];
        if (s->recurrent[il / 8] >> (il % 8) & 1) {
            L->state_bytes = s->state_bytes / (size_t)hp->n_recurrent;
        } else {
            L->kv_pos_bytes = (size_t)cv_kv_parts(hp) * kv_part;
            L->kv_window = window[il] ? hp->n_swa : 0;
        }
    }
    free(window);
    /* Scratch a batch token keeps on the device: the f32 rows of a layer's
     * step (the hidden row and its residual, norm and attention-output
     * rows; q, k and v; the widest of the FFN's gate/up rows, a routed
     * token's experts', a DeltaNet layer's input projection), plus the
     * quantized copy of the widest matmul input (48 bytes a 32 values). */
    const int64_t q_w = hp->n_lora_kv > 0 ? (int64_t)hp->n_head * hp->k_mla : (int64_t)hp->n_head * hp->head_dim;
    const int64_t kv_w = (int64_t)hp->n_head_kv * hp->head_dim;
    const int64_t ffn_w = CV_MAX(2 * (int64_t)hp->n_ff,
                                 2 * (int64_t)hp->n_expert_used * hp->n_ff_exp + 2 * (int64_t)hp->n_ff_shexp);
    const int64_t ssm_w = hp->ssm_inner > 0 ? 2 * (int64_t)hp->ssm_group * hp->ssm_state + 2 * (int64_t)hp->ssm_inner +
                                                  2 * (int64_t)hp->ssm_heads
                                            : 0;
    const int64_t rows = 4 * (int64_t)hp->n_embd + q_w + 2 * kv_w + CV_MAX(ffn_w, ssm_w);
    int64_t max_in = CV_MAX(CV_MAX((int64_t)hp->n_embd, (int64_t)hp->n_ff), CV_MAX(q_w, (int64_t)hp->ssm_inner));
    max_in = CV_MAX(max_in, CV_MAX((int64_t)hp->n_ff_exp, (int64_t)hp->n_ff_shexp));
    out->act_bytes_per_token = (size_t)(4 * rows + (max_in + 31) / 32 * 48);
    /* the output's rows (the summary reads no vocabulary) */
    const cv_gguf_tensor *o = cv_gguf_find_tensor(g, tied ? "token_embd.weight" : "output.weight");
    out->logit_row_bytes = o && o->n_dims >= 2 ? (size_t)o->ne[1] * sizeof(float) : 0;
    /* split-K attention: 32 partial outputs a head, each its value row plus
     * the running max and sum */
    out->attn_bytes_per_seq = (size_t)hp->n_head * 32 * ((size_t)hp->head_dim_v + 2) * sizeof(float);
    return 0;
}
