/* arch_qwen3next.c — the `qwen3next` architecture (Qwen3-Next-80B-A3B,
 * Qwen3-Coder-Next): qwen35moe's hybrid (three Gated DeltaNet layers to one
 * gated full-attention layer, a routed MoE with a sigmoid-gated shared
 * expert in every layer; arch_qwen35.c, arch_qwen35moe.c) with two
 * differences in how the DeltaNet layers' weights are laid out:
 *   - value heads are grouped by key head: value head j reads key head
 *     j / (H_v / H_k), as in the HF checkpoint (qwen35 files tile them:
 *     j mod H_k), in every value-head-indexed tensor (v and z rows, beta
 *     and alpha, ssm_a, ssm_dt, the conv's v channels, ssm_out's columns);
 *   - the input projections are fused per key-head group: `ssm_in` holds,
 *     group after group, q_g, k_g and the v and z rows of its value heads,
 *     and `ssm_ba` the group's betas then its alphas. Today's converter
 *     splits ssm_in into `attn_qkv` (all q, all k, all v) and `attn_gate`
 *     (all z), the qwen35 layout, and keeps ssm_ba fused; the loader takes
 *     either and regroups what is fused (model_load.c,
 *     bind_deltanet_grouped).
 * Attention uses plain NEOX RoPE on rope.dimension_count dims (no
 * sections). Routing renormalises the chosen experts' weights, as
 * llama.cpp hard-codes for this architecture. Norm weights are the
 * effective multipliers (the converter adds 1 to every norm but ssm_norm).
 * Spec: llama.cpp's LLM_ARCH_QWEN3NEXT tensor list and
 * ../shared/testdata/reference3/README.md (qwen3next). */
#include "model/arch_qwen35_mixers.h"
#include "model/model.h"

#define ATTN CV_WHEN_MIXER(CV_MIXER_ATTN)
#define DN CV_WHEN_MIXER(CV_MIXER_DELTANET)
#define MOE CV_WHEN_FFN(CV_FFN_MOE)

static const cv_arch_tensor tensors[] = {
    CV_QWEN35_ATTN_TENSORS
    /* the older files' fused projection, then today's split one */
    { .role = CV_ROLE_SSM_IN, .name = "blk.%d.ssm_in.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_IN,
      .need = CV_NEED_OPTIONAL, .when = DN },
    { .role = CV_ROLE_SSM_QKV, .name = "blk.%d.attn_qkv.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_CH,
      .need = CV_NEED_ALT, .fallback = CV_ROLE_SSM_IN, .when = DN },
    { .role = CV_ROLE_SSM_Z, .name = "blk.%d.attn_gate.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_INNER,
      .need = CV_NEED_ALT, .fallback = CV_ROLE_SSM_IN, .when = DN },
    { .role = CV_ROLE_SSM_BA, .name = "blk.%d.ssm_ba.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_BA, .when = DN },
    CV_QWEN35_DN_TENSORS
    CV_QWEN35_MOE_TENSORS
};

const cv_arch cv_arch_qwen3next = {
    .name = "qwen3next",
    .covers = "Qwen3-Next-80B-A3B, Qwen3-Coder-Next (hybrid mixture of experts)",
    .rope_style = CV_ROPE_NEOX,
    .default_rms_eps = 1e-6f,
    .default_rope_theta = 10000000.0f,
    .mixer = CV_MIXER_ATTN,
    .ffn = CV_FFN_MOE,
    .hybrid = true,
    .attn_gate = true,
    .ssm_grouped = true,
    .expert_norm = true,
    .tensors = tensors,
    .n_tensors = (int)CV_ARRAY_LEN(tensors),
};
