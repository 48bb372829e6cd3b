/* arch_gemma4.c — the `gemma4` architecture (Google Gemma 4: the dense
 * 31B, the E2B / E4B with per-layer inputs and shared K/V, and the
 * 26B-A4B mixture of experts). Gemma 3's block (RMSNorm before and after
 * attention and FFN, GeGLU with the tanh GELU, embeddings times
 * sqrt(n_embd), tied output, NEOX RoPE after per-head Q/K RMSNorm) with:
 *   - window and full layers from `attention.sliding_window_pattern` (one
 *     flag per layer), each kind with its own heads: window layers
 *     `attention.key_length_swa` wide with `rope.dimension_count_swa`
 *     rotated at base `rope.freq_base_swa`, full layers `key_length` wide
 *     with `rope.dimension_count` at `rope.freq_base` and the
 *     `rope_freqs` tensor, whose 1e30 entries keep most pairs still
 *     ("proportional" RoPE: the 26B's full layers rotate dims 0-63 and
 *     256-319 of 512); kv heads and FFN widths one per layer
 *     (`attention.head_count_kv`, `feed_forward_length` arrays);
 *   - scores q.k with scale 1 (the norms carry it), V RMS-normalised with
 *     no weight, and where a layer has no `attn_v` (the K=V full layers of
 *     the 31B and 26B) V is its K projection before the norm and RoPE;
 *   - the last `attention.shared_kv_layers` layers compute no K/V and
 *     attend over the last window / full layer's before them (E2B, E4B);
 *   - per-layer inputs (`embedding_length_per_layer_input` > 0, E2B/E4B):
 *     each token's `per_layer_token_embd` row times sqrt(n_pl) plus the
 *     RMS-normed projection of the scaled embedding, times 1/sqrt(2), one
 *     n_pl slice per layer, gated into the stream after the FFN;
 *   - every layer's whole residual stream times `layer_output_scale`, and
 *     the logits soft-capped by `final_logit_softcapping`;
 *   - 26B-A4B: a layer with a router (`ffn_gate_inp`) is MoE: its dense
 *     GeGLU FFN, post-normed by `post_ffw_norm_1`, plus routed GeGLU
 *     experts (softmax over all, the top `expert_used_count`,
 *     renormalised; each expert's output times `ffn_down_exps.scale`) that
 *     read RMSNorm(x; `pre_ffw_norm_2`), their sum post-normed by
 *     `post_ffw_norm_2`; the router reads the unweighted RMSNorm of the
 *     stream / sqrt(n_embd) times `ffn_gate_inp.scale`; the two branches'
 *     sum is what `post_ffw_norm` normalises.
 * Norm weights are the multipliers as stored (no +1). Spec: llama.cpp's
 * LLM_ARCH_GEMMA4, google/gemma-4-*-it config.json, and
 * ../shared/testdata/reference3/README.md (gemma4, gemma4moe). */
#include "model/model.h"

#define DENSE CV_WHEN_FFN(CV_FFN_DENSE)
#define MOE CV_WHEN_FFN(CV_FFN_MOE)

