/* model — the face of the model layer: a transformer checkpoint opened from
 * a GGUF file, validated against its architecture's descriptor, with every
 * weight matrix prepared for the kernels' matmul.
 *
 * An architecture is data, not code: one `cv_arch` row per GGUF
 * `general.architecture` (arch_llama.c, arch_qwen2.c, arch_qwen3.c, ...) lists
 * its tensors with their symbolic shapes, which are required or optional,
 * which fall back to another (a tied output), and its RoPE style. The
 * loader validates the file against that list; the engine reads the bound
 * `cv_model`, never the architecture's name, so one forward pass serves
 * every row (STYLE.md "Model architecture").
 *
 * Lifetimes: a cv_model owns its open cv_gguf (the mmap stays for the
 * process: weights and tokenizer metadata point into it) and the memory of
 * any prepared or dequantized weight. It is immutable after cv_model_open,
 * so any number of threads may read it. */
#ifndef CV_MODEL_H
#define CV_MODEL_H

#include "base/base.h"
#include "gguf/gguf.h"
#include "backend/backend.h"
#include "kernels/kernels.h"

/* ---- architecture descriptors ---- */

/* What a tensor is for. Global roles come first, then per-layer ones. */
typedef enum cv_role {
    CV_ROLE_TOKEN_EMBD,  /* [n_vocab][n_embd], looked up by id */
    CV_ROLE_OUTPUT_NORM, /* [n_embd] */
    CV_ROLE_OUTPUT,      /* [n_vocab][n_embd] */
    CV_ROLE_ROPE_FREQS,  /* [n_rot/2] per-dimension divisors (llama3 scaling; gemma4: the full layers' pairs
                            that do not rotate, 1e30) */
    /* Per-layer inputs (gemma4 E2B/E4B; n_pl = embedding_length_per_layer_input): */
    CV_ROLE_PL_TOKEN_EMBD, /* [n_vocab][n_layer * n_pl] looked up by id */
    CV_ROLE_PL_MODEL_PROJ, /* [n_layer * n_pl][n_embd] of the scaled token embedding */
    CV_ROLE_PL_PROJ_NORM,  /* [n_pl] RMSNorm of each layer's n_pl projected values */
    CV_ROLE_ATTN_NORM,   /* [n_embd] */
    CV_ROLE_ATTN_Q,      /* [n_q][n_embd], n_q = n_head * head_dim */
    CV_ROLE_ATTN_K,      /* [n_kv][n_embd], n_kv = n_head_kv * head_dim */
    CV_ROLE_ATTN_V,      /* [n_kv][n_embd] */
    CV_ROLE_ATTN_Q_BIAS, /* [n_q] */
    CV_ROLE_ATTN_K_BIAS, /* [n_kv] */
    CV_ROLE_ATTN_V_BIAS, /* [n_kv] */
    CV_ROLE_ATTN_Q_NORM, /* [head_dim], RMSNorm of each query head before RoPE */
    CV_ROLE_ATTN_K_NORM, /* [head_dim] */
    CV_ROLE_ATTN_OUT,    /* [n_embd][n_q] */
    CV_ROLE_ATTN_OUT_BIAS,  /* [n_embd] */
    CV_ROLE_ATTN_SINKS,     /* [n_head] one learned logit per query head (gpt-oss) */
    CV_ROLE_ATTN_POST_NORM, /* [n_embd] RMSNorm of the attention output before the residual add (gemma) */
    CV_ROLE_FFN_NORM,    /* [n_embd] */
    CV_ROLE_FFN_GATE,    /* [n_ff][n_embd] */
    CV_ROLE_FFN_UP,      /* [n_ff][n_embd] */
    CV_ROLE_FFN_DOWN,    /* [n_embd][n_ff] */
    CV_ROLE_FFN_GATE_INP,  /* [n_expert][n_embd] the router */
    CV_ROLE_FFN_GATE_EXPS, /* [n_expert][n_ff_exp][n_embd] */
    CV_ROLE_FFN_UP_EXPS,   /* [n_expert][n_ff_exp][n_embd] */
    CV_ROLE_FFN_DOWN_EXPS, /* [n_expert][n_embd][n_ff_exp] */
    CV_ROLE_FFN_GATE_INP_BIAS,  /* [n_expert] */
    CV_ROLE_FFN_GATE_EXPS_BIAS, /* [n_expert][n_ff_exp] */
    CV_ROLE_FFN_UP_EXPS_BIAS,   /* [n_expert][n_ff_exp] */
    CV_ROLE_FFN_DOWN_EXPS_BIAS, /* [n_expert][n_embd] */
    CV_ROLE_FFN_POST_NORM,      /* [n_embd] RMSNorm of the FFN output before the residual add (gemma) */
    CV_ROLE_FFN_GATE_INP_SHEXP, /* [n_embd] the shared expert's gate: sigmoid(w . x) scales it */
    CV_ROLE_FFN_GATE_SHEXP,     /* [n_ff_shexp][n_embd] */
    CV_ROLE_FFN_UP_SHEXP,       /* [n_ff_shexp][n_embd] */
    CV_ROLE_FFN_DOWN_SHEXP,     /* [n_embd][n_ff_shexp] */
    /* Gated DeltaNet (CV_MIXER_DELTANET); C = 2 * ssm_group * ssm_state +
     * ssm_inner conv channels, H_v = ssm_heads value heads of d = ssm_state. */
    CV_ROLE_SSM_QKV,     /* [C][n_embd] q of the key heads | k of the key heads | v of the value heads */
    CV_ROLE_SSM_Z,       /* [ssm_inner][n_embd] the output gate z (GGUF attn_gate) */
    CV_ROLE_SSM_BETA,    /* [H_v][n_embd] */
    CV_ROLE_SSM_ALPHA,   /* [H_v][n_embd] */
    CV_ROLE_SSM_CONV1D,  /* [C][ssm_conv] the causal depthwise conv, last tap on the current token */
    CV_ROLE_SSM_DT_BIAS, /* [H_v] */
    CV_ROLE_SSM_A,       /* [H_v] -exp(A_log), negative */
    CV_ROLE_SSM_NORM,    /* [ssm_state] RMSNorm of each value head's output */
    CV_ROLE_SSM_OUT,     /* [n_embd][ssm_inner] */
    /* qwen3next's fused projections, rows grouped by key head g (value heads
     * g R .. g R + R - 1, R = H_v / H_k): */
    CV_ROLE_SSM_IN,      /* [C + ssm_inner][n_embd] per group: q_g, k_g, v, z of its value heads */
    CV_ROLE_SSM_BA,      /* [2 H_v][n_embd] per group: beta, then alpha of its value heads */
    /* Multi-head latent attention (CV_MIXER_MLA); D = n_lora_kv + n_rot, the
     * latent row a position keeps; each head's query is q_nope (k_mla - n_rot)
     * then q_pe (n_rot). attn_q (CV_ROLE_ATTN_Q) is [n_head * k_mla][n_embd]. */
    CV_ROLE_ATTN_Q_A,       /* [n_lora_q][n_embd] */
    CV_ROLE_ATTN_Q_A_NORM,  /* [n_lora_q] */
    CV_ROLE_ATTN_Q_B,       /* [n_head * k_mla][n_lora_q] */
    CV_ROLE_ATTN_KV_A,      /* [D][n_embd]: the latent c [n_lora_kv], then k_pe [n_rot] (attn_kv_a_mqa) */
    CV_ROLE_ATTN_KV_A_NORM, /* [n_lora_kv] */
    CV_ROLE_ATTN_K_B,       /* [n_head][n_lora_kv][k_mla - n_rot]: head h's q_nope into the latent space */
    CV_ROLE_ATTN_V_B,       /* [n_head][v_mla][n_lora_kv]: the latent space into head h's value */
    CV_ROLE_FFN_EXP_PROBS_B,/* [n_expert] the router's selection bias (exp_probs_b.bias) */
    /* gemma4 26B-A4B's MoE layers: a dense FFN (bound as the shared expert,
     * ungated) beside routed experts, each branch post-normed, the router
     * reading an unweighted RMSNorm of the stream / sqrt(n_embd) times a
     * learned scale, the experts a norm of their own. */
    CV_ROLE_FFN_GATE_INP_SCALE,  /* [n_embd] */
    CV_ROLE_FFN_NORM_EXPS,       /* [n_embd] the experts' pre-norm (GGUF pre_ffw_norm_2) */
    CV_ROLE_FFN_POST_NORM_SHEXP, /* [n_embd] the dense branch's post-norm (post_ffw_norm_1) */
    CV_ROLE_FFN_POST_NORM_EXPS,  /* [n_embd] the routed sum's post-norm (post_ffw_norm_2) */
    CV_ROLE_FFN_GATE_UP_EXPS,    /* [n_expert][2 n_ff_exp][n_embd] gate rows then up rows, fused */
    CV_ROLE_FFN_DOWN_EXPS_SCALE, /* [n_expert] each expert's output times it */
    /* gemma4 */
    CV_ROLE_PL_GATE,     /* [n_pl][n_embd] the per-layer input's gate (GGUF inp_gate) */
    CV_ROLE_PL_PROJ,     /* [n_embd][n_pl] its projection back (GGUF proj) */
    CV_ROLE_PL_POST_NORM,/* [n_embd] RMSNorm of that projection before the residual add (GGUF post_norm) */
    CV_ROLE_OUT_SCALE,   /* [1] the whole residual stream times it after the layer (GGUF layer_output_scale) */
    CV_ROLE_COUNT
} cv_role;

