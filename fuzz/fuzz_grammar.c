/* fuzz_grammar.c — libFuzzer target for the grammar layer: the input is
 * split at its first NUL into a JSON Schema (or, when it does not parse as
 * JSON, a regular expression) and a document. Compiling must either succeed
 * or fail with an error, never crash or run away (the limits in
 * base/limits.h bound every automaton); a compiled grammar is then fed the
 * document byte by byte, which must either be accepted or refused. Seeds:
 * tests/grammar/schemas (scripts/run-fuzz.sh). */
#include "grammar/grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    const char *nul = memchr(p, 0, size);
    size_t n_schema = nul ? (size_t)(nul - p) : size;
    const char *doc = nul ? nul + 1 : p + size;
    size_t n_doc = nul ? size - n_schema - 1 : 0;
    cv_grammar *g = NULL;
    cv_err err;
    cv_buf warn = { 0 };
    cv_grammar_opts o = { .warnings = &warn };
    json_t *j = json_loadb(p, n_schema, JSON_DECODE_ANY, NULL);
    int rc;
    if (j) {
        rc = cv_grammar_from_schema(j, &o, &g, &err);
        json_decref(j);
    } else {
        rc = cv_grammar_from_regex(p, n_schema, &g, &err);
    }
    cv_buf_free(&warn);
    if (rc)
        return 0;
    cv_grammar_state *s = NULL;
    if (cv_grammar_state_create(g, NULL, &s, &err) == 0) {
        for (size_t i = 0; i < n_doc; i++)
            if (cv_grammar_state_accept_bytes(s, doc + i, 1, NULL))
                break;
        (void)cv_grammar_state_can_end(s);
        (void)cv_grammar_state_min_bytes(s);
        cv_grammar_state_destroy(s);
    }
    cv_grammar_destroy(g);
    return 0;
}
