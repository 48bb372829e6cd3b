/* arch_mistral3.c — the `mistral3` architecture (Ministral 3 3B/8B/14B,
 * Devstral Small 2 24B, Mistral Small 3.x as today's converter writes
 * them): the llama graph (RMSNorm, GQA, SwiGLU, RoPE on adjacent pairs)
 * with two additions read from the metadata. YaRN position scaling whose
 * `rope.scaling.yarn_log_multiplier` is HF's mscale_all_dim as is (not the
 * x0.1 deepseek2 stores), so cos and sin are scaled by
 * (1 + 0.1 ln f) / (1 + 0.1 mscale_all_dim ln f), 1 for the released
 * models; and the Llama-4 query temperature: after RoPE, the query at
 * position p is multiplied by 1 + `attention.temperature_scale` x
 * ln(floor(p / original_context_length) + 1). head_dim comes from
 * `attention.key_length` (Devstral Small 2: 128, not 5120 / 32). A file
 * written without those keys runs as plain llama. The output is separate
 * (Devstral) or tied (the small Ministral 3). Spec: llama.cpp's
 * LLM_ARCH_MISTRAL3, HF Ministral3Config, and
 * ../shared/testdata/reference3/README.md (mistral3). */
#include "model/arch_llama_tensors.h"
#include "model/model.h"

static const cv_arch_tensor tensors[] = {
    CV_LLAMA_TENSORS
    { .role = CV_ROLE_ATTN_OUT_BIAS, .name = "blk.%d.attn_output.bias", .ne0 = CV_DIM_EMBD, .need = CV_NEED_OPTIONAL },
};

const cv_arch cv_arch_mistral3 = {
    .name = "mistral3",
    .covers = "Ministral 3, Devstral Small 2, Mistral Small 3.x",
    .rope_style = CV_ROPE_NORM,
    .default_rms_eps = 1e-5f,
    .default_rope_theta = 1000000.0f,
    .yarn_log_mul = true,
    .tensors = tensors,
    .n_tensors = (int)CV_ARRAY_LEN(tensors),
};