#define CV_ROLE_FIRST_LAYER CV_ROLE_ATTN_NORM

/* Symbolic sizes a descriptor states shapes in; the loader resolves them
 * from the hyper-parameters. */
typedef enum cv_dim {
    CV_DIM_ONE,      /* a vector's absent second dimension */
    CV_DIM_EMBD,
    CV_DIM_VOCAB,
    CV_DIM_Q,        /* n_head * head_dim */
    CV_DIM_KV,       /* n_head_kv * head_dim */
    CV_DIM_FF,
    CV_DIM_HEAD,     /* head_dim */
    CV_DIM_HEADS,    /* n_head */
    CV_DIM_ROT_HALF, /* n_rot / 2 */
    CV_DIM_EXPERT,   /* n_expert */
    CV_DIM_FF_EXP,   /* n_ff_exp: one expert's FFN width */
    CV_DIM_Q_GATED,  /* 2 * n_head * head_dim: each head's query, then its output gate */
    CV_DIM_FF_SHEXP, /* n_ff_shexp: the shared expert's width */
    CV_DIM_SSM_CONV, /* ssm_conv: the conv's taps */
    CV_DIM_SSM_CH,   /* 2 * ssm_group * ssm_state + ssm_inner: the conv's channels */
    CV_DIM_SSM_INNER,/* ssm_inner = ssm_heads * ssm_state */
    CV_DIM_SSM_HEADS,/* ssm_heads: value heads */
    CV_DIM_SSM_STATE,/* ssm_state: one head's key and value size */
    CV_DIM_SSM_IN,   /* C + ssm_inner: the conv's input and the output gate, fused */
    CV_DIM_SSM_BA,   /* 2 * ssm_heads: beta and alpha, fused */
    CV_DIM_Q_LORA,   /* n_lora_q */
    CV_DIM_KV_LORA,  /* n_lora_kv */
    CV_DIM_KV_A,     /* n_lora_kv + n_rot: the latent row */
    CV_DIM_Q_MLA,    /* n_head * k_mla */
    CV_DIM_NOPE,     /* k_mla - n_rot: a head's query and key dims without RoPE */
    CV_DIM_V_MLA,    /* v_mla: a head's value */
    CV_DIM_O_MLA,    /* n_head * v_mla */
    CV_DIM_FF_EXP2,  /* 2 * n_ff_exp: one expert's gate and up, fused */
    CV_DIM_PL,       /* n_pl: one layer's per-layer input */
    CV_DIM_PL_ALL,   /* n_layer * n_pl: every layer's */
} cv_dim;

