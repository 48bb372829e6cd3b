/* synth.c — random-weight models with real architectures' shapes, for tests
 * and benchmarks (`corvid synth`). The tensor list comes from the same
 * descriptor the loader validates against, so a synthetic file is exactly
 * what the loader expects of that architecture. Weights are drawn row by
 * row from a xoshiro stream seeded by (seed, tensor, row), which makes the
 * file byte-identical for a seed whatever the thread count, and quantized
 * with the kernels' reference quantizers. Tensors are generated while the
 * file is written, one at a time, so a 30B-parameter shape needs memory
 * for its largest tensor only; with `fast`, an expert tensor draws 8
 * experts and repeats them, any other matrix its first 1024 rows (a
 * benchmark's bytes without hours of quantizing).
 *
 * Each matrix takes the type of the requested quantization mix
 * (quant_mix.c, llama-quantize's per-tensor rules). Weights: matrices N(0, 1/fan_in), the
 * embedding and the output N(0, 0.15^2), norms U(0.5, 1.5), biases
 * N(0, 0.3^2); a hybrid's tensors as testdata/reference2/README.md draws
 * them, so a synthetic hybrid's recurrence behaves like a real one:
 * attn_qkv and the shared expert's gate N(0, (1.5/sqrt(fan_in))^2),
 * ssm_a = -U(1, 16) (per-token decay exp(softplus(.) * a) in a useful range),
 * ssm_dt.bias = softplus^-1(dt) for dt log-uniform in [1e-3, 0.1], conv
 * taps N(0, 0.5^2), the shared expert's gate vector N(0, (2/sqrt(n_embd))^2). */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/synth.h"

/* ---- shapes ---- */

