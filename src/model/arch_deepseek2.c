/* arch_deepseek2.c — the `deepseek2` architecture: DeepSeek-V2 / V2-Lite,
 * DeepSeek-V3 / V3.1 / R1, Kimi-K2 and GLM-4.7-Flash (llama.cpp runs all of
 * them through this one graph). Two things set it apart:
 *
 * Multi-head latent attention (CV_MIXER_MLA, src/engine/mix_mla.c). A
 * position keeps one compressed row, not per-head keys and values: its
 * latent c = RMSNorm(first kv_lora_rank outputs of attn_kv_a_mqa;
 * attn_kv_a_norm) and its RoPE key k_pe (the last rope.dimension_count
 * outputs, NORM-style RoPE, shared by every head). Head h's query is
 * [q_nope_h, q_pe_h] (key_length_mla = nope + RoPE dims), through q_lora
 * (attn_q_a, RMSNorm attn_q_a_norm, attn_q_b; DeepSeek-V3, Kimi-K2,
 * GLM-4.7-Flash) or a plain attn_q (q_lora_rank 0: DeepSeek-V2-Lite). Its
 * key is [W_UK_h c, k_pe] and its value W_UV_h c; the converter splits
 * HF's kv_b_proj into attn_k_b (W_UK_h transposed, q_nope into the latent
 * space) and attn_v_b (W_UV_h), one slice per head, so attention runs in
 * the latent space: score = scale ([k_b_h q_nope_h, q_pe_h] . [c, k_pe]),
 * output = v_b_h (sum of softmax c). The score scale is
 * mscale^2 / sqrt(key_length_mla), with YaRN's mscale (from the stored
 * yarn_log_multiplier) there and not in cos/sin (model_load.c).
 *
 * Routing (src/engine/ffn_moe.c): after leading_dense_block_count dense
 * layers, a softmax (V2, V2-Lite) or sigmoid (expert_gating_func 2: V3,
 * Kimi-K2, GLM-4.7-Flash) router whose selection adds the bias
 * exp_probs_b, limited to the best expert_group_used_count of
 * expert_group_count groups; weights the unbiased probabilities,
 * renormalised when expert_weights_norm, times expert_weights_scale; plus
 * expert_shared_count shared experts (one of that many times an expert's
 * width), added ungated.
 *
 * Files from before llama.cpp's MLA split (an unsplit attn_kv_b, no
 * key_length_mla) are refused with a message. Spec: llama.cpp's
 * LLM_ARCH_DEEPSEEK2 tensor list and ../shared/testdata/reference3/README.md
 * (deepseek2, deepseek2lite). */
#include "model/model.h"

#define DENSE CV_WHEN_FFN(CV_FFN_DENSE)
#define MOE CV_WHEN_FFN(CV_FFN_MOE)

