/* test_grammar.c — the grammar layer on bytes and tokens: regular
 * expressions and JSON Schemas accept exactly the documents they should
 * (tables of accepted and rejected texts), masks equal a brute-force check
 * of every token of a real vocabulary along random walks, and hostile or
 * pathological schemas fail fast with an error that names the construct. */
#include "grammar/grammar_int.h"
#include "gvocab.h"
#include "test.h"

static bool accepts(cv_grammar *g, const char *doc)
{
    cv_grammar_state *s = NULL;
    if (cv_grammar_state_create(g, NULL, &s, NULL))
        return false;
    bool ok = cv_grammar_state_accept_bytes(s, doc, strlen(doc), NULL) == 0 && cv_grammar_state_can_end(s);
    cv_grammar_state_destroy(s);
    return ok;
}

static cv_grammar *schema(const char *text)
{
    cv_grammar *g = NULL;
    cv_err err;
    cv_buf warn = { 0 };
    cv_grammar_opts o = { .warnings = &warn };
    if (cv_grammar_from_schema_text(text, strlen(text), &o, &g, &err))
        fprintf(stderr, "schema %s: %s\n", text, err.msg);
    cv_buf_free(&warn);
    return g;
}

typedef struct doc_case { const char *doc; bool ok; } doc_case;

TEST(regex_grammars_match_whole_strings)
{
    static const struct { const char *re; doc_case d[6]; } cases[] = {
        { "ab*c", { { "ac", 1 }, { "abbbc", 1 }, { "ab", 0 }, { "xac", 0 } } },
        { "[a-c]{2,3}", { { "ab", 1 }, { "abc", 1 }, { "a", 0 }, { "abca", 0 }, { "ad", 0 } } },
        { "(foo|ba[rz])+", { { "foo", 1 }, { "barfoobaz", 1 }, { "", 0 }, { "fo", 0 } } },
        { "\\d{3}-\\w+", { { "123-abc_9", 1 }, { "12-a", 0 }, { "123-", 0 } } },
        { "[^a-z]+", { { "ABC", 1 }, { "\xC3\xA9\xE2\x82\xAC", 1 }, { "aB", 0 } } },
        { "\\u00e9?x", { { "\xC3\xA9x", 1 }, { "x", 1 }, { "\xC3x", 0 } } },
        { "^wf_[a-z0-9-]{6,}$", { { "wf_abc-12", 1 }, { "wf_abc", 0 }, { "xwf_abcdef", 0 } } },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        cv_grammar *g = NULL;
        cv_err err;
        int rc = cv_grammar_from_regex(cases[i].re, strlen(cases[i].re), &g, &err);
        CHECK_MSG(rc == 0, "%s: %s", cases[i].re, err.msg);
        if (rc)
            continue;
        for (int k = 0; k < 6 && cases[i].d[k].doc; k++)
            CHECK_MSG(accepts(g, cases[i].d[k].doc) == cases[i].d[k].ok, "regex %s on '%s': expected %d",
                      cases[i].re, cases[i].d[k].doc, cases[i].d[k].ok);
        cv_grammar_destroy(g);
    }
}

/* fuzz/seeds/fuzz_grammar/timeout-posix-class-in-class: a POSIX class in a
 * class used to be refused without moving on, and the class loop spun. */
TEST(regex_refuses_a_posix_class_inside_a_class_at_once)
{
    static const char *const res[] = { "[|:+[:][.[+|.]", "[[:alpha:]]", "[a[:]" };
    for (size_t i = 0; i < CV_ARRAY_LEN(res); i++) {
        cv_grammar *g = NULL;
        cv_err err = { 0 };
        CHECK_MSG(cv_grammar_from_regex(res[i], strlen(res[i]), &g, &err) == CV_EUNSUPPORTED, "%s", res[i]);
        CHECK_MSG(strstr(err.msg, "POSIX classes"), "%s: %s", res[i], err.msg);
        cv_grammar_destroy(g);
    }
}