static const cv_arch_tensor tensors[] = {
    { .role = CV_ROLE_TOKEN_EMBD, .name = "token_embd.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB },
    { .role = CV_ROLE_OUTPUT_NORM, .name = "output_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_OUTPUT, .name = "output.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB,
      .need = CV_NEED_FALLBACK, .fallback = CV_ROLE_TOKEN_EMBD },
    { .role = CV_ROLE_ROPE_FREQS, .name = "rope_freqs.weight", .ne0 = CV_DIM_ROT_HALF, .need = CV_NEED_OPTIONAL },
    { .role = CV_ROLE_PL_TOKEN_EMBD, .name = "per_layer_token_embd.weight", .ne0 = CV_DIM_PL_ALL,
      .ne1 = CV_DIM_VOCAB, .need = CV_NEED_OPTIONAL },
    { .role = CV_ROLE_PL_MODEL_PROJ, .name = "per_layer_model_proj.weight", .ne0 = CV_DIM_EMBD,
      .ne1 = CV_DIM_PL_ALL, .need = CV_NEED_OPTIONAL },
    { .role = CV_ROLE_PL_PROJ_NORM, .name = "per_layer_proj_norm.weight", .ne0 = CV_DIM_PL,
      .need = CV_NEED_OPTIONAL },
    { .role = CV_ROLE_ATTN_NORM, .name = "blk.%d.attn_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_ATTN_Q, .name = "blk.%d.attn_q.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_Q },
    /* absent on the shared-K/V layers (the loader requires them on the others) */
    { .role = CV_ROLE_ATTN_K, .name = "blk.%d.attn_k.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_KV,
      .need = CV_NEED_OPTIONAL },
    /* absent on the K=V layers too */
    { .role = CV_ROLE_ATTN_V, .name = "blk.%d.attn_v.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_KV,
      .need = CV_NEED_OPTIONAL },
    { .role = CV_ROLE_ATTN_Q_NORM, .name = "blk.%d.attn_q_norm.weight", .ne0 = CV_DIM_HEAD },
    { .role = CV_ROLE_ATTN_K_NORM, .name = "blk.%d.attn_k_norm.weight", .ne0 = CV_DIM_HEAD,
      .need = CV_NEED_OPTIONAL },
    { .role = CV_ROLE_ATTN_OUT, .name = "blk.%d.attn_output.weight", .ne0 = CV_DIM_Q, .ne1 = CV_DIM_EMBD },
    { .role = CV_ROLE_ATTN_POST_NORM, .name = "blk.%d.post_attention_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_FFN_NORM, .name = "blk.%d.ffn_norm.weight", .ne0 = CV_DIM_EMBD },
    { .role = CV_ROLE_FFN_GATE, .name = "blk.%d.ffn_gate.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF,
      .when = DENSE },
    { .role = CV_ROLE_FFN_UP, .name = "blk.%d.ffn_up.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF, .when = DENSE },
    { .role = CV_ROLE_FFN_DOWN, .name = "blk.%d.ffn_down.weight", .ne0 = CV_DIM_FF, .ne1 = CV_DIM_EMBD,
      .when = DENSE },
    { .role = CV_ROLE_FFN_POST_NORM, .name = "blk.%d.post_ffw_norm.weight", .ne0 = CV_DIM_EMBD },
    /* 26B-A4B: the same dense FFN, as an ungated shared expert, beside the
     * routed ones; each branch post-normed before their sum is */
    { .role = CV_ROLE_FFN_GATE_SHEXP, .name = "blk.%d.ffn_gate.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF,
      .when = MOE },
    { .role = CV_ROLE_FFN_UP_SHEXP, .name = "blk.%d.ffn_up.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF,
      .when = MOE },
    { .role = CV_ROLE_FFN_DOWN_SHEXP, .name = "blk.%d.ffn_down.weight", .ne0 = CV_DIM_FF, .ne1 = CV_DIM_EMBD,
      .when = MOE },
    { .role = CV_ROLE_FFN_POST_NORM_SHEXP, .name = "blk.%d.post_ffw_norm_1.weight", .ne0 = CV_DIM_EMBD,
      .when = MOE },
    { .role = CV_ROLE_FFN_GATE_INP, .name = "blk.%d.ffn_gate_inp.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_EXPERT,
      .when = MOE },
    { .role = CV_ROLE_FFN_GATE_INP_SCALE, .name = "blk.%d.ffn_gate_inp.scale", .ne0 = CV_DIM_EMBD, .when = MOE },
    { .role = CV_ROLE_FFN_NORM_EXPS, .name = "blk.%d.pre_ffw_norm_2.weight", .ne0 = CV_DIM_EMBD, .when = MOE },
    /* fused as the converter writes them, or split (llama.cpp takes both) */
    { .role = CV_ROLE_FFN_GATE_UP_EXPS, .name = "blk.%d.ffn_gate_up_exps.weight", .ne0 = CV_DIM_EMBD,
      .ne1 = CV_DIM_FF_EXP2, .ne2 = CV_DIM_EXPERT, .need = CV_NEED_OPTIONAL, .when = MOE },
    { .role = CV_ROLE_FFN_GATE_EXPS, .name = "blk.%d.ffn_gate_exps.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF_EXP,
      .ne2 = CV_DIM_EXPERT, .need = CV_NEED_OPTIONAL, .when = MOE },
    { .role = CV_ROLE_FFN_UP_EXPS, .name = "blk.%d.ffn_up_exps.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF_EXP,
      .ne2 = CV_DIM_EXPERT, .need = CV_NEED_OPTIONAL, .when = MOE },
    { .role = CV_ROLE_FFN_DOWN_EXPS, .name = "blk.%d.ffn_down_exps.weight", .ne0 = CV_DIM_FF_EXP, .ne1 = CV_DIM_EMBD,
      .ne2 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_DOWN_EXPS_SCALE, .name = "blk.%d.ffn_down_exps.scale", .ne0 = CV_DIM_EXPERT, .when = MOE },
    { .role = CV_ROLE_FFN_POST_NORM_EXPS, .name = "blk.%d.post_ffw_norm_2.weight", .ne0 = CV_DIM_EMBD,
      .when = MOE },
    { .role = CV_ROLE_PL_GATE, .name = "blk.%d.inp_gate.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_PL,
      .need = CV_NEED_OPTIONAL },
    { .role = CV_ROLE_PL_PROJ, .name = "blk.%d.proj.weight", .ne0 = CV_DIM_PL, .ne1 = CV_DIM_EMBD,
      .need = CV_NEED_OPTIONAL },
    { .role = CV_ROLE_PL_POST_NORM, .name = "blk.%d.post_norm.weight", .ne0 = CV_DIM_EMBD,
      .need = CV_NEED_OPTIONAL },
    { .role = CV_ROLE_OUT_SCALE, .name = "blk.%d.layer_output_scale.weight", .ne0 = CV_DIM_ONE,
      .need = CV_NEED_OPTIONAL },
};

const cv_arch cv_arch_gemma4 = {
    .name = "gemma4",
    .covers = "Gemma 4 (E2B, E4B, 31B, 26B-A4B)",
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
    .attn_scale_one = true,
    .v_norm = true,
    .moe_by_router = true,
    .expert_norm = true,
    .tensors = tensors,
    .n_tensors = (int)CV_ARRAY_LEN(tensors),
};