static const cv_arch_tensor tensors[] = {
    { .role = CV_ROLE_TOKEN_EMBD, .name = "token_embd.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB },
    { .role = CV_ROLE_OUTPUT_NORM, .name = "output_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_OUTPUT, .name = "output.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB,
      .need = CV_NEED_FALLBACK, .fallback = CV_ROLE_TOKEN_EMBD },
    { .role = CV_ROLE_ATTN_NORM, .name = "blk.%d.attn_norm.weight", .ne0 = CV_DIM_EMBD },
    /* the query: a plain attn_q (q_lora_rank 0), or through q_lora */
    { .role = CV_ROLE_ATTN_Q, .name = "blk.%d.attn_q.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_Q_MLA,
      .need = CV_NEED_OPTIONAL },
    { .role = CV_ROLE_ATTN_Q_A, .name = "blk.%d.attn_q_a.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_Q_LORA,
      .need = CV_NEED_ALT, .fallback = CV_ROLE_ATTN_Q },
    { .role = CV_ROLE_ATTN_Q_A_NORM, .name = "blk.%d.attn_q_a_norm.weight", .ne0 = CV_DIM_Q_LORA,
      .need = CV_NEED_ALT, .fallback = CV_ROLE_ATTN_Q },
    { .role = CV_ROLE_ATTN_Q_B, .name = "blk.%d.attn_q_b.weight", .ne0 = CV_DIM_Q_LORA, .ne1 = CV_DIM_Q_MLA,
      .need = CV_NEED_ALT, .fallback = CV_ROLE_ATTN_Q },
    /* the latent row and the heads' up-projections */
    { .role = CV_ROLE_ATTN_KV_A, .name = "blk.%d.attn_kv_a_mqa.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_KV_A },
    { .role = CV_ROLE_ATTN_KV_A_NORM, .name = "blk.%d.attn_kv_a_norm.weight", .ne0 = CV_DIM_KV_LORA },
    { .role = CV_ROLE_ATTN_K_B, .name = "blk.%d.attn_k_b.weight", .ne0 = CV_DIM_NOPE, .ne1 = CV_DIM_KV_LORA,
      .ne2 = CV_DIM_HEADS },
    { .role = CV_ROLE_ATTN_V_B, .name = "blk.%d.attn_v_b.weight", .ne0 = CV_DIM_KV_LORA, .ne1 = CV_DIM_V_MLA,
      .ne2 = CV_DIM_HEADS },
    { .role = CV_ROLE_ATTN_OUT, .name = "blk.%d.attn_output.weight", .ne0 = CV_DIM_O_MLA, .ne1 = CV_DIM_EMBD },
    { .role = CV_ROLE_FFN_NORM, .name = "blk.%d.ffn_norm.weight", .ne0 = CV_DIM_EMBD },
    /* the leading dense layers */
    { .role = CV_ROLE_FFN_GATE, .name = "blk.%d.ffn_gate.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF, .when = DENSE },
    { .role = CV_ROLE_FFN_UP, .name = "blk.%d.ffn_up.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF, .when = DENSE },
    { .role = CV_ROLE_FFN_DOWN, .name = "blk.%d.ffn_down.weight", .ne0 = CV_DIM_FF, .ne1 = CV_DIM_EMBD, .when = DENSE },
    /* routed and shared experts */
    { .role = CV_ROLE_FFN_GATE_INP, .name = "blk.%d.ffn_gate_inp.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_EXPERT,
      .when = MOE },
    { .role = CV_ROLE_FFN_EXP_PROBS_B, .name = "blk.%d.exp_probs_b.bias", .ne0 = CV_DIM_EXPERT,
      .need = CV_NEED_OPTIONAL, .when = MOE },
    { .role = CV_ROLE_FFN_GATE_EXPS, .name = "blk.%d.ffn_gate_exps.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF_EXP,
      .ne2 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_UP_EXPS, .name = "blk.%d.ffn_up_exps.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF_EXP,
      .ne2 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_DOWN_EXPS, .name = "blk.%d.ffn_down_exps.weight", .ne0 = CV_DIM_FF_EXP, .ne1 = CV_DIM_EMBD,
      .ne2 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_GATE_SHEXP, .name = "blk.%d.ffn_gate_shexp.weight", .ne0 = CV_DIM_EMBD,
      .ne1 = CV_DIM_FF_SHEXP, .when = MOE },
    { .role = CV_ROLE_FFN_UP_SHEXP, .name = "blk.%d.ffn_up_shexp.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF_SHEXP,
      .when = MOE },
    { .role = CV_ROLE_FFN_DOWN_SHEXP, .name = "blk.%d.ffn_down_shexp.weight", .ne0 = CV_DIM_FF_SHEXP,
      .ne1 = CV_DIM_EMBD, .when = MOE },
};

const cv_arch cv_arch_deepseek2 = {
    .name = "deepseek2",
    .covers = "DeepSeek-V2 / V2-Lite / V3 / R1, Kimi-K2, GLM-4.7-Flash (multi-head latent attention, MoE)",
    .rope_style = CV_ROPE_NORM,
    .default_rms_eps = 1e-6f,
    .default_rope_theta = 10000.0f,
    .mixer = CV_MIXER_MLA,
    .ffn = CV_FFN_MOE,
    .routing = CV_ROUTE_SOFTMAX_TOPK,
    .tensors = tensors,
    .n_tensors = (int)CV_ARRAY_LEN(tensors),
};