/* From each model's published config.json. */
const cv_model_shape cv_model_shapes[] = {
    /* The smallest shape whose rows fit every K-quant block (256); its
     * expert fields make it a tiny MoE under an MoE architecture, its
     * window a 32-position one under a sliding-window one. */
    { .name = "tiny", .arch = "llama", .n_vocab = 2048, .n_embd = 256, .n_layer = 2, .n_head = 8, .n_head_kv = 4,
      .head_dim = 32, .n_ff = 512, .n_ctx = 2048, .rope_theta = 10000.0f, .rms_eps = 1e-5f,
      .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 256, .n_ff_shexp = 256, .n_swa = 32,
      /* Under a hybrid architecture: layer 0 Gated DeltaNet (4 key, 8 value
       * heads of 32: 512 conv channels, rows of 256), layer 1 attends. */
      .ssm_conv = 4, .ssm_state = 32, .ssm_group = 4, .ssm_heads = 8, .full_attn_interval = 2,
      /* Under deepseek2: latent attention (q_lora 64, a 64 + 16 latent row,
       * heads of 32 + 16 / 32), layer 0 dense, layer 1 routed as
       * DeepSeek-V3 (sigmoid with a selection bias, 4 groups of 2 experts,
       * 2 kept, weights renormalised; the scale is left at 1, which
       * testdata/reference3's x2.5 checks) with one shared expert. */
      .n_lora_q = 64, .n_lora_kv = 64, .mla_nope = 32, .mla_rope = 16, .mla_v = 32, .n_dense_lead = 1,
      .n_expert_group = 4, .n_group_used = 2, .sigmoid_routing = true, .expert_norm = true,
      .expert_weights_scale = 1.0f },
    { .name = "qwen2.5-0.5b", .arch = "qwen2", .n_vocab = 151936, .n_embd = 896, .n_layer = 24, .n_head = 14,
      .n_head_kv = 2, .head_dim = 64, .n_ff = 4864, .n_ctx = 32768, .rope_theta = 1000000.0f, .rms_eps = 1e-6f,
      .tied = true },
    { .name = "qwen3-0.6b", .arch = "qwen3", .n_vocab = 151936, .n_embd = 1024, .n_layer = 28, .n_head = 16,
      .n_head_kv = 8, .head_dim = 128, .n_ff = 3072, .n_ctx = 40960, .rope_theta = 1000000.0f, .rms_eps = 1e-6f,
      .tied = true },
    { .name = "llama3.2-1b", .arch = "llama", .n_vocab = 128256, .n_embd = 2048, .n_layer = 16, .n_head = 32,
      .n_head_kv = 8, .head_dim = 64, .n_ff = 8192, .n_ctx = 131072, .rope_theta = 500000.0f, .rms_eps = 1e-5f,
      .tied = true, .rope_scaling = CV_ROPE_SCALING_LLAMA3, .rope_factor = 32, .rope_low_freq = 1,
      .rope_high_freq = 4, .rope_orig_ctx = 8192 },
    /* meta-llama/Llama-3.1-8B-Instruct config.json: 32 layers of 4096, 32
     * heads (8 kv) of 128, FFN 14336, vocabulary 128256, untied, base 5e5
     * with llama3 scaling x8 (1 / 4) from 8192, context 131072. */
    { .name = "llama3.1-8b", .arch = "llama", .n_vocab = 128256, .n_embd = 4096, .n_layer = 32, .n_head = 32,
      .n_head_kv = 8, .head_dim = 128, .n_ff = 14336, .n_ctx = 131072, .rope_theta = 500000.0f, .rms_eps = 1e-5f,
      .rope_scaling = CV_ROPE_SCALING_LLAMA3, .rope_factor = 8, .rope_low_freq = 1, .rope_high_freq = 4,
      .rope_orig_ctx = 8192 },
    /* Qwen3-30B-A3B and Qwen3-Coder-30B-A3B-Instruct: the same tensors;
     * the coder's context is 256k. */
    { .name = "qwen3-30b-a3b", .arch = "qwen3moe", .n_vocab = 151936, .n_embd = 2048, .n_layer = 48, .n_head = 32,
      .n_head_kv = 4, .head_dim = 128, .n_ff = 6144, .n_ctx = 40960, .rope_theta = 1000000.0f, .rms_eps = 1e-6f,
      .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 768 },
    { .name = "qwen3-coder-30b-a3b", .arch = "qwen3moe", .n_vocab = 151936, .n_embd = 2048, .n_layer = 48,
      .n_head = 32, .n_head_kv = 4, .head_dim = 128, .n_ff = 6144, .n_ctx = 262144, .rope_theta = 10000000.0f,
      .rms_eps = 1e-6f, .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 768 },
    /* openai/gpt-oss-20b config.json: 24 layers alternating a 128-token
     * window with full attention, 64 heads (8 kv) of 64, 32 experts of 2880
     * (4 per token), YaRN x32 from 4096, base 150000, untied. */
    { .name = "gpt-oss-20b", .arch = "gpt-oss", .n_vocab = 201088, .n_embd = 2880, .n_layer = 24, .n_head = 64,
      .n_head_kv = 8, .head_dim = 64, .n_ff = 2880, .n_ctx = 131072, .rope_theta = 150000.0f, .rms_eps = 1e-5f,
      .rope_scaling = CV_ROPE_SCALING_YARN, .rope_factor = 32, .rope_orig_ctx = 4096, .n_expert = 32,
      .n_expert_used = 4, .n_ff_exp = 2880, .n_swa = 128 },
    /* google/gemma-3-4b-it and -12b-it config.json (text_config): five
     * 1024-token window layers to one global, head_dim 256, local base
     * 10000, global base 1e6 with linear x8, tied. The vocabulary is the
     * tokenizer's 262144 that GGUF files carry (config.json's 262208 adds
     * image soft tokens). */
    { .name = "gemma3-4b", .arch = "gemma3", .n_vocab = 262144, .n_embd = 2560, .n_layer = 34, .n_head = 8,
      .n_head_kv = 4, .head_dim = 256, .n_ff = 10240, .n_ctx = 131072, .rope_theta = 1000000.0f, .rms_eps = 1e-6f,
      .tied = true, .rope_scaling = CV_ROPE_SCALING_LINEAR, .rope_factor = 8, .n_swa = 1024,
      .rope_theta_swa = 10000.0f },
    { .name = "gemma3-12b", .arch = "gemma3", .n_vocab = 262144, .n_embd = 3840, .n_layer = 48, .n_head = 16,
      .n_head_kv = 8, .head_dim = 256, .n_ff = 15360, .n_ctx = 131072, .rope_theta = 1000000.0f, .rms_eps = 1e-6f,
      .tied = true, .rope_scaling = CV_ROPE_SCALING_LINEAR, .rope_factor = 8, .n_swa = 1024,
      .rope_theta_swa = 10000.0f },
    /* Qwen3.5 and Qwen3.6: no config.json was reachable; the sizes are
     * the model cards' (hidden, layers, the 3:1 layout, DeltaNet heads
     * 32 V / 16 QK of 128, attention heads and their size, RoPE on 64
     * dims, FFN width, vocabulary 248320, context 262144), with RoPE base
     * 1e7 and the tensor shapes checked against a Qwen3.5-4B GGUF's
     * listing. Tied output on the dense ones, untied on the MoE one. */
    { .name = "qwen3.5-4b", .arch = "qwen35", .n_vocab = 248320, .n_embd = 2560, .n_layer = 32, .n_head = 16,
      .n_head_kv = 4, .head_dim = 256, .n_ff = 9216, .n_ctx = 262144, .rope_theta = 10000000.0f, .rms_eps = 1e-6f,
      .tied = true, .n_rot = 64, .ssm_conv = 4, .ssm_state = 128, .ssm_group = 16, .ssm_heads = 32,
      .full_attn_interval = 4 },
    { .name = "qwen3.5-9b", .arch = "qwen35", .n_vocab = 248320, .n_embd = 4096, .n_layer = 32, .n_head = 16,
      .n_head_kv = 4, .head_dim = 256, .n_ff = 12288, .n_ctx = 262144, .rope_theta = 10000000.0f, .rms_eps = 1e-6f,
      .tied = true, .n_rot = 64, .ssm_conv = 4, .ssm_state = 128, .ssm_group = 16, .ssm_heads = 32,
      .full_attn_interval = 4 },
    { .name = "qwen3.6-35b-a3b", .arch = "qwen35moe", .n_vocab = 248320, .n_embd = 2048, .n_layer = 40, .n_head = 16,
      .n_head_kv = 2, .head_dim = 256, .n_ff = 0, .n_ctx = 262144, .rope_theta = 10000000.0f, .rms_eps = 1e-6f,
      .n_expert = 256, .n_expert_used = 8, .n_ff_exp = 512, .n_ff_shexp = 512, .n_rot = 64, .ssm_conv = 4,
      .ssm_state = 128, .ssm_group = 16, .ssm_heads = 32, .full_attn_interval = 4 },
    /* google/gemma-4-26B-A4B-it config.json (text_config): 30 layers of
     * 2816, five 1024-token window layers to one full (layer_types), 16
     * heads: window 8 kv of 256, full 2 kv of 512 with K = V
     * (attention_k_eq_v) and proportional RoPE on a quarter of the dims
     * (partial_rotary_factor 0.25, base 1e6; window base 1e4); every layer a
     * dense GeGLU FFN of 2112 beside 128 experts of 704 (8 per token);
     * vocabulary 262144, tied, context 262144, logits soft-capped at 30. */
    { .name = "gemma4-26b-a4b", .arch = "gemma4", .n_vocab = 262144, .n_embd = 2816, .n_layer = 30, .n_head = 16,
      .n_head_kv = 2, .head_dim = 512, .n_ff = 2112, .n_ctx = 262144, .rope_theta = 1000000.0f, .rms_eps = 1e-6f,
      .tied = true, .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 704, .n_swa = 1024, .rope_theta_swa = 10000.0f,
      .swa_period = 6, .head_dim_swa = 256, .n_head_kv_swa = 8, .rope_pairs_kept = 64, .k_eq_v = true,
      .logit_softcap = 30 },
    /* google/gemma-4-E4B-it config.json (text_config): 42 layers of 2560,
     * five 512-token window layers to one full, 8 heads (2 kv) of 256 in
     * window layers and 512 in full ones, FFN 10240 (no double-wide MLP),
     * per-layer inputs of 256, the last 18 layers reading the K/V of layers
     * 22 (window) and 23 (full), vocabulary 262144, tied, context 131072. */
    { .name = "gemma4-e4b", .arch = "gemma4", .n_vocab = 262144, .n_embd = 2560, .n_layer = 42, .n_head = 8,
      .n_head_kv = 2, .head_dim = 512, .n_ff = 10240, .n_ctx = 131072, .rope_theta = 1000000.0f, .rms_eps = 1e-6f,
      .tied = true, .n_swa = 512, .rope_theta_swa = 10000.0f, .swa_period = 6, .head_dim_swa = 256,
      .n_head_kv_swa = 2, .rope_pairs_kept = 64, .n_kv_shared = 18, .n_pl = 256, .logit_softcap = 30 },
    /* google/gemma-4-31B-it config.json (text_config): 60 layers of 5376,
     * five 1024-token window layers to one full, 32 heads: window 16 kv of
     * 256, full 4 kv of 512 with K = V; FFN 21504; vocabulary 262144, tied,
     * context 262144. */
    { .name = "gemma4-31b", .arch = "gemma4", .n_vocab = 262144, .n_embd = 5376, .n_layer = 60, .n_head = 32,
      .n_head_kv = 4, .head_dim = 512, .n_ff = 21504, .n_ctx = 262144, .rope_theta = 1000000.0f, .rms_eps = 1e-6f,
      .tied = true, .n_swa = 1024, .rope_theta_swa = 10000.0f, .swa_period = 6, .head_dim_swa = 256,
      .n_head_kv_swa = 16, .rope_pairs_kept = 64, .k_eq_v = true, .logit_softcap = 30 },
    /* Gemma 4's layouts in the tiny size, as testdata/reference3 has them:
     * window layers (32 positions, 2 kv heads of 32) two to one full (1 kv
     * head of 64, K = V, 8 of 32 pairs rotating); the E2B/E4B one with
     * per-layer inputs (32) and its last three layers reading the K/V of
     * layers 1 and 2 through a double-wide FFN; the 26B-A4B one with 8
     * experts (2 used) beside each dense FFN. Untied: a random tied output
     * would see mostly the sqrt(n_embd)-scaled input embedding in the
     * stream and predict the input token, every time. */
    { .name = "tiny-gemma4", .arch = "gemma4", .n_vocab = 2048, .n_embd = 256, .n_layer = 6, .n_head = 4,
      .n_head_kv = 1, .head_dim = 64, .n_ff = 256, .n_ctx = 2048, .rope_theta = 1000000.0f, .rms_eps = 1e-6f,
      .n_swa = 32, .rope_theta_swa = 10000.0f, .swa_period = 3, .head_dim_swa = 32, .n_head_kv_swa = 2,
      .rope_pairs_kept = 8, .n_kv_shared = 3, .n_pl = 32, .k_eq_v = true, .ff_double_shared = true,
      .logit_softcap = 30 },
    { .name = "tiny-gemma4moe", .arch = "gemma4", .n_vocab = 2048, .n_embd = 256, .n_layer = 3, .n_head = 4,
      .n_head_kv = 1, .head_dim = 64, .n_ff = 256, .n_ctx = 2048, .rope_theta = 1000000.0f, .rms_eps = 1e-6f,
      .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 256, .n_swa = 32, .rope_theta_swa = 10000.0f,
      .swa_period = 3, .head_dim_swa = 32, .n_head_kv_swa = 2, .rope_pairs_kept = 8, .k_eq_v = true,
      .logit_softcap = 30 },
    /* The tiny shape with mistral3's position handling, as
     * testdata/reference3's mistral3 file has it: YaRN x16 from 64 positions
     * (mscale_all_dim 1) and a query temperature of 0.1, so a few hundred
     * positions cross its steps. */
    { .name = "tiny-mistral3", .arch = "mistral3", .n_vocab = 2048, .n_embd = 256, .n_layer = 2, .n_head = 8,
      .n_head_kv = 4, .head_dim = 32, .n_ff = 512, .n_ctx = 2048, .rope_theta = 1000000.0f, .rms_eps = 1e-5f,
      .rope_scaling = CV_ROPE_SCALING_YARN, .rope_factor = 16, .rope_orig_ctx = 64, .yarn_log_mul = 1,
      .attn_temp_scale = 0.1f },
    /* mistralai/Devstral-Small-2-24B-Instruct-2512 config.json (text_config,
     * model_type ministral3): 40 layers of 5120, 32 heads (8 kv) of 128, FFN
     * 32768, vocabulary 131072, untied; rope_parameters: base 1e8, YaRN x48
     * from 8192 (beta 32 / 1, mscale and mscale_all_dim 1), and
     * llama_4_scaling_beta 0.1 (the query temperature); context 393216. */
    { .name = "devstral-small-2-24b", .arch = "mistral3", .n_vocab = 131072, .n_embd = 5120, .n_layer = 40,
      .n_head = 32, .n_head_kv = 8, .head_dim = 128, .n_ff = 32768, .n_ctx = 393216, .rope_theta = 100000000.0f,
      .rms_eps = 1e-5f, .rope_scaling = CV_ROPE_SCALING_YARN, .rope_factor = 48, .rope_orig_ctx = 8192,
      .yarn_log_mul = 1, .attn_temp_scale = 0.1f },
    /* Qwen3-Coder-Next (80B-A3B): the model card's sizes (48 layers of 2048,
     * 3:1 DeltaNet 32 V / 16 QK heads of 128 to attention 16 (2 kv) of 256
     * with RoPE on 64, 512 experts of 512, 10 used, one shared, 262144
     * context), vocabulary, base 5e6 and untied output from the
     * config.json of its published derivatives (mlx-community's
     * Qwen3-Coder-Next-nvfp4, QuantTrio's Qwen3-Coder-Next-E336). */
    { .name = "qwen3-coder-next", .arch = "qwen3next", .n_vocab = 151936, .n_embd = 2048, .n_layer = 48, .n_head = 16,
      .n_head_kv = 2, .head_dim = 256, .n_ff = 0, .n_ctx = 262144, .rope_theta = 5000000.0f, .rms_eps = 1e-6f,
      .n_expert = 512, .n_expert_used = 10, .n_ff_exp = 512, .n_ff_shexp = 512, .n_rot = 64, .ssm_conv = 4,
      .ssm_state = 128, .ssm_group = 16, .ssm_heads = 32, .full_attn_interval = 4 },
    /* GLM-4.7-Flash (30B-A3B, HF Glm4MoeLiteForCausalLM, a deepseek2 file):
     * 47 layers of 2048, 20 heads of 192 + 64 / 256 over a 512 + 64 latent,
     * q_lora 768, layer 0 dense (10240), then 64 experts of 1536 (4 used,
     * sigmoid with a selection bias, one group, renormalised, x1.8) and one
     * shared, base 1e6 without YaRN, 202752 context, untied; from a
     * glm4_moe_lite config.json with these sizes and the model card. */
    { .name = "glm-4.7-flash", .arch = "deepseek2", .n_vocab = 154880, .n_embd = 2048, .n_layer = 47, .n_head = 20,
      .n_head_kv = 1, .head_dim = 256, .n_ff = 10240, .n_ctx = 202752, .rope_theta = 1000000.0f, .rms_eps = 1e-5f,
      .n_expert = 64, .n_expert_used = 4, .n_ff_exp = 1536, .n_ff_shexp = 1536, .n_lora_q = 768, .n_lora_kv = 512,
      .mla_nope = 192, .mla_rope = 64, .mla_v = 256, .n_dense_lead = 1, .sigmoid_routing = true, .expert_norm = true,
      .expert_weights_scale = 1.8f },
    /* Kimi-K2 (1T-A32B), for its size arithmetic (`synth --plan`): 61 layers
     * of 7168, 64 heads of 128 + 64 / 128 over a 512 + 64 latent, q_lora
     * 1536, layer 0 dense (18432), 384 experts of 2048 (8 used, sigmoid, one
     * group, renormalised, x2.827), one shared, base 50000 with YaRN x32
     * from 4096 (mscale_all_dim 1), vocabulary 163840; NVIDIA Megatron
     * Bridge's KimiK2Provider and DeepSeek-V3's MLA sizes. */
    { .name = "kimi-k2", .arch = "deepseek2", .n_vocab = 163840, .n_embd = 7168, .n_layer = 61, .n_head = 64,
      .n_head_kv = 1, .head_dim = 192, .n_ff = 18432, .n_ctx = 131072, .rope_theta = 50000.0f, .rms_eps = 1e-6f,
      .rope_scaling = CV_ROPE_SCALING_YARN, .rope_factor = 32, .rope_orig_ctx = 4096, .yarn_log_mul = 1,
      .n_expert = 384, .n_expert_used = 8, .n_ff_exp = 2048, .n_ff_shexp = 2048, .n_lora_q = 1536, .n_lora_kv = 512,
      .mla_nope = 128, .mla_rope = 64, .mla_v = 128, .n_dense_lead = 1, .sigmoid_routing = true, .expert_norm = true,
      .expert_weights_scale = 2.827f },
    /* deepseek-ai/DeepSeek-V2-Lite config.json: 27 layers of 2048, 16 heads
     * of 128 + 64 / 128 over a 512 + 64 latent without q_lora, layer 0 dense
     * (10944), 64 experts of 1408 (6 used, softmax, not renormalised) and
     * two shared, YaRN x40 from 4096 with mscale_all_dim 0.707, base 10000,
     * 163840 context, vocabulary 102400, untied. */
    { .name = "deepseek-v2-lite", .arch = "deepseek2", .n_vocab = 102400, .n_embd = 2048, .n_layer = 27, .n_head = 16,
      .n_head_kv = 1, .head_dim = 192, .n_ff = 10944, .n_ctx = 163840, .rope_theta = 10000.0f, .rms_eps = 1e-6f,
      .rope_scaling = CV_ROPE_SCALING_YARN, .rope_factor = 40, .rope_orig_ctx = 4096, .yarn_log_mul = 0.707f,
      .n_expert = 64, .n_expert_used = 6, .n_ff_exp = 1408, .n_ff_shexp = 2816, .n_lora_kv = 512, .mla_nope = 128,
      .mla_rope = 64, .mla_v = 128, .n_dense_lead = 1, .expert_weights_scale = 1.0f },
};
const int cv_n_model_shapes = (int)CV_ARRAY_LEN(cv_model_shapes);

