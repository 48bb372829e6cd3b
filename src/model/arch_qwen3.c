/* arch_qwen3.c — the `qwen3` architecture (Qwen3 dense, Qwen3-Coder dense):
 * no q/k/v bias, but a per-head RMSNorm of queries and keys (over head_dim,
 * before RoPE) with the `attn_q_norm`/`attn_k_norm` weights. head_dim is
 * {arch}.attention.key_length and differs from n_embd / n_head (Qwen3-0.6B:
 * 1024 hidden, 16 heads of 128), which the loader's generic rule handles.
 * NEOX RoPE; tied output on the small models. Spec: llama.cpp's
 * LLM_ARCH_QWEN3 tensor list, the Qwen3 config.json fields. */
#include "model/model.h"

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
    { .role = CV_ROLE_FFN_GATE, .name = "blk.%d.ffn_gate.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF },
    { .role = CV_ROLE_FFN_UP, .name = "blk.%d.ffn_up.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF },
    { .role = CV_ROLE_FFN_DOWN, .name = "blk.%d.ffn_down.weight", .ne0 = CV_DIM_FF, .ne1 = CV_DIM_EMBD },
};

const cv_arch cv_arch_qwen3 = {
    .name = "qwen3",
    .covers = "Qwen3, Qwen3-Coder (dense)",
    .rope_style = CV_ROPE_NEOX,
    .default_rms_eps = 1e-6f,
    .default_rope_theta = 1000000.0f,
    .tensors = tensors,
    .n_tensors = (int)CV_ARRAY_LEN(tensors),
};
