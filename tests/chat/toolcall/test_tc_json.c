/* test_tc_json.c — the tolerant streaming JSON reader (tc_json.c) and value
 * typing (tc_schema.c) on their own: a table of inputs and the canonical
 * JSON each must become (or a rejection), read whole and byte by byte (the
 * two must be identical, which is what makes streamed arguments concatenate
 * to the final text), plus hostile input: nesting past the limit, invalid
 * UTF-8, escapes cut anywhere, and every prefix of every row. */
#include "chat/toolcall/tc_int.h"
#include "test.h"

typedef struct jrow {
    const char *in;
    const char *out; /* NULL: rejected */
    unsigned flags;
} jrow;

static const jrow rows[] = {
    /* JSON as written */
    { "{\"a\": 1}", "{\"a\": 1}", 0 },
    { "{\"a\":[1,2,{\"b\":null}],\"c\":true}", "{\"a\": [1, 2, {\"b\": null}], \"c\": true}", 0 },
    { "  [ ]  ", "[]", 0 },
    { "{}", "{}", 0 },
    { "\"\\u00e9\\ud83d\\ude00\"", "\"\xc3\xa9\xf0\x9f\x98\x80\"", 0 },
    { "\"tab\\there\\nnl \\\"q\\\" \\\\ \\/\"", "\"tab\\there\\nnl \\\"q\\\" \\\\ /\"", 0 },
    { "-0.5e-3", "-0.5e-3", 0 },
    /* repairs */
    { "{'a': 'it\\'s'}", "{\"a\": \"it's\"}", 0 },
    { "{\"a\": True, \"b\": False, \"c\": None}", "{\"a\": true, \"b\": false, \"c\": null}", 0 },
    { "{\"a\": 1,}", "{\"a\": 1}", 0 },
    { "[1, 2,]", "[1, 2]", 0 },
    { "{\"a\": 1 \"b\": 2}", "{\"a\": 1, \"b\": 2}", 0 },
    { "{a: 1, b_2: \"x\"}", "{\"a\": 1, \"b_2\": \"x\"}", 0 },
    { "{\"a\": celsius}", "{\"a\": \"celsius\"}", 0 },
    { "\"line1\nline2\"", "\"line1\\nline2\"", 0 },                 /* a raw newline inside a string */
    { "\"C:\\Users\\x\"", "\"C:\\\\Users\\\\x\"", 0 },                /* invalid escapes keep the backslash */
    { "[+1, .5, 1., 1_000]", "[1, 0.5, 1.0, 1000]", 0 },
    { "\"\\x41\"", "\"A\"", 0 },
    { "\"\\ud83d\"", "\"\xef\xbf\xbd\"", 0 },                        /* a lone surrogate */
    { "\"bad \xff utf8\"", "\"bad \xef\xbf\xbd utf8\"", 0 },
    /* closed at the end of the stream */
    { "{\"a\": [1, {\"b\": \"x", "{\"a\": [1, {\"b\": \"x\"}]}", 0 },
    { "{\"a\"", "{\"a\": null}", 0 },
    { "{\"a\":", "{\"a\": null}", 0 },
    /* Gemma 4 strings */
    { "{k:<|\"|>a \"b\" \\n<|\"|>,n:[1,<|\"|>x<|\"|>]}", "{\"k\": \"a \\\"b\\\" \\\\n\", \"n\": [1, \"x\"]}", TJ_GEMMA },
    /* decoded top-level strings (names, ids) */
    { "\"get_\\u0077eather\"", "get_weather", TJ_DECODE },
    /* rejections */
    { "", NULL, 0 },
    { "   ", NULL, 0 },
    { "}", NULL, 0 },
    { "{\"a\" 1}", NULL, 0 },
    { "{\"a\": }", NULL, 0 },
    { "{return 1;}", NULL, 0 },
    { "{\"a\": word}", NULL, TJ_NO_BARE },
    { "[1] trailing", NULL, 0 },
};

/* Reads in pieces of `step` bytes (0: whole) the way the parser does: each
 * call gets the unconsumed rest plus the new bytes. */