typedef enum cv_need {
    CV_NEED_REQUIRED,
    CV_NEED_OPTIONAL, /* absent: the forward skips it (a bias, a norm) */
    CV_NEED_FALLBACK, /* absent: bound to the `fallback` role (tied output) */
    CV_NEED_ALT,      /* absent: the layer must have the `fallback` role's tensor instead (an
                         older layout of the same weights); `corvid synth` writes this one */
} cv_need;

/* ---- layer kinds ----
 * A layer is a mixer (what mixes positions) followed by an FFN (what each
 * position computes alone), each of a kind resolved per layer at load. The
 * engine runs one traits row per kind (docs/ENGINE.md); the model only says
 * which kind each layer is and binds its tensors. */
typedef enum cv_mixer_kind {
    CV_MIXER_ATTN,     /* causal softmax attention over the layer's KV cache */
    CV_MIXER_DELTANET, /* Gated DeltaNet: linear attention with a recurrent state per sequence */
    CV_MIXER_MLA,      /* multi-head latent attention: one compressed row per position serves every head */
    CV_MIXER_COUNT
} cv_mixer_kind;

typedef enum cv_ffn_kind {
    CV_FFN_DENSE,    /* gated: down(act(gate x) * up x) */
    CV_FFN_MOE,      /* a router picks n_expert_used of n_expert gated experts */
    CV_FFN_COUNT
} cv_ffn_kind;

/* The gate's activation of a gated FFN (dense and expert alike). */
typedef enum cv_glu {
    CV_GLU_SILU,         /* SwiGLU: silu(g) * u */
    CV_GLU_GELU_TANH,    /* GeGLU with the tanh GELU (gemma's gelu_pytorch_tanh) */
    CV_GLU_SILU_CLAMPED, /* gpt-oss: min(g, limit) sigmoid(alpha min(g, limit)) (clamp(u, +-limit) + 1) */
} cv_glu;

/* How an MoE router's logits become a token's experts and weights. */
typedef enum cv_routing {
    CV_ROUTE_SOFTMAX_TOPK, /* softmax over every expert, the k most probable, renormalised when
                              expert_norm (qwen3moe) */
    CV_ROUTE_TOPK_SOFTMAX, /* the k largest raw logits, softmax over those k only (gpt-oss) */
    CV_ROUTE_SIGMOID_TOPK, /* sigmoid of every logit, the k best, weighted by their sigmoids, renormalised when
                              expert_norm (DeepSeek-V3, GLM-4.7-Flash, Kimi-K2) */
} cv_routing;

/* Position scaling a file's metadata names (rope.scaling.type). llama3's
 * arrives as the rope_freqs tensor instead; CV_ROPE_SCALING_LLAMA3 names it
 * for `corvid synth` only. */
typedef enum cv_rope_scaling {
    CV_ROPE_SCALING_NONE,
    CV_ROPE_SCALING_LINEAR, /* positions divided by the factor */
    CV_ROPE_SCALING_YARN,   /* per-dimension ramp between original and interpolated frequencies, cos and sin
                               times 1 + 0.1 ln(factor) */
    CV_ROPE_SCALING_LLAMA3, /* the rope_freqs.weight tensor */
} cv_rope_scaling;

/* Which layers a per-layer tensor belongs to: 0 every layer, else a mask
 * of the kinds that have it (a layer matches when its mixer or its FFN
 * kind is in the mask). */
