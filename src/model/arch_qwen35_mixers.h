/* arch_qwen35_mixers.h — the tensors qwen35, qwen35moe and qwen3next share:
 * the embedding and output, the gated full attention of their attending
 * layers, the parts of the Gated DeltaNet layers they have in common
 * (described in arch_qwen35.c), and the routed and shared experts of the
 * MoE ones. qwen35 and qwen35moe take qwen35's DeltaNet input projections
 * (CV_QWEN35_MIXER_TENSORS); qwen3next has its own (arch_qwen3next.c).
 * Needs ATTN and DN defined as the mixers' CV_WHEN_MIXER conditions, and MOE
 * as CV_WHEN_FFN(CV_FFN_MOE) for the experts. */
#ifndef CV_ARCH_QWEN35_MIXERS_H
#define CV_ARCH_QWEN35_MIXERS_H

#define CV_QWEN35_ATTN_TENSORS \
    { .role = CV_ROLE_TOKEN_EMBD, .name = "token_embd.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB }, \
    { .role = CV_ROLE_OUTPUT_NORM, .name = "output_norm.weight", .ne0 = CV_DIM_EMBD }, \
    { .role = CV_ROLE_OUTPUT, .name = "output.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_VOCAB, \
      .need = CV_NEED_FALLBACK, .fallback = CV_ROLE_TOKEN_EMBD }, \
    { .role = CV_ROLE_ATTN_NORM, .name = "blk.%d.attn_norm.weight", .ne0 = CV_DIM_EMBD }, \
    /* gated full attention */ \
    { .role = CV_ROLE_ATTN_Q, .name = "blk.%d.attn_q.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_Q_GATED, \
      .when = ATTN }, \
    { .role = CV_ROLE_ATTN_K, .name = "blk.%d.attn_k.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_KV, .when = ATTN }, \
    { .role = CV_ROLE_ATTN_V, .name = "blk.%d.attn_v.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_KV, .when = ATTN }, \
    { .role = CV_ROLE_ATTN_Q_NORM, .name = "blk.%d.attn_q_norm.weight", .ne0 = CV_DIM_HEAD, .when = ATTN }, \
    { .role = CV_ROLE_ATTN_K_NORM, .name = "blk.%d.attn_k_norm.weight", .ne0 = CV_DIM_HEAD, .when = ATTN }, \
    { .role = CV_ROLE_ATTN_OUT, .name = "blk.%d.attn_output.weight", .ne0 = CV_DIM_Q, .ne1 = CV_DIM_EMBD, \
      .when = ATTN },

/* Gated DeltaNet: the conv, the decay parameters, the output norm and
 * projection (after each architecture's input projections). */
#define CV_QWEN35_DN_TENSORS \
    { .role = CV_ROLE_SSM_CONV1D, .name = "blk.%d.ssm_conv1d.weight", .ne0 = CV_DIM_SSM_CONV, .ne1 = CV_DIM_SSM_CH, \
      .when = DN }, \
    { .role = CV_ROLE_SSM_DT_BIAS, .name = "blk.%d.ssm_dt.bias", .ne0 = CV_DIM_SSM_HEADS, .when = DN }, \
    { .role = CV_ROLE_SSM_A, .name = "blk.%d.ssm_a", .ne0 = CV_DIM_SSM_HEADS, .when = DN }, \
    { .role = CV_ROLE_SSM_NORM, .name = "blk.%d.ssm_norm.weight", .ne0 = CV_DIM_SSM_STATE, .when = DN }, \
    { .role = CV_ROLE_SSM_OUT, .name = "blk.%d.ssm_out.weight", .ne0 = CV_DIM_SSM_INNER, .ne1 = CV_DIM_EMBD, \
      .when = DN },

#define CV_QWEN35_MIXER_TENSORS \
    CV_QWEN35_ATTN_TENSORS \
    { .role = CV_ROLE_SSM_QKV, .name = "blk.%d.attn_qkv.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_CH, \
      .when = DN }, \
    { .role = CV_ROLE_SSM_Z, .name = "blk.%d.attn_gate.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_INNER, \
      .when = DN }, \
    { .role = CV_ROLE_SSM_BETA, .name = "blk.%d.ssm_beta.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_HEADS, \
      .when = DN }, \
    { .role = CV_ROLE_SSM_ALPHA, .name = "blk.%d.ssm_alpha.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_HEADS, \
      .when = DN }, \
    CV_QWEN35_DN_TENSORS

/* Routed experts and a shared one scaled by sigmoid(ffn_gate_inp_shexp . x),
 * after post_attention_norm (the pre-FFN norm). */
#define CV_QWEN35_MOE_TENSORS \
    { .role = CV_ROLE_FFN_NORM, .name = "blk.%d.post_attention_norm.weight", .ne0 = CV_DIM_EMBD }, \
    { .role = CV_ROLE_FFN_GATE_INP, .name = "blk.%d.ffn_gate_inp.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_EXPERT, \
      .when = MOE }, \
    { .role = CV_ROLE_FFN_GATE_EXPS, .name = "blk.%d.ffn_gate_exps.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF_EXP, \
      .ne2 = CV_DIM_EXPERT, .when = MOE }, \
    { .role = CV_ROLE_FFN_UP_EXPS, .name = "blk.%d.ffn_up_exps.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_FF_EXP, \
      .ne2 = CV_DIM_EXPERT, .when = MOE }, \
    { .role = CV_ROLE_FFN_DOWN_EXPS, .name = "blk.%d.ffn_down_exps.weight", .ne0 = CV_DIM_FF_EXP, \
      .ne1 = CV_DIM_EMBD, .ne2 = CV_DIM_EXPERT, .when = MOE }, \
    { .role = CV_ROLE_FFN_GATE_INP_SHEXP, .name = "blk.%d.ffn_gate_inp_shexp.weight", .ne0 = CV_DIM_EMBD, \
      .when = MOE }, \
    { .role = CV_ROLE_FFN_GATE_SHEXP, .name = "blk.%d.ffn_gate_shexp.weight", .ne0 = CV_DIM_EMBD, \
      .ne1 = CV_DIM_FF_SHEXP, .when = MOE }, \
    { .role = CV_ROLE_FFN_UP_SHEXP, .name = "blk.%d.ffn_up_shexp.weight", .ne0 = CV_DIM_EMBD, \
      .ne1 = CV_DIM_FF_SHEXP, .when = MOE }, \
    { .role = CV_ROLE_FFN_DOWN_SHEXP, .name = "blk.%d.ffn_down_shexp.weight", .ne0 = CV_DIM_FF_SHEXP, \
      .ne1 = CV_DIM_EMBD, .when = MOE },

#endif