const cv_model_shape *cv_model_shape_find(const char *name)
{
    for (int i = 0; i < cv_n_model_shapes; i++)
        if (!strcmp(cv_model_shapes[i].name, name))
            return &cv_model_shapes[i];
    return NULL;
}

/* ---- generation ---- */

#define FAST_EXPERTS 8
#define FAST_ROWS 1024

typedef enum { DIST_NORMAL, DIST_UNIFORM_NORM, DIST_ROPE, DIST_SSM_A, DIST_SSM_DT } dist;

typedef struct gen_job {
    uint32_t type;
    int64_t n_in, n_rows;
    size_t row_bytes;
    char *data;
    dist how;
    float std;
    uint64_t seed;
    const cv_model_shape *shape;
    cv_pool *pool;
    int64_t bank;        /* rows drawn and quantized; row r >= bank copies row r % bank */
} gen_job;

static void gen_rows(void *ctx, int ith, int nth)
{
    gen_job *j = ctx;
    int64_t r0, r1;
    cv_split_range(j->bank, ith, nth, 1, &r0, &r1);
    float *row = cv_xmalloc((size_t)j->n_in * sizeof *row);
    for (int64_t r = r0; r < r1; r++) {
        cv_rng rng;
        cv_rng_seed(&rng, j->seed ^ ((uint64_t)(r + 1) * 0xD1B54A32D192ED03ull));
        if (j->how == DIST_ROPE && j->shape->rope_pairs_kept > 0) {
            /* proportional RoPE (gemma4): the first pairs rotate, the others
             * are divided by 1e30, as the converter writes them */
            for (int64_t i = 0; i < j->n_in; i++)
                row[i] = i < j->shape->rope_pairs_kept ? 1.0f : 1e30f;
        } else if (j->how == DIST_ROPE) {
            const cv_model_shape *s = j->shape;
            cv_rope_llama3_factors(row, (int32_t)(2 * j->n_in), s->rope_theta, s->rope_factor, s->rope_low_freq,
                                   s->rope_high_freq, s->rope_orig_ctx);
        } else {
            for (int64_t i = 0; i < j->n_in; i++) {
                switch (j->how) {
                case DIST_UNIFORM_NORM: row[i] = (0.5f + cv_rng_f32(&rng)) * j->std; break;
                case DIST_SSM_A: row[i] = -(1.0f + 15.0f * cv_rng_f32(&rng)); break;
                case DIST_SSM_DT: {
                    /* dt = e^U(ln 1e-3, ln 0.1); the bias is softplus^-1(dt) = ln(e^dt - 1) */
                    const double dt = exp(log(1e-3) + (log(0.1) - log(1e-3)) * cv_rng_f32(&rng));
                    row[i] = (float)log(expm1(dt));
                    break;
                }
                default: row[i] = cv_rng_normal(&rng) * j->std; break;
                }
            }
        }
        int rc = cv_quantize_row(j->type, row, j->data + (size_t)r * j->row_bytes, j->n_in, NULL);
        assert(rc == 0);
        (void)rc;
    }
    free(row);
}

