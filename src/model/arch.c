/* arch.c — the table of architectures the loader knows. A new architecture
 * is one arch_<name>.c defining its `cv_arch` plus one row here; nothing
 * else in corvid switches on the name. */
#include "model/model.h"

const cv_arch *const cv_archs[] = { &cv_arch_llama,   &cv_arch_qwen2,  &cv_arch_qwen3,     &cv_arch_qwen3moe,
                                     &cv_arch_gpt_oss, &cv_arch_gemma3, &cv_arch_qwen35,    &cv_arch_qwen35moe,
                                     &cv_arch_mistral3, &cv_arch_qwen3next, &cv_arch_deepseek2, &cv_arch_gemma4 };
const int cv_n_archs = (int)CV_ARRAY_LEN(cv_archs);

const cv_arch *cv_arch_find(cv_str name)
{
    for (int i = 0; i < cv_n_archs; i++)
        if (cv_str_eqz(name, cv_archs[i]->name))
            return cv_archs[i];
    return NULL;
}
