/* arch_qwen35moe.c — the `qwen35moe` architecture (Qwen3.5-35B-A3B,
 * Qwen3.5-122B-A10B, Qwen3.6-35B-A3B): qwen35's hybrid mixers (Gated
 * DeltaNet layers, every full_attention_interval-th layer gated full
 * attention; see arch_qwen35.c) with a mixture-of-experts FFN in every
 * layer, routed as qwen3moe's (softmax over every expert, the
 * expert_used_count most probable, their weights renormalised) plus a shared
 * expert every token runs: its SwiGLU output scaled by
 * sigmoid(ffn_gate_inp_shexp . x), a per-token scalar gate from an F32
 * vector. The shared expert's width is expert_shared_feed_forward_length;
 * feed_forward_length is the converter's copy of the dense width and is not
 * used. Spec: llama.cpp's LLM_ARCH_QWEN35MOE tensor list and
 * ../shared/testdata/reference2/README.md (qwen35moe). */
#include "model/model.h"

#define ATTN CV_WHEN_MIXER(CV_MIXER_ATTN)
#define DN CV_WHEN_MIXER(CV_MIXER_DELTANET)
#define MOE CV_WHEN_FFN(CV_FFN_MOE)

static const cv_arch_tensor tensors[] = {
    { .role = CV_ROLE_TOKEN_EMBD, .name = "token_embd.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB },
    { .role = CV_ROLE_OUTPUT_NORM, .name = "output_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_OUTPUT, .name = "output.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB,
      .need = CV_NEED_FALLBACK, .fallback = CV_ROLE_TOKEN_EMBD },
    { .role = CV_ROLE_ATTN_NORM, .name = "blk.%d.attn_norm.weight", .ne0 = CV_DIM_EMBD },
    /* gated full attention */
    { .role = CV_ROLE_ATTN_Q, .name = "blk.%d.attn_q.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_Q_GATED, .when = ATTN },
    { .role = CV_ROLE_ATTN_K, .name = "blk.%d.attn_k.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_KV, .when = ATTN },
    { .role = CV_ROLE_ATTN_V, .name = "blk.%d.attn_v.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_KV, .when = ATTN },
    { .role = CV_ROLE_ATTN_Q_NORM, .name = "blk.%d.attn_q_norm.weight", .ne0 = CV_DIM_HEAD, .when = ATTN },
    { .role = CV_ROLE_ATTN_K_NORM, .name = "blk.%d.attn_k_norm.weight", .ne0 = CV_DIM_HEAD, .when = ATTN },
    { .role = CV_ROLE_ATTN_OUT, .name = "blk.%d.attn_output.weight", .ne0 = CV_DIM_Q, .ne1 = CV_DIM_EMBD,
      .when = ATTN },
    /* Gated DeltaNet */
    { .role = CV_ROLE_SSM_QKV, .name = "blk.%d.attn_qkv.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_CH, .when = DN },
    { .role = CV_ROLE_SSM_Z, .name = "blk.%d.attn_gate.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_INNER,
      .when = DN },
    { .role = CV_ROLE_SSM_BETA, .name = "blk.%d.ssm_beta.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_HEADS,
      .when = DN },
    { .role = CV_ROLE_SSM_ALPHA, .name = "blk.%d.ssm_alpha.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_HEADS,
      .when = DN },
    { .role = CV_ROLE_SSM_CONV1D, .name = "blk.%d.ssm_conv1d.weight", .ne0 = CV_DIM_SSM_CONV, .ne1 = CV_DIM_SSM_CH,
      .when = DN },
    { .role = CV_ROLE_SSM_DT_BIAS, .name = "blk.%d.ssm_dt.bias", .ne0 = CV_DIM_SSM_HEADS, .when = DN },
    { .role = CV_ROLE_SSM_A, .name = "blk.%d.ssm_a", .ne0 = CV_DIM_SSM_HEADS, .when = DN },
    { .role = CV_ROLE_SSM_NORM, .name = "blk.%d.ssm_norm.weight", .ne0 = CV_DIM_SSM_STATE, .when = DN },
    { .role = CV_ROLE_SSM_OUT, .name = "blk.%d.ssm_out.weight", .ne0 = CV_DIM_SSM_INNER, .ne1 = CV_DIM_EMBD,
      .when = DN },
    /* routed and shared experts, after post_attention_norm */
    { .role = CV_ROLE_FFN_NORM, .name = "blk.%d.post_attention_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_FFN_GATE_INP, .name = "blk.%d.ffn_gate_inp.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_EXPERT,
      .when = MOE },
    { .role = CV_ROLE_FFN_GATE_EXPS, .name = "blk.%d.ffn_gate_exps.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF_EXP,
      .ne2 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_UP_EXPS, .name = "blk.%d.ffn_up_exps.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF_EXP,
      .ne2 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_DOWN_EXPS, .name = "blk.%d.ffn_down_exps.weight", .ne0 = CV_DIM_FF_EXP, .ne1 = CV_DIM_EMBD,
      .ne2 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_GATE_INP_SHEXP, .name = "blk.%d.ffn_gate_inp_shexp.weight", .ne0 = CV_DIM_EMBD,
      .when = MOE },
    { .role = CV_ROLE_FFN_GATE_SHEXP, .name = "blk.%d.ffn_gate_shexp.weight", .ne0 = CV_DIM_EMBD,
      .ne1 = CV_DIM_FF_SHEXP, .when = MOE },
    { .role = CV_ROLE_FFN_UP_SHEXP, .name = "blk.%d.ffn_up_shexp.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF_SHEXP,
      .when = MOE },
    { .role = CV_ROLE_FFN_DOWN_SHEXP, .name = "blk.%d.ffn_down_shexp.weight", .ne0 = CV_DIM_FF_SHEXP,
      .ne1 = CV_DIM_EMBD, .when = MOE },
};

const cv_arch cv_arch_qwen35moe = {
    .name = "qwen35moe",
    .covers = "Qwen3.5-35B-A3B, Qwen3.5-122B-A10B, Qwen3.6-35B-A3B (hybrid mixture of experts)",
    .rope_style = CV_ROPE_NEOX,
    .default_rms_eps = 1e-6f,
    .default_rope_theta = 10000000.0f,
    .mixer = CV_MIXER_ATTN,
    .ffn = CV_FFN_MOE,
    .hybrid = true,
    .attn_gate = true,
    .expert_norm = true,
    .tensors = tensors,
    .n_tensors = (int)CV_ARRAY_LEN(tensors),
};