#define CV_WHEN_MIXER(k) (1u << (k))
#define CV_WHEN_FFN(k) (1u << (8 + (k)))

typedef struct cv_arch_tensor {
    cv_role role;
    const char *name;  /* GGUF name; per-layer roles have one %d for the block */
    cv_dim ne0, ne1;   /* ggml order: ne0 is the row length */
    cv_need need;
    cv_role fallback;  /* for CV_NEED_FALLBACK */
    cv_dim ne2;        /* experts of a 3-D tensor; CV_DIM_ONE (0) for a matrix or vector */
    uint32_t when;     /* CV_WHEN_* mask; 0: every layer */
} cv_arch_tensor;

typedef struct cv_arch {
    const char *name;        /* general.architecture, also the metadata key prefix */
    const char *covers;      /* model families it runs, for `corvid info`/errors */
    cv_rope_style rope_style;
    float default_rms_eps;   /* when {arch}.attention.layer_norm_rms_epsilon is absent */
    float default_rope_theta;
    cv_mixer_kind mixer;     /* every layer's mixer kind (of a hybrid's attending layers) */
    /* A hybrid: layers are Gated DeltaNet except every
     * {arch}.full_attention_interval-th one (or as the per-layer array
     * {arch}.attention.recurrent_layers says), which has `mixer`. */
    bool hybrid;
    /* Attention output gated per head: attn_q holds each head's query then
     * its gate g (CV_DIM_Q_GATED rows), and the head's output is multiplied
     * by sigmoid(g) before the output projection (Qwen3.5, Qwen3-Next). */
    bool attn_gate;
    /* Gated DeltaNet value head j reads key head j / (H_v / H_k) (grouped,
     * Qwen3-Next) instead of j mod H_k (tiled, Qwen3.5). */
    bool ssm_grouped;
    cv_ffn_kind ffn;         /* every layer's FFN kind */
    bool expert_norm;        /* MoE: renormalise the chosen experts' weights (a file's
                                {arch}.expert_weights_norm overrides) */
    cv_routing routing;      /* MoE: how the router's logits choose and weigh experts */
    cv_glu glu;              /* every gated FFN's activation */
    float glu_alpha, glu_limit; /* CV_GLU_SILU_CLAMPED's sigmoid slope and clamp */
    /* Sliding-window layers: with swa_period p > 0, layer il attends only the
     * last {arch}.attention.sliding_window positions iff il mod p < p - 1
     * (llama.cpp's pattern rule; {arch}.attention.sliding_window_pattern, a
     * period or one flag per layer, overrides). 0: every layer is full. */
    int32_t swa_period;
    float default_rope_theta_swa; /* window layers' RoPE base without {arch}.rope.freq_base_swa; 0: the
                                     full layers' base */
    bool swa_rope_unscaled;  /* window layers ignore rope.scaling (gemma3 scales global layers only) */
    bool embd_scale_sqrt;    /* token embeddings times sqrt(n_embd) (gemma) */
    /* Queries are scaled by 1/sqrt(head_dim), except in a model of exactly
     * this many layers, which scales by 1/sqrt(n_embd / n_head) (Gemma 3
     * 27B's query_pre_attn_scalar, which GGUF files do not carry; llama.cpp
     * tells the model by its 62 layers too). 0: never. */
    int32_t attn_scale_wide_at_layers;
    /* YaRN: {arch}.rope.scaling.yarn_log_multiplier is HF's mscale_all_dim m
     * as is (mistral3), and cos/sin are scaled by
     * (1 + 0.1 ln f) / (1 + 0.1 m ln f) instead of 1 + 0.1 ln f. */
    bool yarn_log_mul;
    /* Gemma 4: scores are q.k unscaled (its q/k norms carry the scale), V
     * is RMS-normalised without a weight, and a layer without attn_v takes
     * its K projection, before the K norm and RoPE, as V. */
    bool attn_scale_one;
    bool v_norm;
    /* A layer's FFN is MoE iff the file has its router (blk.N.ffn_gate_inp:
     * gemma4's 26B-A4B), else `ffn`; the MoE keys are read when present. */
    bool moe_by_router;
    const cv_arch_tensor *tensors;
    int n_tensors;
} cv_arch;

extern const cv_arch cv_arch_llama;
extern const cv_arch cv_arch_qwen2;
extern const cv_arch cv_arch_qwen3;
extern const cv_arch cv_arch_qwen3moe;
extern const cv_arch cv_arch_gpt_oss;
extern const cv_arch cv_arch_gemma3;
extern const cv_arch cv_arch_qwen35;
extern const cv_arch cv_arch_qwen35moe;
extern const cv_arch cv_arch_mistral3;
extern const cv_arch cv_arch_qwen3next;
extern const cv_arch cv_arch_deepseek2;
extern const cv_arch cv_arch_gemma4;

/* The table of architectures (arch.c): adding one is a new arch_<name>.c
 * and a row there. */
extern const cv_arch *const cv_archs[];
extern const int cv_n_archs;
/* NULL when no row has that general.architecture. */
const cv_arch *cv_arch_find(cv_str name);

