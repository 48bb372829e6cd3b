/* arch_qwen35_mixers.h — the tensors qwen35 and qwen35moe share: the
 * embedding and output, and both mixer kinds of their hybrid layers (gated
 * full attention; Gated DeltaNet), described in arch_qwen35.c. Each arch
 * file follows these rows with its own FFN's. Needs ATTN and DN defined as
 * the mixers' CV_WHEN_MIXER conditions. */
#ifndef CV_ARCH_QWEN35_MIXERS_H
#define CV_ARCH_QWEN35_MIXERS_H

#define CV_QWEN35_MIXER_TENSORS \
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
      .when = ATTN }, \
    /* Gated DeltaNet */ \
    { .role = CV_ROLE_SSM_QKV, .name = "blk.%d.attn_qkv.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_CH, \
      .when = DN }, \
    { .role = CV_ROLE_SSM_Z, .name = "blk.%d.attn_gate.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_INNER, \
      .when = DN }, \
    { .role = CV_ROLE_SSM_BETA, .name = "blk.%d.ssm_beta.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_HEADS, \
      .when = DN }, \
    { .role = CV_ROLE_SSM_ALPHA, .name = "blk.%d.ssm_alpha.weight", .ne0 = CV_DIM_EMBD, .ne1 = CV_DIM_SSM_HEADS, \
      .when = DN }, \
    { .role = CV_ROLE_SSM_CONV1D, .name = "blk.%d.ssm_conv1d.weight", .ne0 = CV_DIM_SSM_CONV, .ne1 = CV_DIM_SSM_CH, \
      .when = DN }, \
    { .role = CV_ROLE_SSM_DT_BIAS, .name = "blk.%d.ssm_dt.bias", .ne0 = CV_DIM_SSM_HEADS, .when = DN }, \
    { .role = CV_ROLE_SSM_A, .name = "blk.%d.ssm_a", .ne0 = CV_DIM_SSM_HEADS, .when = DN }, \
    { .role = CV_ROLE_SSM_NORM, .name = "blk.%d.ssm_norm.weight", .ne0 = CV_DIM_SSM_STATE, .when = DN }, \
    { .role = CV_ROLE_SSM_OUT, .name = "blk.%d.ssm_out.weight", .ne0 = CV_DIM_SSM_INNER, .ne1 = CV_DIM_EMBD, \
      .when = DN },

#endif