/* The writer's fill function: a tensor's rows, generated on the pool. */
static void gen_tensor(void *ctx, void *dst, size_t n_bytes)
{
    gen_job *j = ctx;
    assert(n_bytes == j->row_bytes * (size_t)j->n_rows);
    (void)n_bytes;
    j->data = dst;
    cv_pool_run(j->pool, gen_rows, j);
    for (int64_t r = j->bank; r < j->n_rows; r++)
        memcpy(j->data + (size_t)r * j->row_bytes, j->data + (size_t)(r % j->bank) * j->row_bytes, j->row_bytes);
}

/* What a synthetic layer is: its kinds, whether it is a window layer,
 * keeps its own K/V and has a V projection, and its sizes (gemma4's vary
 * by layer; the shape's otherwise). */
typedef struct synth_layer {
    cv_mixer_kind mixer;
    cv_ffn_kind ffn;
    bool local, own_kv, has_v;
    int32_t head_dim, n_head_kv, n_ff;
} synth_layer;

static synth_layer layer_of(const cv_arch *a, const cv_model_shape *s, int il)
{
    synth_layer l = { .mixer = a->hybrid ? cv_hybrid_layer_mixer(il, s->full_attn_interval) : a->mixer,
                      .ffn = a->moe_by_router && s->n_expert > 0 ? CV_FFN_MOE : a->ffn };
    if (a->mixer == CV_MIXER_MLA && il < s->n_dense_lead) /* deepseek2's leading dense layers */
        l.ffn = CV_FFN_DENSE;
    const int32_t p = s->swa_period > 0 ? s->swa_period : a->swa_period;
    l.local = p > 0 && il % p < p - 1;
    l.own_kv = il < s->n_layer - s->n_kv_shared;
    l.has_v = l.own_kv && !(s->k_eq_v && !l.local);
    l.head_dim = l.local && s->head_dim_swa ? s->head_dim_swa : s->head_dim;
    l.n_head_kv = l.local && s->n_head_kv_swa ? s->n_head_kv_swa : s->n_head_kv;
    l.n_ff = s->ff_double_shared && !l.own_kv ? 2 * s->n_ff : s->n_ff;
    return l;
}

