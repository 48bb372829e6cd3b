/* arch_llama.c — the `llama` architecture: Llama 2 and 3.x (llama3 RoPE
 * scaling comes as the optional `rope_freqs.weight` tensor), Mistral,
 * TinyLlama, CodeLlama and DeepSeek-Coder (linear scaling via metadata),
 * which GGUF files all label `llama`. RMSNorm, GQA, SwiGLU FFN, RoPE on
 * adjacent pairs (ggml's "norm" style: GGUF converters permute Q/K rows for
 * it). The output matrix falls back to the token embedding when absent
 * (Llama 3.2 1B/3B tie them). Spec: llama.cpp's LLM_ARCH_LLAMA tensor
 * names (gguf-py constants), Meta's model cards. */
#include "model/model.h"

static const cv_arch_tensor tensors[] = {
    { CV_ROLE_TOKEN_EMBD, "token_embd.weight", CV_DIM_EMBD, CV_DIM_VOCAB, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_OUTPUT_NORM, "output_norm.weight", CV_DIM_EMBD, CV_DIM_ONE, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_OUTPUT, "output.weight", CV_DIM_EMBD, CV_DIM_VOCAB, CV_NEED_FALLBACK, CV_ROLE_TOKEN_EMBD },
    { CV_ROLE_ROPE_FREQS, "rope_freqs.weight", CV_DIM_ROT_HALF, CV_DIM_ONE, CV_NEED_OPTIONAL, 0 },
    { CV_ROLE_ATTN_NORM, "blk.%d.attn_norm.weight", CV_DIM_EMBD, CV_DIM_ONE, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_Q, "blk.%d.attn_q.weight", CV_DIM_EMBD, CV_DIM_Q, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_K, "blk.%d.attn_k.weight", CV_DIM_EMBD, CV_DIM_KV, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_ATTN_V, "blk.%d.attn_v.weight", CV_DIM_EMBD, CV_DIM_KV, CV_NEED_REQUIRED, 0 },
    /* Some llama-labelled conversions carry q/k/v biases; honour them if present. */
    { CV_ROLE_ATTN_Q_BIAS, "blk.%d.attn_q.bias", CV_DIM_Q, CV_DIM_ONE, CV_NEED_OPTIONAL, 0 },
    { CV_ROLE_ATTN_K_BIAS, "blk.%d.attn_k.bias", CV_DIM_KV, CV_DIM_ONE, CV_NEED_OPTIONAL, 0 },
    { CV_ROLE_ATTN_V_BIAS, "blk.%d.attn_v.bias", CV_DIM_KV, CV_DIM_ONE, CV_NEED_OPTIONAL, 0 },
    { CV_ROLE_ATTN_OUT, "blk.%d.attn_output.weight", CV_DIM_Q, CV_DIM_EMBD, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_FFN_NORM, "blk.%d.ffn_norm.weight", CV_DIM_EMBD, CV_DIM_ONE, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_FFN_GATE, "blk.%d.ffn_gate.weight", CV_DIM_EMBD, CV_DIM_FF, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_FFN_UP, "blk.%d.ffn_up.weight", CV_DIM_EMBD, CV_DIM_FF, CV_NEED_REQUIRED, 0 },
    { CV_ROLE_FFN_DOWN, "blk.%d.ffn_down.weight", CV_DIM_FF, CV_DIM_EMBD, CV_NEED_REQUIRED, 0 },
};

const cv_arch cv_arch_llama = {
    .name = "llama",
    .covers = "Llama 2/3.x, Mistral, TinyLlama, CodeLlama, DeepSeek-Coder",
    .rope_style = CV_ROPE_NORM,
    .default_rms_eps = 1e-5f,
    .default_rope_theta = 10000.0f,
    .tensors = tensors,
    .n_tensors = (int)CV_ARRAY_LEN(tensors),
};
