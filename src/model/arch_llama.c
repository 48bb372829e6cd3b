/* arch_llama.c — the `llama` architecture: Llama 2 and 3.x (llama3 RoPE
 * scaling comes as the optional `rope_freqs.weight` tensor), Mistral,
 * TinyLlama, CodeLlama and DeepSeek-Coder (linear scaling via metadata),
 * which GGUF files all label `llama`. RMSNorm, GQA, SwiGLU FFN, RoPE on
 * adjacent pairs (ggml's "norm" style: GGUF converters permute Q/K rows for
 * it). The output matrix falls back to the token embedding when absent
 * (Llama 3.2 1B/3B tie them). Spec: llama.cpp's LLM_ARCH_LLAMA tensor
 * names (gguf-py constants), Meta's model cards. */
#include "model/arch_llama_tensors.h"
#include "model/model.h"

static const cv_arch_tensor tensors[] = { CV_LLAMA_TENSORS };

const cv_arch cv_arch_llama = {
    .name = "llama",
    .covers = "Llama 2/3.x, Mistral, TinyLlama, CodeLlama, DeepSeek-Coder",
    .rope_style = CV_ROPE_NORM,
    .default_rms_eps = 1e-5f,
    .default_rope_theta = 10000.0f,
    .tensors = tensors,
    .n_tensors = (int)CV_ARRAY_LEN(tensors),
};