static bool alt_wanted(const cv_arch *a, cv_role role, const cv_model_shape *s, int32_t n_vocab);

/* Whether synth writes an optional descriptor row: the rope factors llama3
 * scaling or proportional RoPE has, a sigmoid router's selection bias, the
 * other layout an ALT row names when the shape has no size for that row (a
 * plain attn_q without q_lora), the per-layer inputs a shape with them has,
 * gemma4's K/V of the layers that compute it and its output scales; no
 * optional bias, and experts' gate and up fused where they may be. */
static bool optional_written(const cv_arch *a, const cv_model_shape *s, cv_role role, const synth_layer *l,
                             int32_t n_vocab)
{
    if (alt_wanted(a, role, s, n_vocab))
        return true;
    switch (role) {
    case CV_ROLE_FFN_EXP_PROBS_B: return s->sigmoid_routing;
    case CV_ROLE_ROPE_FREQS: return s->rope_scaling == CV_ROPE_SCALING_LLAMA3 || s->rope_pairs_kept > 0;
    case CV_ROLE_PL_TOKEN_EMBD: case CV_ROLE_PL_MODEL_PROJ: case CV_ROLE_PL_PROJ_NORM: case CV_ROLE_PL_GATE:
    case CV_ROLE_PL_PROJ: case CV_ROLE_PL_POST_NORM:
        return s->n_pl > 0;
    case CV_ROLE_ATTN_K: case CV_ROLE_ATTN_K_NORM: return l && l->own_kv;
    case CV_ROLE_ATTN_V: return l && l->has_v;
    case CV_ROLE_OUT_SCALE: case CV_ROLE_FFN_GATE_UP_EXPS: return true;
    default: return false;
    }
}

/* A dimension's size in layer l (NULL: a global tensor). */
static int64_t dim_of(const cv_model_shape *s, const synth_layer *l, cv_dim d, int32_t n_vocab)
{
    const int64_t hd = l ? l->head_dim : s->head_dim;
    switch (d) {
    case CV_DIM_ONE: return 1;
    case CV_DIM_EMBD: return s->n_embd;
    case CV_DIM_VOCAB: return n_vocab;
    case CV_DIM_Q: return s->n_head * hd;
    case CV_DIM_KV: return (l ? l->n_head_kv : s->n_head_kv) * hd;
    case CV_DIM_FF: return l ? l->n_ff : s->n_ff;
    case CV_DIM_HEAD: return hd;
    case CV_DIM_HEADS: return s->n_head;
    case CV_DIM_ROT_HALF: return s->head_dim / 2;
    case CV_DIM_EXPERT: return s->n_expert;
    case CV_DIM_FF_EXP: return s->n_ff_exp;
    case CV_DIM_FF_EXP2: return 2 * (int64_t)s->n_ff_exp;
    case CV_DIM_Q_GATED: return 2 * s->n_head * hd;
    case CV_DIM_FF_SHEXP: return s->n_ff_shexp;
    case CV_DIM_SSM_CONV: return s->ssm_conv;
    case CV_DIM_SSM_CH: return 2 * (int64_t)s->ssm_group * s->ssm_state + (int64_t)s->ssm_heads * s->ssm_state;
    case CV_DIM_SSM_INNER: return (int64_t)s->ssm_heads * s->ssm_state;
    case CV_DIM_SSM_HEADS: return s->ssm_heads;
    case CV_DIM_SSM_STATE: return s->ssm_state;
    case CV_DIM_SSM_IN: return 2 * (int64_t)s->ssm_group * s->ssm_state + 2 * (int64_t)s->ssm_heads * s->ssm_state;
    case CV_DIM_SSM_BA: return 2 * (int64_t)s->ssm_heads;
    case CV_DIM_Q_LORA: return s->n_lora_q;
    case CV_DIM_KV_LORA: return s->n_lora_kv;
    case CV_DIM_KV_A: return (int64_t)s->n_lora_kv + s->mla_rope;
    case CV_DIM_Q_MLA: return (int64_t)s->n_head * (s->mla_nope + s->mla_rope);
    case CV_DIM_NOPE: return s->mla_nope;
    case CV_DIM_V_MLA: return s->mla_v;
    case CV_DIM_O_MLA: return (int64_t)s->n_head * s->mla_v;
    case CV_DIM_PL: return s->n_pl;
    case CV_DIM_PL_ALL: return (int64_t)s->n_layer * s->n_pl;
    }
    return 1;
}

/* Whether some ALT row naming `role` as its other layout has no size in
 * this shape, so that role's tensor is written instead. */
static bool alt_wanted(const cv_arch *a, cv_role role, const cv_model_shape *s, int32_t n_vocab)
{
    for (int i = 0; i < a->n_tensors; i++) {
        const cv_arch_tensor *d = &a->tensors[i];
        if (d->need == CV_NEED_ALT && d->fallback == role &&
            dim_of(s, NULL, d->ne0, n_vocab) * dim_of(s, NULL, d->ne1, n_vocab) == 0)
            return true;
    }
    return false;
}

static bool has_role(const cv_arch *a, cv_role role)
{
    for (int i = 0; i < a->n_tensors; i++)
        if (a->tensors[i].role == role)
            return true;
    return false;
}

