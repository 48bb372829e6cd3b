/* model_load.c — opening a model: architecture lookup, hyper-parameters,
 * tensor validation against the descriptor, and binding (vectors as f32,
 * matrices prepared by the model's backend). Everything read from the file is
 * checked before use; the descriptor is the only place that knows which
 * tensors an architecture has. Invariant: on failure nothing is left
 * allocated and the caller keeps the cv_gguf; on success the model owns it.
 *
 * Metadata keys follow llama.cpp's GGUF conventions ({arch} is
 * general.architecture): {arch}.embedding_length, .block_count,
 * .feed_forward_length, .context_length, .attention.head_count,
 * .attention.head_count_kv, .attention.key_length, .attention.value_length,
 * .attention.layer_norm_rms_epsilon, .rope.freq_base, .rope.dimension_count,
 * .rope.scaling.type, .rope.scaling.factor, .rope.scale_linear,
 * .rope.scaling.original_context_length, .rope.scaling.yarn_beta_fast/slow,
 * .rope.scaling.yarn_log_multiplier (where the architecture reads it),
 * .attention.temperature_scale;
 * sliding windows: .attention.sliding_window,
 * .attention.sliding_window_pattern, .rope.freq_base_swa; MoE:
 * .expert_count, .expert_used_count, .expert_feed_forward_length,
 * .expert_shared_feed_forward_length; hybrids: .full_attention_interval,
 * .attention.recurrent_layers, .ssm.conv_kernel, .ssm.state_size,
 * .ssm.group_count, .ssm.time_step_rank, .ssm.inner_size; MoE routing:
 * .expert_gating_func, .expert_weights_scale, .expert_weights_norm,
 * .expert_group_count, .expert_group_used_count, .expert_shared_count,
 * .leading_dense_block_count; multi-head latent attention:
 * .attention.q_lora_rank, .attention.kv_lora_rank,
 * .attention.key_length_mla, .attention.value_length_mla,
 * .rope.scaling.yarn_log_multiplier (0.1 x mscale_all_dim for them). */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/model.h"

struct cv_model_owned {
    void **bufs;
    int n_bufs, cap_bufs;
    cv_bmat **mats;
    int n_mats, cap_mats;
};

static void *own_buf(cv_model *m, size_t n)
{
    cv_model_owned *o = m->owned;
    if (o->n_bufs == o->cap_bufs) {
        o->cap_bufs = o->cap_bufs ? 2 * o->cap_bufs : 64;
        o->bufs = cv_xrealloc(o->bufs, (size_t)o->cap_bufs * sizeof *o->bufs);
    }
    void *p = cv_aligned_alloc(n ? n : 1);
    o->bufs[o->n_bufs++] = p;
    return p;
}

static void own_mat(cv_model *m, cv_bmat *w)
{
    cv_model_owned *o = m->owned;
    if (o->n_mats == o->cap_mats) {
        o->cap_mats = o->cap_mats ? 2 * o->cap_mats : 64;
        o->mats = cv_xrealloc(o->mats, (size_t)o->cap_mats * sizeof *o->mats);
    }
    o->mats[o->n_mats++] = w;
}

const cv_bmat *const *cv_model_mats(const cv_model *m, int32_t *n)
{
    *n = m->owned->n_mats;
    return (const cv_bmat *const *)m->owned->mats;
}

static void free_model(cv_model *m, bool close_gguf)
{
    if (!m)
        return;
    if (m->owned) {
        for (int i = 0; i < m->owned->n_mats; i++)
            cv_bmat_destroy(m->be, m->owned->mats[i]);
        for (int i = 0; i < m->owned->n_bufs; i++)
            cv_aligned_free(m->owned->bufs[i]);
        free(m->owned->mats);
        free(m->owned->bufs);
        free(m->owned);
    }
    free(m->layers);
    if (close_gguf)
        cv_gguf_close(m->gguf);
    free(m);
}

void cv_model_close(cv_model *m) { free_model(m, true); }

/* ---- hyper-parameters ---- */

/* Reads {arch}.suffix as an integer in [lo, hi]; absent keys take dflt, or
 * fail when dflt < 0 (required). */
static int hp_int(const cv_gguf *g, const cv_arch *a, const char *suffix, int64_t dflt, int64_t lo, int64_t hi,
                  int32_t *out, cv_err *err)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", a->name, suffix);
    int64_t v;
    int rc = cv_gguf_get_int(g, key, &v, err);
    if (rc == CV_ENOTFOUND) {
        if (dflt < 0)
            return CV_CORRUPT(err, "%s: metadata '%s' is missing; a %s model needs it", cv_gguf_path(g), key,
                              a->name);
        v = dflt;
    } else if (rc) {
        return rc;
    }
    if (v < lo || v > hi)
        return CV_CORRUPT(err, "%s: metadata '%s' = %lld, must be %lld..%lld", cv_gguf_path(g), key, (long long)v,
                          (long long)lo, (long long)hi);
    *out = (int32_t)v;
    return 0;
}

static int hp_float(const cv_gguf *g, const cv_arch *a, const char *suffix, double dflt, double lo, double hi,
                    float *out, cv_err *err)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", a->name, suffix);
    double v;
    int rc = cv_gguf_get_float(g, key, &v, err);
    if (rc == CV_ENOTFOUND)
        v = dflt;
    else if (rc)
        return rc;
    if (!(v >= lo && v <= hi)) /* also rejects NaN */
        return CV_CORRUPT(err, "%s: metadata '%s' = %g, must be %g..%g", cv_gguf_path(g), key, v, lo, hi);
    *out = (float)v;
    return 0;
}

/* {arch}.suffix as hp_int reads it, or, where the file holds one value per
 * layer (gemma4's head_count_kv and feed_forward_length), an array of
 * n_layer integers each in [lo, hi], of which *out gets the largest.
 * per_layer (NULL: not wanted) gets each layer's value either way. */
static int hp_layer_int(const cv_gguf *g, const cv_arch *a, const char *suffix, int64_t dflt, int64_t lo, int64_t hi,
                        int32_t n_layer, int32_t *per_layer, int32_t *out, cv_err *err)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", a->name, suffix);
    const cv_gguf_value *v = cv_gguf_get(g, key);
    if (!v || v->type != CV_GGUF_ARRAY) {
        int rc = hp_int(g, a, suffix, dflt, lo, hi, out, err);
        for (int32_t il = 0; rc == 0 && per_layer && il < n_layer; il++)
            per_layer[il] = *out;
        return rc;
    }
    if (v->arr.n != (uint64_t)n_layer || v->arr.type == CV_GGUF_STRING || v->arr.type == CV_GGUF_ARRAY ||
        v->arr.type == CV_GGUF_FLOAT32 || v->arr.type == CV_GGUF_FLOAT64)
        return CV_CORRUPT(err, "%s: metadata '%s' is an array of %llu, expected one integer per layer (%d)",
                          cv_gguf_path(g), key, (unsigned long long)v->arr.n, n_layer);
    *out = (int32_t)lo;
    for (int32_t il = 0; il < n_layer; il++) {
        const int64_t x = cv_gguf_arr_int(v, (uint64_t)il);
        if (x < lo || x > hi)
            return CV_CORRUPT(err, "%s: metadata '%s' element %d = %lld, must be %lld..%lld", cv_gguf_path(g), key,
                              il, (long long)x, (long long)lo, (long long)hi);
        if (per_layer)
            per_layer[il] = (int32_t)x;
        *out = CV_MAX(*out, (int32_t)x);
    }
    return 0;
}

/* The mixture-of-experts keys, required when the architecture's layers
 * are MoE and ignored otherwise. */
static int read_moe(const cv_gguf *g, const cv_arch *a, cv_hparams *hp, cv_err *err)
{
    hp->n_expert = hp->n_expert_used = hp->n_ff_exp = hp->n_ff_shexp = 0;
    hp->n_expert_group = hp->n_group_used = hp->n_dense_lead = 0;
    hp->expert_weights_scale = 1.0f;
    char key[160];
    snprintf(key, sizeof key, "%s.expert_count", a->name);
    if (a->ffn != CV_FFN_MOE && !(a->moe_by_router && cv_gguf_get(g, key)))
        return 0;
    const char *path = cv_gguf_path(g);
    int rc;
    /* A shared expert's width: the descriptor's shared-expert tensors need
     * it (check_dims names the key when they do and it is absent). */
    if ((rc = hp_int(g, a, "expert_count", -1, 1, CV_MAX_EXPERTS, &hp->n_expert, err)) ||
        (rc = hp_int(g, a, "expert_used_count", -1, 1, CV_MIN(hp->n_expert, CV_MAX_EXPERTS_USED),
                     &hp->n_expert_used, err)) ||
        (rc = hp_int(g, a, "expert_feed_forward_length", -1, 1, CV_MAX_MODEL_DIM, &hp->n_ff_exp, err)) ||
        (rc = hp_int(g, a, "expert_shared_feed_forward_length", 0, 0, CV_MAX_MODEL_DIM, &hp->n_ff_shexp, err)))
        return rc;
    /* Renormalising the chosen experts' weights is the architecture's rule
     * (qwen3moe: always); a file may state it. */
    hp->expert_norm = a->expert_norm;
    snprintf(key, sizeof key, "%s.expert_weights_norm", a->name);
    bool norm;
    rc = cv_gguf_get_bool(g, key, &norm, err);
    if (rc == 0)
        hp->expert_norm = norm;
    else if (rc != CV_ENOTFOUND)
        return rc;
    /* A softmax router may say it is a sigmoid one (llama.cpp's
     * expert_gating_func: 1 softmax, 2 sigmoid). The shared experts'
     * width is their count times an expert's when the file gives a count
     * rather than a width (deepseek2). */
    int32_t gating = 0, n_shared = 0;
    if ((rc = hp_int(g, a, "expert_gating_func", 0, 0, 3, &gating, err)) ||
        (rc = hp_int(g, a, "expert_shared_count", 0, 0, CV_MAX_EXPERTS, &n_shared, err)) ||
        (rc = hp_int(g, a, "expert_group_count", 0, 0, hp->n_expert, &hp->n_expert_group, err)) ||
        (rc = hp_int(g, a, "expert_group_used_count", hp->n_expert_group, 0, CV_MAX(hp->n_expert_group, 1),
                     &hp->n_group_used, err)) ||
        (rc = hp_int(g, a, "leading_dense_block_count", 0, 0, hp->n_layer, &hp->n_dense_lead, err)) ||
        (rc = hp_float(g, a, "expert_weights_scale", 1, 0, 1e6, &hp->expert_weights_scale, err)))
        return rc;
    if (hp->expert_weights_scale == 0) /* llama.cpp: 0 means no scaling */
        hp->expert_weights_scale = 1.0f;
    if (gating > 0 && a->routing != CV_ROUTE_SOFTMAX_TOPK)
        return cv_err_set(err, CV_EUNSUPPORTED, "%s: metadata '%s.expert_gating_func' = %d: a %s router is not "
                          "chosen by it", path, a->name, gating, a->name);
    if (gating == 3)
        return cv_err_set(err, CV_EUNSUPPORTED, "%s: metadata '%s.expert_gating_func' = 3 (softmax over the chosen "
                          "weights) is not supported for %s", path, a->name, a->name);
    if (gating == 2)
        hp->routing = CV_ROUTE_SIGMOID_TOPK;
    if (hp->n_ff_shexp == 0 && n_shared > 0) {
        if ((int64_t)n_shared * hp->n_ff_exp > CV_MAX_MODEL_DIM)
            return CV_CORRUPT(err, "%s: %d shared experts of %d exceed the %d-wide limit", path, n_shared,
                              hp->n_ff_exp, CV_MAX_MODEL_DIM);
        hp->n_ff_shexp = n_shared * hp->n_ff_exp;
    }
    if (hp->n_expert_group > 1) {
        /* every group whole, each of at least 2 experts (a group's score is
         * its best two), and the kept groups holding enough experts */
        const int32_t per = hp->n_expert / hp->n_expert_group;
        if (hp->n_expert % hp->n_expert_group || per < 2 || hp->n_group_used < 1 ||
            (int64_t)hp->n_group_used * per < hp->n_expert_used)
            return CV_CORRUPT(err, "%s: %d experts in '%s.expert_group_count' = %d groups, %d of them kept "
                              "('%s.expert_group_used_count'), cannot give %d experts a token", path, hp->n_expert,
                              a->name, hp->n_expert_group, hp->n_group_used, a->name, hp->n_expert_used);
    }
    cv_err_clear(err);
    return 0;
}

