/* arch_qwen2.c — the `qwen2` architecture (Qwen2, Qwen2.5, Qwen2.5-Coder):
 * the llama block with biases on the q/k/v projections (required) and RoPE
 * on half-split pairs (x[i], x[i + n_rot/2], ggml's "neox" style). Small
 * models tie the output to the token embedding, so output.weight falls
 * back to it. Spec: llama.cpp's LLM_ARCH_QWEN2 tensor list, the Qwen2.5
 * config.json fields. */
#include "model/model.h"

static const cv_arch_tensor tensors[] = {
    { CV_ROLE_TOKEN_EMBD, "token_embd.weight", CV_DIM_EMBD, CV_DIM_VOCAB, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_OUTPUT_NORM, "output_norm.weight", CV_DIM_EMBD, CV_DIM_ONE, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_OUTPUT, "output.weight", CV_DIM_EMBD, CV_DIM_VOCAB, CV_NEED_FALLBACK, CV_ROLE_TOKEN_EMBD },
    { CV_ROLE_ATTN_NORM, "blk.%d.attn_norm.weight", CV_DIM_EMBD, CV_DIM_ONE, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_Q, "blk.%d.attn_q.weight", CV_DIM_EMBD, CV_DIM_Q, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_K, "blk.%d.attn_k.weight", CV_DIM_EMBD, CV_DIM_KV, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_V, "blk.%d.attn_v.weight", CV_DIM_EMBD, CV_DIM_KV, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_Q_BIAS, "blk.%d.attn_q.bias", CV_DIM_Q, CV_DIM_ONE, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_K_BIAS, "blk.%d.attn_k.bias", CV_DIM_KV, CV_DIM_ONE, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_V_BIAS, "blk.%d.attn_v.bias", CV_DIM_KV, CV_DIM_ONE, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_OUT, "blk.%d.attn_output.weight", CV_DIM_Q, CV_DIM_EMBD, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_FFN_NORM, "blk.%d.ffn_norm.weight", CV_DIM_EMBD, CV_DIM_ONE, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_FFN_GATE, "blk.%d.ffn_gate.weight", CV_DIM_EMBD, CV_DIM_FF, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_FFN_UP, "blk.%d.ffn_up.weight", CV_DIM_EMBD, CV_DIM_FF, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_FFN_DOWN, "blk.%d.ffn_down.weight", CV_DIM_FF, CV_DIM_EMBD, CV_NEED_REQUIRED, 0 },
};

const cv_arch cv_arch_qwen2 = {
    .name = "qwen2",
    .covers = "Qwen2, Qwen2.5, Qwen2.5-Coder",
    .rope_style = CV_ROPE_NEOX,
    .default_rms_eps = 1e-6f,
    .default_rope_theta = 1000000.0f,
    .tensors = tensors,
    .n_tensors = (int)CV_ARRAY_LEN(tensors),
};