TEST(schemas_accept_valid_and_reject_invalid_documents)
{
    static const struct { const char *schema; doc_case d[8]; } cases[] = {
        { "{\"type\":\"string\"}", { { "\"hi\"", 1 }, { "\"a\\\"b\\u00e9\\ud83d\\ude00\"", 1 }, { "\"\\ud83d\"", 0 },
                                     { "\"\\u0000\"", 0 }, { "\"a\nb\"", 0 }, { "hi", 0 }, { "\"\xC3\"", 0 } } },
        { "{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}",
          { { "-5", 1 }, { "0", 1 }, { "120", 1 }, { "121", 0 }, { "-6", 0 }, { "007", 0 }, { "99", 1 }, { "-0", 0 } } },
        { "{\"type\":\"integer\",\"exclusiveMinimum\":0,\"maximum\":9007199254740991}",
          { { "1", 1 }, { "0", 0 }, { "9007199254740991", 1 }, { "9007199254740992", 0 }, { "-1", 0 } } },
        { "{\"type\":\"number\",\"minimum\":0,\"maximum\":600000}",
          { { "0", 1 }, { "0.5", 1 }, { "600000", 1 }, { "600000.0", 1 }, { "600000.1", 0 }, { "-0.5", 0 }, { "1e3", 0 } } },
        { "{\"type\":\"number\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":1}",
          { { "0.5", 1 }, { "0", 0 }, { "0.0", 0 }, { "1", 0 }, { "0.001", 1 } } },
        { "{\"type\":\"number\"}", { { "-1.5e10", 1 }, { "3", 1 }, { "1.", 0 }, { ".5", 0 }, { "01", 0 } } },
        { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},\"b\":{\"type\":\"boolean\"},\"c\":{\"type\":\"null\"}},"
          "\"required\":[\"b\"]}",
          { { "{\"b\":true}", 1 }, { "{\"a\":\"x\",\"b\":false}", 1 }, { "{\"a\": \"x\", \"b\": true, \"c\": null}", 1 },
            { "{\"a\":\"x\"}", 0 }, { "{\"b\":true,\"a\":\"x\"}", 0 }, { "{\"b\":true,}", 0 }, { "{\n  \"b\": true\n}", 1 },
            { "{\"b\":true,\"d\":1}", 0 } } },
        { "{\"type\":\"array\",\"items\":{\"enum\":[\"x\",1,null]},\"minItems\":1,\"maxItems\":3}",
          { { "[\"x\"]", 1 }, { "[1, null, \"x\"]", 1 }, { "[]", 0 }, { "[1,1,1,1]", 0 }, { "[2]", 0 } } },
        { "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\","
          "\"items\":{\"$ref\":\"#/$defs/n\"}}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/n\"}",
          { { "{\"v\":1}", 1 }, { "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[]},{\"v\":3}]}", 1 }, { "{\"kids\":[]}", 0 },
            { "{\"v\":1,\"kids\":[{}]}", 0 } } },
        { "{\"anyOf\":[{\"type\":\"string\",\"enum\":[\"pending\",\"done\"]},{\"type\":\"string\",\"const\":\"deleted\"}]}",
          { { "\"pending\"", 1 }, { "\"deleted\"", 1 }, { "\"other\"", 0 } } },
        { "{\"type\":\"string\",\"format\":\"date\"}",
          { { "\"2024-02-29\"", 1 }, { "\"2023-02-29\"", 0 }, { "\"2000-02-29\"", 1 }, { "\"1900-02-29\"", 0 },
            { "\"2024-04-31\"", 0 }, { "\"2024-12-31\"", 1 } } },
        { "{\"type\":\"string\",\"format\":\"uuid\"}",
          { { "\"123e4567-e89b-12d3-a456-426614174000\"", 1 }, { "\"123e4567-e89b-12d3-a456-42661417400\"", 0 } } },
        { "{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}\\\\d$\"}", { { "\"AB1\"", 1 }, { "\"AB12\"", 0 } } },
        { "{\"type\":\"string\",\"pattern\":\"a\\\"b\"}", { { "\"xxa\\\"byy\"", 1 }, { "\"ab\"", 0 } } },
        { "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
          { { "\"ab\"", 1 }, { "\"\\u00e9\\n\"", 1 }, { "\"a\"", 0 }, { "\"abcd\"", 0 }, { "\"\xF0\x9F\x98\x80x\"", 1 } } },
        { "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
          { { "{}", 1 }, { "{\"a\":1,\"b\":2}", 1 }, { "{\"a\":\"x\"}", 0 } } },
        { "{\"type\":[\"string\",\"null\"]}", { { "null", 1 }, { "\"s\"", 1 }, { "1", 0 } } },
        { "{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
          "{\"properties\":{\"b\":{\"type\":\"integer\"}},\"required\":[\"b\"]}]}",
          { { "{\"a\":1,\"b\":2}", 1 }, { "{\"a\":1}", 0 } } },
        { "true", { { "{\"x\":[1,{\"y\":null}],\"z\":\"w\"}", 1 }, { "[", 0 } } },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        cv_grammar *g = schema(cases[i].schema);
        CHECK_MSG(g != NULL, "schema %zu did not compile", i);
        if (!g)
            continue;
        for (int k = 0; k < 8 && cases[i].d[k].doc; k++)
            CHECK_MSG(accepts(g, cases[i].d[k].doc) == cases[i].d[k].ok, "schema %s on '%s': expected %d",
                      cases[i].schema, cases[i].d[k].doc, cases[i].d[k].ok);
        cv_grammar_destroy(g);
    }
}

