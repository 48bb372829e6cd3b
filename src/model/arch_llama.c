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
    { .role = CV_ROLE_TOKEN_EMBD, .name = "token_embd.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB },
    { .role = CV_ROLE_OUTPUT_NORM, .name = "output_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_OUTPUT, .name = "output.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB,
      .need = CV_NEED_FALLBACK, .fallback = CV_ROLE_TOKEN_EMBD },
    { .role = CV_ROLE_ROPE_FREQS, .name = "rope_freqs.weight", .ne0 = CV_DIM_ROT_HALF, .need = CV_NEED_OPTIONAL },
    { .role = CV_ROLE_ATTN_NORM, .name = "blk.%d.attn_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_ATTN_Q, .name = "blk.%d.attn_q.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_Q },
    { .role = CV_ROLE_ATTN_K, .name = "blk.%d.attn_k.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_KV },
    { .role = CV_ROLE_ATTN_V, .name = "blk.%d.attn_v.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_KV },
    /* Some llama-labelled conversions carry q/k/v biases; honour them if present. */
    { .role = CV_ROLE_ATTN_Q_BIAS, .name = "blk.%d.attn_q.bias", .ne0 = CV_DIM_Q, .need = CV_NEED_OPTIONAL },
    { .role = CV_ROLE_ATTN_K_BIAS, .name = "blk.%d.attn_k.bias", .ne0 = CV_DIM_KV, .need = CV_NEED_OPTIONAL },
    { .role = CV_ROLE_ATTN_V_BIAS, .name = "blk.%d.attn_v.bias", .ne0 = CV_DIM_KV, .need = CV_NEED_OPTIONAL },
    { .role = CV_ROLE_ATTN_OUT, .name = "blk.%d.attn_output.weight", .ne0 = CV_DIM_Q, .ne1 = CV_DIM_EMBD },
    { .role = CV_ROLE_FFN_NORM, .name = "blk.%d.ffn_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_FFN_GATE, .name = "blk.%d.ffn_gate.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF },
    { .role = CV_ROLE_FFN_UP, .name = "blk.%d.ffn_up.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF },
    { .role = CV_ROLE_FFN_DOWN, .name = "blk.%d.ffn_down.weight", .ne0 = CV_DIM_FF, .ne1 = CV_DIM_EMBD },
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
