/* test_model.c — the loader against hostile and unusual files, and the
 * descriptor-driven binding. Each hostile case is a reference model copied
 * through the GGUF writer with one thing changed (a tensor dropped,
 * reshaped or retyped, a key removed or set out of range); every one must
 * fail with the right code and a message naming what is wrong, never
 * abort. Then: head_dim from key_length, tied and untied outputs, fused
 * and separate projections computing the same logits, llama3 RoPE factors
 * (the rule and the tensor really being used), linear scaling, YaRN's
 * factors, the window layers and per-layer RoPE of gpt-oss and gemma3 from
 * their metadata, gemma4's experts fused or split, and a bounded storm of
 * random hyper-parameters that must never crash. */
#include "../engine/ref_util.h"

#define REF "reference/models/"
#define REF2 "reference2/models/"
#define REF3 "reference3/models/"

/* ---- copying a model with one change ---- */

typedef struct mutation {
    const char *drop_tensor;   /* leave this tensor out */
    const char *tensor;        /* change this tensor: */
    int64_t ne0, ne1;          /*   new shape when ne0 > 0 (same byte count) */
    int type;                  /*   new type id when >= 0 */
    const char *key;           /* change this key: */
    enum { KEEP, REMOVE, SET_STR, SET_U32, SET_F32, SET_I32_NEG } op;
    const char *str;
    uint32_t u32;
    float f32;
    const char *add_tensor;    /* an extra f32 vector of add_n elements, all add_value */
    int64_t add_n;
    float add_value;
    const char *arr_key;       /* an int32 array key of n_arr elements */
    const int32_t *arr;
    int n_arr;
} mutation;