static void set_hparams(cv_gguf_writer *w, const cv_arch *a, const cv_model_shape *s)
{
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a->name), key)
    cv_gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)s->n_ctx);
    cv_gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)s->n_embd);
    cv_gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)s->n_layer);
    cv_gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)s->n_head);
    const bool mla = a->mixer == CV_MIXER_MLA;
    /* gemma4's sizes per layer: one value each where they vary */
    int32_t *kv = cv_xmalloc((size_t)s->n_layer * sizeof *kv), *ff = cv_xmalloc((size_t)s->n_layer * sizeof *ff);
    uint8_t *local = cv_xmalloc((size_t)s->n_layer);
    bool kv_vary = false, ff_vary = false;
    for (int il = 0; il < s->n_layer; il++) {
        const synth_layer l = layer_of(a, s, il);
        kv[il] = l.n_head_kv, ff[il] = l.n_ff, local[il] = l.local;
        kv_vary |= kv[il] != kv[0], ff_vary |= ff[il] != ff[0];
    }
    if (ff_vary)
        cv_gguf_writer_set_arr(w, KEY("feed_forward_length"), CV_GGUF_INT32, (uint64_t)s->n_layer, ff);
    else
        cv_gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)s->n_ff);
    /* MLA is stored as one KV head whose key is the latent row and whose
     * value is its latent part (arch_deepseek2.c) */
    if (kv_vary)
        cv_gguf_writer_set_arr(w, KEY("attention.head_count_kv"), CV_GGUF_INT32, (uint64_t)s->n_layer, kv);
    else
        cv_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), mla ? 1 : (uint32_t)s->n_head_kv);
    if (s->swa_period > 0)
        cv_gguf_writer_set_arr(w, KEY("attention.sliding_window_pattern"), CV_GGUF_BOOL, (uint64_t)s->n_layer, local);
    free(kv);
    free(ff);
    free(local);
    if (mla) {
        cv_gguf_writer_set_u32(w, KEY("attention.q_lora_rank"), (uint32_t)s->n_lora_q);
        cv_gguf_writer_set_u32(w, KEY("attention.kv_lora_rank"), (uint32_t)s->n_lora_kv);
        cv_gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)(s->n_lora_kv + s->mla_rope));
        cv_gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)s->n_lora_kv);
        cv_gguf_writer_set_u32(w, KEY("attention.key_length_mla"), (uint32_t)(s->mla_nope + s->mla_rope));
        cv_gguf_writer_set_u32(w, KEY("attention.value_length_mla"), (uint32_t)s->mla_v);
        cv_gguf_writer_set_u32(w, KEY("leading_dense_block_count"), (uint32_t)s->n_dense_lead);
        cv_gguf_writer_set_u32(w, KEY("expert_shared_count"), (uint32_t)(s->n_ff_shexp / s->n_ff_exp));
        cv_gguf_writer_set_f32(w, KEY("expert_weights_scale"), s->expert_weights_scale);
        cv_gguf_writer_set_bool(w, KEY("expert_weights_norm"), s->expert_norm);
        cv_gguf_writer_set_u32(w, KEY("expert_gating_func"), s->sigmoid_routing ? 2 : 1);
        if (s->n_expert_group > 1) {
            cv_gguf_writer_set_u32(w, KEY("expert_group_count"), (uint32_t)s->n_expert_group);
            cv_gguf_writer_set_u32(w, KEY("expert_group_used_count"), (uint32_t)s->n_group_used);
        }
        if (s->rope_scaling == CV_ROPE_SCALING_YARN)
            cv_gguf_writer_set_f32(w, KEY("rope.scaling.yarn_log_multiplier"), 0.1f * s->yarn_log_mul);
    } else if (s->head_dim * s->n_head != s->n_embd || a == &cv_arch_qwen3 || a == &cv_arch_qwen3moe || a->hybrid ||
               s->head_dim_swa) {
        cv_gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)s->head_dim);
        cv_gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)s->head_dim);
    }
    if (s->head_dim_swa) {
        cv_gguf_writer_set_u32(w, KEY("attention.key_length_swa"), (uint32_t)s->head_dim_swa);
        cv_gguf_writer_set_u32(w, KEY("attention.value_length_swa"), (uint32_t)s->head_dim_swa);
        cv_gguf_writer_set_u32(w, KEY("rope.dimension_count_swa"), (uint32_t)s->head_dim_swa);
    }
    /* gemma4's keys (llama.cpp requires the per-layer input width, 0 or not) */
    if (has_role(a, CV_ROLE_PL_TOKEN_EMBD)) {
        cv_gguf_writer_set_u32(w, KEY("attention.shared_kv_layers"), (uint32_t)s->n_kv_shared);
        cv_gguf_writer_set_u32(w, KEY("embedding_length_per_layer_input"), (uint32_t)s->n_pl);
    }
    if (s->logit_softcap > 0)
        cv_gguf_writer_set_f32(w, KEY("final_logit_softcapping"), s->logit_softcap);
    const int32_t n_rot = mla ? s->mla_rope : s->n_rot ? s->n_rot : s->head_dim;
    cv_gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)n_rot);
    cv_gguf_writer_set_f32(w, KEY("rope.freq_base"), s->rope_theta);
    cv_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), s->rms_eps);
    if (a->ffn == CV_FFN_MOE || (a->moe_by_router && s->n_expert > 0)) {
        cv_gguf_writer_set_u32(w, KEY("expert_count"), (uint32_t)s->n_expert);
        cv_gguf_writer_set_u32(w, KEY("expert_used_count"), (uint32_t)s->n_expert_used);
        cv_gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)s->n_ff_exp);
        if (a->hybrid) /* the MoE hybrid's shared expert */
            cv_gguf_writer_set_u32(w, KEY("expert_shared_feed_forward_length"), (uint32_t)s->n_ff_shexp);
    }
    if (a->hybrid) {
        cv_gguf_writer_set_u32(w, KEY("ssm.conv_kernel"), (uint32_t)s->ssm_conv);
        cv_gguf_writer_set_u32(w, KEY("ssm.state_size"), (uint32_t)s->ssm_state);
        cv_gguf_writer_set_u32(w, KEY("ssm.group_count"), (uint32_t)s->ssm_group);
        cv_gguf_writer_set_u32(w, KEY("ssm.time_step_rank"), (uint32_t)s->ssm_heads);
        cv_gguf_writer_set_u32(w, KEY("ssm.inner_size"), (uint32_t)(s->ssm_heads * s->ssm_state));
        cv_gguf_writer_set_u32(w, KEY("full_attention_interval"), (uint32_t)s->full_attn_interval);
        /* llama.cpp runs these files with interleaved M-RoPE, which wants
         * the rotated pairs split into sections; Qwen's own split of 32
         * pairs is 11/11/10, kept in proportion (text ignores it: every
         * section gets the same position). */
        const int32_t pairs = n_rot / 2, sec = (pairs * 11 + 16) / 32;
        const int32_t sections[4] = { sec, sec, pairs - 2 * sec, 0 };
        cv_gguf_writer_set_arr(w, KEY("rope.dimension_sections"), CV_GGUF_INT32, 4, sections);
    }
    if (a->swa_period > 0)
        cv_gguf_writer_set_u32(w, KEY("attention.sliding_window"), (uint32_t)s->n_swa);
    if (s->rope_theta_swa > 0)
        cv_gguf_writer_set_f32(w, KEY("rope.freq_base_swa"), s->rope_theta_swa);
    if (s->rope_scaling == CV_ROPE_SCALING_LINEAR || s->rope_scaling == CV_ROPE_SCALING_YARN) {
        cv_gguf_writer_set_str(w, KEY("rope.scaling.type"),
                               cv_str_of(s->rope_scaling == CV_ROPE_SCALING_YARN ? "yarn" : "linear"));
        cv_gguf_writer_set_f32(w, KEY("rope.scaling.factor"), s->rope_factor);
        if (s->rope_scaling == CV_ROPE_SCALING_YARN)
            cv_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)s->rope_orig_ctx);
        if (s->rope_scaling == CV_ROPE_SCALING_YARN && a->yarn_log_mul)
            cv_gguf_writer_set_f32(w, KEY("rope.scaling.yarn_log_multiplier"), s->yarn_log_mul);
    }
    if (s->attn_temp_scale > 0)
        cv_gguf_writer_set_f32(w, KEY("attention.temperature_scale"), s->attn_temp_scale);
#undef KEY
}