static int read_in(const char *in, unsigned flags, size_t step, cv_buf *out)
{
    size_t n = strlen(in);
    tc_json j;
    uint64_t work = 0;
    tc_json_init(&j, flags, (tc_type){ 0 }, NULL, out, &work);
    size_t pos = 0, avail = step ? 0 : n;
    int rc = TC_MORE;
    for (;;) {
        if (step)
            avail = avail + step < n ? avail + step : n; /* the unconsumed rest stays */
        size_t used = 0;
        rc = tc_json_feed(&j, in + pos, avail - pos, avail == n, &used);
        pos += used;
        if (rc != TC_MORE || avail == n)
            break;
    }
    tc_json_fini(&j);
    if (rc == TC_DONE)
        for (size_t i = pos; i < n; i++)
            if (in[i] != ' ')
                rc = TC_FAIL;
    return rc;
}

TEST(each_row_reads_to_its_canonical_json_whole_and_byte_by_byte)
{
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++) {
        for (size_t step = 0; step <= 3; step++) {
            cv_buf out = { 0 };
            int rc = read_in(rows[i].in, rows[i].flags, step, &out);
            if (rows[i].out) {
                CHECK_MSG(rc == TC_DONE && out.data && !strcmp(out.data, rows[i].out),
                          "row %zu step %zu: \"%s\" -> rc %d \"%s\", expected \"%s\"", i, step, rows[i].in, rc,
                          out.data ? out.data : "", rows[i].out);
            } else {
                CHECK_MSG(rc != TC_DONE, "row %zu step %zu: \"%s\" accepted as \"%s\"", i, step, rows[i].in,
                          out.data ? out.data : "");
            }
            cv_buf_free(&out);
        }
    }
}

TEST(every_prefix_of_every_row_reads_without_harm)
{
    for (size_t i = 0; i < CV_ARRAY_LEN(rows); i++) {
        size_t n = strlen(rows[i].in);
        for (size_t k = 0; k <= n; k++) {
            char *p = cv_xstrndup(rows[i].in, k);
            cv_buf out = { 0 };
            int rc = read_in(p, rows[i].flags, 1, &out);
            if (rc == TC_DONE && !(rows[i].flags & TJ_DECODE)) {
                json_t *v = json_loads(out.data, JSON_DECODE_ANY, NULL);
                CHECK_MSG(v != NULL, "prefix \"%s\" gave invalid JSON \"%s\"", p, out.data);
                json_decref(v);
            }
            cv_buf_free(&out);
            free(p);
        }
    }
}

TEST(nesting_past_the_depth_limit_is_rejected_not_recursed)
{
    cv_buf in = { 0 };
    for (int i = 0; i < CV_MAX_JSON_DEPTH + 10; i++)
        cv_buf_putc(&in, '[');
    cv_buf out = { 0 };
    CHECK(read_in(in.data, 0, 0, &out) == TC_FAIL);
    cv_buf_free(&out);
    cv_buf_reset(&in);
    for (int i = 0; i < CV_MAX_JSON_DEPTH - 1; i++)
        cv_buf_putc(&in, '[');
    CHECK(read_in(in.data, 0, 0, &out) == TC_DONE); /* closed at the end */
    CHECK(out.len == 2 * (CV_MAX_JSON_DEPTH - 1));
    cv_buf_free(&out);
    cv_buf_free(&in);
}

TEST(members_are_typed_by_the_schema_while_streaming)
{
    json_t *props = json_loads("{\"n\": {\"type\": \"integer\"}, \"s\": {\"type\": \"string\"}, \"b\": {\"type\": "
                               "\"boolean\"}, \"o\": {\"type\": \"object\"}, \"u\": {\"type\": [\"integer\", \"null\"]}}",
                               0, NULL);
    static const struct {
        const char *in, *out;
    } t[] = {
        { "{\"n\": \"42\", \"s\": 42, \"b\": \"false\"}", "{\"n\": 42, \"s\": \"42\", \"b\": false}" },
        { "{\"n\": \"4x\"}", "{\"n\": \"4x\"}" }, /* does not fit: kept */
        { "{\"s\": [1, \"a\"]}", "{\"s\": \"[1, \\\"a\\\"]\"}" },
        { "{\"o\": \"{\\\"k\\\": 1}\", \"u\": \"null\"}", "{\"o\": {\"k\": 1}, \"u\": null}" },
        { "{\"s\": null, \"n\": 3.0}", "{\"s\": null, \"n\": 3.0}" },
        { "{\"x\": \"5\"}", "{\"x\": \"5\"}" }, /* undeclared: as written */
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(t); i++) {
        for (int bytewise = 0; bytewise < 2; bytewise++) {
            cv_buf out = { 0 };
            tc_json j;
            tc_json_init(&j, 0, (tc_type){ 0 }, props, &out, NULL);
            size_t n = strlen(t[i].in), pos = 0, used = 0;
            int rc = TC_MORE;
            if (!bytewise) {
                rc = tc_json_feed(&j, t[i].in, n, true, &used);
            } else {
                for (size_t a = 1; a <= n && rc == TC_MORE; a++) {
                    rc = tc_json_feed(&j, t[i].in + pos, a - pos, a == n, &used);
                    pos += used;
                }
            }
            CHECK_MSG(rc == TC_DONE && !strcmp(out.data, t[i].out), "%s -> %s (bytewise %d)", t[i].in,
                      out.data ? out.data : "", bytewise);
            tc_json_fini(&j);
            cv_buf_free(&out);
        }
    }
    json_decref(props);
}

