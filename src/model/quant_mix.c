/* quant_mix.c — the quantization mixes: which tensor type each matrix of a
 * model gets in a file of a given llama-quantize file type, restated from
 * llama-quantize's default per-tensor rules closely enough for realistic
 * sizes and speeds. `corvid synth` writes files by it and `corvid
 * bench-kernels` builds its matrices by it, so the two cannot drift.
 *   q4_k_m / q5_k_m: Q4_K / Q5_K, but attn_v and ffn_down take Q6_K in the
 *     "more bits" layers (the first and last eighth, and every third one in
 *     between), and the output matrix (or a tied embedding) takes Q6_K;
 *   q4_0: Q4_0 with a Q6_K output; q6_k: all Q6_K; q8_0, f16, f32: uniform;
 *   iq4_xs: IQ4_XS with a Q6_K output;
 *   q2_k / q3_k_m: Q2_K / Q3_K with a Q6_K output, attn_v and ffn_down
 *     (and so the experts' down projections) taking Q3_K / Q4_K in every
 *     layer (llama-quantize gives Q2_K files Q4_K attn_v where the model
 *     shares each KV head among 4 or more query heads, Q3_K_M files Q5_K
 *     in their first layers, and both a bigger attn_output: within a few
 *     percent of the bytes);
 *   mxfp4 (llama-quantize's MXFP4_MOE, as gpt-oss ships: ggml-org's
 *     gpt-oss-20b-mxfp4.gguf holds 72 MXFP4 tensors, 98 Q8_0, 289 F32):
 *     experts MXFP4, every other matrix Q8_0;
 *   otherwise experts as their dense counterparts (gate/up the base type,
 *   down bumped in the same layers), the shared expert as the routed ones,
 *   a hybrid's DeltaNet input (attn_qkv) as attn_v and its other matrices
 *   the base type; latent attention's projections (attn_q_a/_b,
 *   attn_kv_a_mqa, attn_k_b, attn_v_b) the base type (none is named attn_v);
 *   gemma4's per-layer embedding as the output type, its other per-layer
 *   matrices the base type;
 *   a row that is not a multiple of 256 falls back as ggml's tools do:
 *   Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K, Q3_K, IQ4_XS -> IQ4_NL.
 * Norm weights, biases, routers, rope factors and a hybrid's conv taps,
 * decay parameters and shared-expert gate stay F32. */
#include "model/synth.h"

struct cv_quant_mix {
    const char *name;
    uint32_t file_type; /* general.file_type (llama_ftype) */
    uint32_t base;      /* most matrices */
    uint32_t output;    /* the output matrix, or the embedding when tied */
    uint32_t bumped;    /* attn_v / ffn_down of "more bits" layers; base if none */
    uint32_t experts;   /* every expert matrix, when not 0; 0: as their dense counterparts */
    bool bump_all;      /* bumped in every layer, not only the "more bits" ones */
};

static const cv_quant_mix mixes[] = {
    { "f32", 0, CV_GGML_F32, CV_GGML_F32, CV_GGML_F32, 0, false },
    { "f16", 1, CV_GGML_F16, CV_GGML_F16, CV_GGML_F16, 0, false },
    { "q8_0", 7, CV_GGML_Q8_0, CV_GGML_Q8_0, CV_GGML_Q8_0, 0, false },
    { "q4_0", 2, CV_GGML_Q4_0, CV_GGML_Q6_K, CV_GGML_Q4_0, 0, false },
    { "q6_k", 18, CV_GGML_Q6_K, CV_GGML_Q6_K, CV_GGML_Q6_K, 0, false },
    { "q4_k_m", 15, CV_GGML_Q4_K, CV_GGML_Q6_K, CV_GGML_Q6_K, 0, false },
    { "q5_k_m", 17, CV_GGML_Q5_K, CV_GGML_Q6_K, CV_GGML_Q6_K, 0, false },
    { "iq4_xs", 30, CV_GGML_IQ4_XS, CV_GGML_Q6_K, CV_GGML_IQ4_XS, 0, false },
    { "mxfp4", 38, CV_GGML_Q8_0, CV_GGML_Q8_0, CV_GGML_Q8_0, CV_GGML_MXFP4, false },
    { "q2_k", 10, CV_GGML_Q2_K, CV_GGML_Q6_K, CV_GGML_Q3_K, 0, true },
    { "q3_k_m", 12, CV_GGML_Q3_K, CV_GGML_Q6_K, CV_GGML_Q4_K, 0, true },
};