/* Copies every tokenizer.* key of a vocab-only GGUF; returns its size. */
static int copy_vocab(cv_gguf_writer *w, const char *path, int32_t *n_vocab, cv_err *err)
{
    cv_gguf *g;
    int rc = cv_gguf_open(path, &g, err);
    if (rc)
        return rc;
    const cv_gguf_value *tokens;
    rc = cv_gguf_get_arr(g, "tokenizer.ggml.tokens", CV_GGUF_STRING, &tokens, err);
    if (rc == CV_ENOTFOUND)
        rc = cv_err_set(err, CV_EINVAL, "%s: no tokenizer.ggml.tokens array; --vocab needs a vocab GGUF", path);
    if (rc == 0 && (tokens->arr.n < 1 || tokens->arr.n > CV_MAX_VOCAB))
        rc = cv_err_set(err, CV_ELIMIT, "%s: %llu tokens, must be 1..%d", path,
                        (unsigned long long)tokens->arr.n, CV_MAX_VOCAB);
    if (rc == 0) {
        *n_vocab = (int32_t)tokens->arr.n;
        for (int64_t i = 0; i < cv_gguf_n_kv(g); i++) {
            cv_str k = cv_gguf_kv_key(g, i);
            if (!cv_str_starts(k, CV_STR("tokenizer.")))
                continue;
            char *key = cv_xstrndup(k.ptr, k.len);
            cv_gguf_writer_set_value(w, key, cv_gguf_kv_value(g, i));
            free(key);
        }
    }
    cv_gguf_close(g);
    return rc;
}