/* A hybrid's rule for layer il when every interval-th layer attends
 * (llama.cpp's reading of {arch}.full_attention_interval): Gated DeltaNet
 * unless (il + 1) is a multiple of interval. */
static inline cv_mixer_kind cv_hybrid_layer_mixer(int32_t il, int32_t interval)
{
    return (il + 1) % interval ? CV_MIXER_DELTANET : CV_MIXER_ATTN;
}

/* ---- hyper-parameters ---- */

typedef struct cv_hparams {
    int32_t n_vocab;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;  /* the largest where a file gives one per layer (gemma4): each layer's is cv_layer's */
    int32_t head_dim;   /* {arch}.attention.key_length, else n_embd / n_head */
    int32_t n_ff;       /* the largest where a file gives one per layer, as n_head_kv */
    int32_t n_rot;      /* rotated dims per head, even, <= head_dim */
    /* Window layers' heads ({arch}.attention.key_length_swa and
     * rope.dimension_count_swa, gemma4), else the full layers'. */
    int32_t head_dim_swa, n_rot_swa;
    /* The last n_kv_shared layers keep no K/V of their own and attend over
     * an earlier layer's ({arch}.attention.shared_kv_layers, gemma4: the
     * last window and the last full layer before them); 0: none. */
    int32_t n_kv_shared;
    int32_t n_pl;          /* {arch}.embedding_length_per_layer_input: per-layer input width (0: none) */
    float logit_softcap;   /* {arch}.final_logit_softcapping: logits c tanh(logits / c); 0: none */
    int32_t n_ctx_train;/* {arch}.context_length */
    float rms_eps;
    float rope_theta;
    float rope_freq_scale; /* linear position scaling: 1 / rope.scaling.factor, else 1 */
    cv_rope_scaling rope_scaling; /* none, linear or yarn */
    float rope_factor;     /* rope.scaling.factor (1: none) */
    int32_t rope_orig_ctx; /* YaRN: rope.scaling.original_context_length */
    float yarn_beta_fast, yarn_beta_slow; /* YaRN's correction-dimension bounds (32 and 1 by default) */
    float yarn_log_mul;    /* YaRN: mscale_all_dim, where the architecture reads it (cv_arch.yarn_log_mul; MLA:
                              its converter's 0.1 x mscale_all_dim over 0.1) */
    float rope_theta_swa;  /* window layers' RoPE base */
    int32_t n_swa;         /* {arch}.attention.sliding_window: what window layers see; 0: no window */
    float attn_scale;      /* score = attn_scale * q.k */
    /* Query temperature (Llama 4's, mistral3's): the query at position p is
     * multiplied by 1 + attn_temp_scale ln(floor(p / attn_temp_len) + 1)
     * after RoPE ({arch}.attention.temperature_scale, and the original
     * context as the step); 0: none. */
    float attn_temp_scale;
    int32_t attn_temp_len;
    float embd_scale;      /* token embedding multiplier (1, or sqrt(n_embd) for gemma) */
    cv_glu glu;
    float glu_alpha, glu_limit;
    cv_routing routing;
    /* Mixture of experts (0 experts: a dense model). */
    int32_t n_expert;      /* {arch}.expert_count */
    int32_t n_expert_used; /* {arch}.expert_used_count: experts per token */
    int32_t n_ff_exp;      /* {arch}.expert_feed_forward_length */
    bool expert_norm;      /* the chosen experts' weights renormalised to sum 1 */
    int32_t n_ff_shexp;    /* {arch}.expert_shared_feed_forward_length (0: no shared expert) */
    /* Gated DeltaNet layers of a hybrid (all 0 otherwise). */
    int32_t ssm_conv;      /* {arch}.ssm.conv_kernel: the causal conv's taps K */
    int32_t ssm_state;     /* {arch}.ssm.state_size: key and value head size d */
    int32_t ssm_group;     /* {arch}.ssm.group_count: key heads H_k */
    int32_t ssm_heads;     /* {arch}.ssm.time_step_rank: value heads H_v (value head j reads key head j mod H_k,
                              or j / (H_v / H_k) when ssm_grouped) */
    bool ssm_grouped;      /* the architecture's cv_arch.ssm_grouped */
    int32_t ssm_inner;     /* {arch}.ssm.inner_size = H_v * d */
    int32_t full_attn_interval; /* {arch}.full_attention_interval (4 when absent) */
    int32_t n_recurrent;   /* layers whose mixer is Gated DeltaNet */
    /* MoE routing beyond the choice of experts (every MoE architecture may
     * carry these keys): a softmax or sigmoid router's selection among the
     * n_group_used best of n_expert_group groups of consecutive experts (a
     * group scored by the sum of its two best selection scores; 0 or 1
     * group: no limit), the chosen weights times expert_weights_scale. The
     * selection score is the probability plus the layer's exp_probs_b. */
    int32_t n_expert_group, n_group_used; /* {arch}.expert_group_count, .expert_group_used_count */
    float expert_weights_scale;           /* {arch}.expert_weights_scale (1 when absent or 0) */
    int32_t n_dense_lead;  /* {arch}.leading_dense_block_count: the first layers have a dense FFN */
    /* Multi-head latent attention (0: none): head_dim is the latent row D =
     * n_lora_kv + n_rot ({arch}.attention.key_length), head_dim_v the value
     * part of it, n_lora_kv ({arch}.attention.value_length), n_head_kv 1. */
    int32_t n_lora_q;      /* {arch}.attention.q_lora_rank (0: a plain attn_q) */
    int32_t n_lora_kv;     /* {arch}.attention.kv_lora_rank */
    int32_t k_mla, v_mla;  /* {arch}.attention.key_length_mla / value_length_mla: one head's query (nope +
                              RoPE dims) and value */
    int32_t head_dim_v;    /* {arch}.attention.value_length: head_dim, or an MLA latent row's value part */
} cv_hparams;