TEST(text_is_coerced_to_the_schema_type_losslessly)
{
    static const struct {
        const char *in;
        unsigned mask;
        bool as_json;
        const char *out;
    } t[] = {
        { " 42 ", TT_INTEGER, false, "42" },
        { "3.0", TT_INTEGER, false, "3" },
        { "3.5", TT_INTEGER, false, "3.5" }, /* no lossless integer: the number as written */
        { "3.5", TT_NUMBER, false, "3.5" },
        { "1.5e10", TT_NUMBER, false, "1.5e10" },
        { "True", TT_BOOLEAN, false, "true" },
        { "null", TT_STRING | TT_NULL, false, "null" },
        { "hello world", TT_STRING | TT_NULL, false, "\"hello world\"" },
        { "  keep spaces\n", TT_STRING, false, "\"  keep spaces\\n\"" },
        { "[\"a\"]", TT_ARRAY, false, "[\"a\"]" },
        { "[{\\\"id\\\": \\\"1\\\"}]", TT_ARRAY, false, "[{\"id\": \"1\"}]" }, /* escaped JSON */
        { "{\"k\": 1}", TT_STRING | TT_OBJECT, false, "{\"k\": 1}" },
        { "42", 0, true, "42" },
        { "hello", 0, true, "\"hello\"" },
        { "42", 0, false, "\"42\"" },
        { "nope", TT_INTEGER, false, "\"nope\"" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(t); i++) {
        cv_buf out = { 0 };
        tc_coerce_text(t[i].in, strlen(t[i].in), (tc_type){ t[i].mask }, t[i].as_json, &out);
        CHECK_MSG(out.data && !strcmp(out.data, t[i].out), "\"%s\" mask %u -> %s, expected %s", t[i].in, t[i].mask,
                  out.data ? out.data : "", t[i].out);
        cv_buf_free(&out);
    }
}

TEST(schema_types_are_read_from_type_unions_and_enums)
{
    json_t *props = json_loads("{\"a\": {\"type\": [\"integer\", \"null\"]}, \"b\": {\"anyOf\": [{\"type\": \"string\"},"
                               " {\"type\": \"object\"}]}, \"c\": {\"enum\": [1, 2]}, \"d\": {\"properties\": {}},"
                               " \"e\": {\"oneOf\": [{\"type\": \"string\"}, {}]}, \"f\": {}}",
                               0, NULL);
    CHECK_EQ_INT(tc_prop_type(props, "a", 1).mask, TT_INTEGER | TT_NULL);
    CHECK_EQ_INT(tc_prop_type(props, "b", 1).mask, TT_STRING | TT_OBJECT);
    CHECK_EQ_INT(tc_prop_type(props, "c", 1).mask, TT_INTEGER);
    CHECK_EQ_INT(tc_prop_type(props, "d", 1).mask, TT_OBJECT);
    CHECK_EQ_INT(tc_prop_type(props, "e", 1).mask, 0); /* an untyped branch: anything */
    CHECK_EQ_INT(tc_prop_type(props, "f", 1).mask, 0);
    CHECK_EQ_INT(tc_prop_type(props, "zz", 2).mask, 0);
    CHECK_EQ_INT(tc_prop_type(NULL, "a", 1).mask, 0);
    json_decref(props);
}

int main(void)
{
    RUN(each_row_reads_to_its_canonical_json_whole_and_byte_by_byte);
    RUN(every_prefix_of_every_row_reads_without_harm);
    RUN(nesting_past_the_depth_limit_is_rejected_not_recursed);
    RUN(members_are_typed_by_the_schema_while_streaming);
    RUN(text_is_coerced_to_the_schema_type_losslessly);
    RUN(schema_types_are_read_from_type_unions_and_enums);
    return test_report();
}