/* Multi-head latent attention's keys (required for an MLA architecture,
 * ignored otherwise). GGUF files store MLA as one KV head whose key is the
 * latent row (key_length = kv_lora_rank + RoPE dims) and whose value is
 * its latent part (value_length = kv_lora_rank); the heads' own sizes are
 * key_length_mla (nope + RoPE dims) and value_length_mla. Older files
 * without them hold an unsplit attn_kv_b that corvid does not run. */
static int read_mla(const cv_gguf *g, const cv_arch *a, cv_hparams *hp, cv_err *err)
{
    hp->n_lora_q = hp->n_lora_kv = hp->k_mla = hp->v_mla = 0;
    if (a->mixer != CV_MIXER_MLA)
        return 0;
    const char *path = cv_gguf_path(g);
    char key[160];
    snprintf(key, sizeof key, "%s.attention.key_length_mla", a->name);
    if (!cv_gguf_get(g, key))
        return cv_err_set(err, CV_EUNSUPPORTED, "%s: no '%s': a file from before llama.cpp's MLA split (an unsplit "
                          "attn_kv_b), which corvid does not run; convert the model again", path, key);
    /* deepseek2's converter stores 0.1 x mscale_all_dim as the YaRN log
     * multiplier (llama.cpp divides it back) */
    float stored_log_mul;
    int rc;
    if ((rc = hp_float(g, a, "rope.scaling.yarn_log_multiplier", 0, 0, 100, &stored_log_mul, err)))
        return rc;
    hp->yarn_log_mul = stored_log_mul / 0.1f;
    if ((rc = hp_int(g, a, "attention.q_lora_rank", 0, 0, CV_MAX_MODEL_DIM, &hp->n_lora_q, err)) ||
        (rc = hp_int(g, a, "attention.kv_lora_rank", -1, 1, CV_MAX_HEAD_DIM, &hp->n_lora_kv, err)) ||
        (rc = hp_int(g, a, "attention.key_length_mla", -1, 1, CV_MAX_HEAD_DIM, &hp->k_mla, err)) ||
        (rc = hp_int(g, a, "attention.value_length_mla", -1, 1, CV_MAX_HEAD_DIM, &hp->v_mla, err)))
        return rc;
    if (hp->n_head_kv != 1 || hp->head_dim != hp->n_lora_kv + hp->n_rot || hp->head_dim_v != hp->n_lora_kv ||
        hp->k_mla <= hp->n_rot)
        return CV_CORRUPT(err, "%s: MLA sizes disagree: %d kv heads of key %d and value %d, kv_lora_rank %d, %d RoPE "
                          "dims, key_length_mla %d (expected 1 kv head, key kv_lora_rank + RoPE dims, value "
                          "kv_lora_rank, key_length_mla above the RoPE dims)", path, hp->n_head_kv, hp->head_dim,
                          hp->head_dim_v, hp->n_lora_kv, hp->n_rot, hp->k_mla);
    if ((int64_t)hp->n_head * CV_MAX(hp->k_mla, hp->v_mla) > CV_MAX_MODEL_DIM)
        return CV_CORRUPT(err, "%s: %d heads of %d exceed the %d-wide limit", path, hp->n_head,
                          CV_MAX(hp->k_mla, hp->v_mla), CV_MAX_MODEL_DIM);
    return 0;
}

/* What the architecture decides about every layer, and the window layers'
 * keys: the sliding window (required when the architecture has window
 * layers), their RoPE base, the query scale, the embedding multiplier,
 * the per-layer inputs' width, the logits' soft cap and the FFN's
 * activation and routing. */
static int read_layer_hparams(const cv_gguf *g, const cv_arch *a, cv_hparams *hp, cv_err *err)
{
    int rc;
    hp->n_swa = 0;
    if (a->swa_period > 0 &&
        (rc = hp_int(g, a, "attention.sliding_window", -1, 1, CV_MAX_CONTEXT, &hp->n_swa, err)))
        return rc;
    const float theta_swa = a->default_rope_theta_swa > 0 ? a->default_rope_theta_swa : hp->rope_theta;
    if ((rc = hp_float(g, a, "rope.freq_base_swa", theta_swa, 1, 1e12, &hp->rope_theta_swa, err)))
        return rc;
    const bool wide = a->attn_scale_wide_at_layers > 0 && hp->n_layer == a->attn_scale_wide_at_layers;
    hp->attn_scale = a->attn_scale_one ? 1.0f
                                       : 1.0f / sqrtf(wide ? (float)(hp->n_embd / hp->n_head) : (float)hp->head_dim);
    if (a->mixer == CV_MIXER_MLA) {
        /* A head's score is over its own k_mla dims; with YaRN, deepseek2
         * puts mscale^2 into the score scale and none into cos/sin, mscale
         * = 1 + 0.1 mscale_all_dim ln(factor) (testdata/reference3 README). */
        const float ms = hp->rope_scaling == CV_ROPE_SCALING_YARN
                             ? 1.0f + 0.1f * hp->yarn_log_mul * logf(hp->rope_factor)
                             : 1.0f;
        hp->attn_scale = ms * ms / sqrtf((float)hp->k_mla);
    }
    /* gemma4: per-layer inputs (E2B / E4B) and soft-capped logits */
    if ((rc = hp_int(g, a, "embedding_length_per_layer_input", 0, 0, CV_MAX_MODEL_DIM / hp->n_layer, &hp->n_pl,
                     err)) ||
        (rc = hp_float(g, a, "final_logit_softcapping", 0, 0, 1e6, &hp->logit_softcap, err)))
        return rc;
    hp->embd_scale = a->embd_scale_sqrt ? sqrtf((float)hp->n_embd) : 1.0f;
    hp->glu = a->glu;
    hp->glu_alpha = a->glu_alpha;
    hp->glu_limit = a->glu_limit;
    cv_err_clear(err);
    return 0;
}

/* The Gated DeltaNet keys of a hybrid, required for one and ignored
 * otherwise. The state a sequence holds is sized from them, so each is
 * bounded (base/limits.h) and they must agree with each other. */
static int read_ssm(const cv_gguf *g, const cv_arch *a, cv_hparams *hp, cv_err *err)
{
    hp->ssm_conv = hp->ssm_state = hp->ssm_group = hp->ssm_heads = hp->ssm_inner = 0;
    hp->full_attn_interval = 0;
    hp->ssm_grouped = a->ssm_grouped;
    if (!a->hybrid)
        return 0;
    const char *path = cv_gguf_path(g);
    int rc;
    if ((rc = hp_int(g, a, "ssm.conv_kernel", -1, 1, CV_MAX_SSM_CONV, &hp->ssm_conv, err)) ||
        (rc = hp_int(g, a, "ssm.state_size", -1, 1, CV_MAX_SSM_STATE, &hp->ssm_state, err)) ||
        (rc = hp_int(g, a, "ssm.group_count", -1, 1, CV_MAX_HEADS, &hp->ssm_group, err)) ||
        (rc = hp_int(g, a, "ssm.time_step_rank", -1, 1, CV_MAX_HEADS, &hp->ssm_heads, err)) ||
        (rc = hp_int(g, a, "ssm.inner_size", -1, 1, CV_MAX_MODEL_DIM, &hp->ssm_inner, err)) ||
        (rc = hp_int(g, a, "full_attention_interval", 4, 1, CV_MAX_LAYERS, &hp->full_attn_interval, err)))
        return rc;
    if ((int64_t)hp->ssm_heads * hp->ssm_state != hp->ssm_inner)
        return CV_CORRUPT(err, "%s: metadata '%s.ssm.inner_size' = %d, must be %s.ssm.time_step_rank (%d value heads) "
                          "x %s.ssm.state_size (%d)", path, a->name, hp->ssm_inner, a->name, hp->ssm_heads, a->name,
                          hp->ssm_state);
    if (hp->ssm_heads % hp->ssm_group)
        return CV_CORRUPT(err, "%s: metadata '%s.ssm.time_step_rank' = %d value heads do not split evenly over "
                          "'%s.ssm.group_count' = %d key heads", path, a->name, hp->ssm_heads, a->name,
                          hp->ssm_group);
    if ((int64_t)2 * hp->ssm_group * hp->ssm_state + hp->ssm_inner > CV_MAX_MODEL_DIM)
        return CV_CORRUPT(err, "%s: %d key heads and %d value heads of %d exceed the %d-wide limit", path,
                          hp->ssm_group, hp->ssm_heads, hp->ssm_state, CV_MAX_MODEL_DIM);
    return 0;
}

/* One kind of layer's heads: their size from {arch}.attention.key_length
 * + sfx (value_length + sfx must agree) and their rotated dimensions from
 * {arch}.rope.dimension_count + sfx (even, at most the head; dflt_rot < 0:
 * the whole head, else at most it); the value's size into hd_v (MLA's is
 * its latent part, others' must be the key's). sfx is "" for the full
 * layers and "_swa" for the window layers, which gemma4 gives heads of
 * their own. */
static int read_head(const cv_gguf *g, const cv_arch *a, const cv_hparams *hp, const char *sfx, int32_t dflt_hd,
                     int32_t dflt_rot, int32_t *hd, int32_t *hd_v, int32_t *n_rot, cv_err *err)
{
    const char *path = cv_gguf_path(g);
    char kk[64], kv[64], kr[64];
    snprintf(kk, sizeof kk, "attention.key_length%s", sfx);
    snprintf(kv, sizeof kv, "attention.value_length%s", sfx);
    snprintf(kr, sizeof kr, "rope.dimension_count%s", sfx);
    int rc;
    if ((rc = hp_int(g, a, kk, dflt_hd, 1, CV_MAX_HEAD_DIM, hd, err)) ||
        (rc = hp_int(g, a, kv, *hd, 1, CV_MAX_HEAD_DIM, hd_v, err)))
        return rc;
    if (*hd_v != *hd && a->mixer != CV_MIXER_MLA) /* MLA's value is its key's latent part */
        return cv_err_set(err, CV_EUNSUPPORTED,
                          "%s: value head size %d differs from key head size %d; corvid supports equal sizes", path,
                          *hd_v, *hd);
    if ((int64_t)hp->n_head * *hd > CV_MAX_MODEL_DIM)
        return CV_CORRUPT(err, "%s: %d heads of %d exceed the %d-wide limit", path, hp->n_head, *hd,
                          CV_MAX_MODEL_DIM);
    /* The kernels' RoPE keeps its per-dimension tables on the stack. */
    if ((rc = hp_int(g, a, kr, dflt_rot < 0 ? *hd : CV_MIN(dflt_rot, *hd), 2, CV_MIN(*hd, CV_MAX_ROPE_DIMS), n_rot,
                     err)))
        return rc;
    if (*n_rot % 2)
        return CV_CORRUPT(err, "%s: metadata '%s.%s' = %d must be even", path, a->name, kr, *n_rot);
    return 0;
}