/* K and V halves a position keeps per KV head: 2, or 1 for MLA, whose
 * latent row is the key and, in its first n_lora_kv dims, the value. */
static inline int32_t cv_kv_parts(const cv_hparams *hp) { return hp->n_lora_kv > 0 ? 1 : 2; }

/* ---- the bound model ---- */

/* One projection of a fused matmul group: w writes the output columns
 * [col, col + n_out) of each result row. Separate matrices are a group of
 * several; fused ones (same dtype, concatenated at load) a group of one,
 * so the forward runs the same loop either way. */
typedef struct cv_proj {
    cv_bmat *w;
    int32_t col;
} cv_proj;

/* A projection of every expert: w[e] is expert e's slice of a 3-D tensor
 * (or of several stacked, as cv_proj), writing result columns [col, ..). */
typedef struct cv_expert_proj {
    cv_bmat **w;             /* [n_expert] */
    int32_t col;
} cv_expert_proj;

typedef struct cv_layer {
    cv_mixer_kind mixer;
    cv_ffn_kind ffn;
    /* This layer's sizes (the model's, except where a file gives them per
     * layer or per kind of layer: gemma4) and, for an attention layer, the
     * layer whose K/V it attends over: itself, or an earlier one whose
     * cache it shares (cv_hparams.n_kv_shared). */
    int32_t head_dim, n_head_kv, n_ff;
    int32_t kv_src;
    /* Attention: a position p sees p - n_swa + 1 .. p (the n_swa last, itself
     * included; llama.cpp masks p0 when p - p0 >= n_swa); 0: all of 0 .. p. */
    int32_t n_swa;
    cv_rope_params rope;     /* this layer's RoPE (window layers may have their own base) */
    const float *attn_norm;  /* [n_embd] */
    /* CV_MIXER_ATTN */
    cv_proj qkv[3];          /* result row: q [n_q] | k [n_kv] | v [n_kv]; with attn_gate q is
                                [n_head][query head_dim | gate head_dim] (2 n_q) */
    int32_t n_qkv;
    const float *q_bias;     /* [n_q] or NULL */
    const float *k_bias;     /* [n_kv] or NULL */
    const float *v_bias;     /* [n_kv] or NULL */
    const float *q_norm;     /* [head_dim] or NULL */
    const float *k_norm;     /* [head_dim] or NULL */
    cv_bmat *wo;             /* [n_embd][n_q] */
    const float *o_bias;     /* [n_embd] or NULL */
    const float *sinks;      /* [n_head] or NULL: softmax sink logits */
    const float *attn_post_norm; /* [n_embd] or NULL: RMSNorm of the mixer's output (gemma3) */
    bool attn_gate;          /* output gated by sigmoid of each head's gate (cv_arch.attn_gate) */
    bool v_from_k;           /* no V projection: V is the K projection before its norm and RoPE (gemma4) */
    bool v_norm;             /* V RMS-normalised without a weight (cv_arch.v_norm) */
    /* CV_MIXER_DELTANET (C, H_v, d as at CV_ROLE_SSM_QKV) */
    cv_proj ssm_in[4];       /* result row: qkv [C] | z [ssm_inner] | beta [H_v] | alpha [H_v] */
    int32_t n_ssm_in;
    const float *ssm_conv1d; /* [C][ssm_conv] */
    const float *ssm_dt_bias;/* [H_v] */
    const float *ssm_a;      /* [H_v] */
    const float *ssm_norm;   /* [d] */
    cv_bmat *ssm_out;        /* [n_embd][ssm_inner] */
    /* CV_MIXER_MLA (D = n_lora_kv + n_rot, as at CV_ROLE_ATTN_Q_A) */
    cv_bmat *mla_q;          /* [n_lora_q][n_embd] (attn_q_a), or [n_head * k_mla][n_embd] (attn_q) */
    const float *mla_q_norm; /* [n_lora_q] or NULL (no q_lora) */
    cv_bmat *mla_q_b;        /* [n_head * k_mla][n_lora_q] or NULL */
    cv_bmat *mla_kv;         /* [D][n_embd] */
    const float *mla_kv_norm;/* [n_lora_kv] */
    cv_bmat **mla_k_b;       /* [n_head] of [n_lora_kv][k_mla - n_rot] */
    cv_bmat **mla_v_b;       /* [n_head] of [v_mla][n_lora_kv] */
    const float *ffn_norm;   /* [n_embd] the pre-FFN norm (qwen35: post_attention_norm) */
    const float *ffn_post_norm;  /* [n_embd] or NULL: RMSNorm of the FFN's output (gemma3) */
    cv_proj gate_up[2];      /* result row: gate [n_ff] | up [n_ff] */
    int32_t n_gate_up;
    cv_bmat *w_down;         /* [n_embd][n_ff] */
    /* CV_FFN_MOE */
    cv_bmat *router;         /* [n_expert][n_embd] */
    cv_expert_proj exp_gate_up[2]; /* result row: gate [n_ff_exp] | up [n_ff_exp] */
    int32_t n_exp_gate_up;
    cv_bmat **exp_down;      /* [n_expert] of [n_embd][n_ff_exp] */
    const float *router_bias;   /* [n_expert] or NULL */
    const float *exp_probs_b;   /* [n_expert] or NULL: the selection bias (cv_hparams routing) */
    const float *exp_gate_bias; /* [n_expert][n_ff_exp] or NULL */
    const float *exp_up_bias;   /* [n_expert][n_ff_exp] or NULL */
    const float *exp_down_bias; /* [n_expert][n_embd] or NULL */
    /* A shared expert every token runs besides its routed ones (NULL
     * shexp_down: none), scaled by sigmoid(shexp_gate . x) when it has the
     * gate (qwen35moe), added as it is otherwise (deepseek2; gemma4's dense
     * branch, post-normed first). */
    const float *shexp_gate; /* [n_embd] or NULL */
    cv_proj shexp_gate_up[2];/* result row: gate [n_ff_shexp] | up [n_ff_shexp] */
    int32_t n_shexp_gate_up;
    cv_bmat *shexp_down;     /* [n_embd][n_ff_shexp] */
    /* gemma4's MoE: the router reads RMSNorm(x) / sqrt(n_embd) * router_scale
     * and the experts RMSNorm(x; exp_norm) instead of the FFN's normed
     * input; expert e's output times exp_scale[e]; the routed sum and the
     * shared expert each post-normed (all NULL: none of that). */
    const float *router_scale;   /* [n_embd] */
    const float *exp_norm;       /* [n_embd] */
    const float *exp_scale;      /* [n_expert] */
    const float *exp_post_norm;  /* [n_embd] */
    const float *shexp_post_norm;/* [n_embd] */
    /* After the FFN (gemma4): the layer's per-layer input, when the model
     * has them (x += post_norm(W_proj (gelu(W_gate x) * pl[il]))), then the
     * whole stream times out_scale (1 when absent). */
    cv_bmat *pl_gate;        /* [n_pl][n_embd] */
    cv_bmat *pl_proj;        /* [n_embd][n_pl] */
    const float *pl_post_norm; /* [n_embd] */
    float out_scale;
} cv_layer;

