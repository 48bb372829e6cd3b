/* arch_gpt_oss.c — the `gpt-oss` architecture (OpenAI gpt-oss-20b and
 * gpt-oss-120b; llama.cpp's LLM_ARCH_OPENAI_MOE). A mixture-of-experts
 * transformer whose layers alternate a sliding window (even layers, window
 * `attention.sliding_window`, 128 in the released models) with full causal
 * attention, every attention has a learned per-head sink logit that takes
 * softmax mass and gives no value, q/k/v/o carry biases, RoPE is NEOX with
 * YaRN scaling in both layer types. The FFN's pre-norm is stored as
 * `post_attention_norm` (it normalises the residual after attention); the
 * router (with a bias) takes the k largest raw logits and weighs them by a
 * softmax over those k; experts have biases on gate, up and down and use
 * the clamped SwiGLU g' = min(g, 7), u' = clamp(u, -7, 7),
 * g' sigmoid(1.702 g') (u' + 1). The output matrix is separate (llama.cpp
 * requires it). Released files keep the experts in MXFP4, attention and the
 * embeddings in Q8_0, routers, norms, biases and sinks in F32. Spec:
 * llama.cpp's LLM_ARCH_OPENAI_MOE tensor list, openai/gpt-oss-20b
 * config.json, ../shared/testdata/reference2/README.md. */
#include "model/model.h"

#define MOE CV_WHEN_FFN(CV_FFN_MOE)

static const cv_arch_tensor tensors[] = {
    { .role = CV_ROLE_TOKEN_EMBD, .name = "token_embd.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB },
    { .role = CV_ROLE_OUTPUT_NORM, .name = "output_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_OUTPUT, .name = "output.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB },
    { .role = CV_ROLE_ATTN_NORM, .name = "blk.%d.attn_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_ATTN_Q, .name = "blk.%d.attn_q.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_Q },
    { .role = CV_ROLE_ATTN_K, .name = "blk.%d.attn_k.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_KV },
    { .role = CV_ROLE_ATTN_V, .name = "blk.%d.attn_v.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_KV },
    { .role = CV_ROLE_ATTN_Q_BIAS, .name = "blk.%d.attn_q.bias", .ne0 = CV_DIM_Q },
    { .role = CV_ROLE_ATTN_K_BIAS, .name = "blk.%d.attn_k.bias", .ne0 = CV_DIM_KV },
    { .role = CV_ROLE_ATTN_V_BIAS, .name = "blk.%d.attn_v.bias", .ne0 = CV_DIM_KV },
    { .role = CV_ROLE_ATTN_OUT, .name = "blk.%d.attn_output.weight", .ne0 = CV_DIM_Q, .ne1 = CV_DIM_EMBD },
    { .role = CV_ROLE_ATTN_OUT_BIAS, .name = "blk.%d.attn_output.bias", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_ATTN_SINKS, .name = "blk.%d.attn_sinks.weight", .ne0 = CV_DIM_HEADS },
    { .role = CV_ROLE_FFN_NORM, .name = "blk.%d.post_attention_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_FFN_GATE_INP, .name = "blk.%d.ffn_gate_inp.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_EXPERT,
      .when = MOE },
    { .role = CV_ROLE_FFN_GATE_INP_BIAS, .name = "blk.%d.ffn_gate_inp.bias", .ne0 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_GATE_EXPS, .name = "blk.%d.ffn_gate_exps.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF_EXP,
      .ne2 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_GATE_EXPS_BIAS, .name = "blk.%d.ffn_gate_exps.bias", .ne0 = CV_DIM_FF_EXP,
      .ne1 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_UP_EXPS, .name = "blk.%d.ffn_up_exps.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF_EXP,
      .ne2 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_UP_EXPS_BIAS, .name = "blk.%d.ffn_up_exps.bias", .ne0 = CV_DIM_FF_EXP,
      .ne1 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_DOWN_EXPS, .name = "blk.%d.ffn_down_exps.weight", .ne0 = CV_DIM_FF_EXP, .ne1 = CV_DIM_EMBD,
      .ne2 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_DOWN_EXPS_BIAS, .name = "blk.%d.ffn_down_exps.bias", .ne0 = CV_DIM_EMBD,
      .ne1 = CV_DIM_EXPERT, .when = MOE },
};

const cv_arch cv_arch_gpt_oss = {
    .name = "gpt-oss",
    .covers = "gpt-oss-20b, gpt-oss-120b (mixture of experts, sliding window, attention sinks)",
    .rope_style = CV_ROPE_NEOX,
    .default_rms_eps = 1e-5f,
    .default_rope_theta = 150000.0f,
    .mixer = CV_MIXER_ATTN,
    .ffn = CV_FFN_MOE,
    .routing = CV_ROUTE_TOPK_SOFTMAX,
    .glu = CV_GLU_SILU_CLAMPED,
    .glu_alpha = 1.702f,
    .glu_limit = 7.0f,
    .swa_period = 2,
    .tensors = tensors,
    .n_tensors = (int)CV_ARRAY_LEN(tensors),
};