static int read_hparams(const cv_gguf *g, const cv_arch *a, cv_hparams *hp, cv_err *err)
{
    const char *path = cv_gguf_path(g);
    int rc;
    if ((rc = hp_int(g, a, "embedding_length", -1, 1, CV_MAX_MODEL_DIM, &hp->n_embd, err)) ||
        (rc = hp_int(g, a, "block_count", -1, 1, CV_MAX_LAYERS, &hp->n_layer, err)) ||
        (rc = hp_layer_int(g, a, "feed_forward_length", a->ffn == CV_FFN_DENSE ? -1 : 0, 0, CV_MAX_MODEL_DIM,
                           hp->n_layer, NULL, &hp->n_ff, err)) ||
        (rc = hp_int(g, a, "attention.head_count", -1, 1, CV_MAX_HEADS, &hp->n_head, err)) ||
        (rc = hp_layer_int(g, a, "attention.head_count_kv", hp->n_head, 1, hp->n_head, hp->n_layer, NULL,
                           &hp->n_head_kv, err)) ||
        (rc = hp_int(g, a, "context_length", 2048, 1, CV_MAX_CONTEXT, &hp->n_ctx_train, err)))
        return rc;
    /* (each layer's kv heads split its query heads: layer_geometry checks) */
    if (hp->n_head % hp->n_head_kv)
        return CV_CORRUPT(err, "%s: %d query heads do not split evenly over %d kv heads", path, hp->n_head,
                          hp->n_head_kv);
    if (a->ffn == CV_FFN_DENSE && hp->n_ff < 1)
        return CV_CORRUPT(err, "%s: metadata '%s.feed_forward_length' = 0, a %s model needs a dense FFN width",
                          path, a->name, a->name);
    hp->routing = a->routing;
    if ((rc = read_moe(g, a, hp, err)) || (rc = read_ssm(g, a, hp, err)))
        return rc;
    /* head_dim: key_length when given (qwen3), else the even split; window
     * layers may have their own (gemma4), else the same. */
    int32_t dflt_hd = hp->n_embd % hp->n_head == 0 ? hp->n_embd / hp->n_head : -1;
    int32_t hd_v_swa;
    if ((rc = read_head(g, a, hp, "", dflt_hd, -1, &hp->head_dim, &hp->head_dim_v, &hp->n_rot, err)) ||
        (rc = read_head(g, a, hp, "_swa", hp->head_dim, hp->n_rot, &hp->head_dim_swa, &hd_v_swa, &hp->n_rot_swa,
                        err)) ||
        (rc = hp_int(g, a, "attention.shared_kv_layers", 0, 0, hp->n_layer - 1, &hp->n_kv_shared, err)))
        return rc;
    if ((rc = hp_float(g, a, "attention.layer_norm_rms_epsilon", a->default_rms_eps, 0, 1, &hp->rms_eps, err)) ||
        (rc = hp_float(g, a, "rope.freq_base", a->default_rope_theta, 1, 1e12, &hp->rope_theta, err)) ||
        (rc = read_mla(g, a, hp, err)))
        return rc;

    /* Position scaling. llama3 scaling arrives as the rope_freqs tensor, so
     * only "linear" (DeepSeek-Coder, CodeLlama variants, Gemma 3's global
     * layers) and "yarn" (gpt-oss) are read here. */
    hp->rope_freq_scale = 1.0f;
    hp->rope_factor = 1.0f;
    hp->rope_scaling = CV_ROPE_SCALING_NONE;
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a->name);
    cv_str type;
    rc = cv_gguf_get_str(g, key, &type, err);
    if (rc && rc != CV_ENOTFOUND)
        return rc;
    float factor = 0;
    if (rc == 0 && !cv_str_eqz(type, "none")) {
        if (cv_str_eqz(type, "linear"))
            hp->rope_scaling = CV_ROPE_SCALING_LINEAR;
        else if (cv_str_eqz(type, "yarn"))
            hp->rope_scaling = CV_ROPE_SCALING_YARN;
        else
            return cv_err_set(err, CV_EUNSUPPORTED,
                              "%s: RoPE scaling '%.*s' is not supported (corvid runs none, linear, yarn, and llama3 "
                              "via rope_freqs.weight)",
                              path, (int)CV_MIN(type.len, 64), type.ptr);
        if ((rc = hp_float(g, a, "rope.scaling.factor", 1, 1e-3, 1e6, &factor, err)))
            return rc;
    } else if (rc == CV_ENOTFOUND) {
        if ((rc = hp_float(g, a, "rope.scale_linear", 0, 0, 1e6, &factor, err)))
            return rc;
        if (factor > 0)
            hp->rope_scaling = CV_ROPE_SCALING_LINEAR;
    }
    if (hp->rope_scaling == CV_ROPE_SCALING_YARN) {
        /* The factor divides the interpolated frequencies; the original
         * context and the betas place the ramp between kept and divided. */
        if (factor < 1)
            return CV_CORRUPT(err, "%s: metadata '%s.rope.scaling.factor' = %g, YaRN needs a factor >= 1", path,
                              a->name, factor);
        if ((rc = hp_int(g, a, "rope.scaling.original_context_length", hp->n_ctx_train, 1, CV_MAX_CONTEXT,
                         &hp->rope_orig_ctx, err)) ||
            (rc = hp_float(g, a, "rope.scaling.yarn_beta_fast", 32, 1e-3, 1e6, &hp->yarn_beta_fast, err)) ||
            (rc = hp_float(g, a, "rope.scaling.yarn_beta_slow", 1, 1e-3, 1e6, &hp->yarn_beta_slow, err)) ||
            (a->yarn_log_mul &&
             (rc = hp_float(g, a, "rope.scaling.yarn_log_multiplier", 0, 0, 100, &hp->yarn_log_mul, err))))
            return rc;
        hp->rope_factor = factor;
    } else if (factor > 0) {
        hp->rope_factor = factor;
        hp->rope_freq_scale = 1.0f / factor;
    }
    /* The query temperature steps at the original context (mistral3). */
    if ((rc = hp_float(g, a, "attention.temperature_scale", 0, 0, 100, &hp->attn_temp_scale, err)))
        return rc;
    hp->attn_temp_len = 0;
    if (hp->attn_temp_scale > 0 &&
        (rc = hp_int(g, a, "rope.scaling.original_context_length", hp->n_ctx_train, 1, CV_MAX_CONTEXT,
                     &hp->attn_temp_len, err)))
        return rc;
    cv_err_clear(err);
    return read_layer_hparams(g, a, hp, err);
}

/* ---- tensors ---- */

/* A dimension's size, in layer L (NULL: a global tensor). */
static int64_t dim_value(const cv_hparams *hp, const cv_layer *L, cv_dim d)
{
    const int64_t hd = L ? L->head_dim : hp->head_dim, n_kv = L ? L->n_head_kv : hp->n_head_kv;
    switch (d) {
    case CV_DIM_ONE: return 1;
    case CV_DIM_EMBD: return hp->n_embd;
    case CV_DIM_VOCAB: return hp->n_vocab;
    case CV_DIM_Q: return hp->n_head * hd;
    case CV_DIM_KV: return n_kv * hd;
    case CV_DIM_FF: return L ? L->n_ff : hp->n_ff;
    case CV_DIM_HEAD: return hd;
    case CV_DIM_HEADS: return hp->n_head;
    case CV_DIM_ROT_HALF: return hp->n_rot / 2;
    case CV_DIM_EXPERT: return hp->n_expert;
    case CV_DIM_FF_EXP: return hp->n_ff_exp;
    case CV_DIM_FF_EXP2: return 2 * (int64_t)hp->n_ff_exp;
    case CV_DIM_Q_GATED: return 2 * hp->n_head * hd;
    case CV_DIM_FF_SHEXP: return hp->n_ff_shexp;
    case CV_DIM_SSM_CONV: return hp->ssm_conv;
    case CV_DIM_SSM_CH: return 2 * (int64_t)hp->ssm_group * hp->ssm_state + hp->ssm_inner;
    case CV_DIM_SSM_INNER: return hp->ssm_inner;
    case CV_DIM_SSM_HEADS: return hp->ssm_heads;
    case CV_DIM_SSM_STATE: return hp->ssm_state;
    case CV_DIM_SSM_IN: return 2 * (int64_t)hp->ssm_group * hp->ssm_state + 2 * (int64_t)hp->ssm_inner;
    case CV_DIM_SSM_BA: return 2 * (int64_t)hp->ssm_heads;
    case CV_DIM_Q_LORA: return hp->n_lora_q;
    case CV_DIM_KV_LORA: return hp->n_lora_kv;
    case CV_DIM_KV_A: return (int64_t)hp->n_lora_kv + hp->n_rot;
    case CV_DIM_Q_MLA: return (int64_t)hp->n_head * hp->k_mla;
    case CV_DIM_NOPE: return (int64_t)hp->k_mla - hp->n_rot;
    case CV_DIM_V_MLA: return hp->v_mla;
    case CV_DIM_O_MLA: return (int64_t)hp->n_head * hp->v_mla;
    case CV_DIM_PL: return hp->n_pl;
    case CV_DIM_PL_ALL: return (int64_t)hp->n_layer * hp->n_pl;
    }
    return -1;
}

/* The metadata key a dimension comes from, where a file may lack it (a
 * tensor that needs it then says which key is missing). */
static const char *dim_key(cv_dim d)
{
    switch (d) {
    case CV_DIM_FF: return "feed_forward_length";
    case CV_DIM_FF_SHEXP: return "expert_shared_feed_forward_length";
    case CV_DIM_Q_LORA: return "attention.q_lora_rank";
    case CV_DIM_PL: case CV_DIM_PL_ALL: return "embedding_length_per_layer_input";
    default: return NULL;
    }
}

static bool is_matrix_role(cv_role r)
{
    switch (r) {
    case CV_ROLE_TOKEN_EMBD: case CV_ROLE_OUTPUT: case CV_ROLE_ATTN_Q: case CV_ROLE_ATTN_K: case CV_ROLE_ATTN_V:
    case CV_ROLE_ATTN_OUT: case CV_ROLE_FFN_GATE: case CV_ROLE_FFN_UP: case CV_ROLE_FFN_DOWN:
    case CV_ROLE_FFN_GATE_INP: case CV_ROLE_FFN_GATE_EXPS: case CV_ROLE_FFN_UP_EXPS: case CV_ROLE_FFN_DOWN_EXPS:
    case CV_ROLE_FFN_GATE_UP_EXPS:
    case CV_ROLE_FFN_GATE_SHEXP: case CV_ROLE_FFN_UP_SHEXP: case CV_ROLE_FFN_DOWN_SHEXP:
    case CV_ROLE_SSM_QKV: case CV_ROLE_SSM_Z: case CV_ROLE_SSM_BETA: case CV_ROLE_SSM_ALPHA: case CV_ROLE_SSM_OUT:
    case CV_ROLE_SSM_IN: case CV_ROLE_SSM_BA:
    case CV_ROLE_ATTN_Q_A: case CV_ROLE_ATTN_Q_B: case CV_ROLE_ATTN_KV_A: case CV_ROLE_ATTN_K_B: case CV_ROLE_ATTN_V_B:
    case CV_ROLE_PL_TOKEN_EMBD: case CV_ROLE_PL_MODEL_PROJ: case CV_ROLE_PL_GATE: case CV_ROLE_PL_PROJ:
        return true;
    default:
        return false;
    }
}

/* Checks one tensor's shape and dtype against its descriptor row. */
static int check_tensor(const cv_gguf *g, const cv_arch *a, const cv_hparams *hp, const cv_layer *L,
                        const cv_arch_tensor *d, const cv_gguf_tensor *t, cv_err *err)
{
    const char *path = cv_gguf_path(g);
    int64_t ne0 = dim_value(hp, L, d->ne0), ne1 = dim_value(hp, L, d->ne1), ne2 = dim_value(hp, L, d->ne2);
    const cv_dim dims[3] = { d->ne0, d->ne1, d->ne2 };
    for (int i = 0; i < 3; i++)
        if (dim_value(hp, L, dims[i]) == 0 && dim_key(dims[i]))
            return CV_CORRUPT(err, "%s: metadata '%s.%s' is missing or 0; tensor '%s' needs it", path, a->name,
                              dim_key(dims[i]), t->name);
    bool shape_ok = t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == ne2 && t->ne[3] == 1;
    if (!shape_ok) {
        char expect[96], experts[64] = "";
        if (d->ne2 != CV_DIM_ONE) {
            snprintf(expect, sizeof expect, "[%lld, %lld, %lld]", (long long)ne0, (long long)ne1, (long long)ne2);
            snprintf(experts, sizeof experts, ", %d experts of %d", hp->n_expert, hp->n_ff_exp);
        } else {
            snprintf(expect, sizeof expect, "[%lld, %lld]", (long long)ne0, (long long)ne1);
        }
        return CV_CORRUPT(err, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected %s for this "
                          "%s model (%d hidden, %d heads of %d, %d kv heads, %d ffn, %d vocab%s)",
                          path, t->name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                          (long long)t->ne[3], expect, a->name, hp->n_embd, hp->n_head,
                          (int)dim_value(hp, L, CV_DIM_HEAD), L ? L->n_head_kv : hp->n_head_kv,
                          (int)dim_value(hp, L, CV_DIM_FF), hp->n_vocab, experts);
    }
    const cv_dtype *dt = cv_dtype_get(t->type);
    cv_ggml_type_info ti;
    const char *tname = cv_ggml_type_info_get(t->type, &ti) ? ti.name : "unknown";
    if (!dt)
        return cv_err_set(err, CV_EUNSUPPORTED, "%s: tensor '%s' has type %s, which corvid cannot compute with", path,
                          t->name, tname);
    if (is_matrix_role(d->role) && !dt->is_weight)
        return cv_err_set(err, CV_EUNSUPPORTED, "%s: tensor '%s' has type %s, which corvid cannot use as a weight "
                          "matrix", path, t->name, tname);
    return 0;
}

/* A vector tensor (or a table of them, as per-expert biases are, or a
 * small 2-D one read as rows, like the conv's taps) as f32: the mapping
 * itself when it is f32 (GGUF aligns data to >= 8 bytes... but a hostile
 * alignment of 1 is legal, hence the check), else dequantized row by row
 * into memory the model owns. */