typedef struct cv_model_owned cv_model_owned; /* private: buffers to free */

typedef struct cv_model {
    const cv_arch *arch;
    cv_hparams hp;
    cv_gguf *gguf;                  /* owned; the tokenizer layer reads its metadata */
    const cv_gguf_tensor *tok_embd; /* rows dequantized one token at a time */
    const float *output_norm;       /* [n_embd] */
    cv_bmat *output;                /* [n_vocab][n_embd]; token_embd's data when tied */
    /* Per-layer inputs (NULL without: hp.n_pl == 0): each token's
     * [n_layer][n_pl] rows, looked up and projected from the embedding. */
    const cv_gguf_tensor *pl_embd;  /* [n_vocab][n_layer * n_pl], rows dequantized one token at a time */
    cv_bmat *pl_model_proj;         /* [n_layer * n_pl][n_embd] */
    const float *pl_proj_norm;      /* [n_pl] */
    bool tied_output;
    cv_rope_params rope;            /* full layers': style, n_rot, theta, scale, factors, mscale (each
                                       layer holds its own copy, window layers maybe another base) */
    cv_layer *layers;               /* [n_layer] */
    bool dequantized;               /* opened with cv_model_params.dequantize */
    size_t matmul_bytes;            /* bytes of every matrix (what RAM must hold) */
    size_t active_bytes;            /* weight bytes one token reads: every matrix once, but of an MoE
                                       layer's experts only the n_expert_used it is routed to */
    int64_t matmul_macs;            /* multiply-adds of the matmuls per token (routed experts only) */
    int64_t output_macs;            /* of which the output layer's (a prefill computes it for one token) */
    int64_t n_params;               /* elements of every tensor (cv_model_summary's count) */
    int64_t n_params_active;        /* of which one token uses (an MoE's routed experts only) */
    cv_backend *be;                 /* where the matrices are prepared (cv_model_params.backend) */
    cv_model_owned *owned;
} cv_model;

typedef struct cv_model_params {
    /* The fp32 reference path: every matrix is dequantized to f32 at load and
     * multiplied with f32 activations, so results match a dequantized twin
     * of the file (tests; `corvid run --exact`). Costs 4 bytes per weight. */
    bool dequantize;
    /* Keep q/k/v and gate/up as separate matmuls even when they could be
     * fused (tests compare both; fusion only changes the launch count). */
    bool no_fuse;
    /* The backend that prepares and keeps the matrices; NULL: the CPU
     * backend (cv_backend_cpu). An engine over the model computes on it. */
    cv_backend *backend;
} cv_model_params;