/* Every token's mask bit must equal what accepting it would say. */
static void walk_and_compare(cv_grammar *g, const cv_grammar_vocab *v, uint64_t seed, int steps, int *n_checked)
{
    cv_grammar_state *s = NULL;
    CHECK(cv_grammar_state_create(g, v, &s, NULL) == 0);
    int32_t n = cv_grammar_vocab_n(v);
    uint64_t *mask = calloc(((size_t)n + 63) / 64, 8);
    cv_rng rng;
    cv_rng_seed(&rng, seed);
    for (int step = 0; step < steps && !cv_grammar_state_done(s); step++) {
        CHECK(cv_grammar_state_mask(s, mask, NULL) == 0);
        int32_t n_allowed = 0, bad = 0;
        for (int32_t t = 0; t < n; t++) {
            bool m = mask[t >> 6] >> (t & 63) & 1;
            bool a = cv_grammar_state_allows(s, t);
            if (m != a && bad++ < 3)
                CHECK_MSG(false, "step %d token %d '%.*s': mask %d, allows %d", step, t,
                          (int)cv_grammar_vocab_piece(v, t).len, cv_grammar_vocab_piece(v, t).ptr, m, a);
            n_allowed += m;
        }
        (*n_checked)++;
        CHECK(n_allowed > 0);
        if (!n_allowed || bad)
            break;
        int32_t pick = (int32_t)cv_rng_below(&rng, (uint64_t)n_allowed), tok = -1;
        for (int32_t t = 0; t < n; t++)
            if ((mask[t >> 6] >> (t & 63) & 1) && pick-- == 0) {
                tok = t;
                break;
            }
        CHECK(cv_grammar_state_accept(s, tok, NULL) == 0);
    }
    free(mask);
    cv_grammar_state_destroy(s);
}

TEST(masks_equal_a_token_by_token_check_on_a_real_vocabulary)
{
    cv_grammar_vocab *v = gv_load(test_data("reference/models/tiny-qwen3-gpt2-F32.gguf"));
    CHECK(v != NULL);
    if (!v)
        return;
    static const char *const schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"file_path\":{\"type\":\"string\"},\"offset\":{\"type\":\"integer\","
        "\"minimum\":0,\"maximum\":9007199254740991},\"mode\":{\"enum\":[\"a\",\"b c\"]}},\"required\":[\"file_path\"]}",
        "{\"type\":\"array\",\"items\":{\"type\":\"number\",\"minimum\":-10,\"maximum\":10},\"maxItems\":5}",
        "{\"$defs\":{\"t\":{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/t\"},"
        "\"maxItems\":2}}}},\"$ref\":\"#/$defs/t\"}",
        "{\"type\":\"string\",\"pattern\":\"^[a-z]+( [a-z]+)*$\"}",
        "true",
    };
    int checked = 0;
    for (size_t i = 0; i < CV_ARRAY_LEN(schemas); i++) {
        cv_grammar *g = schema(schemas[i]);
        CHECK(g != NULL);
        if (!g)
            continue;
        for (uint64_t seed = 1; seed <= 3; seed++)
            walk_and_compare(g, v, seed * 7 + i, 40, &checked);
        cv_grammar_destroy(g);
    }
    CHECK(checked > 100);
    cv_grammar_vocab_destroy(v);
}