static const float *bind_vector(cv_model *m, const cv_gguf_tensor *t)
{
    if (!t)
        return NULL;
    const int64_t n = t->ne[0], rows = t->ne[1];
    if (t->type == CV_GGML_F32 && ((uintptr_t)t->data % sizeof(float)) == 0)
        return t->data;
    float *v = own_buf(m, (size_t)(n * rows) * sizeof(float));
    const size_t rb = cv_ggml_row_bytes(t->type, n);
    for (int64_t r = 0; r < rows; r++) {
        int rc = cv_dequantize_row(t->type, (const char *)t->data + (size_t)r * rb, v + r * n, n, NULL);
        assert(rc == 0); /* check_tensor vetted the type and the row length */
        (void)rc;
    }
    return v;
}

/* A matrix to prepare: a 2-D tensor, or one expert's slice of a 3-D one. */
typedef struct piece {
    const char *name; /* the tensor's, for errors */
    uint32_t type;
    int64_t n_in, n_out;
    const void *data;
    size_t n_bytes;
} piece;

static piece piece_of(const cv_gguf_tensor *t)
{
    return (piece){ t->name, t->type, t->ne[0], t->ne[1], t->data, t->n_bytes };
}

/* Rows [r0, r0 + n) of a 2-D tensor. */
static piece rows_piece(const cv_gguf_tensor *t, int64_t r0, int64_t n)
{
    const size_t rb = cv_ggml_row_bytes(t->type, t->ne[0]);
    return (piece){ t->name, t->type, t->ne[0], n, (const char *)t->data + (size_t)r0 * rb, (size_t)n * rb };
}

/* Expert e's [n_out][n_in] slice of a 3-D tensor (expert index last, so a
 * slice is contiguous). */
static piece expert_piece(const cv_gguf_tensor *t, int64_t e)
{
    const size_t bytes = t->n_bytes / (size_t)t->ne[2];
    return (piece){ t->name, t->type, t->ne[0], t->ne[1], (const char *)t->data + (size_t)e * bytes, bytes };
}

/* Tells the OS a stretch of the mapped file is not needed any more: the
 * kernels hold their own prepared copy. The pages leave this process's
 * resident set (an 18 GB MoE would otherwise count twice: its mapping and
 * its packed weights) and stay in the page cache only while memory allows;
 * a later read would fetch them again, so this is always safe. */
static void drop_pages(const void *data, size_t n)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = ((uintptr_t)data + page - 1) & ~(page - 1),
                    hi = ((uintptr_t)data + n) & ~(page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* Maps a stretch of the file that a matrix reads in place into the page
 * tables now (reading it from disk where the page cache lacks it): else
 * the first request pays for it, a fault every 64 KiB of weights, inside
 * its time to first token (docs/PERF.md, "Several models in one server").
 * MADV_POPULATE_READ is Linux 5.14's; before it the first request maps
 * the pages as it reads them, as it always did. */
static void map_pages(const void *data, size_t n)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = (uintptr_t)data & ~(page - 1),
                    hi = ((uintptr_t)data + n + page - 1) & ~(page - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_POPULATE_READ);
}

/* Prepares n matrices that share their input as one: rows of the first,
 * then of the next (rows are independent in every GGUF type, so stacking
 * matrices is concatenating their bytes); the dequantized path stacks f32
 * rows. A single matrix on the native path is prepared straight from the
 * mapping. A stacked buffer is freed at once when the kernels keep their
 * own packed copy. */
static int bind_run(cv_model *m, const piece *ps, int n, cv_bmat **out, cv_err *err)
{
    const bool deq = m->dequantized;
    const int64_t n_in = ps[0].n_in;
    int rc;
    if (n == 1 && !deq) {
        rc = cv_bmat_create(m->be, ps[0].type, n_in, ps[0].n_out, ps[0].data, ps[0].n_bytes, out, err);
    } else {
        int64_t n_out = 0;
        size_t bytes = 0;
        for (int i = 0; i < n; i++) {
            n_out += ps[i].n_out;
            bytes += deq ? (size_t)ps[i].n_out * (size_t)n_in * sizeof(float) : ps[i].n_bytes;
        }
        char *buf = cv_aligned_alloc(bytes), *p = buf;
        for (int i = 0; i < n; i++) {
            if (deq) {
                size_t rb = cv_ggml_row_bytes(ps[i].type, n_in);
                for (int64_t r = 0; r < ps[i].n_out; r++, p += n_in * sizeof(float))
                    cv_dequantize_row(ps[i].type, (const char *)ps[i].data + r * rb, (float *)p, n_in, NULL);
            } else {
                memcpy(p, ps[i].data, ps[i].n_bytes);
                p += ps[i].n_bytes;
            }
        }
        rc = cv_bmat_create(m->be, deq ? CV_GGML_F32 : ps[0].type, n_in, n_out, buf, bytes, out, err);
        if (rc == 0 && !(*out)->owns_data) {
            /* the matrix reads buf: keep it for the model's lifetime */
            cv_model_owned *o = m->owned;
            if (o->n_bufs == o->cap_bufs) {
                o->cap_bufs = o->cap_bufs ? 2 * o->cap_bufs : 64;
                o->bufs = cv_xrealloc(o->bufs, (size_t)o->cap_bufs * sizeof *o->bufs);
            }
            o->bufs[o->n_bufs++] = buf;
        } else {
            cv_aligned_free(buf);
        }
    }
    if (rc) {
        cv_err_prefix(err, "%s: tensor '%s'%s: ", cv_gguf_path(m->gguf), ps[0].name, n > 1 ? " (stacked)" : "");
        return rc;
    }
    /* Whatever was copied or packed from the mapping is read from there no
     * more; a matrix read in place keeps its pages (n == 1, not packed),
     * mapped now. */
    if ((*out)->owns_data || n > 1 || deq)
        for (int i = 0; i < n; i++)
            drop_pages(ps[i].data, ps[i].n_bytes);
    else
        map_pages(ps[0].data, ps[0].n_bytes);
    own_mat(m, *out);
    return 0;
}

/* Splits a group of matrices that share their input (q/k/v, gate/up) into
 * runs to prepare as one: with fuse, each maximal run of members of one
 * dtype (every member on the dequantized path). Calls back per run with
 * its first member and length; col is where the run's outputs start in
 * the result row. */
typedef int (*run_fn)(cv_model *m, int first, int n, int slot, int32_t col, void *ctx, cv_err *err);

static int for_each_run(cv_model *m, const uint32_t *types, const int64_t *n_out, int n, bool fuse, run_fn fn,
                        void *ctx, int32_t *n_runs, cv_err *err)
{
    int nr = 0;
    int64_t col = 0;
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (fuse && j < n && (m->dequantized || types[j] == types[i]))
            j++;
        int rc = fn(m, i, j - i, nr++, (int32_t)col, ctx, err);
        if (rc)
            return rc;
        for (; i < j; i++)
            col += n_out[i];
    }
    *n_runs = nr;
    return 0;
}

typedef struct group_ctx {
    const cv_gguf_tensor *const *ts;
    cv_proj *projs;
} group_ctx;

static int bind_group_run(cv_model *m, int first, int n, int slot, int32_t col, void *ctx, cv_err *err)
{
    group_ctx *c = ctx;
    piece ps[4];
    for (int i = 0; i < n; i++)
        ps[i] = piece_of(c->ts[first + i]);
    c->projs[slot].col = col;
    return bind_run(m, ps, n, &c->projs[slot].w, err);
}

/* A group of 2-D matrices (at most 4), one cv_proj per run. */
static int bind_group(cv_model *m, const cv_gguf_tensor *const *ts, int n, bool fuse, cv_proj *projs, int32_t *n_projs,
                      cv_err *err)
{
    uint32_t types[4] = { 0 };
    int64_t n_out[4] = { 0 };
    assert(n <= 4);
    for (int i = 0; i < n; i++)
        types[i] = ts[i]->type, n_out[i] = ts[i]->ne[1];
    group_ctx c = { ts, projs };
    return for_each_run(m, types, n_out, n, fuse, bind_group_run, &c, n_projs, err);
}

static int bind_matrix(cv_model *m, const cv_gguf_tensor *t, cv_bmat **out, cv_err *err)
{
    piece p = piece_of(t);
    return bind_run(m, &p, 1, out, err);
}

typedef struct experts_ctx {
    const cv_gguf_tensor *const *ts;
    cv_expert_proj *projs;
} experts_ctx;

static int bind_experts_run(cv_model *m, int first, int n, int slot, int32_t col, void *ctx, cv_err *err)
{
    experts_ctx *c = ctx;
    const int64_t n_exp = c->ts[first]->ne[2];
    cv_expert_proj *p = &c->projs[slot];
    p->col = col;
    p->w = own_buf(m, (size_t)n_exp * sizeof *p->w);
    for (int64_t e = 0; e < n_exp; e++) {
        piece ps[4];
        for (int i = 0; i < n; i++)
            ps[i] = expert_piece(c->ts[first + i], e);
        int rc = bind_run(m, ps, n, &p->w[e], err);
        if (rc)
            return rc;
    }
    return 0;
}

/* A group of 3-D expert tensors sharing their input (gate/up): each run
 * becomes one prepared matrix per expert, expert e's rows of each member
 * stacked. */
static int bind_experts(cv_model *m, const cv_gguf_tensor *const *ts, int n, bool fuse, cv_expert_proj *projs,
                        int32_t *n_projs, cv_err *err)
{
    uint32_t types[4] = { 0 };
    int64_t n_out[4] = { 0 };
    assert(n <= 4);
    for (int i = 0; i < n; i++)
        types[i] = ts[i]->type, n_out[i] = ts[i]->ne[1];
    experts_ctx c = { ts, projs };
    return for_each_run(m, types, n_out, n, fuse, bind_experts_run, &c, n_projs, err);
}

/* Each layer's sizes (cv_layer.head_dim, .n_head_kv, .n_ff): a window
 * layer's heads are hp->head_dim_swa wide, its kv heads and FFN width the
 * file's value for the layer (a per-layer array, or the model's); and the
 * layer whose K/V it attends over (cv_layer.kv_src): itself, but for the
 * last hp->n_kv_shared layers the last window layer before them (window
 * layers) or the last one before them (full layers), llama.cpp's rule for
 * gemma4, which must then be an attention layer of the same kind and
 * size. */
static int layer_geometry(const cv_gguf *g, const cv_arch *a, const cv_hparams *hp, cv_layer *layers, cv_err *err)
{
    const char *path = cv_gguf_path(g);
    const int32_t n = hp->n_layer, first_shared = n - hp->n_kv_shared;
    int32_t *kv = cv_xmalloc((size_t)n * sizeof *kv), *ff = cv_xmalloc((size_t)n * sizeof *ff), max;
    int rc = hp_layer_int(g, a, "attention.head_count_kv", hp->n_head, 1, hp->n_head, n, kv, &max, err);
    if (rc == 0)
        rc = hp_layer_int(g, a, "feed_forward_length", a->ffn == CV_FFN_DENSE ? -1 : 0, 0, CV_MAX_MODEL_DIM, n, ff,
                          &max, err);
    for (int32_t il = 0; rc == 0 && il < n; il++) {
        cv_layer *L = &layers[il];
        L->head_dim = L->n_swa > 0 ? hp->head_dim_swa : hp->head_dim;
        L->n_head_kv = kv[il];
        L->n_ff = ff[il];
        L->kv_src = il;
        if (hp->n_head % L->n_head_kv)
            rc = CV_CORRUPT(err, "%s: layer %d: %d query heads do not split evenly over %d kv heads", path, il,
                            hp->n_head, L->n_head_kv);
        else if (L->ffn == CV_FFN_DENSE && L->n_ff < 1)
            rc = CV_CORRUPT(err, "%s: metadata '%s.feed_forward_length' is 0 for layer %d, which has a dense FFN",
                            path, a->name, il);
        if (rc || il < first_shared || L->mixer != CV_MIXER_ATTN)
            continue;
        const int32_t src = first_shared - (L->n_swa > 0 ? 2 : 1);
        if (src < 0 || layers[src].mixer != CV_MIXER_ATTN || layers[src].n_swa != L->n_swa ||
            layers[src].n_head_kv != L->n_head_kv)
            rc = CV_CORRUPT(err, "%s: layer %d would share the K/V of layer %d ('%s.attention.shared_kv_layers' = %d), "
                            "which is not an attention layer of its kind and size", path, il, src, a->name,
                            hp->n_kv_shared);
        else
            L->kv_src = src;
    }
    free(kv);
    free(ff);
    return rc;
}

/* Each layer's mixer and FFN kind and its window (layers[il].mixer, .ffn,
 * .n_swa), from the architecture and the file: every layer has the
 * architecture's kinds, except a hybrid's recurrent layers, which are every
 * layer but each full_attention_interval-th, or those a per-layer array
 * {arch}.attention.recurrent_layers (one 0/1 or bool per layer) marks; a
 * sliding-window architecture's pattern (its period, or
 * {arch}.attention.sliding_window_pattern: a period or one flag per layer,
 * as llama.cpp reads it) says which layers are local and take the window.
 * Sets hp->n_recurrent. Shared by the loader and cv_model_summarize, so a
 * model and its summary agree on every layer. */
