/* tc_select.c — the format registry (cv_tc_formats[], one row per
 * tc_<name>.c) and the choice of a format for a model: by the syntax its
 * chat template renders for assistant tool calls (each format lists
 * substrings that identify its template; the most specific match wins),
 * then by its name or architecture, then a default. A new wire syntax is a
 * new tc_<name>.c plus one row here (STYLE.md "Tool-call format").
 *
 * Table order is also the order in which output detection (tc_detect.c)
 * claims markers that several rows share: the first row writing a marker
 * reads it (<tool_call> is Hermes, whose reader sniffs its neighbours'
 * bodies; <tool_calls> is Hunyuan's, which drops text after the calls). */
#include <ctype.h>

#include "chat/toolcall/tc_int.h"

#define F(n) extern const cv_tc_format tc_fmt_##n;
F(hermes) F(longcat) F(qwen3_coder_xml) F(seed_oss) F(glm45) F(llama3_json) F(pythonic) F(lfm2) F(olmo3)
F(mistral_v11) F(mistral_pre_v11) F(deepseek_v3) F(deepseek_v31) F(deepseek_dsml) F(kimi_k2) F(gpt_oss_harmony)
F(minimax_m1) F(minimax_m2) F(minimax_m3) F(jamba) F(hunyuan_a13b) F(apriel) F(granite) F(granite_20b_fc)
F(internlm2) F(phi4_mini) F(firefunction_v2) F(xlam) F(functionary_v3_1) F(functionary_v3_2) F(command_r7b)
F(command_r_plus) F(step3) F(gemma4) F(apertus) F(gigachat3) F(nemotron_nano_v2) F(minicpm5) F(plain_content)
#undef F

const cv_tc_format *const cv_tc_formats[] = {
    &tc_fmt_hermes, &tc_fmt_qwen3_coder_xml, &tc_fmt_glm45, &tc_fmt_seed_oss, &tc_fmt_longcat,
    &tc_fmt_llama3_json, &tc_fmt_pythonic, &tc_fmt_lfm2, &tc_fmt_olmo3, &tc_fmt_mistral_v11,
    &tc_fmt_mistral_pre_v11, &tc_fmt_deepseek_v3, &tc_fmt_deepseek_v31, &tc_fmt_deepseek_dsml, &tc_fmt_kimi_k2,
    &tc_fmt_gpt_oss_harmony, &tc_fmt_minimax_m2, &tc_fmt_minimax_m3, &tc_fmt_hunyuan_a13b, &tc_fmt_minimax_m1,
    &tc_fmt_jamba, &tc_fmt_apriel, &tc_fmt_granite, &tc_fmt_granite_20b_fc, &tc_fmt_internlm2,
    &tc_fmt_phi4_mini, &tc_fmt_firefunction_v2, &tc_fmt_xlam, &tc_fmt_functionary_v3_1, &tc_fmt_functionary_v3_2,
    &tc_fmt_command_r7b, &tc_fmt_command_r_plus, &tc_fmt_step3, &tc_fmt_gemma4, &tc_fmt_apertus,
    &tc_fmt_gigachat3, &tc_fmt_nemotron_nano_v2, &tc_fmt_minicpm5, &tc_fmt_plain_content,
};
const int cv_tc_n_formats = (int)CV_ARRAY_LEN(cv_tc_formats);

int cv_tc_format_count(void) { return cv_tc_n_formats; }

const cv_tc_format *cv_tc_format_at(int i)
{
    return i >= 0 && i < cv_tc_n_formats ? cv_tc_formats[i] : NULL;
}

const char *cv_tc_format_name(const cv_tc_format *f) { return f ? f->name : NULL; }
const char *cv_tc_format_summary(const cv_tc_format *f) { return f ? f->summary : NULL; }
const char *const *cv_tc_format_efforts(const cv_tc_format *f) { return f ? f->efforts : NULL; }
const cv_tool_syntax *cv_tc_format_syntax(const cv_tc_format *f) { return f ? f->syntax : NULL; }

static bool eq_ci(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b) && !((*a == '-' || *a == '_') && (*b == '-' || *b == '_')))
            return false;
    return !*a && !*b;
}

const cv_tc_format *cv_tc_format_find(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < cv_tc_n_formats; i++) {
        const cv_tc_format *f = cv_tc_formats[i];
        if (eq_ci(f->name, name))
            return f;
        for (const char *const *a = f->aliases; a && *a; a++)
            if (eq_ci(*a, name))
                return f;
    }
    return NULL;
}

static bool has(cv_str hay, const char *needle)
{
    size_t m = strlen(needle);
    return m <= hay.len && memmem(hay.ptr, hay.len, needle, m) != NULL;
}

const cv_tc_format *cv_tc_detect_why(cv_str tmpl, cv_str model, const char **why)
{
    const cv_tc_format *best = NULL;
    int best_rank = -1;
    for (int i = 0; tmpl.len && i < cv_tc_n_formats; i++) {
        const cv_tc_format *f = cv_tc_formats[i];
        for (int row = 0; row < 4 && f->tmpl[row]; row++) {
            bool all = true;
            for (const char *const *s = f->tmpl[row]; *s && all; s++)
                all = has(tmpl, *s);
            if (all && f->tmpl_rank > best_rank) {
                best = f;
                best_rank = f->tmpl_rank;
            }
        }
    }
    if (best) {
        if (why)
            *why = "template";
        return best;
    }
    if (model.len && model.len < 512) {
        char low[512];
        for (size_t i = 0; i < model.len; i++)
            low[i] = (char)tolower((unsigned char)model.ptr[i]);
        cv_str m = { low, model.len };
        size_t best_len = 0;
        for (int i = 0; i < cv_tc_n_formats; i++)
            for (const char *const *p = cv_tc_formats[i]->names; p && *p; p++)
                if (strlen(*p) > best_len && has(m, *p)) {
                    best = cv_tc_formats[i];
                    best_len = strlen(*p);
                }
        if (best) {
            if (why)
                *why = "name";
            return best;
        }
    }
    if (why)
        *why = "default";
    /* a template that renders no tool syntax: no own markers, every known
     * syntax through the fallback; nothing known at all: the commonest one */
    return tmpl.len ? &tc_fmt_plain_content : &tc_fmt_hermes;
}

const cv_tc_format *cv_tc_detect(cv_str tmpl, cv_str model)
{
    return cv_tc_detect_why(tmpl, model, NULL);
}
