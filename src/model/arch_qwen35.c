/* arch_qwen35.c — the `qwen35` architecture (Qwen3.5 dense: 0.8B ... 27B,
 * Qwen3.6-27B), a hybrid: three of every four layers are Gated DeltaNet
 * (linear attention with a recurrent state, CV_MIXER_DELTANET), every
 * {arch}.full_attention_interval-th is gated full attention. Both kinds
 * share the residual block: attn_norm before the mixer, then
 * `post_attention_norm` before the SwiGLU FFN (it is the pre-FFN norm
 * despite its name, so it binds the FFN_NORM role).
 *
 * Full-attention layers: attn_q holds, per head, the query and then an
 * output gate (2 n_q rows); q and k get per-head RMSNorm, then NEOX RoPE on
 * the first rope.dimension_count (16 of 64 in the test files, 64 of 256 in
 * the real ones) dimensions. The file says IMROPE with
 * rope.dimension_sections; for text every token's position components are
 * equal, which makes it exactly NEOX, so the sections are not read. Each
 * head's output is multiplied by sigmoid(gate) before attn_output.
 *
 * DeltaNet layers: attn_qkv feeds a short causal conv (ssm_conv1d, F32 in
 * released files) whose SiLU output splits into L2-normalised q, k (key
 * heads) and v (value heads); attn_gate is the output gate z; ssm_beta and
 * ssm_alpha give the per-head write strength and decay, with ssm_dt.bias
 * and ssm_a (-exp(A_log), no `.weight` suffix); ssm_norm normalises each
 * value head's output and ssm_out projects it back. The recurrence is in
 * src/engine/mix_deltanet.c. Norm weights are stored as the effective
 * multiplier (the converter writes 1 + w for Qwen3.5's zero-centred norms).
 * Spec: llama.cpp's LLM_ARCH_QWEN35 tensor list and
 * ../shared/testdata/reference2/README.md (qwen35 section). */
#include "model/arch_qwen35_mixers.h"
#include "model/model.h"

#define ATTN CV_WHEN_MIXER(CV_MIXER_ATTN)
#define DN CV_WHEN_MIXER(CV_MIXER_DELTANET)

static const cv_arch_tensor tensors[] = {
    CV_QWEN35_MIXER_TENSORS
    /* the FFN, after post_attention_norm */
    { .role = CV_ROLE_FFN_NORM, .name = "blk.%d.post_attention_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_FFN_GATE, .name = "blk.%d.ffn_gate.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF },
    { .role = CV_ROLE_FFN_UP, .name = "blk.%d.ffn_up.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF },
    { .role = CV_ROLE_FFN_DOWN, .name = "blk.%d.ffn_down.weight", .ne0 = CV_DIM_FF, .ne1 = CV_DIM_EMBD },
};

const cv_arch cv_arch_qwen35 = {
    .name = "qwen35",
    .covers = "Qwen3.5 (0.8B-27B), Qwen3.6-27B (hybrid: Gated DeltaNet + gated attention)",
    .rope_style = CV_ROPE_NEOX,
    .default_rms_eps = 1e-6f,
    .default_rope_theta = 10000000.0f,
    .mixer = CV_MIXER_ATTN,
    .ffn = CV_FFN_DENSE,
    .hybrid = true,
    .attn_gate = true,
    .tensors = tensors,
    .n_tensors = (int)CV_ARRAY_LEN(tensors),
};