static int layer_kinds(const cv_gguf *g, const cv_arch *a, cv_hparams *hp, cv_layer *layers, cv_err *err)
{
    const char *path = cv_gguf_path(g);
    char key[160];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a->name);
    const cv_gguf_value *pat = a->swa_period > 0 ? cv_gguf_get(g, key) : NULL;
    int64_t period = a->swa_period;
    if (pat && pat->type == CV_GGUF_ARRAY) {
        if (pat->arr.n != (uint64_t)hp->n_layer || pat->arr.type == CV_GGUF_STRING || pat->arr.type == CV_GGUF_ARRAY)
            return CV_CORRUPT(err, "%s: metadata '%s' is an array of %llu, expected one number or flag per layer "
                              "(%d)", path, key, (unsigned long long)pat->arr.n, hp->n_layer);
    } else if (pat) {
        int rc = cv_gguf_get_int(g, key, &period, err);
        if (rc)
            return rc;
        if (period < 0 || period > CV_MAX_LAYERS)
            return CV_CORRUPT(err, "%s: metadata '%s' = %lld, must be 0..%d", path, key, (long long)period,
                              CV_MAX_LAYERS);
    }
    const cv_gguf_value *rec = NULL;
    char rkey[160];
    snprintf(rkey, sizeof rkey, "%s.attention.recurrent_layers", a->name);
    if (a->hybrid) {
        int rc = cv_gguf_get_arr(g, rkey, -1, &rec, err);
        if (rc == CV_ENOTFOUND)
            rec = NULL;
        else if (rc)
            return rc;
        if (rec && (rec->arr.type == CV_GGUF_STRING || rec->arr.type == CV_GGUF_ARRAY ||
                    rec->arr.type == CV_GGUF_FLOAT32 || rec->arr.type == CV_GGUF_FLOAT64 ||
                    rec->arr.n != (uint64_t)hp->n_layer))
            return CV_CORRUPT(err, "%s: metadata '%s' must hold one integer or bool per layer (%d)", path, rkey,
                              hp->n_layer);
    }
    hp->n_recurrent = 0;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        cv_layer *L = &layers[il];
        L->mixer = a->mixer;
        L->ffn = il < hp->n_dense_lead ? CV_FFN_DENSE : a->ffn;
        if (a->moe_by_router) {
            char router[64];
            snprintf(router, sizeof router, "blk.%d.ffn_gate_inp.weight", il);
            if (cv_gguf_find_tensor(g, router)) {
                if (hp->n_expert == 0)
                    return CV_CORRUPT(err, "%s: tensor '%s' routes experts, but metadata '%s.expert_count' is missing",
                                      path, router, a->name);
                L->ffn = CV_FFN_MOE;
            }
        }
        if (rec) {
            const int64_t v = cv_gguf_arr_int(rec, (uint64_t)il);
            if (v != 0 && v != 1)
                return CV_CORRUPT(err, "%s: metadata '%s' element %d = %lld, must be 0 or 1", path, rkey, il,
                                  (long long)v);
            L->mixer = v ? CV_MIXER_DELTANET : a->mixer;
        } else if (a->hybrid) {
            L->mixer = cv_hybrid_layer_mixer(il, hp->full_attn_interval);
        }
        hp->n_recurrent += L->mixer == CV_MIXER_DELTANET;
        bool local;
        if (pat && pat->type == CV_GGUF_ARRAY)
            local = cv_gguf_arr_int(pat, (uint64_t)il) != 0;
        else
            local = period > 0 && il % period < period - 1;
        L->n_swa = local && L->mixer == CV_MIXER_ATTN ? hp->n_swa : 0;
    }
    cv_err_clear(err);
    return layer_geometry(g, a, hp, layers, err);
}

/* The loaded model's layers: their kinds and windows (layer_kinds), and
 * each layer's RoPE: local layers take their own RoPE base and, unless the
 * architecture scales them too, no position scaling. */
static int resolve_layers(cv_model *m, cv_err *err)
{
    const cv_arch *a = m->arch;
    int rc = layer_kinds(m->gguf, a, &m->hp, m->layers, err);
    if (rc)
        return rc;
    cv_rope_params swa_rope = m->rope;
    swa_rope.theta = m->hp.rope_theta_swa;
    swa_rope.n_rot = m->hp.n_rot_swa;
    if (swa_rope.n_rot != m->rope.n_rot && swa_rope.freq_factors && !a->swa_rope_unscaled)
        return cv_err_set(err, CV_EUNSUPPORTED, "%s: window layers rotate %d dims, the full ones %d, with one set "
                          "of frequency factors", cv_gguf_path(m->gguf), swa_rope.n_rot, m->rope.n_rot);
    if (a->swa_rope_unscaled) {
        swa_rope.freq_scale = 1.0f;
        swa_rope.freq_factors = NULL;
        swa_rope.mscale = 1.0f;
    }
    for (int32_t il = 0; il < m->hp.n_layer; il++)
        m->layers[il].rope = m->layers[il].n_swa > 0 ? swa_rope : m->rope;
    return 0;
}

/* Whether descriptor row d belongs to layer L (by the layer's kinds). */
static bool tensor_in_layer(const cv_arch_tensor *d, const cv_layer *L)
{
    return d->when == 0 || (d->when & (CV_WHEN_MIXER(L->mixer) | CV_WHEN_FFN(L->ffn)));
}

/* Finds every descriptor tensor of layer L (NULL: the global ones) and
 * validates it; found[role] is NULL for an absent optional one. */