/* A writer holding every key of g. */
static cv_gguf_writer *writer_with_keys(const cv_gguf *g)
{
    cv_gguf_writer *w = cv_gguf_writer_create();
    for (int64_t i = 0; i < cv_gguf_n_kv(g); i++) {
        cv_str k = cv_gguf_kv_key(g, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
        cv_gguf_writer_set_value(w, key, cv_gguf_kv_value(g, i));
    }
    return w;
}

static int build(const char *src, const mutation *mu, cv_buf *out, cv_err *err)
{
    cv_gguf *g;
    int rc = cv_gguf_open(test_data(src), &g, err);
    if (rc)
        return rc;
    cv_gguf_writer *w = writer_with_keys(g);
    if (mu->key) {
        switch (mu->op) {
        case REMOVE: cv_gguf_writer_remove(w, mu->key); break;
        case SET_STR: cv_gguf_writer_set_str(w, mu->key, cv_str_of(mu->str)); break;
        case SET_U32: cv_gguf_writer_set_u32(w, mu->key, mu->u32); break;
        case SET_F32: cv_gguf_writer_set_f32(w, mu->key, mu->f32); break;
        case SET_I32_NEG: cv_gguf_writer_set_i32(w, mu->key, -(int32_t)mu->u32); break;
        case KEEP: break;
        }
    }
    if (mu->arr_key)
        cv_gguf_writer_set_arr(w, mu->arr_key, CV_GGUF_INT32, (uint64_t)mu->n_arr, mu->arr);
    float *extra = NULL;
    for (int64_t i = 0; rc == 0 && i < cv_gguf_n_tensors(g); i++) {
        const cv_gguf_tensor *t = cv_gguf_tensor_at(g, i);
        if (mu->drop_tensor && !strcmp(t->name, mu->drop_tensor))
            continue;
        int64_t ne[4] = { t->ne[0], t->ne[1], t->ne[2], t->ne[3] };
        uint32_t type = t->type, n_dims = t->n_dims;
        if (mu->tensor && !strcmp(t->name, mu->tensor)) {
            if (mu->ne0 > 0) {
                ne[0] = mu->ne0, ne[1] = mu->ne1;
                n_dims = mu->ne1 > 1 ? 2 : 1;
            }
            if (mu->type >= 0)
                type = (uint32_t)mu->type;
        }
        rc = cv_gguf_writer_add_tensor(w, t->name, type, n_dims, ne, t->data, t->n_bytes, err);
    }
    if (rc == 0 && mu->add_tensor) {
        extra = malloc((size_t)mu->add_n * sizeof *extra);
        for (int64_t i = 0; i < mu->add_n; i++)
            extra[i] = mu->add_value;
        rc = cv_gguf_writer_add_tensor(w, mu->add_tensor, CV_GGML_F32, 1, (int64_t[]){ mu->add_n }, extra,
                                       (size_t)mu->add_n * 4, err);
    }
    if (rc == 0)
        rc = cv_gguf_writer_to_buf(w, out, err);
    free(extra);
    cv_gguf_writer_destroy(w);
    cv_gguf_close(g);
    return rc;
}

/* Opens the mutated model from memory; the caller closes *m (if 0) and
 * frees buf after. */
static int open_mutated(const char *src, const mutation *mu, const cv_model_params *mp, cv_buf *buf, cv_model **m,
                        cv_err *err)
{
    *m = NULL;
    int rc = build(src, mu, buf, err);
    if (rc) {
        CHECK_MSG(0, "building the mutated file: %s", err->msg);
        return rc;
    }
    cv_gguf *g;
    rc = cv_gguf_open_memory(buf->data, buf->len, "mutated.gguf", &g, err);
    if (rc)
        return rc;
    rc = cv_model_open_gguf(g, mp, m, err);
    if (rc)
        cv_gguf_close(g);
    return rc;
}

TEST(hostile_models_fail_with_the_right_code_and_a_message_naming_the_fault)
{
    struct {
        const char *src;
        mutation mu;
        int code;
        const char *msg;
    } cases[] = {
        { REF "tiny-qwen3-gpt2-Q8_0.gguf", { .drop_tensor = "blk.1.ffn_up.weight", .type = -1 }, CV_ECORRUPT,
          "'blk.1.ffn_up.weight' is missing" },
        { REF "tiny-qwen3-gpt2-Q8_0.gguf", { .drop_tensor = "blk.0.attn_k_norm.weight", .type = -1 }, CV_ECORRUPT,
          "'blk.0.attn_k_norm.weight' is missing" },
        { REF "tiny-qwen2-gpt2-Q8_0.gguf", { .drop_tensor = "blk.0.attn_v.bias", .type = -1 }, CV_ECORRUPT,
          "'blk.0.attn_v.bias' is missing" },
        { REF "tiny-qwen3-gpt2-Q8_0.gguf", { .tensor = "blk.0.attn_q.weight", .ne0 = 512, .ne1 = 256, .type = -1 },
          CV_ECORRUPT, "'blk.0.attn_q.weight' has shape [512, 256" },
        { REF "tiny-llama-spm-F32.gguf", { .tensor = "blk.1.ffn_norm.weight", .type = CV_GGML_I32 },
          CV_EUNSUPPORTED, "type i32" },
        { REF "tiny-llama-spm-F16.gguf", { .tensor = "blk.0.attn_q.weight", .type = CV_GGML_I16 /* same size */ },
          CV_EUNSUPPORTED, "'blk.0.attn_q.weight' has type i16" },
        { REF "tiny-llama-spm-F32.gguf", { .type = -1, .key = "general.architecture", .op = SET_STR, .str = "gemma" },
          CV_EUNSUPPORTED, "architecture 'gemma' is not supported" },
        { REF "tiny-llama-spm-F32.gguf", { .type = -1, .key = "general.architecture", .op = REMOVE }, CV_ECORRUPT,
          "not a model file" },
        { REF "tiny-qwen3-gpt2-F32.gguf", { .type = -1, .key = "qwen3.block_count", .op = REMOVE }, CV_ECORRUPT,
          "'qwen3.block_count' is missing" },
        { REF "tiny-qwen3-gpt2-F32.gguf", { .type = -1, .key = "qwen3.block_count", .op = SET_U32, .u32 = 1u << 30 },
          CV_ECORRUPT, "'qwen3.block_count' = 1073741824, must be 1..1024" },
        { REF "tiny-qwen3-gpt2-F32.gguf", { .type = -1, .key = "qwen3.block_count", .op = SET_U32, .u32 = 3 },
          CV_ECORRUPT, "'blk.2.attn_norm.weight' is missing" },
        { REF "tiny-qwen3-gpt2-F32.gguf",
          { .type = -1, .key = "qwen3.embedding_length", .op = SET_I32_NEG, .u32 = 256 }, CV_ECORRUPT,
          "'qwen3.embedding_length' = -256" },
        { REF "tiny-qwen3-gpt2-F32.gguf", { .type = -1, .key = "qwen3.embedding_length", .op = SET_STR, .str = "256" },
          CV_ECORRUPT, "'qwen3.embedding_length' is string" },
        { REF "tiny-qwen3-gpt2-F32.gguf",
          { .type = -1, .key = "qwen3.attention.head_count_kv", .op = SET_U32, .u32 = 3 }, CV_ECORRUPT,
          "do not split evenly" },
        { REF "tiny-qwen3-gpt2-F32.gguf",
          { .type = -1, .key = "qwen3.attention.head_count_kv", .op = SET_U32, .u32 = 16 }, CV_ECORRUPT,
          "head_count_kv' = 16, must be 1..8" },
        { REF "tiny-qwen2-gpt2-F32.gguf",
          { .type = -1, .key = "qwen2.attention.key_length", .op = SET_U32, .u32 = 64 }, CV_ECORRUPT,
          "'blk.0.attn_q.weight' has shape [256, 256, 1, 1], expected [256, 512]" },
        { REF "tiny-qwen3-gpt2-F32.gguf",
          { .type = -1, .key = "qwen3.attention.value_length", .op = SET_U32, .u32 = 32 }, CV_EUNSUPPORTED,
          "value head size 32" },
        { REF "tiny-llama-spm-F32.gguf",
          { .type = -1, .key = "llama.rope.dimension_count", .op = SET_U32, .u32 = 31 }, CV_ECORRUPT, "even" },
        { REF "tiny-llama-spm-F32.gguf",
          { .type = -1, .key = "llama.rope.dimension_count", .op = SET_U32, .u32 = 64 }, CV_ECORRUPT, "must be 2..32" },
        { REF "tiny-qwen2-gpt2-F32.gguf",
          { .type = -1, .key = "qwen2.attention.key_length", .op = SET_U32, .u32 = 2048 }, CV_ECORRUPT,
          "'qwen2.rope.dimension_count' = 2048, must be 2..1024" },
        { REF "tiny-llama-spm-F32.gguf",
          { .type = -1, .key = "llama.rope.scaling.type", .op = SET_STR, .str = "longrope" }, CV_EUNSUPPORTED,
          "RoPE scaling 'longrope'" },
        /* gpt-oss and gemma3: the tensors and keys only they have */
        { REF2 "tiny-gptoss-gpt2-F32.gguf", { .drop_tensor = "blk.1.attn_sinks.weight", .type = -1 }, CV_ECORRUPT,
          "'blk.1.attn_sinks.weight' is missing" },
        { REF2 "tiny-gptoss-gpt2-F32.gguf", { .drop_tensor = "blk.0.ffn_down_exps.bias", .type = -1 }, CV_ECORRUPT,
          "'blk.0.ffn_down_exps.bias' is missing" },
        { REF2 "tiny-gptoss-gpt2-F32.gguf", { .drop_tensor = "output.weight", .type = -1 }, CV_ECORRUPT,
          "'output.weight' is missing" },
        { REF2 "tiny-gptoss-gpt2-F32.gguf", { .tensor = "blk.0.attn_sinks.weight", .ne0 = 4, .ne1 = 2, .type = -1 },
          CV_ECORRUPT, "'blk.0.attn_sinks.weight' has shape [4, 2" },
        { REF2 "tiny-gptoss-gpt2-F32.gguf",
          { .type = -1, .key = "gpt-oss.attention.sliding_window", .op = REMOVE }, CV_ECORRUPT,
          "'gpt-oss.attention.sliding_window' is missing" },
        { REF2 "tiny-gptoss-gpt2-F32.gguf",
          { .type = -1, .key = "gpt-oss.attention.sliding_window", .op = SET_U32, .u32 = 0 }, CV_ECORRUPT,
          "'gpt-oss.attention.sliding_window' = 0, must be 1.." },
        { REF2 "tiny-gptoss-gpt2-F32.gguf",
          { .type = -1, .key = "gpt-oss.rope.scaling.factor", .op = SET_F32, .f32 = 0.5f }, CV_ECORRUPT,
          "YaRN needs a factor >= 1" },
        { REF2 "tiny-gemma3-gpt2-F32.gguf", { .drop_tensor = "blk.5.post_ffw_norm.weight", .type = -1 },
          CV_ECORRUPT, "'blk.5.post_ffw_norm.weight' is missing" },
        { REF2 "tiny-gemma3-gpt2-F32.gguf",
          { .type = -1, .key = "gemma3.attention.sliding_window_pattern", .op = SET_I32_NEG, .u32 = 2 },
          CV_ECORRUPT, "'gemma3.attention.sliding_window_pattern' = -2, must be 0.." },
        { REF "tiny-llama-spm-F32.gguf",
          { .type = -1, .key = "llama.attention.layer_norm_rms_epsilon", .op = SET_F32, .f32 = NAN }, CV_ECORRUPT,
          "layer_norm_rms_epsilon' = nan" },
        { REF "tiny-llama-spm-F32.gguf",
          { .type = -1, .add_tensor = "rope_freqs.weight", .add_n = 16, .add_value = 0 }, CV_ECORRUPT,
          "'rope_freqs.weight' element 0 = 0" },
        { REF "tiny-llama-spm-F32.gguf",
          { .type = -1, .add_tensor = "rope_freqs.weight", .add_n = 15, .add_value = 1 }, CV_ECORRUPT,
          "'rope_freqs.weight' has shape [15" },
        { REF "tiny-llama-spm-F32.gguf", { .tensor = "token_embd.weight", .ne0 = 256 * 2048, .ne1 = 1, .type = -1 },
          CV_ECORRUPT, "'token_embd.weight' has 1 dims" },
        { REF "tiny-llama-spm-F32.gguf", { .tensor = "output.weight", .ne0 = 512, .ne1 = 1024, .type = -1 },
          CV_ECORRUPT, "'output.weight' has shape [512, 1024" },
        /* hybrids: the DeltaNet keys, tensors and layer pattern */
        { REF2 "tiny-qwen35-gpt2-Q8_0.gguf", { .type = -1, .key = "qwen35.ssm.state_size", .op = REMOVE },
          CV_ECORRUPT, "'qwen35.ssm.state_size' is missing" },
        { REF2 "tiny-qwen35-gpt2-Q8_0.gguf", { .type = -1, .key = "qwen35.ssm.inner_size", .op = SET_U32, .u32 = 128 },
          CV_ECORRUPT, "'qwen35.ssm.inner_size' = 128, must be" },
        { REF2 "tiny-qwen35-gpt2-Q8_0.gguf", { .type = -1, .key = "qwen35.ssm.group_count", .op = SET_U32, .u32 = 3 },
          CV_ECORRUPT, "do not split evenly over 'qwen35.ssm.group_count' = 3" },
        { REF2 "tiny-qwen35-gpt2-Q8_0.gguf", { .type = -1, .key = "qwen35.ssm.conv_kernel", .op = SET_U32, .u32 = 100 },
          CV_ECORRUPT, "'qwen35.ssm.conv_kernel' = 100, must be 1..64" },
        { REF2 "tiny-qwen35-gpt2-Q8_0.gguf", { .type = -1, .key = "qwen35.ssm.state_size", .op = SET_U32, .u32 = 4096 },
          CV_ECORRUPT, "'qwen35.ssm.state_size' = 4096, must be 1..1024" },
        { REF2 "tiny-qwen35-gpt2-Q8_0.gguf", { .drop_tensor = "blk.1.ssm_conv1d.weight", .type = -1 }, CV_ECORRUPT,
          "'blk.1.ssm_conv1d.weight' is missing" },
        { REF2 "tiny-qwen35-gpt2-Q8_0.gguf", { .drop_tensor = "blk.3.attn_q.weight", .type = -1 }, CV_ECORRUPT,
          "'blk.3.attn_q.weight' is missing" },
        { REF2 "tiny-qwen35-gpt2-Q8_0.gguf", { .drop_tensor = "blk.0.ssm_a", .type = -1, .add_tensor = "blk.0.ssm_a",
                                               .add_n = 4, .add_value = 0.5f },
          CV_ECORRUPT, "'blk.0.ssm_a' element 0 = 0.5, must be negative" },
        { REF2 "tiny-qwen35-gpt2-Q8_0.gguf", { .tensor = "blk.0.ssm_conv1d.weight", .ne0 = 8, .ne1 = 256, .type = -1 },
          CV_ECORRUPT, "'blk.0.ssm_conv1d.weight' has shape [8, 256" },
        /* the interval is read, not assumed: 2 makes layer 1 attend, and
         * the file has no attention tensors there */
        { REF2 "tiny-qwen35-gpt2-Q8_0.gguf",
          { .type = -1, .key = "qwen35.full_attention_interval", .op = SET_U32, .u32 = 2 }, CV_ECORRUPT,
          "'blk.1.attn_q.weight' is missing" },
        /* a per-layer array overrides it */
        { REF2 "tiny-qwen35-gpt2-Q8_0.gguf",
          { .type = -1, .arr_key = "qwen35.attention.recurrent_layers", .arr = (const int32_t[]){ 1, 1, 0, 0 },
            .n_arr = 4 },
          CV_ECORRUPT, "'blk.2.attn_q.weight' is missing" },
        { REF2 "tiny-qwen35-gpt2-Q8_0.gguf",
          { .type = -1, .arr_key = "qwen35.attention.recurrent_layers", .arr = (const int32_t[]){ 1, 1, 1 },
            .n_arr = 3 },
          CV_ECORRUPT, "one integer or bool per layer (4)" },
        { REF2 "tiny-qwen35-gpt2-Q8_0.gguf",
          { .type = -1, .arr_key = "qwen35.attention.recurrent_layers", .arr = (const int32_t[]){ 1, 1, 2, 0 },
            .n_arr = 4 },
          CV_ECORRUPT, "element 2 = 2, must be 0 or 1" },
        { REF2 "tiny-qwen35moe-gpt2-Q4_K_M.gguf",
          { .type = -1, .key = "qwen35moe.expert_shared_feed_forward_length", .op = REMOVE }, CV_ECORRUPT,
          "'qwen35moe.expert_shared_feed_forward_length' is missing or 0; tensor 'blk.0.ffn_gate_shexp.weight'" },
        { REF2 "tiny-qwen35moe-gpt2-Q4_K_M.gguf", { .drop_tensor = "blk.1.ffn_down_shexp.weight", .type = -1 },
          CV_ECORRUPT, "'blk.1.ffn_down_shexp.weight' is missing" },
        /* qwen3next: neither layout of the DeltaNet input, half of the
         * split one, the fused projections' shapes */
        { REF3 "tiny-qwen3next-gpt2-F32.gguf", { .drop_tensor = "blk.1.ssm_in.weight", .type = -1 }, CV_ECORRUPT,
          "'blk.1.attn_qkv.weight' is missing, and so is its alternative 'blk.1.ssm_in.weight'" },
        { REF3 "tiny-qwen3next-gpt2-F32.gguf",
          { .type = -1, .add_tensor = "blk.0.attn_gate.weight", .add_n = 16, .add_value = 1 }, CV_ECORRUPT,
          "'blk.0.attn_gate.weight' has shape [16" },
        { REF3 "tiny-qwen3next-gpt2-F32.gguf", { .tensor = "blk.2.ssm_ba.weight", .ne0 = 512, .ne1 = 4, .type = -1 },
          CV_ECORRUPT, "'blk.2.ssm_ba.weight' has shape [512, 4" },
        { REF3 "tiny-qwen3next-gpt2-F32.gguf", { .tensor = "blk.0.ssm_in.weight", .ne0 = 512, .ne1 = 192, .type = -1 },
          CV_ECORRUPT, "'blk.0.ssm_in.weight' has shape [512, 192" },
        { REF3 "tiny-qwen3next-gpt2-F32.gguf", { .drop_tensor = "blk.0.ssm_ba.weight", .type = -1 }, CV_ECORRUPT,
          "'blk.0.ssm_ba.weight' is missing" },
        /* deepseek2: MLA's keys and sizes, both query layouts, the routing
         * keys, the dense lead */
        { REF3 "tiny-deepseek2-gpt2-F32.gguf", { .type = -1, .key = "deepseek2.attention.key_length_mla", .op = REMOVE },
          CV_EUNSUPPORTED, "before llama.cpp's MLA split" },
        { REF3 "tiny-deepseek2-gpt2-F32.gguf",
          { .type = -1, .key = "deepseek2.attention.key_length", .op = SET_U32, .u32 = 64 }, CV_ECORRUPT,
          "MLA sizes disagree" },
        { REF3 "tiny-deepseek2-gpt2-F32.gguf",
          { .type = -1, .key = "deepseek2.attention.head_count_kv", .op = SET_U32, .u32 = 4 }, CV_ECORRUPT,
          "MLA sizes disagree: 4 kv heads" },
        { REF3 "tiny-deepseek2-gpt2-F32.gguf", { .drop_tensor = "blk.2.attn_q_b.weight", .type = -1 }, CV_ECORRUPT,
          "'blk.2.attn_q_b.weight' is missing, and so is its alternative 'blk.2.attn_q.weight'" },
        { REF3 "tiny-deepseek2-gpt2-F32.gguf",
          { .type = -1, .key = "deepseek2.attention.q_lora_rank", .op = SET_U32, .u32 = 0 }, CV_ECORRUPT,
          "'deepseek2.attention.q_lora_rank' is missing or 0; tensor 'blk.0.attn_q_a.weight' needs it" },
        { REF3 "tiny-deepseek2lite-gpt2-F32.gguf",
          { .type = -1, .key = "deepseek2.attention.q_lora_rank", .op = SET_U32, .u32 = 64 }, CV_ECORRUPT,
          "layer 0 has no attn_q_a tensor; a model with deepseek2.attention.q_lora_rank = 64 needs it" },
        { REF3 "tiny-deepseek2-gpt2-F32.gguf", { .tensor = "blk.1.attn_k_b.weight", .ne0 = 64, .ne1 = 128, .type = -1 },
          CV_ECORRUPT, "'blk.1.attn_k_b.weight' has shape [64, 128, 1, 1], expected [32, 64, 4]" },
        { REF3 "tiny-deepseek2-gpt2-F32.gguf",
          { .type = -1, .key = "deepseek2.expert_group_count", .op = SET_U32, .u32 = 3 }, CV_ECORRUPT,
          "8 experts in 'deepseek2.expert_group_count' = 3 groups" },
        { REF3 "tiny-deepseek2-gpt2-F32.gguf",
          { .type = -1, .key = "deepseek2.expert_group_used_count", .op = SET_U32, .u32 = 9 }, CV_ECORRUPT,
          "'deepseek2.expert_group_used_count' = 9, must be 0..4" },
        { REF3 "tiny-deepseek2-gpt2-F32.gguf",
          { .type = -1, .key = "deepseek2.expert_gating_func", .op = SET_U32, .u32 = 3 }, CV_EUNSUPPORTED,
          "'deepseek2.expert_gating_func' = 3" },
        { REF3 "tiny-deepseek2-gpt2-F32.gguf",
          { .type = -1, .key = "deepseek2.leading_dense_block_count", .op = SET_U32, .u32 = 2 }, CV_ECORRUPT,
          "'blk.1.ffn_gate.weight' is missing" },
        { REF3 "tiny-deepseek2-gpt2-F32.gguf", { .drop_tensor = "blk.2.ffn_down_shexp.weight", .type = -1 },
          CV_ECORRUPT, "'blk.2.ffn_down_shexp.weight' is missing" },
        /* gemma4: K/V where a layer computes them, the sharing rule, the
         * per-layer arrays and inputs, the 26B's experts */
        { REF3 "tiny-gemma4-gpt2-F32.gguf", { .drop_tensor = "blk.0.attn_k.weight", .type = -1 }, CV_ECORRUPT,
          "'blk.0.attn_k.weight' is missing; layer 0 computes its own K/V" },
        { REF3 "tiny-gemma4-gpt2-F32.gguf",
          { .type = -1, .key = "gemma4.attention.shared_kv_layers", .op = SET_U32, .u32 = 4 }, CV_ECORRUPT,
          "layer 2 would share the K/V of layer 1 ('gemma4.attention.shared_kv_layers' = 4)" },
        { REF3 "tiny-gemma4-gpt2-F32.gguf",
          { .type = -1, .arr_key = "gemma4.attention.head_count_kv", .arr = (const int32_t[]){ 2, 2, 1, 2, 2 },
            .n_arr = 5 },
          CV_ECORRUPT, "'gemma4.attention.head_count_kv' is an array of 5, expected one integer per layer (6)" },
        { REF3 "tiny-gemma4-gpt2-F32.gguf",
          { .type = -1, .arr_key = "gemma4.attention.head_count_kv", .arr = (const int32_t[]){ 2, 2, 3, 2, 2, 1 },
            .n_arr = 6 },
          CV_ECORRUPT, "'gemma4.attention.head_count_kv' element 2 = 3, must be 1..2" },
        { REF3 "tiny-gemma4-gpt2-F32.gguf",
          { .type = -1, .arr_key = "gemma4.feed_forward_length", .arr = (const int32_t[]){ 32, 32, 32, 64, 64, 32 },
            .n_arr = 6 },
          CV_ECORRUPT, "'blk.5.ffn_gate.weight' has shape [256, 64, 1, 1], expected [256, 32]" },
        { REF3 "tiny-gemma4-gpt2-F32.gguf", { .drop_tensor = "per_layer_proj_norm.weight", .type = -1 },
          CV_ECORRUPT, "'per_layer_proj_norm.weight' is missing; 'gemma4.embedding_length_per_layer_input' = 16" },
        { REF3 "tiny-gemma4-gpt2-F32.gguf", { .drop_tensor = "blk.3.inp_gate.weight", .type = -1 }, CV_ECORRUPT,
          "'blk.3.inp_gate.weight' is missing" },
        { REF3 "tiny-gemma4-gpt2-F32.gguf",
          { .type = -1, .key = "gemma4.embedding_length_per_layer_input", .op = SET_U32, .u32 = 8 }, CV_ECORRUPT,
          "'per_layer_token_embd.weight' has shape [96, 4096" },
        { REF3 "tiny-gemma4moe-gpt2-F32.gguf", { .drop_tensor = "blk.1.ffn_gate_up_exps.weight", .type = -1 },
          CV_ECORRUPT, "need ffn_gate_exps and ffn_up_exps, or ffn_gate_up_exps" },
        { REF3 "tiny-gemma4moe-gpt2-F32.gguf", { .type = -1, .key = "gemma4.expert_count", .op = REMOVE },
          CV_ECORRUPT, "'blk.0.ffn_gate_inp.weight' routes experts, but metadata 'gemma4.expert_count' is missing" },
        { REF3 "tiny-gemma4moe-gpt2-F32.gguf", { .drop_tensor = "blk.2.post_ffw_norm_2.weight", .type = -1 },
          CV_ECORRUPT, "'blk.2.post_ffw_norm_2.weight' is missing" },
        { REF3 "tiny-mistral3-gpt2-F32.gguf",
          { .type = -1, .key = "mistral3.attention.temperature_scale", .op = SET_F32, .f32 = -1 }, CV_ECORRUPT,
          "'mistral3.attention.temperature_scale' = -1, must be 0..100" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        cv_buf buf = { 0 };
        cv_model *m = NULL;
        cv_err err = { 0 };
        int rc = open_mutated(cases[i].src, &cases[i].mu, NULL, &buf, &m, &err);
        CHECK_MSG(rc == cases[i].code && m == NULL && strstr(err.msg, cases[i].msg) &&
                      strncmp(err.msg, "mutated.gguf: ", 14) == 0,
                  "case %zu: rc %d (want %d), \"%s\" (want \"%s\")", i, rc, cases[i].code, err.msg, cases[i].msg);
        if (m)
            cv_model_close(m);
        cv_buf_free(&buf);
    }
    /* Vocab-only GGUFs (real files with no tensors at all). */
    cv_model *m;
    cv_err err = { 0 };
    int rc = cv_model_open(test_data("vocab/ggml-vocab-gpt-2.gguf"), NULL, &m, &err);
    CHECK_MSG(rc == CV_EUNSUPPORTED && strstr(err.msg, "architecture 'gpt2'"), "vocab-only gpt2: %d %s", rc, err.msg);
    rc = cv_model_open(test_data("vocab/ggml-vocab-llama-spm.gguf"), NULL, &m, &err);
    CHECK_MSG(rc == CV_ECORRUPT && strstr(err.msg, "'token_embd.weight' is missing"), "vocab-only llama: %d %s", rc,
              err.msg);
    rc = cv_model_open("/nonexistent/model.gguf", NULL, &m, &err);
    CHECK(rc != 0 && m == NULL && strstr(err.msg, "/nonexistent/model.gguf"));
}

TEST(hybrid_layers_resolve_from_the_interval_or_the_per_layer_array)
{
    struct {
        const char *file;
        mutation mu;
        int32_t n_recurrent;
        const char *pattern; /* D: Gated DeltaNet, A: attention */
        const char *describe;
    } cases[] = {
        { REF2 "tiny-qwen35-gpt2-F32.gguf", { .type = -1 }, 3, "DDDA",
          "hybrid: 3 of 4 layers Gated DeltaNet (0-2)" },
        { REF2 "tiny-qwen35moe-gpt2-Q4_K_M.gguf", { .type = -1 }, 1, "DA",
          "hybrid: 1 of 2 layers Gated DeltaNet (0)" },
        /* the array says what the interval says */
        { REF2 "tiny-qwen35moe-gpt2-Q4_K_M.gguf",
          { .type = -1, .arr_key = "qwen35moe.attention.recurrent_layers", .arr = (const int32_t[]){ 1, 0 },
            .n_arr = 2 },
          1, "DA", "a shared expert" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        cv_buf buf = { 0 };
        cv_model *m = NULL;
        cv_err err = { 0 };
        if (open_mutated(cases[i].file, &cases[i].mu, NULL, &buf, &m, &err)) {
            CHECK_MSG(0, "case %zu: %s", i, err.msg);
            cv_buf_free(&buf);
            continue;
        }
        CHECK_EQ_INT(m->hp.n_recurrent, cases[i].n_recurrent);
        CHECK_EQ_INT(m->hp.n_rot, 16);
        CHECK(m->layers[m->hp.n_layer - 1].attn_gate);
        for (int32_t il = 0; il < m->hp.n_layer; il++)
            CHECK_MSG((m->layers[il].mixer == CV_MIXER_DELTANET) == (cases[i].pattern[il] == 'D'), "case %zu layer %d",
                      i, il);
        cv_buf d = { 0 };
        cv_model_describe(m, &d);
        CHECK_MSG(strstr(d.data, cases[i].describe) && strstr(d.data, "rope neox on 16 of 64 dims"), "case %zu: %s", i,
                  d.data);
        cv_buf_free(&d);
        cv_model_close(m);
        cv_buf_free(&buf);
    }
}

TEST(random_hyperparameters_never_crash_the_loader)
{
    static const char *const keys[] = {
        "qwen3.embedding_length", "qwen3.block_count", "qwen3.feed_forward_length", "qwen3.attention.head_count",
        "qwen3.attention.head_count_kv", "qwen3.attention.key_length", "qwen3.attention.value_length",
        "qwen3.rope.dimension_count", "qwen3.context_length",
    };
    cv_rng r;
    cv_rng_seed(&r, 42);
    int ok = 0, failed = 0;
    for (int i = 0; i < 60; i++) {
        mutation mu = { .type = -1, .key = keys[i % CV_ARRAY_LEN(keys)], .op = SET_U32 };
        static const uint32_t interesting[] = { 0, 1, 2, 3, 7, 8, 16, 31, 32, 63, 64, 128, 255, 256, 257, 512,
                                                4096, 65535, 1u << 20, 1u << 31, UINT32_MAX };
        mu.u32 = interesting[cv_rng_below(&r, CV_ARRAY_LEN(interesting))];
        cv_buf buf = { 0 };
        cv_model *m = NULL;
        cv_err err = { 0 };
        int rc = open_mutated(REF "tiny-qwen3-gpt2-Q8_0.gguf", &mu, NULL, &buf, &m, &err);
        if (rc == 0) {
            ok++;
            cv_model_close(m);
        } else {
            failed++;
            CHECK_MSG(err.msg[0] != 0, "%s = %u failed without a message", mu.key, mu.u32);
        }
        cv_buf_free(&buf);
    }
    CHECK(failed > 0 && ok > 0); /* some values are the real ones or harmless (context_length) */
}

TEST(qwen3_head_dim_comes_from_key_length_and_outputs_tie_or_not)
{
    struct {
        const char *file;
        int32_t head_dim, n_rot;
        bool tied;
        cv_rope_style style;
        bool q_norm, bias;
    } cases[] = {
        { REF "tiny-qwen3-gpt2-Q4_K_M.gguf", 64, 64, true, CV_ROPE_NEOX, true, false },
        { REF "tiny-qwen2-gpt2-Q8_0.gguf", 32, 32, true, CV_ROPE_NEOX, false, true },
        { REF "tiny-llama-spm-Q5_K_M.gguf", 32, 32, false, CV_ROPE_NORM, false, false },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        cv_model *m;
        cv_err err = { 0 };
        if (cv_model_open(test_data(cases[i].file), NULL, &m, &err)) {
            CHECK_MSG(0, "%s", err.msg);
            continue;
        }
        CHECK_EQ_INT(m->hp.head_dim, cases[i].head_dim);
        CHECK_EQ_INT(m->hp.n_rot, cases[i].n_rot);
        CHECK_EQ_INT(m->tied_output, cases[i].tied);
        CHECK_EQ_INT(m->rope.style, cases[i].style);
        CHECK_EQ_INT(m->layers[1].q_norm != NULL, cases[i].q_norm);
        CHECK_EQ_INT(m->layers[1].k_bias != NULL, cases[i].bias);
        CHECK(m->matmul_bytes > 0 && m->matmul_macs > 0);
        cv_buf d = { 0 };
        cv_model_describe(m, &d);
        CHECK(strstr(d.data, m->arch->name) == d.data);
        cv_buf_free(&d);
        cv_model_close(m);
    }
}

static float *last_logits(cv_model *m, const int32_t *ids, int32_t n)
{
    cv_engine *e;
    cv_err err = { 0 };
    cv_engine_params ep = { .n_threads = 2, .n_ctx = 256 };
    if (cv_engine_create(m, &ep, &e, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return NULL;
    }
    float *out = malloc((size_t)m->hp.n_vocab * sizeof(float));
    CHECK(ref_run(e, ids, n, NULL, out) == 0);
    cv_engine_destroy(e);
    return out;
}

static double diff(const float *a, const float *b, int32_t n)
{
    double d = 0;
    for (int32_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

TEST(fused_and_separate_projections_compute_the_same_logits)
{
    int32_t ids[40];
    for (int i = 0; i < 40; i++)
        ids[i] = (i * 37) % 2048;
    const char *files[] = { REF "tiny-llama-spm-Q4_K_M.gguf", REF "tiny-qwen2-gpt2-Q8_0.gguf" };
    for (size_t f = 0; f < CV_ARRAY_LEN(files); f++) {
        for (int deq = 0; deq < 2; deq++) {
            cv_model *a, *b;
            cv_err err = { 0 };
            cv_model_params pa = { .dequantize = deq }, pb = { .dequantize = deq, .no_fuse = true };
            if (cv_model_open(test_data(files[f]), &pa, &a, &err) || cv_model_open(test_data(files[f]), &pb, &b, &err)) {
                CHECK_MSG(0, "%s", err.msg);
                continue;
            }
            CHECK_EQ_INT(b->layers[0].n_qkv, 3);
            CHECK_EQ_INT(b->layers[0].n_gate_up, 2);
            /* Q4_K_M mixes types inside a layer only for v/down: q/k/v of
             * layer 1 differ (v is Q6_K), so that group stays separate. */
            /* One matmul per run of one dtype: Q4_K_M's layer 1 has a Q6_K
             * attn_v, so q|k stack and v stays apart there. */
            CHECK_EQ_INT(a->layers[0].n_qkv, 1);
            CHECK_EQ_INT(a->layers[1].n_qkv, deq || f == 1 ? 1 : 2);
            CHECK_EQ_INT(a->layers[0].n_gate_up, 1);
            CHECK_EQ_INT(a->matmul_macs, b->matmul_macs);
            float *la = last_logits(a, ids, 40), *lb = last_logits(b, ids, 40);
            if (la && lb)
                CHECK_MSG(diff(la, lb, a->hp.n_vocab) <= 1e-5, "%s deq=%d: fused vs separate %g", files[f], deq,
                          diff(la, lb, a->hp.n_vocab));
            free(la);
            free(lb);
            cv_model_close(a);
            cv_model_close(b);
        }
    }
}

/* Gemma 4's experts' gate and up as the converter fuses them
 * (ffn_gate_up_exps: each expert's gate rows, then its up rows) or split in
 * two tensors (llama.cpp takes both): the same logits. The split file is
 * testdata/reference3's gemma4moe rewritten. */
TEST(gemma4_experts_fused_or_split_compute_the_same_logits)
{
    cv_gguf *g;
    cv_err err = { 0 };
    if (cv_gguf_open(test_data(REF3 "tiny-gemma4moe-gpt2-F32.gguf"), &g, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    cv_gguf_writer *w = writer_with_keys(g);
    float *parts[8] = { 0 };
    int n_parts = 0, n_split = 0;
    for (int64_t i = 0; i < cv_gguf_n_tensors(g); i++) {
        const cv_gguf_tensor *t = cv_gguf_tensor_at(g, i);
        const char *at = strstr(t->name, "ffn_gate_up_exps");
        if (!at || t->type != CV_GGML_F32) {
            CHECK(cv_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->n_bytes, &err) == 0);
            continue;
        }
        const int64_t n_in = t->ne[0], ff = t->ne[1] / 2, n_exp = t->ne[2];
        for (int half = 0; half < 2; half++) {
            float *dst = parts[n_parts++] = malloc((size_t)(n_in * ff * n_exp) * sizeof(float));
            for (int64_t e = 0; e < n_exp; e++)
                memcpy(dst + e * ff * n_in, (const float *)t->data + (e * 2 * ff + half * ff) * n_in,
                       (size_t)(ff * n_in) * sizeof(float));
            char name[128];
            snprintf(name, sizeof name, "%.*s%s", (int)(at - t->name), t->name,
                     half ? "ffn_up_exps.weight" : "ffn_gate_exps.weight");
            CHECK(cv_gguf_writer_add_tensor(w, name, CV_GGML_F32, 3, (int64_t[]){ n_in, ff, n_exp, 1 }, dst,
                                            (size_t)(n_in * ff * n_exp) * sizeof(float), &err) == 0);
        }
        n_split++;
    }
    CHECK_EQ_INT(n_split, 3);
    cv_buf buf = { 0 };
    CHECK(cv_gguf_writer_to_buf(w, &buf, &err) == 0);
    cv_gguf_writer_destroy(w);
    cv_gguf *gs;
    cv_model *fused = NULL, *split = NULL;
    if (cv_gguf_open_memory(buf.data, buf.len, "split.gguf", &gs, &err) == 0 &&
        cv_model_open_gguf(gs, NULL, &split, &err))
        cv_gguf_close(gs);
    CHECK_MSG(split != NULL, "the split layout: %s", err.msg);
    CHECK(cv_model_open(test_data(REF3 "tiny-gemma4moe-gpt2-F32.gguf"), NULL, &fused, &err) == 0);
    if (split && fused) {
        int32_t ids[40];
        for (int i = 0; i < 40; i++)
            ids[i] = (i * 37) % 4096;
        float *la = last_logits(fused, ids, 40), *lb = last_logits(split, ids, 40);
        if (la && lb)
            CHECK_MSG(diff(la, lb, fused->hp.n_vocab) == 0, "fused vs split experts: %g",
                      diff(la, lb, fused->hp.n_vocab));
        free(la);
        free(lb);
    }
    if (fused)
        cv_model_close(fused);
    if (split)
        cv_model_close(split);
    cv_buf_free(&buf);
    for (int i = 0; i < n_parts; i++)
        free(parts[i]);
    cv_gguf_close(g);
}

TEST(llama3_rope_factors_follow_the_published_rule_and_the_tensor_is_used)
{
    /* Llama 3.2: theta 500000, 64 rotated dims, factor 32, low 1, high 4,
     * original context 8192. Wavelengths below 8192/4 keep their frequency,
     * above 8192/1 are divided by 32, in between a smooth ramp. */
    float f[32];
    cv_rope_llama3_factors(f, 64, 500000.0f, 32, 1, 4, 8192);
    CHECK_NEAR(f[0], 1, 0);
    CHECK_NEAR(f[31], 32, 1e-5);
    for (int i = 0; i < 32; i++) {
        double freq = pow(500000.0, -2.0 * i / 64), wl = 2 * M_PI / freq;
        if (wl < 2048) CHECK_NEAR(f[i], 1, 0);
        if (wl > 8192) CHECK_NEAR(f[i], 32, 1e-5);
        if (i) CHECK(f[i] >= f[i - 1]);
    }
    /* The tensor: all-ones changes nothing, all-twos changes the logits. */
    int32_t ids[30];
    for (int i = 0; i < 30; i++)
        ids[i] = (i * 53) % 2048;
    cv_model *base, *ones, *twos;
    cv_err err = { 0 };
    cv_buf b1 = { 0 }, b2 = { 0 };
    mutation m1 = { .type = -1, .add_tensor = "rope_freqs.weight", .add_n = 16, .add_value = 1 };
    mutation m2 = { .type = -1, .add_tensor = "rope_freqs.weight", .add_n = 16, .add_value = 2 };
    if (cv_model_open(test_data(REF "tiny-llama-spm-F32.gguf"), NULL, &base, &err) ||
        open_mutated(REF "tiny-llama-spm-F32.gguf", &m1, NULL, &b1, &ones, &err) ||
        open_mutated(REF "tiny-llama-spm-F32.gguf", &m2, NULL, &b2, &twos, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    CHECK(base->rope.freq_factors == NULL && ones->rope.freq_factors != NULL);
    float *l0 = last_logits(base, ids, 30), *l1 = last_logits(ones, ids, 30), *l2 = last_logits(twos, ids, 30);
    CHECK(diff(l0, l1, 2048) <= 1e-6);
    CHECK(diff(l0, l2, 2048) > 0.01);
    free(l0);
    free(l1);
    free(l2);
    cv_model_close(base);
    cv_model_close(ones);
    cv_model_close(twos);
    cv_buf_free(&b1);
    cv_buf_free(&b2);
}

TEST(yarn_factors_keep_fast_pairs_and_interpolate_slow_ones)
{
    /* gpt-oss: 64 rotated dims, base 150000, factor 32 from 4096: pairs up
     * to 8 keep their frequency, pairs from 18 are divided by 32 (the
     * reference2 README's correction dimensions), a linear ramp between. */
    float f[32];
    cv_rope_yarn_factors(f, 64, 150000.0f, 32, 4096, 32, 1);
    for (int i = 0; i <= 8; i++)
        CHECK_NEAR(f[i], 1, 1e-7);
    for (int i = 18; i < 32; i++)
        CHECK_NEAR(f[i], 32, 1e-5);
    for (int i = 9; i < 18; i++) {
        const double r = 1 - (i - 8) / 10.0;
        CHECK_NEAR(f[i], 1 / (r + (1 - r) / 32), 1e-5);
        CHECK(f[i] > f[i - 1]);
    }
    cv_model *m;
    cv_err err = { 0 };
    if (cv_model_open(test_data(REF2 "tiny-gptoss-gpt2-F32.gguf"), NULL, &m, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    CHECK_EQ_INT(m->hp.rope_scaling, CV_ROPE_SCALING_YARN);
    CHECK_NEAR(m->rope.mscale, 1 + 0.1 * log(32), 1e-6);
    CHECK(m->rope.freq_factors && m->rope.freq_scale == 1.0f);
    for (int i = 0; i < 32; i++)
        CHECK_NEAR(m->rope.freq_factors[i], f[i], 0);
    cv_model_close(m);
}

TEST(window_layers_and_their_rope_come_from_the_pattern)
{
    /* gpt-oss: even layers local with window 32, YaRN on both kinds, sinks
     * and biases everywhere; gemma3: layers 0-4 local (base 10000, no
     * scaling), layer 5 global (base 1e6, linear x8), post-norms, the
     * embedding scale 16 and queries scaled by 1/sqrt(64). */
    cv_model *g, *m;
    cv_err err = { 0 };
    if (cv_model_open(test_data(REF2 "tiny-gptoss-gpt2-F32.gguf"), NULL, &g, &err) ||
        cv_model_open(test_data(REF2 "tiny-gemma3-gpt2-F32.gguf"), NULL, &m, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    CHECK_EQ_INT(g->layers[0].n_swa, 32);
    CHECK_EQ_INT(g->layers[1].n_swa, 0);
    for (int il = 0; il < 2; il++) {
        const cv_layer *L = &g->layers[il];
        CHECK(L->rope.theta == 150000.0f && L->rope.freq_factors == g->rope.freq_factors && L->rope.mscale > 1.3f);
        CHECK(L->sinks && L->o_bias && L->q_bias && L->router_bias && L->exp_gate_bias && L->exp_up_bias &&
              L->exp_down_bias && !L->attn_post_norm && !L->ffn_post_norm);
    }
    CHECK(!g->tied_output && g->hp.glu == CV_GLU_SILU_CLAMPED && g->hp.routing == CV_ROUTE_TOPK_SOFTMAX);
    CHECK(g->hp.embd_scale == 1.0f && g->hp.attn_scale == 0.125f);
    for (int il = 0; il < 6; il++) {
        const cv_layer *L = &m->layers[il];
        const bool local = il < 5;
        CHECK_EQ_INT(L->n_swa, local ? 32 : 0);
        CHECK_NEAR(L->rope.theta, local ? 10000 : 1e6, 0);
        CHECK_NEAR(L->rope.freq_scale, local ? 1 : 0.125, 0);
        CHECK(L->attn_post_norm && L->ffn_post_norm && !L->sinks);
    }
    CHECK(m->tied_output && m->hp.glu == CV_GLU_GELU_TANH && m->hp.embd_scale == 16.0f && m->hp.attn_scale == 0.125f);
    cv_buf d = { 0 };
    cv_model_describe(g, &d);
    CHECK_MSG(strstr(d.data, "sliding window 32 on 1 of 2 layers") && strstr(d.data, "YaRN x32 from 4096") &&
              strstr(d.data, "attention sinks"), "%s", d.data);
    cv_buf_free(&d);
    cv_model_close(g);
    /* A period of 3 in the file: layers 0, 1, 3, 4 local. */
    cv_buf buf = { 0 };
    mutation mu = { .type = -1, .key = "gemma3.attention.sliding_window_pattern", .op = SET_U32, .u32 = 3 };
    cv_model_close(m);
    if (open_mutated(REF2 "tiny-gemma3-gpt2-F32.gguf", &mu, NULL, &buf, &m, &err) == 0) {
        for (int il = 0; il < 6; il++)
            CHECK_EQ_INT(m->layers[il].n_swa, il % 3 < 2 ? 32 : 0);
        cv_model_close(m);
    } else {
        CHECK_MSG(0, "%s", err.msg);
    }
    cv_buf_free(&buf);
}

TEST(linear_rope_scaling_is_read_from_metadata)
{
    cv_model *m;
    cv_err err = { 0 };
    cv_buf buf = { 0 };
    mutation mu = { .type = -1, .key = "llama.rope.scaling.type", .op = SET_STR, .str = "linear" };
    CHECK(open_mutated(REF "tiny-llama-spm-F32.gguf", &mu, NULL, &buf, &m, &err) == 0);
    if (m) {
        CHECK_NEAR(m->hp.rope_freq_scale, 1.0, 0); /* no factor given: 1 */
        cv_model_close(m);
    }
    cv_buf_free(&buf);
    mu = (mutation){ .type = -1, .key = "llama.rope.scale_linear", .op = SET_F32, .f32 = 4 };
    CHECK(open_mutated(REF "tiny-llama-spm-F32.gguf", &mu, NULL, &buf, &m, &err) == 0);
    if (m) {
        CHECK_NEAR(m->hp.rope_freq_scale, 0.25, 1e-7);
        CHECK_NEAR(m->rope.freq_scale, 0.25, 1e-7);
        cv_model_close(m);
    }
    cv_buf_free(&buf);
}

int main(void)
{
    test_require_data();
    RUN(hostile_models_fail_with_the_right_code_and_a_message_naming_the_fault);
    RUN(random_hyperparameters_never_crash_the_loader);
    RUN(hybrid_layers_resolve_from_the_interval_or_the_per_layer_array);
    RUN(qwen3_head_dim_comes_from_key_length_and_outputs_tie_or_not);
    RUN(fused_and_separate_projections_compute_the_same_logits);
    RUN(gemma4_experts_fused_or_split_compute_the_same_logits);
    RUN(llama3_rope_factors_follow_the_published_rule_and_the_tensor_is_used);
    RUN(linear_rope_scaling_is_read_from_metadata);
    RUN(yarn_factors_keep_fast_pairs_and_interpolate_slow_ones);
    RUN(window_layers_and_their_rope_come_from_the_pattern);
    return test_report();
}
