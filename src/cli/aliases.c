/* aliases.c — the alias table: short names for models worth running behind
 * a coding agent, each mapped to one GGUF on Hugging Face (repo + file of a
 * sensible default quant: Q8_0 where the model is small enough that quality
 * matters more than bytes, Q4_K_M above that) and to what the model's
 * authors recommend for sampling (their model card / generation_config).
 *
 * n_ctx is the context corvid suggests serving the model with: its trained
 * context, capped where the KV cache of the full context would not fit the
 * machines such a model is run on. Agents need room: Claude Code's first
 * request alone is ~20k tokens, so no row goes below 32k.
 *
 * Repos and file names were checked against public references when the row
 * was written; a repo that renames a file breaks only its row (`corvid pull
 * ORG/REPO:QUANT` still works). Adding a model is one row. */
#include <strings.h>

#include "cli/models.h"
#include "model/model.h"
#include "sched/sched.h"

/* Qwen3 model card, thinking mode (the template's default): T 0.6, top-p
 * 0.95, top-k 20, min-p 0. Qwen2.5/Qwen3 coder generation_config: T 0.7,
 * top-p 0.8, top-k 20, repetition penalty 1.05. Llama 3.x generation_config:
 * T 0.6, top-p 0.9. DeepSeek-R1 distills: T 0.6, top-p 0.95. gpt-oss: T 1.0,
 * top-p 1.0. Qwen3.5 / Qwen3.6 model cards, thinking mode for precise coding:
 * Qwen3's (T 0.6, top-p 0.95, top-k 20, min-p 0). Gemma 3 generation_config:
 * T 1.0, top-p 0.95, top-k 64; Gemma 4's model cards the same.
 * GLM-4.7-Flash, Z.ai's recommendation for tool calling and SWE-bench (as
 * unsloth's guide quotes it): T 0.7, top-p 1.0. Devstral: a low
 * temperature, 0.15 (Mistral's Devstral cards; LM Studio's listing of
 * Devstral Small 2), nothing else cut. DeepSeek-V2 and V2-Lite
 * generation_config: T 0.3, top-p 0.95. */
#define QWEN3_THINK 0.6f, 0.95f, 0.0f, 0.0f, 20
#define QWEN3_INSTRUCT 0.7f, 0.8f, 0.0f, 0.0f, 20
#define QWEN_CODER 0.7f, 0.8f, 0.0f, 1.05f, 20
#define LLAMA3 0.6f, 0.9f, 0.0f, 0.0f, 0
#define R1_DISTILL 0.6f, 0.95f, 0.0f, 0.0f, 0
#define GPT_OSS 1.0f, 1.0f, 0.0f, 0.0f, 0
#define GEMMA3 1.0f, 0.95f, 0.0f, 0.0f, 64
#define GLM47_TOOLS 0.7f, 1.0f, 0.0f, 0.0f, 0
#define DEVSTRAL 0.15f, 1.0f, 0.0f, 0.0f, 0
#define DEEPSEEK_V2 0.3f, 0.95f, 0.0f, 0.0f, 0