static int find_tensors(const cv_gguf *g, const cv_arch *a, const cv_hparams *hp, int il, const cv_layer *L,
                        const cv_gguf_tensor **found, cv_err *err)
{
    for (int i = 0; i < a->n_tensors; i++) {
        const cv_arch_tensor *d = &a->tensors[i];
        bool per_layer = d->role >= CV_ROLE_FIRST_LAYER;
        if (per_layer != (L != NULL) || (L && !tensor_in_layer(d, L)))
            continue;
        char name[256];
        if (per_layer)
            snprintf(name, sizeof name, d->name, il);
        else
            snprintf(name, sizeof name, "%s", d->name);
        const cv_gguf_tensor *t = cv_gguf_find_tensor(g, name);
        found[d->role] = t;
        if (!t) {
            if (d->need == CV_NEED_REQUIRED)
                return CV_CORRUPT(err, "%s: tensor '%s' is missing; a %s model needs it", cv_gguf_path(g), name,
                                  a->name);
            if (d->need == CV_NEED_ALT && !found[d->fallback]) {
                /* the other layout's row (an older file's, or another
                 * configuration's) comes first in the descriptor */
                const char *alt = "";
                for (int k = 0; k < i; k++)
                    if (a->tensors[k].role == d->fallback)
                        alt = a->tensors[k].name;
                char alt_name[256];
                snprintf(alt_name, sizeof alt_name, alt, il);
                return CV_CORRUPT(err, "%s: tensor '%s' is missing, and so is its alternative '%s'; a %s model "
                                  "needs one of them", cv_gguf_path(g), name, alt_name, a->name);
            }
            if (d->need == CV_NEED_FALLBACK)
                found[d->role] = found[d->fallback];
            continue;
        }
        int rc = check_tensor(g, a, hp, L, d, t, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* The shared expert: its three matrices or none (the descriptor may mark
 * them optional), and its gate vector only beside them (absent: not
 * gated, as deepseek2's and gemma4's dense branch beside its experts,
 * post-normed first). */
static int bind_shared_expert(cv_model *m, cv_layer *L, const cv_gguf_tensor **f, bool fuse, cv_err *err)
{
    static const cv_role roles[3] = { CV_ROLE_FFN_GATE_SHEXP, CV_ROLE_FFN_UP_SHEXP, CV_ROLE_FFN_DOWN_SHEXP };
    static const char *const names[3] = { "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp" };
    const cv_gguf_tensor *gate = f[CV_ROLE_FFN_GATE_INP_SHEXP];
    int present = 0, missing = 0;
    for (int i = 0; i < 3; i++) {
        if (f[roles[i]])
            present++;
        else
            missing = i;
    }
    if (present == 0 && !gate)
        return 0;
    if (present < 3) {
        const cv_gguf_tensor *any = gate ? gate : f[roles[missing == 0 ? 1 : 0]];
        return CV_CORRUPT(err, "%s: tensor '%s' belongs to a shared expert, but that layer's %s tensor is missing",
                          cv_gguf_path(m->gguf), any->name, names[missing]);
    }
    L->shexp_gate = bind_vector(m, f[CV_ROLE_FFN_GATE_INP_SHEXP]);
    L->shexp_post_norm = bind_vector(m, f[CV_ROLE_FFN_POST_NORM_SHEXP]);
    const cv_gguf_tensor *gu[2] = { f[CV_ROLE_FFN_GATE_SHEXP], f[CV_ROLE_FFN_UP_SHEXP] };
    int rc = bind_group(m, gu, 2, fuse, L->shexp_gate_up, &L->n_shexp_gate_up, err);
    return rc ? rc : bind_matrix(m, f[CV_ROLE_FFN_DOWN_SHEXP], &L->shexp_down, err);
}

static int bind_ffn(cv_model *m, cv_layer *L, const cv_gguf_tensor **f, bool fuse, cv_err *err)
{
    L->ffn_norm = bind_vector(m, f[CV_ROLE_FFN_NORM]);
    switch (L->ffn) {
    case CV_FFN_DENSE: {
        const cv_gguf_tensor *gu[2] = { f[CV_ROLE_FFN_GATE], f[CV_ROLE_FFN_UP] };
        int rc = bind_group(m, gu, 2, fuse, L->gate_up, &L->n_gate_up, err);
        return rc ? rc : bind_matrix(m, f[CV_ROLE_FFN_DOWN], &L->w_down, err);
    }
    case CV_FFN_MOE: {
        /* gate and up: two tensors, or one fused (gemma4's converter) */
        const bool fused = f[CV_ROLE_FFN_GATE_UP_EXPS] != NULL;
        const cv_gguf_tensor *gu[2] = { fused ? f[CV_ROLE_FFN_GATE_UP_EXPS] : f[CV_ROLE_FFN_GATE_EXPS],
                                        f[CV_ROLE_FFN_UP_EXPS] };
        if (!fused && (!gu[0] || !gu[1]))
            return CV_CORRUPT(err, "%s: a layer's experts need ffn_gate_exps and ffn_up_exps, or ffn_gate_up_exps",
                              cv_gguf_path(m->gguf));
        cv_expert_proj down;
        int32_t n_down;
        int rc;
        L->router_scale = bind_vector(m, f[CV_ROLE_FFN_GATE_INP_SCALE]);
        L->exp_norm = bind_vector(m, f[CV_ROLE_FFN_NORM_EXPS]);
        L->exp_scale = bind_vector(m, f[CV_ROLE_FFN_DOWN_EXPS_SCALE]);
        L->exp_post_norm = bind_vector(m, f[CV_ROLE_FFN_POST_NORM_EXPS]);
        L->router_bias = bind_vector(m, f[CV_ROLE_FFN_GATE_INP_BIAS]);
        L->exp_probs_b = bind_vector(m, f[CV_ROLE_FFN_EXP_PROBS_B]);
        L->exp_gate_bias = bind_vector(m, f[CV_ROLE_FFN_GATE_EXPS_BIAS]);
        L->exp_up_bias = bind_vector(m, f[CV_ROLE_FFN_UP_EXPS_BIAS]);
        L->exp_down_bias = bind_vector(m, f[CV_ROLE_FFN_DOWN_EXPS_BIAS]);
        if ((rc = bind_matrix(m, f[CV_ROLE_FFN_GATE_INP], &L->router, err)) ||
            (rc = bind_experts(m, gu, fused ? 1 : 2, fuse, L->exp_gate_up, &L->n_exp_gate_up, err)) ||
            (rc = bind_experts(m, &f[CV_ROLE_FFN_DOWN_EXPS], 1, false, &down, &n_down, err)))
            return rc;
        L->exp_down = down.w;
        return bind_shared_expert(m, L, f, fuse, err);
    }
    case CV_FFN_COUNT: break;
    }
    return 0;
}

/* An attention layer: q, k, v as one group, except that a layer attending
 * over an earlier layer's K/V (gemma4's shared ones) projects q alone (k
 * and v tensors it has are not used), and a layer without attn_v (gemma4's
 * K=V layers, where the descriptor makes it optional) takes V from K. */
static int bind_attention(cv_model *m, int il, cv_layer *L, const cv_gguf_tensor **f, bool fuse, cv_err *err)
{
    const bool own_kv = L->kv_src == il;
    if (own_kv && !f[CV_ROLE_ATTN_K])
        return CV_CORRUPT(err, "%s: tensor 'blk.%d.attn_k.weight' is missing; layer %d computes its own K/V",
                          cv_gguf_path(m->gguf), il, il);
    L->q_bias = bind_vector(m, f[CV_ROLE_ATTN_Q_BIAS]);
    L->k_bias = own_kv ? bind_vector(m, f[CV_ROLE_ATTN_K_BIAS]) : NULL;
    L->v_bias = own_kv ? bind_vector(m, f[CV_ROLE_ATTN_V_BIAS]) : NULL;
    L->q_norm = bind_vector(m, f[CV_ROLE_ATTN_Q_NORM]);
    L->k_norm = own_kv ? bind_vector(m, f[CV_ROLE_ATTN_K_NORM]) : NULL;
    L->o_bias = bind_vector(m, f[CV_ROLE_ATTN_OUT_BIAS]);
    L->sinks = bind_vector(m, f[CV_ROLE_ATTN_SINKS]);
    L->attn_gate = m->arch->attn_gate;
    L->v_from_k = own_kv && !f[CV_ROLE_ATTN_V];
    L->v_norm = m->arch->v_norm;
    const cv_gguf_tensor *qkv[3] = { f[CV_ROLE_ATTN_Q], f[CV_ROLE_ATTN_K], f[CV_ROLE_ATTN_V] };
    int rc = bind_group(m, qkv, !own_kv ? 1 : L->v_from_k ? 2 : 3, fuse, L->qkv, &L->n_qkv, err);
    return rc ? rc : bind_matrix(m, f[CV_ROLE_ATTN_OUT], &L->wo, err);
}

/* One matrix of a tensor whose rows come in n_groups groups of n_sec
 * sections (section s has len[s] rows), with the rows regrouped by section:
 * section 0 of every group, then section 1 of every group, ... */
static int bind_regrouped(cv_model *m, const cv_gguf_tensor *t, int32_t n_groups, const int64_t *len, int n_sec,
                          cv_bmat **out, cv_err *err)
{
    int64_t per = 0;
    for (int s = 0; s < n_sec; s++)
        per += len[s];
    piece *ps = cv_xmalloc((size_t)n_groups * (size_t)n_sec * sizeof *ps);
    int n = 0;
    for (int s = 0, off = 0; s < n_sec; off += (int)len[s++])
        for (int32_t g = 0; g < n_groups; g++)
            ps[n++] = rows_piece(t, g * per + off, len[s]);
    const int rc = bind_run(m, ps, n, out, err);
    free(ps);
    return rc;
}

/* qwen3next's DeltaNet input: its files keep each key head's rows
 * together (ssm_in: q_g, k_g, then v and z of the group's R value heads;
 * ssm_ba: the group's betas, then its alphas), where the mixer reads all
 * q, all k, all v, all z, all betas, all alphas in turn; regrouped at load
 * (a row copy: rows are independent in every GGUF type). Today's
 * converter writes q|k|v and z already split (attn_qkv, attn_gate, the
 * qwen35 layout); ssm_ba stays fused in both. Result row: qkv [C] | z
 * [inner] | beta [H_v] | alpha [H_v], as bind_deltanet's. */
static int bind_deltanet_grouped(cv_model *m, cv_layer *L, const cv_gguf_tensor **f, bool fuse, cv_err *err)
{
    const cv_hparams *hp = &m->hp;
    const int64_t d = hp->ssm_state, R = hp->ssm_heads / hp->ssm_group;
    int rc;
    if (!f[CV_ROLE_SSM_QKV] != !f[CV_ROLE_SSM_Z]) {
        const cv_gguf_tensor *t = f[CV_ROLE_SSM_QKV] ? f[CV_ROLE_SSM_QKV] : f[CV_ROLE_SSM_Z];
        return CV_CORRUPT(err, "%s: tensor '%s' has no %s beside it (attn_qkv and attn_gate come together)",
                          cv_gguf_path(m->gguf), t->name, f[CV_ROLE_SSM_QKV] ? "attn_gate" : "attn_qkv");
    }
    if (f[CV_ROLE_SSM_QKV]) {
        const cv_gguf_tensor *in[2] = { f[CV_ROLE_SSM_QKV], f[CV_ROLE_SSM_Z] };
        rc = bind_group(m, in, 2, fuse, L->ssm_in, &L->n_ssm_in, err);
    } else {
        const int64_t sec[4] = { d, d, R * d, R * d };
        L->ssm_in[0].col = 0;
        L->n_ssm_in = 1;
        rc = bind_regrouped(m, f[CV_ROLE_SSM_IN], hp->ssm_group, sec, 4, &L->ssm_in[0].w, err);
    }
    if (rc)
        return rc;
    const int64_t sec[2] = { R, R };
    cv_proj *ba = &L->ssm_in[L->n_ssm_in++];
    ba->col = (int32_t)(2 * hp->ssm_group * d + 2 * (int64_t)hp->ssm_inner);
    return bind_regrouped(m, f[CV_ROLE_SSM_BA], hp->ssm_group, sec, 2, &ba->w, err);
}

/* What follows a gemma4 layer's FFN: its per-layer input (all three
 * tensors when the model has per-layer inputs) and its output scale. */
static int bind_layer_out(cv_model *m, int il, cv_layer *L, const cv_gguf_tensor **f, cv_err *err)
{
    L->out_scale = 1.0f;
    if (f[CV_ROLE_OUT_SCALE]) {
        L->out_scale = bind_vector(m, f[CV_ROLE_OUT_SCALE])[0];
        if (!isfinite(L->out_scale))
            return CV_CORRUPT(err, "%s: tensor '%s' = %g, must be finite", cv_gguf_path(m->gguf),
                              f[CV_ROLE_OUT_SCALE]->name, L->out_scale);
    }
    if (m->hp.n_pl == 0)
        return 0;
    static const cv_role roles[3] = { CV_ROLE_PL_GATE, CV_ROLE_PL_PROJ, CV_ROLE_PL_POST_NORM };
    static const char *const names[3] = { "inp_gate.weight", "proj.weight", "post_norm.weight" };
    for (int i = 0; i < 3; i++)
        if (!f[roles[i]])
            return CV_CORRUPT(err, "%s: tensor 'blk.%d.%s' is missing; a model with per-layer inputs needs it",
                              cv_gguf_path(m->gguf), il, names[i]);
    L->pl_post_norm = bind_vector(m, f[CV_ROLE_PL_POST_NORM]);
    int rc = bind_matrix(m, f[CV_ROLE_PL_GATE], &L->pl_gate, err);
    return rc ? rc : bind_matrix(m, f[CV_ROLE_PL_PROJ], &L->pl_proj, err);
}

/* A Gated DeltaNet layer: the four projections of the normed input
 * (conv input, output gate, beta, alpha) as one group, the conv's taps,
 * the per-head decay parameters, the output norm and projection. ssm_a
 * must be negative (it is -exp(A_log)): a positive one would make the
 * state grow without bound. */
static int bind_deltanet(cv_model *m, cv_layer *L, const cv_gguf_tensor **f, bool fuse, cv_err *err)
{
    int rc;
    if (f[CV_ROLE_SSM_BA])
        rc = bind_deltanet_grouped(m, L, f, fuse, err);
    else {
        const cv_gguf_tensor *in[4] = { f[CV_ROLE_SSM_QKV], f[CV_ROLE_SSM_Z], f[CV_ROLE_SSM_BETA],
                                        f[CV_ROLE_SSM_ALPHA] };
        rc = bind_group(m, in, 4, fuse, L->ssm_in, &L->n_ssm_in, err);
    }
    if (rc || (rc = bind_matrix(m, f[CV_ROLE_SSM_OUT], &L->ssm_out, err)))
        return rc;
    L->ssm_conv1d = bind_vector(m, f[CV_ROLE_SSM_CONV1D]);
    L->ssm_dt_bias = bind_vector(m, f[CV_ROLE_SSM_DT_BIAS]);
    L->ssm_a = bind_vector(m, f[CV_ROLE_SSM_A]);
    L->ssm_norm = bind_vector(m, f[CV_ROLE_SSM_NORM]);
    for (int32_t h = 0; h < m->hp.ssm_heads; h++)
        if (!(L->ssm_a[h] < 0) || !isfinite(L->ssm_a[h]))
            return CV_CORRUPT(err, "%s: tensor '%s' element %d = %g, must be negative and finite (-exp(A_log))",
                              cv_gguf_path(m->gguf), f[CV_ROLE_SSM_A]->name, h, L->ssm_a[h]);
    return 0;
}

/* A multi-head latent attention layer: the query through q_lora (attn_q_a,
 * its norm, attn_q_b) or a plain attn_q, as the file's q_lora_rank says;
 * the latent row's projection and norm; the heads' up-projections, one
 * matrix per head (slices of the 3-D attn_k_b / attn_v_b); the output. */
static int bind_mla(cv_model *m, cv_layer *L, const cv_gguf_tensor **f, cv_err *err)
{
    const bool lora = m->hp.n_lora_q > 0;
    const cv_role need[3] = { lora ? CV_ROLE_ATTN_Q_A : CV_ROLE_ATTN_Q, CV_ROLE_ATTN_Q_A_NORM, CV_ROLE_ATTN_Q_B };
    static const char *const names[3] = { "attn_q_a", "attn_q_a_norm", "attn_q_b" };
    for (int i = 0; i < (lora ? 3 : 1); i++)
        if (!f[need[i]])
            return CV_CORRUPT(err, "%s: layer %d has no %s tensor; a model with %s.attention.q_lora_rank = %d needs it",
                              cv_gguf_path(m->gguf), (int)(L - m->layers), lora ? names[i] : "attn_q", m->arch->name,
                              m->hp.n_lora_q);
    cv_expert_proj kb, vb;
    int32_t n;
    int rc;
    if ((rc = bind_matrix(m, f[need[0]], &L->mla_q, err)) ||
        (lora && (rc = bind_matrix(m, f[CV_ROLE_ATTN_Q_B], &L->mla_q_b, err))) ||
        (rc = bind_matrix(m, f[CV_ROLE_ATTN_KV_A], &L->mla_kv, err)) ||
        (rc = bind_experts(m, &f[CV_ROLE_ATTN_K_B], 1, false, &kb, &n, err)) ||
        (rc = bind_experts(m, &f[CV_ROLE_ATTN_V_B], 1, false, &vb, &n, err)) ||
        (rc = bind_matrix(m, f[CV_ROLE_ATTN_OUT], &L->wo, err)))
        return rc;
    L->mla_q_norm = lora ? bind_vector(m, f[CV_ROLE_ATTN_Q_A_NORM]) : NULL;
    L->mla_kv_norm = bind_vector(m, f[CV_ROLE_ATTN_KV_A_NORM]);
    L->mla_k_b = kb.w;
    L->mla_v_b = vb.w;
    return 0;
}

static int bind_layer(cv_model *m, int il, bool fuse, cv_err *err)
{
    cv_layer *L = &m->layers[il];
    const cv_gguf_tensor *f[CV_ROLE_COUNT] = { 0 };
    int rc = find_tensors(m->gguf, m->arch, &m->hp, il, L, f, err);
    if (rc)
        return rc;
    L->attn_norm = bind_vector(m, f[CV_ROLE_ATTN_NORM]);
    L->attn_post_norm = bind_vector(m, f[CV_ROLE_ATTN_POST_NORM]);
    L->ffn_post_norm = bind_vector(m, f[CV_ROLE_FFN_POST_NORM]);
    rc = L->mixer == CV_MIXER_DELTANET ? bind_deltanet(m, L, f, fuse, err)
         : L->mixer == CV_MIXER_MLA    ? bind_mla(m, L, f, err)
                                       : bind_attention(m, il, L, f, fuse, err);
    if (rc)
        return rc;
    return (rc = bind_ffn(m, L, f, fuse, err)) ? rc : bind_layer_out(m, il, L, f, err);
}

/* Bytes, multiply-adds and weights of the matrices, in total and for one
 * token (which reads n_expert_used of an MoE layer's experts). */
typedef struct work {
    size_t bytes, active_bytes;
    int64_t active_params;
} work;

static void add_mat(work *w, const cv_bmat *m, int64_t share_num, int64_t share_den)
{
    const size_t bytes = m->bytes;
    const int64_t params = m->n_in * m->n_out;
    w->bytes += bytes;
    w->active_bytes += bytes * (size_t)share_num / (size_t)share_den;
    w->active_params += params * share_num / share_den;
}

static void count_work(cv_model *m)
{
    work w = { 0 };
    for (int il = 0; il < m->hp.n_layer; il++) {
        const cv_layer *L = &m->layers[il];
        if (L->mixer == CV_MIXER_DELTANET) {
            for (int i = 0; i < L->n_ssm_in; i++)
                add_mat(&w, L->ssm_in[i].w, 1, 1);
            add_mat(&w, L->ssm_out, 1, 1);
        } else if (L->mixer == CV_MIXER_MLA) {
            add_mat(&w, L->mla_q, 1, 1);
            if (L->mla_q_b)
                add_mat(&w, L->mla_q_b, 1, 1);
            add_mat(&w, L->mla_kv, 1, 1);
            for (int32_t h = 0; h < m->hp.n_head; h++) {
                add_mat(&w, L->mla_k_b[h], 1, 1);
                add_mat(&w, L->mla_v_b[h], 1, 1);
            }
            add_mat(&w, L->wo, 1, 1);
        } else {
            for (int i = 0; i < L->n_qkv; i++)
                add_mat(&w, L->qkv[i].w, 1, 1);
            add_mat(&w, L->wo, 1, 1);
        }
        for (int i = 0; L->shexp_down && i < L->n_shexp_gate_up; i++)
            add_mat(&w, L->shexp_gate_up[i].w, 1, 1);
        if (L->shexp_down)
            add_mat(&w, L->shexp_down, 1, 1);
        if (L->ffn == CV_FFN_DENSE) {
            for (int i = 0; i < L->n_gate_up; i++)
                add_mat(&w, L->gate_up[i].w, 1, 1);
            add_mat(&w, L->w_down, 1, 1);
        } else if (L->ffn == CV_FFN_MOE) {
            add_mat(&w, L->router, 1, 1);
            /* One expert's matrices count n_expert_used / n_expert of the
             * whole: every expert has the same shape and type. */
            for (int32_t e = 0; e < m->hp.n_expert; e++) {
                for (int i = 0; i < L->n_exp_gate_up; i++)
                    add_mat(&w, L->exp_gate_up[i].w[e], m->hp.n_expert_used, m->hp.n_expert);
                add_mat(&w, L->exp_down[e], m->hp.n_expert_used, m->hp.n_expert);
            }
        }
    }
    for (int il = 0; il < m->hp.n_layer && m->pl_model_proj; il++) {
        add_mat(&w, m->layers[il].pl_gate, 1, 1);
        add_mat(&w, m->layers[il].pl_proj, 1, 1);
    }
    if (m->pl_model_proj)
        add_mat(&w, m->pl_model_proj, 1, 1);
    add_mat(&w, m->output, 1, 1);
    m->output_macs = m->output->n_in * m->output->n_out;
    m->matmul_bytes = w.bytes;
    m->active_bytes = w.active_bytes;
    m->matmul_macs = w.active_params;
}

int cv_model_open_gguf(cv_gguf *g, const cv_model_params *params, cv_model **out, cv_err *err)
{
    static const cv_model_params defaults = { 0 };
    if (!params)
        params = &defaults;
    const char *path = cv_gguf_path(g);
    cv_model *m = cv_xcalloc(1, sizeof *m);
    m->owned = cv_xcalloc(1, sizeof *m->owned);
    m->gguf = g;
    m->dequantized = params->dequantize;
    m->be = params->backend ? params->backend : cv_backend_cpu();
    int rc;

    cv_str an;
    rc = cv_gguf_get_str(g, "general.architecture", &an, err);
    if (rc == CV_ENOTFOUND) {
        rc = CV_CORRUPT(err, "%s: no 'general.architecture' key; this is not a model file (a vocab-only GGUF?)",
                        path);
        goto fail;
    }
    if (rc)
        goto fail;
    m->arch = cv_arch_find(an);
    if (!m->arch) {
        cv_buf names = { 0 };
        for (int i = 0; i < cv_n_archs; i++)
            cv_buf_printf(&names, "%s%s", i ? ", " : "", cv_archs[i]->name);
        rc = cv_err_set(err, CV_EUNSUPPORTED, "%s: architecture '%.*s' is not supported (corvid runs %s)", path,
                        (int)CV_MIN(an.len, 64), an.ptr, names.data);
        cv_buf_free(&names);
        goto fail;
    }
    if ((rc = read_hparams(g, m->arch, &m->hp, err)))
        goto fail;

    /* The vocabulary size comes from the embedding, so check it first. */
    const cv_gguf_tensor *emb = cv_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) {
        rc = CV_CORRUPT(err, "%s: tensor 'token_embd.weight' is missing; a %s model needs it", path, m->arch->name);
        goto fail;
    }
    if (emb->n_dims != 2 || emb->ne[1] < 1 || emb->ne[1] > CV_MAX_VOCAB) {
        rc = CV_CORRUPT(err, "%s: tensor 'token_embd.weight' has %u dims and %lld rows; expected 2 dims and "
                        "1..%d rows (the vocabulary)", path, emb->n_dims, (long long)emb->ne[1], CV_MAX_VOCAB);
        goto fail;
    }
    m->hp.n_vocab = (int32_t)emb->ne[1];

    const cv_gguf_tensor *f[CV_ROLE_COUNT] = { 0 };
    if ((rc = find_tensors(g, m->arch, &m->hp, -1, NULL, f, err)))
        goto fail;
    m->tok_embd = f[CV_ROLE_TOKEN_EMBD];
    m->output_norm = bind_vector(m, f[CV_ROLE_OUTPUT_NORM]);
    m->tied_output = f[CV_ROLE_OUTPUT] == f[CV_ROLE_TOKEN_EMBD];
    if ((rc = bind_matrix(m, f[CV_ROLE_OUTPUT], &m->output, err)))
        goto fail;
    if (m->hp.n_pl > 0) {
        static const cv_role roles[3] = { CV_ROLE_PL_TOKEN_EMBD, CV_ROLE_PL_MODEL_PROJ, CV_ROLE_PL_PROJ_NORM };
        static const char *const names[3] = { "per_layer_token_embd", "per_layer_model_proj", "per_layer_proj_norm" };
        for (int i = 0; i < 3; i++)
            if (!f[roles[i]]) {
                rc = CV_CORRUPT(err, "%s: tensor '%s.weight' is missing; '%s.embedding_length_per_layer_input' = %d "
                                "needs it", path, names[i], m->arch->name, m->hp.n_pl);
                goto fail;
            }
        m->pl_embd = f[CV_ROLE_PL_TOKEN_EMBD];
        m->pl_proj_norm = bind_vector(m, f[CV_ROLE_PL_PROJ_NORM]);
        if ((rc = bind_matrix(m, f[CV_ROLE_PL_MODEL_PROJ], &m->pl_model_proj, err)))
            goto fail;
    }
    const float *factors = bind_vector(m, f[CV_ROLE_ROPE_FREQS]);
    float mscale = 1.0f;
    if (factors && m->hp.rope_scaling == CV_ROPE_SCALING_YARN) {
        rc = cv_err_set(err, CV_EUNSUPPORTED, "%s: tensor 'rope_freqs.weight' with YaRN scaling: corvid runs one "
                        "or the other", path);
        goto fail;
    }
    if (m->hp.rope_scaling == CV_ROPE_SCALING_YARN) {
        float *yarn = own_buf(m, (size_t)(m->hp.n_rot / 2) * sizeof *yarn);
        cv_rope_yarn_factors(yarn, m->hp.n_rot, m->hp.rope_theta, m->hp.rope_factor, m->hp.rope_orig_ctx,
                             m->hp.yarn_beta_fast, m->hp.yarn_beta_slow);
        factors = yarn;
        /* ggml scales cos/sin by 1 + 0.1 ln f; a model that states its
         * mscale_all_dim m divides that by 1 + 0.1 m ln f (mistral3: m = 1,
         * so 1); deepseek2's MLA moves YaRN's magnitude into the score
         * scale (read_layer_hparams) and leaves cos/sin unscaled. */
        const float lf = logf(m->hp.rope_factor);
        mscale = m->arch->mixer == CV_MIXER_MLA ? 1.0f : (1.0f + 0.1f * lf) / (1.0f + 0.1f * m->hp.yarn_log_mul * lf);
    } else if (factors) {
        for (int i = 0; i < m->hp.n_rot / 2; i++) {
            if (!(factors[i] > 0 && isfinite(factors[i]))) {
                rc = CV_CORRUPT(err, "%s: tensor 'rope_freqs.weight' element %d = %g, must be a positive finite "
                                "divisor", path, i, factors[i]);
                goto fail;
            }
        }
    }
    m->rope = (cv_rope_params){
        .style = m->arch->rope_style,
        .n_rot = m->hp.n_rot,
        .theta = m->hp.rope_theta,
        .freq_scale = m->hp.rope_freq_scale,
        .freq_factors = factors,
        .mscale = mscale,
    };

    m->layers = cv_xcalloc((size_t)m->hp.n_layer, sizeof *m->layers);
    if ((rc = resolve_layers(m, err)))
        goto fail;
    for (int il = 0; il < m->hp.n_layer; il++)
        if ((rc = bind_layer(m, il, !params->no_fuse, err)))
            goto fail;
    count_work(m);
    cv_model_summary sum;
    if ((rc = cv_model_summarize(g, &sum, err)))
        goto fail;
    m->n_params = sum.n_params;
    m->n_params_active = sum.n_params_active;
    *out = m;
    return 0;
fail:
    free_model(m, false);
    *out = NULL;
    return rc;
}

int cv_model_open(const char *path, const cv_model_params *params, cv_model **out, cv_err *err)
{
    cv_gguf *g;
    int rc = cv_gguf_open(path, &g, err);
    if (rc) {
        *out = NULL;
        return rc;
    }
    rc = cv_model_open_gguf(g, params, out, err);
    if (rc)
        cv_gguf_close(g);
    return rc;
}

static void embed_row(const cv_gguf_tensor *t, int32_t token, float *out)
{
    assert(token >= 0 && token < t->ne[1]);
    size_t rb = cv_ggml_row_bytes(t->type, t->ne[0]);
    cv_dequantize_row(t->type, (const char *)t->data + (size_t)token * rb, out, t->ne[0], NULL);
}

void cv_model_embed(const cv_model *m, int32_t token, float *out) { embed_row(m->tok_embd, token, out); }

int cv_model_summarize(const cv_gguf *g, cv_model_summary *out, cv_err *err)
{
    memset(out, 0, sizeof *out);
    const char *path = cv_gguf_path(g);
    cv_str an;
    int rc = cv_gguf_get_str(g, "general.architecture", &an, err);
    if (rc == CV_ENOTFOUND)
        return CV_CORRUPT(err, "%s: no 'general.architecture' key; this is not a model file (a vocab-only GGUF?)",
                          path);
    if (rc)
        return rc;
    out->arch = cv_arch_find(an);
    if (!out->arch)
        return cv_err_set(err, CV_EUNSUPPORTED, "%s: architecture '%.*s' is not supported", path,
                          (int)CV_MIN(an.len, 64), an.ptr);
    if ((rc = read_hparams(g, out->arch, &out->hp, err)))
        return rc;
    const cv_hparams *hp = &out->hp;
    for (int64_t i = 0; i < cv_gguf_n_tensors(g); i++) {
        const cv_gguf_tensor *t = cv_gguf_tensor_at(g, i);
        int64_t n = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            n *= t->ne[d];
        out->n_params += n;
        out->bytes += t->n_bytes;
        /* An expert tensor's third dimension is the expert index. */
        const bool experts = t->n_dims == 3 && hp->n_expert > 0 && t->ne[2] == hp->n_expert;
        out->n_params_active += experts ? n / hp->n_expert * hp->n_expert_used : n;
        /* An untied embedding is only looked up, a row a token, as gemma4's
         * per-layer one always is. */
        const bool lookup_only = (!strcmp(t->name, "token_embd.weight") && cv_gguf_find_tensor(g, "output.weight")) ||
                                 !strcmp(t->name, "per_layer_token_embd.weight");
        if (!lookup_only)
            out->active_bytes += experts ? t->n_bytes / (size_t)hp->n_expert * (size_t)hp->n_expert_used : t->n_bytes;
    }
    cv_layer *layers = cv_xcalloc((size_t)out->hp.n_layer, sizeof *layers);
    rc = layer_kinds(g, out->arch, &out->hp, layers, err);
    const size_t C = 2 * (size_t)hp->ssm_group * (size_t)hp->ssm_state + (size_t)hp->ssm_inner;
    for (int32_t il = 0; rc == 0 && il < hp->n_layer; il++) {
        const cv_layer *L = &layers[il];
        out->n_kv_layers += L->mixer == CV_MIXER_ATTN || L->mixer == CV_MIXER_MLA;
        out->n_window_layers += L->mixer == CV_MIXER_ATTN && L->n_swa > 0;
        /* a layer that shares an earlier one's K/V keeps none */
        out->n_kv_shared_layers += L->mixer == CV_MIXER_ATTN && L->kv_src != il;
        if ((L->mixer == CV_MIXER_ATTN || L->mixer == CV_MIXER_MLA) && L->kv_src == il)
            out->kv_pos_elts[L->n_swa > 0] += cv_kv_parts(hp) * (int64_t)L->n_head_kv * L->head_dim;
        if (L->mixer == CV_MIXER_DELTANET) {
            out->recurrent[il / 8] |= (uint8_t)(1u << (il % 8));
            out->state_bytes += ((size_t)(hp->ssm_conv - 1) * C +
                                 (size_t)hp->ssm_heads * (size_t)hp->ssm_state * (size_t)hp->ssm_state) *
                                sizeof(float);
        }
    }
    free(layers);
    return rc;
}

/* "multi-head latent attention: a 576-wide row a position (512 latent +
 * 64 RoPE dims) for heads of 192 + 64 / 256, q_lora 768; MoE routing:
 * sigmoid with a selection bias, 8 groups (4 kept), weights x2.5": what
 * MLA and the routing keys make of a model, for both describers. */
static void describe_mla_routing(cv_buf *out, const cv_hparams *hp)
{
    if (hp->n_lora_kv > 0) {
        cv_buf_printf(out, "; multi-head latent attention: a %d-wide row a position (%d latent + %d RoPE dims) for "
                      "heads of %d + %d / %d", hp->head_dim, hp->n_lora_kv, hp->n_rot, hp->k_mla - hp->n_rot,
                      hp->n_rot, hp->v_mla);
        if (hp->n_lora_q > 0)
            cv_buf_printf(out, ", q_lora %d", hp->n_lora_q);
    }
    if (hp->n_expert == 0)
        return;
    if (hp->routing == CV_ROUTE_SIGMOID_TOPK)
        cv_buf_puts(out, "; sigmoid routing");
    if (hp->n_expert_group > 1)
        cv_buf_printf(out, "; experts in %d groups, %d kept a token", hp->n_expert_group, hp->n_group_used);
    if (hp->expert_weights_scale != 1.0f)
        cv_buf_printf(out, "; expert weights x%g", hp->expert_weights_scale);
    if (hp->n_dense_lead > 0)
        cv_buf_printf(out, hp->n_dense_lead > 1 ? "; the first %d layers dense" : "; layer 0 dense", hp->n_dense_lead);
}

/* ", logits soft-capped at 30, YaRN x48 from 8192, query temperature 0.1
 * per 8192 positions" (each where the model has it, sep before each): what
 * a model does to positions and logits beyond plain RoPE, for both
 * describers. */
static void describe_positions(cv_buf *out, const cv_hparams *hp, const char *sep)
{
    if (hp->logit_softcap > 0)
        cv_buf_printf(out, "%slogits soft-capped at %g", sep, hp->logit_softcap);
    if (hp->rope_scaling == CV_ROPE_SCALING_YARN)
        cv_buf_printf(out, "%sYaRN x%g from %d", sep, hp->rope_factor, hp->rope_orig_ctx);
    if (hp->attn_temp_scale > 0)
        cv_buf_printf(out, "%squery temperature %g per %d positions", sep, hp->attn_temp_scale, hp->attn_temp_len);
}

/* ", hybrid: 18 of 24 layers Gated DeltaNet (0-2,4-6,...) of 16 value / 16
 * key heads of 128, conv 4; the others attend with an output gate": the
 * recurrent layers as ranges (bit il of rec), for both describers. */
static void describe_recurrent(cv_buf *out, const cv_arch *a, const cv_hparams *hp, const uint8_t *rec)
{
    if (hp->n_recurrent == 0)
        return;
    cv_buf_printf(out, "hybrid: %d of %d layers Gated DeltaNet (", hp->n_recurrent, hp->n_layer);
#define REC(il) (rec[(il) / 8] >> ((il) % 8) & 1)
    for (int32_t il = 0, first = 1; il < hp->n_layer; il++) {
        if (!REC(il) || (il > 0 && REC(il - 1)))
            continue;
        int32_t end = il;
        while (end + 1 < hp->n_layer && REC(end + 1))
            end++;
        cv_buf_printf(out, first ? "%d" : ",%d", il);
        if (end > il)
            cv_buf_printf(out, "-%d", end);
        first = 0;
    }
#undef REC
    cv_buf_printf(out, ") of %d value / %d key heads of %d, conv %d; the others attend%s", hp->ssm_heads,
                  hp->ssm_group, hp->ssm_state, hp->ssm_conv, a->attn_gate ? " with an output gate" : "");
}

void cv_model_summary_describe(const cv_model_summary *s, cv_buf *out)
{
    const cv_hparams *hp = &s->hp;
    const double scale = s->n_params >= 1000000000 ? 1e9 : 1e6;
    const char *unit = scale == 1e9 ? "B" : "M";
    cv_buf_printf(out, "%s", s->arch->name);
    if (hp->n_expert > 0)
        cv_buf_printf(out, ", MoE: %d experts, %d used per token%s; %.2f%s parameters, %.2f%s active", hp->n_expert,
                      hp->n_expert_used, hp->n_ff_shexp > 0 ? " beside a shared one" : "", s->n_params / scale, unit,
                      s->n_params_active / scale, unit);
    else
        cv_buf_printf(out, ", dense; %.2f%s parameters", s->n_params / scale, unit);
    if (hp->n_recurrent > 0) {
        cv_buf_puts(out, "; ");
        describe_recurrent(out, s->arch, hp, s->recurrent);
        if (s->state_bytes < 1048576)
            cv_buf_printf(out, " (%.1f KiB of state a sequence)", s->state_bytes / 1024.0);
        else
            cv_buf_printf(out, " (%.1f MiB of state a sequence)", s->state_bytes / 1048576.0);
    }
    if (s->n_window_layers > 0)
        cv_buf_printf(out, "; sliding window %d on %d of %d layers", hp->n_swa, s->n_window_layers, hp->n_layer);
    if (s->n_window_layers > 0 && hp->head_dim_swa != hp->head_dim)
        cv_buf_printf(out, " (heads of %d; the others' %d)", hp->head_dim_swa, hp->head_dim);
    describe_mla_routing(out, hp);
    if (s->n_kv_shared_layers > 0)
        cv_buf_printf(out, "; %d layers read earlier layers' K/V and keep none", s->n_kv_shared_layers);
    if (hp->n_pl > 0)
        cv_buf_printf(out, "; per-layer inputs of %d", hp->n_pl);
    describe_positions(out, hp, "; ");
}

double cv_model_summary_ram_bytes(const cv_model_summary *s, int32_t n_ctx, int32_t n_seq, double kv_elt_bytes)
{
    const double full = (double)s->kv_pos_elts[0] * n_ctx;
    const double window = (double)s->kv_pos_elts[1] * CV_MIN(n_ctx, s->hp.n_swa);
    return (double)s->bytes + ((full + window) * kv_elt_bytes + (double)s->state_bytes) * n_seq;
}

void cv_model_describe(const cv_model *m, cv_buf *out)
{
    const cv_hparams *hp = &m->hp;
    if (hp->n_lora_kv > 0) /* latent attention: its heads and row in describe_mla_routing's words */
        cv_buf_printf(out, "%s: %d layers, %d hidden, %d heads, ", m->arch->name, hp->n_layer, hp->n_embd, hp->n_head);
    else
        cv_buf_printf(out, "%s: %d layers, %d hidden, %d heads (%d kv) of %d, ", m->arch->name, hp->n_layer,
                      hp->n_embd, hp->n_head, hp->n_head_kv, hp->head_dim);
    if (hp->n_recurrent > 0) {
        uint8_t rec[CV_MAX_LAYERS / 8] = { 0 };
        for (int32_t il = 0; il < hp->n_layer; il++)
            rec[il / 8] |= (uint8_t)((m->layers[il].mixer == CV_MIXER_DELTANET) << (il % 8));
        describe_recurrent(out, m->arch, hp, rec);
        cv_buf_puts(out, ", ");
    }
    if (hp->n_expert > 0)
        cv_buf_printf(out, "MoE %d experts (%d used) of ffn %d%s, ", hp->n_expert, hp->n_expert_used, hp->n_ff_exp,
                      hp->n_ff_shexp > 0 ? " + a shared expert" : "");
    else
        cv_buf_printf(out, "ffn %d, ", hp->n_ff);
    cv_buf_printf(out, "vocab %d, rope %s", hp->n_vocab, m->rope.style == CV_ROPE_NEOX ? "neox" : "norm");
    if (hp->n_rot < hp->head_dim && hp->n_lora_kv == 0)
        cv_buf_printf(out, " on %d of %d dims", hp->n_rot, hp->head_dim);
    cv_buf_printf(out, " theta %g%s%s, %s output, %.1f MiB of matrices", hp->rope_theta,
                  m->rope.freq_factors && hp->rope_scaling != CV_ROPE_SCALING_YARN ? " (freq factors)" : "",
                  hp->rope_freq_scale != 1.0f ? " (linear)" : "", m->tied_output ? "tied" : "separate",
                  m->matmul_bytes / 1048576.0);
    if (hp->n_expert > 0) {
        const double scale = m->n_params >= 1000000000 ? 1e9 : 1e6;
        const char *unit = scale == 1e9 ? "B" : "M";
        cv_buf_printf(out, ", %.2f%s of %.2f%s parameters active per token (%.1f MiB read)",
                      m->n_params_active / scale, unit, m->n_params / scale, unit, m->active_bytes / 1048576.0);
    }
    int n_local = 0, n_shared = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        n_local += m->layers[il].n_swa > 0;
        n_shared += m->layers[il].mixer == CV_MIXER_ATTN && m->layers[il].kv_src != il;
    }
    if (n_local > 0)
        cv_buf_printf(out, ", sliding window %d on %d of %d layers", hp->n_swa, n_local, hp->n_layer);
    if (n_local > 0 && (hp->head_dim_swa != hp->head_dim || hp->n_rot_swa != hp->n_rot))
        cv_buf_printf(out, " (heads of %d, rope on %d dims, base %g)", hp->head_dim_swa, hp->n_rot_swa,
                      hp->rope_theta_swa);
    if (n_shared > 0)
        cv_buf_printf(out, ", %d layers reading earlier layers' K/V", n_shared);
    if (hp->n_pl > 0)
        cv_buf_printf(out, ", per-layer inputs of %d", hp->n_pl);
    describe_positions(out, hp, ", ");
    if (m->layers[0].sinks)
        cv_buf_printf(out, ", attention sinks");
    describe_mla_routing(out, hp);
}

void cv_rope_llama3_factors(float *factors, int32_t n_rot, float theta, float factor, float low_freq_factor,
                            float high_freq_factor, int32_t original_ctx)
{
    const double low_wavelen = original_ctx / (double)low_freq_factor;
    const double high_wavelen = original_ctx / (double)high_freq_factor;
    for (int i = 0; i < n_rot / 2; i++) {
        double freq = pow(theta, -2.0 * i / n_rot);
        double wavelen = 2 * M_PI / freq;
        double f;
        if (wavelen < high_wavelen) {
            f = 1;
        } else if (wavelen > low_wavelen) {
            f = factor;
        } else {
            double smooth = (original_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
            f = 1.0 / ((1 - smooth) / factor + smooth);
        }
        factors[i] = (float)f;
    }
}

void cv_rope_yarn_factors(float *factors, int32_t n_rot, float theta, float factor, int32_t original_ctx,
                          float beta_fast, float beta_slow)
{
    const double denom = 2 * log((double)theta);
    const double c_fast = n_rot * log(original_ctx / (2 * M_PI * beta_fast)) / denom;
    const double c_slow = n_rot * log(original_ctx / (2 * M_PI * beta_slow)) / denom;
    const double lo = fmax(0, floor(c_fast)), hi = fmin(n_rot - 1, ceil(c_slow));
    const double s = 1.0 / factor;
    for (int i = 0; i < n_rot / 2; i++) {
        /* r = 1 keeps the original frequency, r = 0 takes the interpolated
         * one (divided by factor); the angle is theta_ext (s (1 - r) + r). */
        const double r = 1 - fmin(1, fmax(0, (i - lo) / fmax(0.001, hi - lo)));
        factors[i] = (float)(1.0 / (s * (1 - r) + r));
    }
}