const cv_quant_mix *cv_quant_mix_find(const char *name)
{
    for (size_t i = 0; name && i < CV_ARRAY_LEN(mixes); i++)
        if (!strcmp(mixes[i].name, name))
            return &mixes[i];
    return NULL;
}

const cv_quant_mix *cv_quant_mix_at(int i) { return i >= 0 && i < (int)CV_ARRAY_LEN(mixes) ? &mixes[i] : NULL; }
const char *cv_quant_mix_name(const cv_quant_mix *m) { return m->name; }
uint32_t cv_quant_mix_file_type(const cv_quant_mix *m) { return m->file_type; }

static bool more_bits(int il, int n)
{
    return il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2;
}

static uint32_t fallback(uint32_t type, int64_t n_in)
{
    if (n_in % 256 == 0)
        return type;
    switch (type) {
    case CV_GGML_Q4_K: return CV_GGML_Q5_0;
    case CV_GGML_Q5_K: return CV_GGML_Q5_1;
    case CV_GGML_Q6_K: return CV_GGML_Q8_0;
    case CV_GGML_Q2_K: case CV_GGML_Q3_K: case CV_GGML_IQ4_XS: return CV_GGML_IQ4_NL;
    default: return type;
    }
}

uint32_t cv_quant_mix_type(const cv_quant_mix *x, cv_role role, int il, int n_layer, int64_t n_in, bool tied)
{
    uint32_t t;
    switch (role) {
    case CV_ROLE_OUTPUT: t = x->output; break;
    case CV_ROLE_TOKEN_EMBD: t = tied ? x->output : x->base; break;
    case CV_ROLE_PL_TOKEN_EMBD: t = x->output; break; /* as llama-quantize takes it for a token embedding */
    case CV_ROLE_FFN_GATE_EXPS: case CV_ROLE_FFN_UP_EXPS: case CV_ROLE_FFN_DOWN_EXPS: case CV_ROLE_FFN_GATE_UP_EXPS:
        if (x->experts) {
            t = x->experts;
            break;
        }
        t = role != CV_ROLE_FFN_DOWN_EXPS || !(x->bump_all || more_bits(il, n_layer)) ? x->base : x->bumped;
        break;
    case CV_ROLE_ATTN_V: case CV_ROLE_FFN_DOWN: case CV_ROLE_FFN_DOWN_SHEXP: case CV_ROLE_SSM_QKV: case CV_ROLE_SSM_IN:
        t = x->bump_all || more_bits(il, n_layer) ? x->bumped : x->base;
        break;
    case CV_ROLE_ATTN_Q: case CV_ROLE_ATTN_K: case CV_ROLE_ATTN_OUT: case CV_ROLE_FFN_GATE: case CV_ROLE_FFN_UP:
    case CV_ROLE_FFN_GATE_SHEXP: case CV_ROLE_FFN_UP_SHEXP:
    case CV_ROLE_SSM_Z: case CV_ROLE_SSM_BETA: case CV_ROLE_SSM_ALPHA: case CV_ROLE_SSM_OUT: case CV_ROLE_SSM_BA:
    case CV_ROLE_ATTN_Q_A: case CV_ROLE_ATTN_Q_B: case CV_ROLE_ATTN_KV_A: case CV_ROLE_ATTN_K_B: case CV_ROLE_ATTN_V_B:
    case CV_ROLE_PL_MODEL_PROJ: case CV_ROLE_PL_GATE: case CV_ROLE_PL_PROJ:
        t = x->base;
        break;
    default: return CV_GGML_F32; /* norms, biases, rope factors, routers, conv taps, decays, gate vectors */
    }
    return fallback(t, n_in);
}
