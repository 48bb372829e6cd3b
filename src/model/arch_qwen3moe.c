/* arch_qwen3moe.c — the `qwen3moe` architecture (Qwen3-30B-A3B,
 * Qwen3-Coder-30B-A3B-Instruct, Qwen3-235B-A22B): qwen3's attention (per-head
 * Q/K RMSNorm before NEOX RoPE, no bias, head_dim from key_length) with a
 * mixture-of-experts FFN in every layer. The router `ffn_gate_inp` (F32 in
 * released files) scores n_expert experts; a token takes the
 * expert_used_count best by softmax probability, their probabilities
 * renormalised to sum 1 (Qwen3's norm_topk_prob; llama.cpp hard-codes it for
 * this architecture), and sums those experts' SwiGLU outputs so weighted.
 * The experts' gate/up/down matrices are 3-D tensors, expert index last.
 * `feed_forward_length` is the dense width the converter copies and is not
 * used; an expert's width is `expert_feed_forward_length`. Spec: llama.cpp's
 * LLM_ARCH_QWEN3MOE tensor list and ../shared/testdata/reference2/README.md. */
#include "model/model.h"

#define MOE CV_WHEN_FFN(CV_FFN_MOE)

static const cv_arch_tensor tensors[] = {
    { .role = CV_ROLE_TOKEN_EMBD, .name = "token_embd.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB },
    { .role = CV_ROLE_OUTPUT_NORM, .name = "output_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_OUTPUT, .name = "output.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB,
      .need = CV_NEED_FALLBACK, .fallback = CV_ROLE_TOKEN_EMBD },
    { .role = CV_ROLE_ATTN_NORM, .name = "blk.%d.attn_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_ATTN_Q, .name = "blk.%d.attn_q.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_Q },
    { .role = CV_ROLE_ATTN_K, .name = "blk.%d.attn_k.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_KV },
    { .role = CV_ROLE_ATTN_V, .name = "blk.%d.attn_v.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_KV },
    { .role = CV_ROLE_ATTN_Q_NORM, .name = "blk.%d.attn_q_norm.weight", .ne0 = CV_DIM_HEAD },
    { .role = CV_ROLE_ATTN_K_NORM, .name = "blk.%d.attn_k_norm.weight", .ne0 = CV_DIM_HEAD },
    { .role = CV_ROLE_ATTN_OUT, .name = "blk.%d.attn_output.weight", .ne0 = CV_DIM_Q, .ne1 = CV_DIM_EMBD },
    { .role = CV_ROLE_FFN_NORM, .name = "blk.%d.ffn_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_FFN_GATE_INP, .name = "blk.%d.ffn_gate_inp.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_EXPERT,
      .when = MOE },
    { .role = CV_ROLE_FFN_GATE_EXPS, .name = "blk.%d.ffn_gate_exps.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF_EXP,
      .ne2 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_UP_EXPS, .name = "blk.%d.ffn_up_exps.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF_EXP,
      .ne2 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_DOWN_EXPS, .name = "blk.%d.ffn_down_exps.weight", .ne0 = CV_DIM_FF_EXP, .ne1 = CV_DIM_EMBD,
      .ne2 = CV_DIM_EXPERT, .when = MOE },
};

const cv_arch cv_arch_qwen3moe = {
    .name = "qwen3moe",
    .covers = "Qwen3-30B-A3B, Qwen3-Coder-30B-A3B, Qwen3-235B-A22B (mixture of experts)",
    .rope_style = CV_ROPE_NEOX,
    .default_rms_eps = 1e-6f,
    .default_rope_theta = 1000000.0f,
    .mixer = CV_MIXER_ATTN,
    .ffn = CV_FFN_MOE,
    .expert_norm = true,
    .tensors = tensors,
    .n_tensors = (int)CV_ARRAY_LEN(tensors),
};
