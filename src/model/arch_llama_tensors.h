/* arch_llama_tensors.h — the tensors of the llama graph (arch_llama.c),
 * which mistral3 (arch_mistral3.c) runs too: its descriptor is these rows
 * and its own. */
#ifndef CV_ARCH_LLAMA_TENSORS_H
#define CV_ARCH_LLAMA_TENSORS_H

#define CV_LLAMA_TENSORS \
    { .role = CV_ROLE_TOKEN_EMBD, .name = "token_embd.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB }, \
    { .role = CV_ROLE_OUTPUT_NORM, .name = "output_norm.weight", .ne0 = CV_DIM_EMBD }, \
    { .role = CV_ROLE_OUTPUT, .name = "output.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB, \
      .need = CV_NEED_FALLBACK, .fallback = CV_ROLE_TOKEN_EMBD }, \
    { .role = CV_ROLE_ROPE_FREQS, .name = "rope_freqs.weight", .ne0 = CV_DIM_ROT_HALF, .need = CV_NEED_OPTIONAL }, \
    { .role = CV_ROLE_ATTN_NORM, .name = "blk.%d.attn_norm.weight", .ne0 = CV_DIM_EMBD }, \
    { .role = CV_ROLE_ATTN_Q, .name = "blk.%d.attn_q.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_Q }, \
    { .role = CV_ROLE_ATTN_K, .name = "blk.%d.attn_k.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_KV }, \
    { .role = CV_ROLE_ATTN_V, .name = "blk.%d.attn_v.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_KV }, \
    /* Some llama-labelled conversions carry q/k/v biases; honour them if present. */ \
    { .role = CV_ROLE_ATTN_Q_BIAS, .name = "blk.%d.attn_q.bias", .ne0 = CV_DIM_Q, .need = CV_NEED_OPTIONAL }, \
    { .role = CV_ROLE_ATTN_K_BIAS, .name = "blk.%d.attn_k.bias", .ne0 = CV_DIM_KV, .need = CV_NEED_OPTIONAL }, \
    { .role = CV_ROLE_ATTN_V_BIAS, .name = "blk.%d.attn_v.bias", .ne0 = CV_DIM_KV, .need = CV_NEED_OPTIONAL }, \
    { .role = CV_ROLE_ATTN_OUT, .name = "blk.%d.attn_output.weight", .ne0 = CV_DIM_Q, .ne1 = CV_DIM_EMBD }, \
    { .role = CV_ROLE_FFN_NORM, .name = "blk.%d.ffn_norm.weight", .ne0 = CV_DIM_EMBD }, \
    { .role = CV_ROLE_FFN_GATE, .name = "blk.%d.ffn_gate.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF }, \
    { .role = CV_ROLE_FFN_UP, .name = "blk.%d.ffn_up.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF }, \
    { .role = CV_ROLE_FFN_DOWN, .name = "blk.%d.ffn_down.weight", .ne0 = CV_DIM_FF, .ne1 = CV_DIM_EMBD },

#endif