const cv_model_alias cv_model_aliases[] = {
    { "qwen3-0.6b", "Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf",
      "Qwen3 0.6B (thinking), 0.6 GB: the smallest model that calls tools", 32768, QWEN3_THINK,
      .arch = "qwen3", .shape = "qwen3-0.6b" },
    { "qwen3-1.7b", "Qwen/Qwen3-1.7B-GGUF", "Qwen3-1.7B-Q8_0.gguf",
      "Qwen3 1.7B (thinking), 1.8 GB", 32768, QWEN3_THINK,
      .arch = "qwen3" },
    { "qwen3-4b", "Qwen/Qwen3-4B-GGUF", "Qwen3-4B-Q4_K_M.gguf",
      "Qwen3 4B (thinking), 2.5 GB", 32768, QWEN3_THINK,
      .arch = "qwen3" },
    { "qwen3-4b-instruct-2507", "unsloth/Qwen3-4B-Instruct-2507-GGUF", "Qwen3-4B-Instruct-2507-Q4_K_M.gguf",
      "Qwen3 4B Instruct 2507 (no thinking), 2.5 GB", 65536, QWEN3_INSTRUCT,
      .arch = "qwen3" },
    { "qwen3-8b", "Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf",
      "Qwen3 8B (thinking), 5.0 GB", 32768, QWEN3_THINK,
      .arch = "qwen3" },
    { "qwen3-14b", "Qwen/Qwen3-14B-GGUF", "Qwen3-14B-Q4_K_M.gguf",
      "Qwen3 14B (thinking), 9.0 GB", 32768, QWEN3_THINK,
      .arch = "qwen3" },
    { "qwen3-32b", "Qwen/Qwen3-32B-GGUF", "Qwen3-32B-Q4_K_M.gguf",
      "Qwen3 32B (thinking), 19.8 GB", 32768, QWEN3_THINK,
      .arch = "qwen3" },
    { "qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B-GGUF", "Qwen3-30B-A3B-Q4_K_M.gguf",
      "Qwen3 30B-A3B MoE (thinking), 18.6 GB, 3B active: fast on CPU", 32768, QWEN3_THINK,
      .arch = "qwen3moe", .shape = "qwen3-30b-a3b" },
    { "qwen3-coder-30b-a3b", "unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF", "Qwen3-Coder-30B-A3B-Instruct-Q4_K_M.gguf",
      "Qwen3 Coder 30B-A3B MoE, 18.6 GB: the coding-agent model", 65536, QWEN_CODER,
      .arch = "qwen3moe", .shape = "qwen3-coder-30b-a3b" },
    { "qwen3.5-4b", "unsloth/Qwen3.5-4B-GGUF", "Qwen3.5-4B-Q4_K_M.gguf",
      "Qwen3.5 4B hybrid (Gated DeltaNet, thinking), 2.7 GB: small KV, long context", 65536, QWEN3_THINK,
      .arch = "qwen35", .shape = "qwen3.5-4b" },
    { "qwen3.5-9b", "unsloth/Qwen3.5-9B-GGUF", "Qwen3.5-9B-Q4_K_M.gguf",
      "Qwen3.5 9B hybrid (Gated DeltaNet, thinking), 5.7 GB", 65536, QWEN3_THINK,
      .arch = "qwen35", .shape = "qwen3.5-9b" },
    { "qwen3.6-35b-a3b", "unsloth/Qwen3.6-35B-A3B-GGUF", "Qwen3.6-35B-A3B-UD-Q4_K_M.gguf",
      "Qwen3.6 35B-A3B hybrid MoE (thinking), 22.1 GB, 3B active: the coding-agent hybrid", 65536, QWEN3_THINK,
      .arch = "qwen35moe", .shape = "qwen3.6-35b-a3b" },
    { "qwen3-coder-next", "unsloth/Qwen3-Coder-Next-GGUF", "Qwen3-Coder-Next-UD-Q4_K_XL.gguf",
      "Qwen3 Coder Next 80B-A3B hybrid MoE (Gated DeltaNet, no thinking), ~46 GB, 3B active", 65536, QWEN_CODER,
      .arch = "qwen3next", .shape = "qwen3-coder-next" },
    { "glm-4.7-flash", "unsloth/GLM-4.7-Flash-GGUF", "GLM-4.7-Flash-UD-Q4_K_XL.gguf",
      "GLM-4.7-Flash 30B-A3B MoE (latent attention: ~54 KB of KV a position, thinking), ~18 GB", 65536, GLM47_TOOLS,
      .arch = "deepseek2", .shape = "glm-4.7-flash" },
    { "deepseek-v2-lite", "mradermacher/DeepSeek-V2-Lite-Chat-GGUF", "DeepSeek-V2-Lite-Chat.Q4_K_M.gguf",
      "DeepSeek-V2-Lite-Chat 16B-A2.4B MoE (latent attention without q_lora: ~31 KB of KV a position), 10.4 GB",
      65536, DEEPSEEK_V2, .arch = "deepseek2", .shape = "deepseek-v2-lite" },
    { "qwen2.5-coder-1.5b", "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", "qwen2.5-coder-1.5b-instruct-q8_0.gguf",
      "Qwen2.5 Coder 1.5B Instruct, 1.9 GB", 32768, QWEN_CODER,
      .arch = "qwen2" },
    { "qwen2.5-coder-7b", "Qwen/Qwen2.5-Coder-7B-Instruct-GGUF", "qwen2.5-coder-7b-instruct-q4_k_m.gguf",
      "Qwen2.5 Coder 7B Instruct, 4.7 GB", 32768, QWEN_CODER,
      .arch = "qwen2" },
    { "qwen2.5-coder-14b", "bartowski/Qwen2.5-Coder-14B-Instruct-GGUF", "Qwen2.5-Coder-14B-Instruct-Q4_K_M.gguf",
      "Qwen2.5 Coder 14B Instruct, 9.0 GB", 32768, QWEN_CODER,
      .arch = "qwen2" },
    { "qwen2.5-coder-32b", "bartowski/Qwen2.5-Coder-32B-Instruct-GGUF", "Qwen2.5-Coder-32B-Instruct-Q4_K_M.gguf",
      "Qwen2.5 Coder 32B Instruct, 19.9 GB", 32768, QWEN_CODER,
      .arch = "qwen2" },
    { "llama3.2-1b", "bartowski/Llama-3.2-1B-Instruct-GGUF", "Llama-3.2-1B-Instruct-Q8_0.gguf",
      "Llama 3.2 1B Instruct, 1.3 GB", 32768, LLAMA3,
      .arch = "llama", .shape = "llama3.2-1b" },
    { "llama3.2-3b", "bartowski/Llama-3.2-3B-Instruct-GGUF", "Llama-3.2-3B-Instruct-Q4_K_M.gguf",
      "Llama 3.2 3B Instruct, 2.0 GB", 32768, LLAMA3,
      .arch = "llama" },
    { "llama3.1-8b", "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
      "Llama 3.1 8B Instruct, 4.9 GB", 32768, LLAMA3,
      .arch = "llama" },
    { "deepseek-r1-qwen-7b", "bartowski/DeepSeek-R1-Distill-Qwen-7B-GGUF", "DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.gguf",
      "DeepSeek R1 distilled into Qwen2.5 7B (reasoning), 4.7 GB", 32768, R1_DISTILL,
      .arch = "qwen2" },
    { "gpt-oss-20b", "ggml-org/gpt-oss-20b-GGUF", "gpt-oss-20b-mxfp4.gguf",
      "OpenAI gpt-oss 20B MoE (reasoning, MXFP4), 12.1 GB", 65536, GPT_OSS,
      .arch = "gpt-oss", .shape = "gpt-oss-20b" },
    { "gemma3-4b", "ggml-org/gemma-3-4b-it-GGUF", "gemma-3-4b-it-Q4_K_M.gguf",
      "Google Gemma 3 4B IT (5 sliding-window : 1 global layers), 2.5 GB", 65536, GEMMA3,
      .arch = "gemma3", .shape = "gemma3-4b" },
    /* Gemma 4 (their shapes' q4_k_m plans: 16.8, 5.2 and 18.7 GB) */
    { "gemma4-26b-a4b", "ggml-org/gemma-4-26B-A4B-it-GGUF", "gemma-4-26B-A4B-it-Q4_K_M.gguf",
      "Google Gemma 4 26B-A4B IT MoE, 16.9 GB, 3.8B active: fast on CPU", 65536, GEMMA3,
      .arch = "gemma4", .shape = "gemma4-26b-a4b" },
    { "gemma4-e4b", "unsloth/gemma-4-E4B-it-GGUF", "gemma-4-E4B-it-Q4_K_M.gguf",
      "Google Gemma 4 E4B IT (per-layer inputs, shared K/V), 5.0 GB", 65536, GEMMA3,
      .arch = "gemma4", .shape = "gemma4-e4b" },
    { "gemma4-31b", "unsloth/gemma-4-31B-it-GGUF", "gemma-4-31B-it-Q4_K_M.gguf",
      "Google Gemma 4 31B IT, about 18 GB", 32768, GEMMA3,
      .arch = "gemma4", .shape = "gemma4-31b" },
    { "devstral-small-2", "unsloth/Devstral-Small-2-24B-Instruct-2512-GGUF",
      "Devstral-Small-2-24B-Instruct-2512-Q4_K_M.gguf",
      "Mistral Devstral Small 2 24B (agentic coding, [TOOL_CALLS]), 14.3 GB", 65536, DEVSTRAL,
      .arch = "mistral3", .shape = "devstral-small-2-24b" },
    /* Embedding models (/v1/embeddings), Qwen's own GGUFs: last-token
     * pooling at the EOS the tokenizer appends, Matryoshka-trained down to
     * 32 values (the Qwen3-Embedding model card); files written before
     * llama.cpp stored qwen3.pooling_type get the pooling from the row. */
    { "qwen3-embedding-0.6b", "Qwen/Qwen3-Embedding-0.6B-GGUF", "Qwen3-Embedding-0.6B-Q8_0.gguf",
      "Qwen3 Embedding 0.6B (1024-value vectors), 0.6 GB: code and text search", 32768, 0, 0, 0, 0, 0,
      .arch = "qwen3", .shape = "qwen3-0.6b", .pooling = CV_POOL_LAST, .min_dims = 32 },
    { "qwen3-embedding-4b", "Qwen/Qwen3-Embedding-4B-GGUF", "Qwen3-Embedding-4B-Q4_K_M.gguf",
      "Qwen3 Embedding 4B (2560-value vectors), 2.5 GB", 32768, 0, 0, 0, 0, 0,
      .arch = "qwen3", .pooling = CV_POOL_LAST, .min_dims = 32 },
};
const int cv_n_model_aliases = (int)CV_ARRAY_LEN(cv_model_aliases);

int cv_model_alias_runnable(const cv_model_alias *a, cv_err *err)
{
    if (cv_arch_find(cv_str_of(a->arch)))
        return 0;
    cv_buf names = { 0 };
    for (int i = 0; i < cv_n_archs; i++)
        cv_buf_printf(&names, "%s%s", i ? ", " : "", cv_archs[i]->name);
    int rc = cv_err_set(err, CV_EUNSUPPORTED, "corvid cannot run %s yet: %s is a '%s' model and corvid runs %s",
                        a->name, a->file, a->arch, names.data);
    cv_buf_free(&names);
    return rc;
}

const cv_model_alias *cv_model_alias_find(const char *name)
{
    for (int i = 0; i < cv_n_model_aliases; i++)
        if (!strcasecmp(cv_model_aliases[i].name, name))
            return &cv_model_aliases[i];
    return NULL;
}

const cv_model_alias *cv_model_alias_by_file(const char *repo, const char *file)
{
    for (int i = 0; i < cv_n_model_aliases; i++)
        if (!strcasecmp(cv_model_aliases[i].repo, repo) && !strcasecmp(cv_model_aliases[i].file, file))
            return &cv_model_aliases[i];
    return NULL;
}
