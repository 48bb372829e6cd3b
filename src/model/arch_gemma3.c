/* arch_gemma3.c — the `gemma3` architecture (Google Gemma 3 1B, 4B, 12B,
 * 27B text models). Five local layers (sliding window
 * `attention.sliding_window`, 512 or 1024) to one global, RMSNorm before
 * and after both sub-blocks (`post_attention_norm` and `post_ffw_norm`
 * normalise the sub-block's output before the residual add), per-head Q/K
 * RMSNorm before NEOX RoPE, GeGLU with the tanh GELU, token embeddings
 * times sqrt(n_embd), queries scaled by 1/sqrt(head_dim) (27B: by
 * 1/sqrt(n_embd / n_head)). Local layers rotate with base
 * `rope.freq_base_swa` (10000 when absent) and no scaling; global ones with
 * `rope.freq_base` and the file's rope.scaling (linear x8 on 4B and up).
 * The output is tied to the embedding. Norm weights are stored as the
 * multipliers (the converter adds Gemma's +1), so they are used as they
 * are. No final logit soft-capping (Gemma 3 has none). Spec: llama.cpp's
 * LLM_ARCH_GEMMA3 tensor list, google/gemma-3-*-it config.json,
 * ../shared/testdata/reference2/README.md. */
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
    { .role = CV_ROLE_ATTN_POST_NORM, .name = "blk.%d.post_attention_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_FFN_NORM, .name = "blk.%d.ffn_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_FFN_GATE, .name = "blk.%d.ffn_gate.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF },
    { .role = CV_ROLE_FFN_UP, .name = "blk.%d.ffn_up.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF },
    { .role = CV_ROLE_FFN_DOWN, .name = "blk.%d.ffn_down.weight", .ne0 = CV_DIM_FF, .ne1 = CV_DIM_EMBD },
    { .role = CV_ROLE_FFN_POST_NORM, .name = "blk.%d.post_ffw_norm.weight", .ne0 = CV_DIM_EMBD },
};

const cv_arch cv_arch_gemma3 = {
    .name = "gemma3",
    .covers = "Gemma 3 (1B, 4B, 12B, 27B text)",
    .rope_style = CV_ROPE_NEOX,
    .default_rms_eps = 1e-6f,
    .default_rope_theta = 1000000.0f,
    .mixer = CV_MIXER_ATTN,
    .ffn = CV_FFN_DENSE,
    .glu = CV_GLU_GELU_TANH,
    .swa_period = 6,
    .default_rope_theta_swa = 10000.0f,
    .swa_rope_unscaled = true,
    .embd_scale_sqrt = true,
    .attn_scale_wide_at_layers = 62,
    .tensors = tensors,
    .n_tensors = (int)CV_ARRAY_LEN(tensors),
};
