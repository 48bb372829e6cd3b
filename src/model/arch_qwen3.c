/* arch_qwen3.c — the `qwen3` architecture (Qwen3 dense, Qwen3-Coder dense):
 * no q/k/v bias, but a per-head RMSNorm of queries and keys (over head_dim,
 * before RoPE) with the `attn_q_norm`/`attn_k_norm` weights. head_dim is
 * {arch}.attention.key_length and differs from n_embd / n_head (Qwen3-0.6B:
 * 1024 hidden, 16 heads of 128), which the loader's generic rule handles.
 * NEOX RoPE; tied output on the small models. Spec: llama.cpp's
 * LLM_ARCH_QWEN3 tensor list, the Qwen3 config.json fields. */
#include "model/model.h"

static const cv_arch_tensor tensors[] = {
    { CV_ROLE_TOKEN_EMBD, "token_embd.weight", CV_DIM_EMBD, CV_DIM_VOCAB, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_OUTPUT_NORM, "output_norm.weight", CV_DIM_EMBD, CV_DIM_ONE, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_OUTPUT, "output.weight", CV_DIM_EMBD, CV_DIM_VOCAB, CV_NEED_FALLBACK, CV_ROLE_TOKEN_EMBD },
    { CV_ROLE_ATTN_NORM, "blk.%d.attn_norm.weight", CV_DIM_EMBD, CV_DIM_ONE, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_Q, "blk.%d.attn_q.weight", CV_DIM_EMBD, CV_DIM_Q, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_K, "blk.%d.attn_k.weight", CV_DIM_EMBD, CV_DIM_KV, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_V, "blk.%d.attn_v.weight", CV_DIM_EMBD, CV_DIM_KV, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_Q_NORM, "blk.%d.attn_q_norm.weight", CV_DIM_HEAD, CV_DIM_ONE, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_K_NORM, "blk.%d.attn_k_norm.weight", CV_DIM_HEAD, CV_DIM_ONE, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_OUT, "blk.%d.attn_output.weight", CV_DIM_Q, CV_DIM_EMBD, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_FFN_NORM, "blk.%d.ffn_norm.weight", CV_DIM_EMBD, CV_DIM_ONE, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_FFN_GATE, "blk.%d.ffn_gate.weight", CV_DIM_EMBD, CV_DIM_FF, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_FFN_UP, "blk.%d.ffn_up.weight", CV_DIM_EMBD, CV_DIM_FF, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_FFN_DOWN, "blk.%d.ffn_down.weight", CV_DIM_FF, CV_DIM_EMBD, CV_NEED_REQUIRED, 0 },
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
