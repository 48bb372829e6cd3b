/* arch_qwen35moe.c — the `qwen35moe` architecture (Qwen3.5-35B-A3B,
 * Qwen3.5-122B-A10B, Qwen3.6-35B-A3B): qwen35's hybrid mixers (Gated
 * DeltaNet layers, every full_attention_interval-th layer gated full
 * attention; see arch_qwen35.c) with a mixture-of-experts FFN in every
 * layer, routed as qwen3moe's (softmax over every expert, the
 * expert_used_count most probable, their weights renormalised) plus a shared
 * expert every token runs: its SwiGLU output scaled by
 * sigmoid(ffn_gate_inp_shexp . x), a per-token scalar gate from an F32
 * vector. The shared expert's width is expert_shared_feed_forward_length;
 * feed_forward_length is the converter's copy of the dense width and is not
 * used. Spec: llama.cpp's LLM_ARCH_QWEN35MOE tensor list and
 * ../shared/testdata/reference2/README.md (qwen35moe). */
#include "model/arch_qwen35_mixers.h"
#include "model/model.h"

#define ATTN CV_WHEN_MIXER(CV_MIXER_ATTN)
#define DN CV_WHEN_MIXER(CV_MIXER_DELTANET)
#define MOE CV_WHEN_FFN(CV_FFN_MOE)

static const cv_arch_tensor tensors[] = {
    CV_QWEN35_MIXER_TENSORS
    CV_QWEN35_MOE_TENSORS
};

const cv_arch cv_arch_qwen35moe = {
    .name = "qwen35moe",
    .covers = "Qwen3.5-35B-A3B, Qwen3.5-122B-A10B, Qwen3.6-35B-A3B (hybrid mixture of experts)",
    .rope_style = CV_ROPE_NEOX,
    .default_rms_eps = 1e-6f,
    .default_rope_theta = 10000000.0f,
    .mixer = CV_MIXER_ATTN,
    .ffn = CV_FFN_MOE,
    .hybrid = true,
    .attn_gate = true,
    .expert_norm = true,
    .tensors = tensors,
    .n_tensors = (int)CV_ARRAY_LEN(tensors),
};