TEST(pathological_schemas_fail_fast_with_a_clear_error)
{
    static const struct { const char *schema; int code; const char *needle; } cases[] = {
        { "{\"type\":\"string\",\"pattern\":\"^(a|b)*a(a|b){24}$\"}", CV_ELIMIT, "automaton states" },
        { "{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", CV_EUNSUPPORTED, "backreferences" },
        { "{\"type\":\"string\",\"pattern\":\"(?=a)b\"}", CV_EUNSUPPORTED, "lookahead" },
        { "{\"type\":\"string\",\"pattern\":\"[a-\"}", CV_EINVAL, "pattern" },
        { "{\"$ref\":\"#\"}", CV_EINVAL, "no finite" },
        { "{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":\"null\"}]}", CV_EINVAL, "left-recursive" },
        { "{\"$ref\":\"http://example.com/s.json\"}", CV_EUNSUPPORTED, "only local" },
        { "{\"$ref\":\"#/$defs/missing\"}", CV_EINVAL, "does not resolve" },
        { "{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#\"}},\"required\":[\"a\"]}", CV_EINVAL, "no finite" },
        { "{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", CV_EINVAL, "no integer" },
        { "{\"type\":\"string\",\"maxLength\":1,\"minLength\":3}", CV_EINVAL, "maxLength" },
        { "{\"type\":\"wat\"}", CV_EINVAL, "unknown type" },
        { "{\"type\":\"string\",\"minLength\":100000}", CV_ELIMIT, "CV_MAX_GRAMMAR_REPEAT" },
        { "{\"type\":\"string\",\"pattern\":\"a{100000}\"}", CV_ELIMIT, "repetition" },
        { "{\"enum\":[]}", CV_EINVAL, "enum" },
        { "[1]", CV_EINVAL, "schema must be" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        cv_grammar *g = NULL;
        cv_err err = { 0 };
        uint64_t t0 = cv_now_ns();
        int rc = cv_grammar_from_schema_text(cases[i].schema, strlen(cases[i].schema), NULL, &g, &err);
        CV_UNUSED(t0);
        CHECK_MSG(rc == cases[i].code, "%s: rc %d, expected %d (%s)", cases[i].schema, rc, cases[i].code, err.msg);
        CHECK_MSG(strstr(err.msg, cases[i].needle) != NULL, "%s: message '%s' lacks '%s'", cases[i].schema, err.msg,
                  cases[i].needle);
        CHECK(g == NULL);
        cv_grammar_destroy(g);
    }
    /* deep nesting and a huge enum */
    cv_buf deep = { 0 };
    for (int i = 0; i < 200; i++)
        cv_buf_puts(&deep, "{\"type\":\"array\",\"items\":");
    cv_buf_puts(&deep, "true");
    for (int i = 0; i < 200; i++)
        cv_buf_putc(&deep, '}');
    cv_grammar *g = NULL;
    cv_err err;
    CHECK(cv_grammar_from_schema_text(deep.data, deep.len, NULL, &g, &err) != 0);
    cv_buf_free(&deep);
    cv_buf big = { 0 };
    cv_buf_puts(&big, "{\"enum\":[");
    for (int i = 0; i < CV_MAX_GRAMMAR_ALTS + 1; i++)
        cv_buf_printf(&big, "%s\"v%d\"", i ? "," : "", i);
    cv_buf_puts(&big, "]}");
    CHECK(cv_grammar_from_schema_text(big.data, big.len, NULL, &g, &err) == CV_ELIMIT);
    cv_buf_free(&big);
}

int main(void)
{
    test_require_data();
    RUN(regex_grammars_match_whole_strings);
    RUN(regex_refuses_a_posix_class_inside_a_class_at_once);
    RUN(schemas_accept_valid_and_reject_invalid_documents);
    RUN(masks_equal_a_token_by_token_check_on_a_real_vocabulary);
    RUN(pathological_schemas_fail_fast_with_a_clear_error);
    return test_report();
}