int cv_model_synth(const cv_synth_params *p, const char *out_path, cv_err *err)
{
    const cv_arch *a = p->arch ? cv_arch_find(cv_str_of(p->arch)) : NULL;
    if (!a) {
        cv_buf names = { 0 };
        for (int i = 0; i < cv_n_archs; i++)
            cv_buf_printf(&names, "%s%s", i ? ", " : "", cv_archs[i]->name);
        int rc = cv_err_set(err, CV_EINVAL, "synth: architecture '%s' is not one of %s", p->arch ? p->arch : "(none)",
                            names.data);
        cv_buf_free(&names);
        return rc;
    }
    const cv_model_shape *s = p->shape ? cv_model_shape_find(p->shape) : NULL;
    if (!s) {
        cv_buf names = { 0 };
        for (int i = 0; i < cv_n_model_shapes; i++)
            cv_buf_printf(&names, "%s%s", i ? ", " : "", cv_model_shapes[i].name);
        int rc = cv_err_set(err, CV_EINVAL, "synth: shape '%s' is not one of %s", p->shape ? p->shape : "(none)",
                            names.data);
        cv_buf_free(&names);
        return rc;
    }
    /* --layers: the shape's first layers only (the largest cut of a model
     * that does not fit the machine whole keeps its per-layer costs); the
     * cut keeps a layer past latent attention's leading dense ones, a
     * window architecture's full layer and a hybrid's attention layer,
     * and before layers that share K/V a window and a full layer whose K/V
     * they read */
    cv_model_shape cut = *s;
    if (p->n_layer > 0) {
        const int32_t period = a->hybrid           ? s->full_attn_interval
                               : a->swa_period > 0 ? (s->swa_period ? s->swa_period : a->swa_period)
                                                   : 1;
        const int32_t least = CV_MAX(a->mixer == CV_MIXER_MLA ? s->n_dense_lead + 1 : 1, s->n_kv_shared + period);
        if (p->n_layer < least || p->n_layer > s->n_layer)
            return cv_err_set(err, CV_EINVAL, "synth: %d layers of shape '%s': must be %d..%d", (int)p->n_layer,
                              s->name, (int)least, (int)s->n_layer);
        cut.n_layer = p->n_layer;
        s = &cut;
    }
    if (a->ffn == CV_FFN_MOE && s->n_expert == 0)
        return cv_err_set(err, CV_EINVAL, "synth: shape '%s' has no experts; a %s model needs a shape that has",
                          s->name, a->name);
    if (a->swa_period > 0 && s->n_swa == 0)
        return cv_err_set(err, CV_EINVAL, "synth: shape '%s' has no sliding window; a %s model needs one", s->name,
                          a->name);
    if (a->hybrid && (s->ssm_state == 0 || (a->ffn == CV_FFN_MOE && s->n_ff_shexp == 0)))
        return cv_err_set(err, CV_EINVAL, "synth: shape '%s' has no Gated DeltaNet %s; a %s model needs them",
                          s->name, s->ssm_state == 0 ? "sizes" : "shared expert", a->name);
    if (a->ffn == CV_FFN_DENSE && s->n_ff == 0)
        return cv_err_set(err, CV_EINVAL, "synth: shape '%s' has no dense FFN width; a %s model needs one", s->name,
                          a->name);
    if (a->mixer == CV_MIXER_MLA && (s->n_lora_kv == 0 || s->n_ff_shexp == 0 || (s->n_dense_lead > 0 && s->n_ff == 0)))
        return cv_err_set(err, CV_EINVAL, "synth: shape '%s' has no latent attention sizes, shared experts or dense "
                          "width; a %s model needs them", s->name, a->name);
    const cv_quant_mix *x = cv_quant_mix_find(p->dtype);
    if (!x) {
        char names[160] = "";
        for (int i = 0; cv_quant_mix_at(i); i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     cv_quant_mix_name(cv_quant_mix_at(i)));
        return cv_err_set(err, CV_EINVAL, "synth: dtype '%s' is not one of %s", p->dtype ? p->dtype : "(none)",
                          names);
    }

    cv_gguf_writer *w = cv_gguf_writer_create();
    int32_t n_vocab = s->n_vocab;
    int rc = 0;
    gen_job *jobs = NULL;
    int n_jobs = 0;
    if (p->vocab && (rc = copy_vocab(w, p->vocab, &n_vocab, err)))
        goto out;
    /* Keys in the usual order: general first. */
    cv_gguf_writer_set_str(w, "general.architecture", cv_str_of(a->name));
    char name[160];
    snprintf(name, sizeof name, "corvid-synth %s %s %s seed %llu", a->name, s->name, cv_quant_mix_name(x),
             (unsigned long long)p->seed);
    if (p->n_layer > 0)
        snprintf(name + strlen(name), sizeof name - strlen(name), ", first %d layers", (int)p->n_layer);
    cv_gguf_writer_set_str(w, "general.name", cv_str_of(name));
    cv_gguf_writer_set_u32(w, "general.file_type", cv_quant_mix_file_type(x));
    cv_gguf_writer_set_u32(w, "general.quantization_version", 2);
    set_hparams(w, a, s);
    if (p->pooling) { /* as llama.cpp's converter writes sentence-transformers models */
        snprintf(name, sizeof name, "%s.pooling_type", a->name);
        cv_gguf_writer_set_u32(w, name, (uint32_t)p->pooling);
    }

    jobs = cv_xcalloc((size_t)a->n_tensors * ((size_t)s->n_layer + 1), sizeof *jobs);
    uint64_t tensor_index = 0;
    for (int il = -1; il < s->n_layer && rc == 0; il++) {
        const synth_layer layer = il >= 0 ? layer_of(a, s, il) : (synth_layer){ 0 }, *l = il >= 0 ? &layer : NULL;
        for (int i = 0; i < a->n_tensors && rc == 0; i++) {
            const cv_arch_tensor *d = &a->tensors[i];
            bool per_layer = d->role >= CV_ROLE_FIRST_LAYER;
            if (per_layer != (il >= 0))
                continue;
            if (per_layer && d->when && !(d->when & (CV_WHEN_MIXER(l->mixer) | CV_WHEN_FFN(l->ffn))))
                continue;
            if (d->need == CV_NEED_FALLBACK && s->tied)
                continue;
            if (d->need == CV_NEED_OPTIONAL && !optional_written(a, s, d->role, l, n_vocab))
                continue;
            if (d->need == CV_NEED_ALT && dim_of(s, l, d->ne0, n_vocab) * dim_of(s, l, d->ne1, n_vocab) == 0)
                continue;
            char tname[128];
            if (per_layer)
                snprintf(tname, sizeof tname, d->name, il);
            else
                snprintf(tname, sizeof tname, "%s", d->name);
            int64_t ne[3] = { dim_of(s, l, d->ne0, n_vocab), dim_of(s, l, d->ne1, n_vocab),
                              dim_of(s, l, d->ne2, n_vocab) };
            gen_job *j = &jobs[n_jobs++];
            *j = (gen_job){
                .type = cv_quant_mix_type(x, d->role, il, s->n_layer, ne[0], s->tied),
                .n_in = ne[0],
                .n_rows = ne[1] * ne[2],
                .shape = s,
                .pool = p->pool,
                .seed = p->seed * 0x9E3779B97F4A7C15ull + (++tensor_index) * 0xBF58476D1CE4E5B9ull,
            };
            switch (d->role) {
            case CV_ROLE_ATTN_NORM: case CV_ROLE_FFN_NORM: case CV_ROLE_OUTPUT_NORM:
            case CV_ROLE_ATTN_POST_NORM: case CV_ROLE_FFN_POST_NORM: case CV_ROLE_SSM_NORM:
            case CV_ROLE_ATTN_Q_A_NORM: case CV_ROLE_ATTN_KV_A_NORM:
            case CV_ROLE_PL_PROJ_NORM: case CV_ROLE_PL_POST_NORM: case CV_ROLE_OUT_SCALE:
            case CV_ROLE_FFN_GATE_INP_SCALE: case CV_ROLE_FFN_NORM_EXPS: case CV_ROLE_FFN_POST_NORM_SHEXP:
            case CV_ROLE_FFN_POST_NORM_EXPS: case CV_ROLE_FFN_DOWN_EXPS_SCALE:
                j->how = DIST_UNIFORM_NORM, j->std = 1.0f;
                break;
            /* Unscaled scores (gemma4) take the 1/sqrt(head_dim) from the
             * q and k norms, head_dim^(-1/4) each, as
             * testdata/reference3's weights do. */
            case CV_ROLE_ATTN_Q_NORM: case CV_ROLE_ATTN_K_NORM:
                j->how = DIST_UNIFORM_NORM, j->std = a->attn_scale_one ? powf((float)ne[0], -0.25f) : 1.0f;
                break;
            case CV_ROLE_SSM_A: j->how = DIST_SSM_A; break;
            case CV_ROLE_SSM_DT_BIAS: j->how = DIST_SSM_DT; break;
            case CV_ROLE_SSM_CONV1D: j->how = DIST_NORMAL, j->std = 0.5f; break;
            case CV_ROLE_FFN_GATE_INP_SHEXP: j->how = DIST_NORMAL, j->std = 2.0f / sqrtf((float)ne[0]); break;
            case CV_ROLE_SSM_QKV: case CV_ROLE_FFN_GATE_SHEXP:
                j->how = DIST_NORMAL, j->std = 1.5f / sqrtf((float)ne[0]);
                break;
            case CV_ROLE_ROPE_FREQS: j->how = DIST_ROPE; break;
            case CV_ROLE_ATTN_Q_BIAS: case CV_ROLE_ATTN_K_BIAS: case CV_ROLE_ATTN_V_BIAS: case CV_ROLE_ATTN_OUT_BIAS:
            case CV_ROLE_FFN_GATE_INP_BIAS: case CV_ROLE_FFN_GATE_EXPS_BIAS: case CV_ROLE_FFN_UP_EXPS_BIAS:
            case CV_ROLE_FFN_DOWN_EXPS_BIAS:
                j->how = DIST_NORMAL, j->std = 0.3f;
                break;
            /* Sink logits of the size of a score: they take a share of the
             * softmax, as trained ones do. */
            case CV_ROLE_ATTN_SINKS: j->how = DIST_NORMAL, j->std = 1.0f; break;
            /* a selection bias of the size of the sigmoid's spread between
             * experts (testdata/reference3 draws it so) */
            case CV_ROLE_FFN_EXP_PROBS_B: j->how = DIST_NORMAL, j->std = 0.1f; break;
            /* Embedding and output alike: logits then have a spread of
             * 0.15 sqrt(n_embd) (2.4 for 256 wide), peaked like a real model's. */
            case CV_ROLE_TOKEN_EMBD: case CV_ROLE_OUTPUT: case CV_ROLE_PL_TOKEN_EMBD:
                j->how = DIST_NORMAL, j->std = 0.15f;
                break;
            default: j->how = DIST_NORMAL, j->std = 1.0f / sqrtf((float)ne[0]); break;
            }
            j->row_bytes = cv_ggml_row_bytes(j->type, ne[0]);
            /* --fast: an expert tensor's first FAST_EXPERTS experts are drawn,
             * the others repeat them, and a larger matrix's first FAST_ROWS
             * rows (the same bytes and shapes to stream, without quantizing
             * every expert of a 30B model or every row of a 24B one). */
            j->bank = !p->fast                  ? j->n_rows
                      : d->ne2 == CV_DIM_EXPERT ? CV_MIN(ne[2], FAST_EXPERTS) * ne[1]
                                                : CV_MIN(j->n_rows, FAST_ROWS);
            const uint32_t n_dims = d->ne2 != CV_DIM_ONE ? 3 : ne[1] > 1 ? 2 : 1;
            rc = cv_gguf_writer_add_tensor_fn(w, tname, j->type, n_dims, ne, gen_tensor, j, err);
        }
    }
    size_t bytes = 0;
    for (int i = 0; i < n_jobs; i++)
        bytes += jobs[i].row_bytes * (size_t)jobs[i].n_rows;
    if (p->bytes_out)
        *p->bytes_out = bytes;
    if (rc == 0 && !p->plan_only)
        rc = p->sparse ? cv_gguf_writer_write_sparse(w, out_path, err) : cv_gguf_writer_write(w, out_path, err);
out:
    free(jobs);
    cv_gguf_writer_destroy(w);
    return rc;
}