/* Opens a GGUF model: validates the architecture, the hyper-parameters
 * against base/limits.h, and every tensor of the descriptor (presence,
 * shape, dtype), then prepares the matrices. A file corvid cannot run gives
 * CV_EUNSUPPORTED (architecture, dtype, RoPE scaling) or CV_ECORRUPT (a
 * missing tensor, a wrong shape, an inconsistent hyper-parameter), with a
 * message that starts with the path and names the tensor or key, the value
 * and what was expected. Never aborts on file content. params may be NULL
 * (defaults). The caller closes *out with cv_model_close. */
int cv_model_open(const char *path, const cv_model_params *params, cv_model **out, cv_err *err);
/* The same over an already opened file; on success the model owns g, on
 * failure the caller still does. */
int cv_model_open_gguf(cv_gguf *g, const cv_model_params *params, cv_model **out, cv_err *err);
void cv_model_close(cv_model *m);
/* Every matrix the model prepared on its backend, *n of them (a stream
 * sets up its scratch for them: cv_bstream_reserve). */
const cv_bmat *const *cv_model_mats(const cv_model *m, int32_t *n);

/* What a model file is, from its metadata and tensor index alone (nothing
 * is prepared: cheap for an 18 GB file), for `corvid info`, `doctor` and
 * the model list. Parameters count every tensor's elements (embeddings
 * included, as model cards count them); the active ones count of each
 * expert tensor only the experts one token uses. */
typedef struct cv_model_summary {
    const cv_arch *arch;
    cv_hparams hp;
    int64_t n_params, n_params_active;
    size_t bytes;          /* every tensor's data: what RAM must hold */
    size_t active_bytes;   /* the tensors one token reads (embedding lookups apart) */
    int32_t n_kv_layers;   /* attention layers (full or window) */
    int32_t n_window_layers; /* of which see only the last hp.n_swa positions */
    int32_t n_kv_shared_layers; /* of which read an earlier layer's K/V and keep none (gemma4) */
    int64_t kv_pos_elts[2]; /* K and V elements one position keeps in the full [0] and window [1] layers */
    size_t state_bytes;    /* recurrent state one sequence holds (every Gated DeltaNet layer's conv and
                              delta-rule state, f32); 0 without recurrent layers */
    uint8_t recurrent[CV_MAX_LAYERS / 8]; /* bit il: layer il is Gated DeltaNet */
} cv_model_summary;

/* Fills *out (CV_EUNSUPPORTED / CV_ECORRUPT as cv_model_open words them,
 * for the architecture and its hyper-parameters). */
int cv_model_summarize(const cv_gguf *g, cv_model_summary *out, cv_err *err);
/* "qwen3moe, MoE: 128 experts, 8 used per token; 30.53B parameters, 3.35B
 * active", and a hybrid's Gated DeltaNet layers and a model's window
 * layers as cv_model_describe says them. */
void cv_model_summary_describe(const cv_model_summary *s, cv_buf *out);
/* Bytes of RAM serving the model takes: every tensor (an MoE's experts all
 * stay resident whichever a token uses) plus, for each of n_seq sequences,
 * a KV cache of n_ctx positions (kv_elt_bytes per element; a window layer
 * keeps min(n_ctx, window) of them) and its recurrent state. */
double cv_model_summary_ram_bytes(const cv_model_summary *s, int32_t n_ctx, int32_t n_seq, double kv_elt_bytes);

/* Dequantizes the embedding row of `token` (0 <= token < n_vocab) into
 * out [n_embd]. */
void cv_model_embed(const cv_model *m, int32_t token, float *out);

/* "llama: 2 layers, 256 hidden, 8 heads (4 kv) of 32, ..."; a hybrid's
 * line says which layers are Gated DeltaNet. */
void cv_model_describe(const cv_model *m, cv_buf *out);

/* llama3 RoPE scaling: fills factors[n_rot/2] with the per-dimension
 * divisors of the rotation frequencies (Meta's published rule: long
 * wavelengths divided by `factor`, short ones kept, a smooth ramp between,
 * relative to the original context). GGUF files carry the result as the
 * `rope_freqs.weight` tensor, which `corvid synth` writes with this. */
void cv_rope_llama3_factors(float *factors, int32_t n_rot, float theta, float factor, float low_freq_factor,
                            float high_freq_factor, int32_t original_ctx);
/* YaRN RoPE scaling (arXiv 2309.00071, as ggml applies it): fills
 * factors[n_rot/2] with the divisors of the rotation frequencies. Pair i
 * keeps its frequency below the correction dimension of beta_fast, is
 * interpolated (divided by factor) above that of beta_slow, and mixes the
 * two linearly between; a correction dimension of beta is
 * n_rot ln(original_ctx / (2 pi beta)) / (2 ln theta), the lower one
 * floored and the upper one ceiled. The matching cos/sin factor is
 * 1 + 0.1 ln(factor). */
void cv_rope_yarn_factors(float *factors, int32_t n_rot, float theta, float factor, int32_t original_ctx,
                          float beta_fast, float beta_slow);

#endif
