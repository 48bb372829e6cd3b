/* synth.h — synthetic models, apart from the model face: the shapes of real
 * models (`corvid synth --shape NAME`), the quantization mixes named as
 * llama-quantize names its file types, and the writer of random-weight GGUF
 * files in them (synth.c, quant_mix.c). What tests, benchmarks and fuzzers
 * build models with; nothing that loads or runs a model needs it. */
#ifndef CV_MODEL_SYNTH_H
#define CV_MODEL_SYNTH_H

#include "model/model.h"

/* A real model's shape: what `corvid synth --shape NAME` builds. */
typedef struct cv_model_shape {
    const char *name;  /* "qwen2.5-0.5b" */
    const char *arch;  /* the architecture it is native to */
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx;
    float rope_theta, rms_eps;
    bool tied;
    /* RoPE scaling: llama3's (factor, low/high frequency factors, original
     * context), linear (factor) or YaRN (factor, original context). */
    cv_rope_scaling rope_scaling;
    float rope_factor, rope_low_freq, rope_high_freq;
    int32_t rope_orig_ctx;
    /* Mixture of experts (0: dense); n_ff_shexp: a shared expert's width. */
    int32_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    int32_t n_rot;     /* rotated dimensions per head (0: head_dim) */
    /* Sliding-window layers (0: none) and their RoPE base (0: the full layers'). */
    int32_t n_swa;
    float rope_theta_swa;
    /* Gated DeltaNet layers of a hybrid (ssm_state 0: none): conv taps,
     * head size, key heads, value heads, and every how many layers one
     * attends. */
    int32_t ssm_conv, ssm_state, ssm_group, ssm_heads, full_attn_interval;
    /* YaRN's mscale_all_dim (written where the architecture reads it) and
     * the query temperature (0: none). */
    float yarn_log_mul, attn_temp_scale;
    /* Multi-head latent attention (n_lora_kv 0: none): q_lora (0: a plain
     * attn_q), the latent, one head's nope and RoPE dims, its value. */
    int32_t n_lora_q, n_lora_kv, mla_nope, mla_rope, mla_v;
    /* deepseek2's routing: leading dense layers, expert groups (and how
     * many a token keeps), a sigmoid router with a selection bias, the
     * weights renormalised and scaled. */
    int32_t n_dense_lead, n_expert_group, n_group_used;
    bool sigmoid_routing, expert_norm;
    float expert_weights_scale;
    /* Gemma 4 (0 / false: none, or the full layers'): the window pattern's
     * period (il mod p < p - 1: window; 0: the architecture's), the window
     * layers' head size and kv heads, the full layers' rotated pairs (the
     * others get rope_freqs 1e30: "proportional" RoPE), the last n_kv_shared
     * layers reading earlier ones' K/V, per-layer inputs of n_pl, full
     * layers taking V from K, the shared layers' FFN twice as wide (E2B),
     * the logits' soft cap. */
    int32_t swa_period, head_dim_swa, n_head_kv_swa, rope_pairs_kept, n_kv_shared, n_pl;
    bool k_eq_v, ff_double_shared;
    float logit_softcap;
} cv_model_shape;

extern const cv_model_shape cv_model_shapes[];
extern const int cv_n_model_shapes;
const cv_model_shape *cv_model_shape_find(const char *name);

/* Quantization mixes, named as llama-quantize names its file types: "f32",
 * "f16", "q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k", "iq4_xs", "mxfp4"
 * (MXFP4 experts, Q8_0 elsewhere); the rules are in quant_mix.c. find:
 * NULL for an unknown name; at: the i-th mix, NULL past the last. */
typedef struct cv_quant_mix cv_quant_mix;
const cv_quant_mix *cv_quant_mix_find(const char *name);
const cv_quant_mix *cv_quant_mix_at(int i);
const char *cv_quant_mix_name(const cv_quant_mix *m);
uint32_t cv_quant_mix_file_type(const cv_quant_mix *m); /* general.file_type (llama_ftype) */
/* The tensor type the mix gives a tensor of this role in layer il of
 * n_layer, whose rows hold n_in values (tied: the embedding is also the
 * output). */
uint32_t cv_quant_mix_type(const cv_quant_mix *m, cv_role role, int il, int n_layer, int64_t n_in, bool tied);

typedef struct cv_synth_params {
    const char *arch;      /* a cv_archs name */
    const char *shape;     /* a cv_model_shapes name */
    const char *dtype;     /* a cv_quant_mix name */
    const char *vocab;     /* optional vocab-only GGUF: its tokenizer.* metadata is copied */
    uint64_t seed;
    cv_pool *pool;         /* quantization runs on it (NULL: one thread) */
    bool plan_only;        /* validate and size the file, write nothing (the full shapes in tests) */
    bool fast;             /* experts past the first 8 of a layer repeat those, rows past a matrix's first
                              1024 too (benchmark shapes) */
    int32_t n_layer;       /* the shape's first n_layer layers only (0: all of them) */
    bool sparse;           /* write the file with its tensor data a hole (cv_gguf_writer_write_sparse): the
                              full shapes' tensor index and metadata for tests, in no time or disk */
    size_t *bytes_out;     /* optional: the tensor bytes the file holds */
    int32_t pooling;       /* {arch}.pooling_type to write (1 mean, 2 cls, 3 last: an embedding model); 0: none */
} cv_synth_params;

/* Writes a random-weight model with the shape's dimensions and the arch's
 * tensors to out_path: the same bytes for the same parameters, whatever the
 * thread count. Weights are N(0, 1/fan_in) (embedding and output
 * N(0, 0.15^2)), norm weights U(0.5, 1.5), biases N(0, 0.3^2). With a vocab file the vocabulary
 * size is its token count. CV_EINVAL names a bad arch/shape/dtype. */
int cv_model_synth(const cv_synth_params *p, const char *out_path, cv_err *err);

#endif
