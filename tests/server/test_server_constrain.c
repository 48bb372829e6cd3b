/* test_server_constrain.c — constrained decoding as the server runs it
 * (sched/constrain.c): the production backend over a real random-weight
 * model (testdata reference tiny-qwen3, GPT-2 vocabulary) generates through
 * the scheduler's sampling hook, and what comes out is read back by the real
 * tool-call parser or parsed as JSON and checked here against the request.
 * The hook alone is driven with hostile logits (every allowed token banned,
 * random noise) to show that the grammar always wins and the output always
 * ends complete within max_tokens. The heavy corpus (100+ schemas x 20
 * generations, validated by Ajv) runs against the release binary in
 * tests/js/server/constrain.test.mjs. */
#include <math.h>

#include "chat/chat.h"
#include "model/model.h"
#include "sched/constrain.h"
#include "server/server.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

#define MODEL "reference/models/tiny-qwen3-gpt2-Q8_0.gguf"

static cv_server_backend *be;

static const char *ADDRESS =
    "{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\",\"maxLength\":12},"
    "\"zip\":{\"type\":\"string\",\"pattern\":\"^\\\\d{5}$\"},\"n\":{\"type\":\"integer\",\"minimum\":1,"
    "\"maximum\":9},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]},\"maxItems\":3}},"
    "\"required\":[\"street\",\"zip\",\"n\"],\"additionalProperties\":false}";

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":10},\"days\":{\"type\":\"integer\",\"minimum\":1,"
    "\"maximum\":7}},\"required\":[\"city\",\"days\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"path\":{\"type\":\"string\",\"maxLength\":16}},\"required\":[\"path\"]}}}]";

/* A chat request: one user message, temperature 1, a seed. */
static cv_chat_request *request(uint64_t seed, int32_t max_tokens)
{
    cv_chat_request *r = cv_xcalloc(1, sizeof *r);
    cv_chat_request_init(r);
    json_decref(r->messages);
    r->messages = json_pack("[{s:s,s:s}]", "role", "user", "content", "Say something.");
    r->sample.temperature = 1.0f;
    r->sample.seed = seed;
    r->sample.has_seed = true;
    r->max_tokens = max_tokens;
    return r;
}

static void request_free(cv_chat_request *r)
{
    cv_chat_request_fini(r);
    free(r);
}

typedef struct result {
    int rc;
    cv_err err;
    cv_buf text;
    int32_t n_gen;
    cv_finish_reason finish;
} result;

/* Renders, submits through the backend (which builds the hook) and
 * collects the generated text (end-of-generation tokens left out). */
static void generate(const cv_chat_request *r, result *out)
{
    memset(out, 0, sizeof *out);
    int32_t *ids = NULL, n = 0;
    cv_buf opener = { 0 };
    if ((out->rc = be->encode_chat(be->ctx, r, &ids, &n, &opener, &out->err)))
        return;
    cv_sched_params p = { .prompt = ids, .n_prompt = n, .max_tokens = r->max_tokens, .sample = r->sample };
    cv_sched_req *sr = NULL;
    out->rc = be->submit(be->ctx, r, (cv_str){ opener.data ? opener.data : "", opener.len }, &p, &sr, &out->err);
    free(ids);
    cv_buf_free(&opener);
    if (out->rc)
        return;
    void *d = be->detok_create(be->ctx);
    for (;;) {
        cv_sched_event ev;
        if (be->next(sr, 1000, &ev) != 0)
            continue;
        if (ev.type == CV_SCHED_TOKEN) {
            out->n_gen++;
            if (!be->is_eog(be->ctx, ev.token))
                be->detok_feed(d, ev.token, &out->text);
        } else if (ev.type == CV_SCHED_DONE) {
            out->finish = ev.finish;
            break;
        } else if (ev.type == CV_SCHED_ERROR) {
            out->rc = ev.err.code ? ev.err.code : CV_EINVAL;
            out->err = ev.err;
            break;
        }
    }
    be->detok_flush(d, &out->text);
    be->detok_destroy(d);
    be->release(sr);
}

/* Code points of a valid UTF-8 string (the schema counts those). */
static size_t n_cps(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static bool all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* The checks the address schema makes, written out by hand (the compiler's
 * own matcher is not the judge). */
static void check_address(const char *text, int seed)
{
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    CHECK_MSG(json_is_object(doc), "seed %d: not a JSON object (%s): %.300s", seed, je.text, text);
    if (!doc)
        return;
    const char *street = json_string_value(json_object_get(doc, "street"));
    const char *zip = json_string_value(json_object_get(doc, "zip"));
    json_t *nv = json_object_get(doc, "n"), *tags = json_object_get(doc, "tags");
    CHECK_MSG(street && n_cps(street) <= 12, "seed %d: street: %.300s", seed, text);
    CHECK_MSG(zip && strlen(zip) == 5 && all_digits(zip, 5), "seed %d: zip: %.300s", seed, text);
    CHECK_MSG(json_is_integer(nv) && json_integer_value(nv) >= 1 && json_integer_value(nv) <= 9, "seed %d: n: %.300s",
              seed, text);
    CHECK_MSG(!tags || (json_is_array(tags) && json_array_size(tags) <= 3), "seed %d: tags: %.300s", seed, text);
    size_t i;
    json_t *t;
    json_array_foreach(tags, i, t) CHECK_MSG(json_is_string(t) && (!strcmp(json_string_value(t), "a") ||
                                                                   !strcmp(json_string_value(t), "b")),
                                             "seed %d: tag: %.300s", seed, text);
    const char *key;
    json_t *v;
    json_object_foreach(doc, key, v) CHECK_MSG(!strcmp(key, "street") || !strcmp(key, "zip") || !strcmp(key, "n") ||
                                                   !strcmp(key, "tags"),
                                               "seed %d: extra key %s", seed, key);
    json_decref(doc);
}

TEST(a_json_schema_response_is_a_valid_document_from_the_real_engine)
{
    for (int seed = 1; seed <= 6; seed++) {
        cv_chat_request *r = request((uint64_t)seed, 300);
        r->response_format = json_pack("{s:s,s:{s:s,s:o}}", "type", "json_schema", "json_schema", "name", "address",
                                       "schema", json_loads(ADDRESS, 0, NULL));
        result res;
        generate(r, &res);
        CHECK_MSG(res.rc == 0, "seed %d: %s", seed, res.err.msg);
        CHECK_MSG(res.finish == CV_FINISH_STOP, "seed %d: finish %d after %d tokens", seed, res.finish, res.n_gen);
        check_address(res.text.data ? res.text.data : "", seed);
        cv_buf_free(&res.text);
        request_free(r);
    }
}

TEST(json_object_gives_an_object)
{
    for (int seed = 1; seed <= 4; seed++) {
        cv_chat_request *r = request((uint64_t)seed, 200);
        r->response_format = json_pack("{s:s}", "type", "json_object");
        result res;
        generate(r, &res);
        CHECK_MSG(res.rc == 0, "%s", res.err.msg);
        json_t *doc = json_loads(res.text.data ? res.text.data : "", 0, NULL);
        CHECK_MSG(json_is_object(doc), "seed %d: %.300s", seed, res.text.data);
        json_decref(doc);
        cv_buf_free(&res.text);
        request_free(r);
    }
}

TEST(a_small_max_tokens_still_ends_with_a_complete_document)
{
    /* The shortest address is 33 bytes; 40 tokens leave the random model
     * little room, so the budget rule has to steer most steps. */
    for (int seed = 1; seed <= 6; seed++) {
        cv_chat_request *r = request((uint64_t)seed + 100, 40);
        r->response_format = json_pack("{s:s,s:{s:s,s:o}}", "type", "json_schema", "json_schema", "name", "a",
                                       "schema", json_loads(ADDRESS, 0, NULL));
        result res;
        generate(r, &res);
        CHECK_MSG(res.rc == 0, "%s", res.err.msg);
        CHECK(res.n_gen <= 40);
        CHECK_MSG(res.finish == CV_FINISH_STOP, "seed %d: finish %d", seed, res.finish);
        check_address(res.text.data ? res.text.data : "", seed + 100);
        cv_buf_free(&res.text);
        request_free(r);
    }
    /* below the shortest output: cut by length, not failed */
    cv_chat_request *r = request(5, 8);
    r->response_format = json_pack("{s:s,s:{s:s,s:o}}", "type", "json_schema", "json_schema", "name", "a", "schema",
                                   json_loads(ADDRESS, 0, NULL));
    result res;
    generate(r, &res);
    CHECK_MSG(res.rc == 0, "%s", res.err.msg);
    CHECK_EQ_INT(res.finish, CV_FINISH_LENGTH);
    CHECK_MSG(res.text.data && res.text.data[0] == '{', "%s", res.text.data);
    cv_buf_free(&res.text);
    request_free(r);
}

/* Parses text with the real hermes parser and the request's tools. */
static void parse_calls(const char *text, const json_t *tools, cv_chat_parse_result *out)
{
    memset(out, 0, sizeof *out);
    cv_chat_parse_opts po = { .format = cv_tc_format_find("hermes"), .tools = tools, .id_seed = 1 };
    cv_err err;
    CHECK_MSG(cv_chat_parse_text(&po, text, strlen(text), out, &err) == 0, "%s", err.msg);
}

static void check_call(const cv_chat_tool_call *c, const char *text)
{
    json_t *args = json_loads(c->arguments, 0, NULL);
    CHECK_MSG(json_is_object(args), "arguments %s of %.300s", c->arguments, text);
    if (!strcmp(c->name, "get_weather")) {
        const char *city = json_string_value(json_object_get(args, "city"));
        json_t *days = json_object_get(args, "days");
        CHECK_MSG(city && n_cps(city) <= 10, "%s", c->arguments);
        CHECK_MSG(json_is_integer(days) && json_integer_value(days) >= 1 && json_integer_value(days) <= 7, "%s",
                  c->arguments);
    } else {
        CHECK_MSG(!strcmp(c->name, "read_file"), "tool %s", c->name);
        CHECK_MSG(json_is_string(json_object_get(args, "path")), "%s", c->arguments);
    }
    json_decref(args);
}

TEST(tool_choice_required_gives_a_call_the_real_parser_reads_back)
{
    int seen[2] = { 0, 0 };
    for (int seed = 1; seed <= 8; seed++) {
        cv_chat_request *r = request((uint64_t)seed, 200);
        json_decref(r->tools);
        r->tools = json_loads(TOOLS, 0, NULL);
        r->tool_choice = CV_TOOL_CHOICE_REQUIRED;
        r->parallel_tool_calls = false;
        result res;
        generate(r, &res);
        CHECK_MSG(res.rc == 0, "%s", res.err.msg);
        const char *text = res.text.data ? res.text.data : "";
        cv_chat_parse_result pr;
        parse_calls(text, r->tools, &pr);
        CHECK_MSG(pr.n_calls == 1, "seed %d: %d calls in %.300s", seed, pr.n_calls, text);
        if (pr.n_calls >= 1) {
            check_call(&pr.calls[0], text);
            seen[!strcmp(pr.calls[0].name, "read_file")]++;
        }
        cv_chat_parse_result_fini(&pr);
        cv_buf_free(&res.text);
        request_free(r);
    }
    printf("required: %d get_weather, %d read_file\n", seen[0], seen[1]);
}

TEST(a_named_tool_choice_calls_that_tool)
{
    for (int seed = 1; seed <= 6; seed++) {
        cv_chat_request *r = request((uint64_t)seed, 200);
        json_decref(r->tools);
        r->tools = json_loads(TOOLS, 0, NULL);
        r->tool_choice = CV_TOOL_CHOICE_NAMED;
        r->tool_choice_name = cv_xstrdup(seed & 1 ? "read_file" : "get_weather");
        result res;
        generate(r, &res);
        CHECK_MSG(res.rc == 0, "%s", res.err.msg);
        const char *text = res.text.data ? res.text.data : "";
        cv_chat_parse_result pr;
        parse_calls(text, r->tools, &pr);
        CHECK_MSG(pr.n_calls >= 1, "seed %d: no call in %.300s", seed, text);
        for (int i = 0; i < pr.n_calls; i++) {
            CHECK_EQ_STR(pr.calls[i].name, r->tool_choice_name);
            check_call(&pr.calls[i], text);
        }
        cv_chat_parse_result_fini(&pr);
        cv_buf_free(&res.text);
        request_free(r);
    }
}

TEST(what_cannot_be_enforced_is_the_requests_error_naming_it)
{
    static const struct {
        const char *schema;
        int code;
        const char *says;
    } bad[] = {
        { "{\"type\":\"string\",\"pattern\":\"(?=a)b\"}", CV_EUNSUPPORTED, "#" },
        { "{\"$ref\":\"https://example.com/x.json\"}", CV_EUNSUPPORTED, "$ref" },
        { "{\"type\":\"integer\",\"minimum\":5,\"maximum\":1}", CV_EINVAL, "minimum" },
        { "{\"enum\":[]}", CV_EINVAL, "enum" },
        { "{\"type\":\"string\",\"pattern\":\"(a|b)*a(a|b){24}\"}", CV_ELIMIT, "limit" },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(bad); i++) {
        cv_chat_request *r = request(1, 50);
        r->response_format = json_pack("{s:s,s:{s:s,s:o}}", "type", "json_schema", "json_schema", "name", "x",
                                       "schema", json_loads(bad[i].schema, 0, NULL));
        result res;
        generate(r, &res);
        CHECK_MSG(res.rc == bad[i].code, "%s: rc %d (%s)", bad[i].schema, res.rc, res.err.msg);
        CHECK_MSG(strstr(res.err.msg, bad[i].says) != NULL, "%s: message '%s' does not name %s", bad[i].schema,
                  res.err.msg, bad[i].says);
        cv_buf_free(&res.text);
        request_free(r);
    }
    /* a named tool that is not declared, a forced call without tools */
    cv_chat_request *r = request(1, 50);
    json_decref(r->tools);
    r->tools = json_loads(TOOLS, 0, NULL);
    r->tool_choice = CV_TOOL_CHOICE_NAMED;
    r->tool_choice_name = cv_xstrdup("delete_everything");
    result res;
    generate(r, &res);
    CHECK_EQ_INT(res.rc, CV_EINVAL);
    CHECK_MSG(strstr(res.err.msg, "delete_everything") != NULL, "%s", res.err.msg);
    request_free(r);
    r = request(1, 50);
    r->tool_choice = CV_TOOL_CHOICE_REQUIRED;
    generate(r, &res);
    CHECK_EQ_INT(res.rc, CV_EINVAL);
    CHECK_MSG(strstr(res.err.msg, "tools") != NULL, "%s", res.err.msg);
    request_free(r);
}

/* ---- the hook alone, with a tokenizer and logits made up here ---- */

typedef struct hook_env {
    cv_model *m;
    cv_tok *tok;
    int32_t n_vocab;
    float *logits;
    cv_rng rng;
} hook_env;

static bool env_open(hook_env *h)
{
    memset(h, 0, sizeof *h);
    cv_err err;
    if (cv_model_open(test_data(MODEL), NULL, &h->m, &err) || cv_tok_load(h->m->gguf, &h->tok, &err)) {
        CHECK_MSG(false, "%s", err.msg);
        return false;
    }
    h->n_vocab = cv_tok_n_vocab(h->tok);
    h->logits = cv_xmalloc((size_t)h->n_vocab * sizeof *h->logits);
    cv_rng_seed(&h->rng, 7);
    return true;
}

static void env_close(hook_env *h)
{
    free(h->logits);
    cv_tok_destroy(h->tok);
    cv_model_close(h->m);
}

/* Runs a hook to its end over logits from fill (called per step); returns
 * the text and whether the grammar was complete. */
static bool run_hook(hook_env *h, void *ud, int32_t max_tokens, void (*fill)(hook_env *, int32_t), cv_buf *text)
{
    cv_sampler *smp = NULL;
    cv_sample_params sp = { .temperature = 1.0f, .seed = 11, .has_seed = true };
    CHECK(cv_sampler_create(&sp, h->n_vocab, &smp, NULL) == 0);
    bool ended = false;
    for (int32_t i = 0; i < max_tokens; i++) {
        fill(h, i);
        int32_t tok = -1;
        cv_err err;
        if (cv_constrain_hook.choose(ud, smp, h->logits, h->n_vocab, &tok, &err)) {
            CHECK_MSG(false, "step %d: %s", i, err.msg);
            break;
        }
        cv_sampler_accept(smp, tok);
        if (cv_tok_is_eog(h->tok, tok)) {
            ended = true;
            break;
        }
        cv_tok_piece(h->tok, tok, 0, text, NULL);
    }
    ended = ended || cv_constrain_hook_done(ud);
    cv_sampler_destroy(smp);
    return ended;
}

static void fill_noise(hook_env *h, int32_t step)
{
    (void)step;
    for (int32_t i = 0; i < h->n_vocab; i++)
        h->logits[i] = 3.0f * cv_rng_normal(&h->rng);
}

/* Only one token is finite, and it is never one the grammar wants at the
 * start ('x'); everything the grammar allows is -inf. */
static void fill_hostile(hook_env *h, int32_t step)
{
    (void)step;
    for (int32_t i = 0; i < h->n_vocab; i++)
        h->logits[i] = -INFINITY;
    h->logits[87] = 0; /* 'x' in the GPT-2 byte alphabet */
}

TEST(the_grammar_wins_over_logits_that_ban_every_allowed_token)
{
    hook_env h;
    if (!env_open(&h))
        return;
    cv_constrain *c = NULL;
    CHECK(cv_constrain_create(h.tok, NULL, &c, NULL) == 0);
    json_t *schema = json_loads(ADDRESS, 0, NULL);
    void *ud = NULL;
    cv_err err;
    CHECK(cv_constrain_for_schema(c, schema, (cv_str){ "", 0 }, 120, &ud, &err) == 0);
    cv_buf text = { 0 };
    CHECK(run_hook(&h, ud, 120, fill_hostile, &text));
    check_address(text.data ? text.data : "", -1);
    cv_constrain_stats st;
    cv_constrain_hook_stats(ud, &st);
    CHECK(st.n_masked > 0); /* first draws of 'x' outside strings were refused */
    cv_constrain_hook.destroy(ud);
    cv_buf_free(&text);
    json_decref(schema);
    cv_constrain_destroy(c);
    env_close(&h);
}

TEST(padded_logit_rows_past_the_vocabulary_are_never_chosen)
{
    /* Qwen's output matrix has 151,936 rows for 151,669 tokens: the rows
     * past the tokenizer get the highest logits here and must never win. */
    hook_env h;
    if (!env_open(&h))
        return;
    cv_constrain *c = NULL;
    CHECK(cv_constrain_create(h.tok, NULL, &c, NULL) == 0);
    json_t *schema = json_loads(ADDRESS, 0, NULL);
    void *ud = NULL;
    CHECK(cv_constrain_for_schema(c, schema, (cv_str){ "", 0 }, 150, &ud, NULL) == 0);
    int32_t n = h.n_vocab + 64;
    float *logits = cv_xmalloc((size_t)n * sizeof *logits);
    cv_sampler *smp = NULL;
    cv_sample_params sp = { .temperature = 1.0f, .seed = 3, .has_seed = true };
    CHECK(cv_sampler_create(&sp, n, &smp, NULL) == 0);
    cv_buf text = { 0 };
    bool ended = false;
    for (int step = 0; step < 150 && !ended; step++) {
        for (int32_t i = 0; i < n; i++)
            logits[i] = i >= h.n_vocab ? 50.0f : 3.0f * cv_rng_normal(&h.rng);
        int32_t tok = -1;
        cv_err err;
        if (cv_constrain_hook.choose(ud, smp, logits, n, &tok, &err)) {
            CHECK_MSG(false, "step %d: %s", step, err.msg);
            break;
        }
        CHECK_MSG(tok >= 0 && tok < h.n_vocab, "step %d chose padded row %d", step, tok);
        ended = cv_tok_is_eog(h.tok, tok);
        if (!ended)
            cv_tok_piece(h.tok, tok, 0, &text, NULL);
    }
    CHECK(ended);
    check_address(text.data ? text.data : "", 50);
    cv_buf_free(&text);
    cv_sampler_destroy(smp);
    free(logits);
    cv_constrain_hook.destroy(ud);
    json_decref(schema);
    cv_constrain_destroy(c);
    env_close(&h);
}

TEST(a_prompt_that_opened_think_gets_reasoning_first_then_the_document)
{
    hook_env h;
    if (!env_open(&h))
        return;
    cv_constrain *c = NULL;
    CHECK(cv_constrain_create(h.tok, &(cv_constrain_opts){ .syntax = "hermes", .reasoning = true }, &c, NULL) == 0);
    json_t *schema = json_loads(ADDRESS, 0, NULL);
    for (int k = 0; k < 3; k++) {
        void *ud = NULL;
        cv_err err;
        CHECK(cv_constrain_for_schema(c, schema, cv_str_of("<think>\n"), 260, &ud, &err) == 0);
        cv_buf text = { 0 };
        CHECK(run_hook(&h, ud, 260, fill_noise, &text));
        const char *s = text.data ? text.data : "";
        const char *close = strstr(s, "</think>");
        CHECK_MSG(close != NULL, "no </think> in %.300s", s);
        if (close)
            check_address(close + 8, k);
        cv_constrain_hook.destroy(ud);
        cv_buf_free(&text);
    }
    /* no opener, a reasoning model: a think block may come first, or not */
    cv_chat_request *r = request(1, 200);
    r->response_format = json_pack("{s:s,s:{s:s,s:O}}", "type", "json_schema", "json_schema", "name", "a", "schema",
                                   schema);
    void *ud = NULL;
    CHECK(cv_constrain_for_request(c, r, (cv_str){ "", 0 }, 200, &ud, NULL) == 0);
    cv_buf text = { 0 };
    CHECK(run_hook(&h, ud, 200, fill_noise, &text));
    const char *s = text.data ? text.data : "";
    const char *close = strstr(s, "</think>");
    check_address(close ? close + 8 : s, 99);
    cv_constrain_hook.destroy(ud);
    cv_buf_free(&text);
    /* thinking switched off: the document at once */
    r->thinking = CV_THINKING_OFF;
    CHECK(cv_constrain_for_request(c, r, (cv_str){ "", 0 }, 200, &ud, NULL) == 0);
    CHECK(run_hook(&h, ud, 200, fill_noise, &text));
    check_address(text.data ? text.data : "", 100);
    cv_constrain_hook.destroy(ud);
    cv_buf_free(&text);
    request_free(r);
    json_decref(schema);
    cv_constrain_destroy(c);
    env_close(&h);
}

TEST(a_forced_call_after_an_opened_think_block_is_read_back_as_reasoning_then_the_call)
{
    hook_env h;
    if (!env_open(&h))
        return;
    cv_constrain *c = NULL;
    CHECK(cv_constrain_create(h.tok, &(cv_constrain_opts){ .syntax = "hermes", .reasoning = true }, &c, NULL) == 0);
    cv_chat_request *r = request(1, 260);
    json_decref(r->tools);
    r->tools = json_loads(TOOLS, 0, NULL);
    r->tool_choice = CV_TOOL_CHOICE_NAMED;
    r->tool_choice_name = cv_xstrdup("get_weather");
    for (int k = 0; k < 3; k++) {
        void *ud = NULL;
        cv_err err;
        CHECK_MSG(cv_constrain_for_request(c, r, cv_str_of("<think>\n"), 260, &ud, &err) == 0, "%s", err.msg);
        if (!ud)
            break;
        cv_buf text = { 0 };
        CHECK(run_hook(&h, ud, 260, fill_noise, &text));
        const char *s = text.data ? text.data : "";
        cv_chat_parse_result pr = { 0 };
        cv_chat_parse_opts po = { .format = cv_tc_format_find("hermes"), .tools = r->tools,
                                  .reasoning_open = cv_str_of("<think>\n"), .id_seed = 1 };
        CHECK_MSG(cv_chat_parse_text(&po, s, strlen(s), &pr, &err) == 0, "%s", err.msg);
        CHECK_MSG(pr.n_calls >= 1, "no call in %.300s", s);
        CHECK_MSG(pr.reasoning.len > 0 || strncmp(s, "</think>", 8) == 0, "no reasoning before the call: %.200s", s);
        for (int i = 0; i < pr.n_calls; i++) {
            CHECK_EQ_STR(pr.calls[i].name, "get_weather");
            check_call(&pr.calls[i], s);
        }
        cv_chat_parse_result_fini(&pr);
        cv_constrain_hook.destroy(ud);
        cv_buf_free(&text);
    }
    request_free(r);
    cv_constrain_destroy(c);
    env_close(&h);
}

/* Forced tool_choice is enforced in every syntax a model may have, not a
 * few: the hook made for the model's syntax (by its format name, as the
 * backend passes it) writes a call that format's parser reads back; a
 * syntax without calls (plain_content) leaves tool_choice to the prompt. */
TEST(tool_choice_required_is_enforced_in_every_syntax_with_call_syntax)
{
    hook_env h;
    if (!env_open(&h))
        return;
    cv_chat_request *r = request(1, 300);
    json_decref(r->tools);
    r->tools = json_loads(TOOLS, 0, NULL);
    r->tool_choice = CV_TOOL_CHOICE_REQUIRED;
    r->parallel_tool_calls = false;
    int n_enforced = 0;
    for (int k = 0; k < cv_tc_format_count(); k++) {
        const cv_tc_format *f = cv_tc_format_at(k);
        cv_constrain *c = NULL;
        CHECK(cv_constrain_create(h.tok, &(cv_constrain_opts){ .syntax = cv_tc_format_name(f) }, &c, NULL) == 0);
        void *ud = NULL;
        cv_err err = { 0 };
        CHECK_MSG(cv_constrain_for_request(c, r, (cv_str){ "", 0 }, 300, &ud, &err) == 0, "%s: %s",
                  cv_tc_format_name(f), err.msg);
        CHECK_MSG((ud != NULL) == (cv_tc_format_syntax(f) != NULL), "%s: enforced %d", cv_tc_format_name(f), ud != NULL);
        if (ud) {
            cv_buf text = { 0 };
            CHECK_MSG(run_hook(&h, ud, 300, fill_noise, &text), "%s: not complete", cv_tc_format_name(f));
            const char *s = text.data ? text.data : "";
            cv_chat_parse_result pr = { 0 };
            cv_chat_parse_opts po = { .format = f, .tools = r->tools, .id_seed = 1 };
            CHECK(cv_chat_parse_text(&po, s, strlen(s), &pr, &err) == 0);
            CHECK_MSG(pr.n_calls == 1, "%s: %d calls in %.300s", cv_tc_format_name(f), pr.n_calls, s);
            if (pr.n_calls == 1)
                check_call(&pr.calls[0], s);
            n_enforced += pr.n_calls == 1;
            cv_chat_parse_result_fini(&pr);
            cv_buf_free(&text);
            cv_constrain_hook.destroy(ud);
        }
        cv_constrain_destroy(c);
    }
    printf("  tool_choice required enforced and read back in %d syntaxes\n", n_enforced);
    CHECK(n_enforced >= cv_tc_format_count() - 1);
    request_free(r);
    env_close(&h);
}

TEST(grammars_are_cached_by_text_and_an_evicted_one_lives_while_in_use)
{
    hook_env h;
    if (!env_open(&h))
        return;
    cv_constrain *c = NULL;
    CHECK(cv_constrain_create(h.tok, NULL, &c, NULL) == 0);
    cv_constrain_info info;
    cv_constrain_get_info(c, &info);
    CHECK(!info.vocab_built); /* nothing built before the first constrained request */
    json_t *schema = json_loads(ADDRESS, 0, NULL);
    void *first = NULL, *again = NULL;
    CHECK(cv_constrain_for_schema(c, schema, (cv_str){ "", 0 }, 100, &first, NULL) == 0);
    CHECK(cv_constrain_for_schema(c, schema, (cv_str){ "", 0 }, 100, &again, NULL) == 0);
    cv_constrain_get_info(c, &info);
    CHECK(info.vocab_built);
    CHECK_EQ_INT((int)info.misses, 1);
    CHECK_EQ_INT((int)info.hits, 1);
    cv_constrain_hook.destroy(again);
    /* fill the cache past its bound with other schemas: ADDRESS goes */
    for (int i = 0; i < CV_MAX_GRAMMAR_CACHE + 2; i++) {
        json_t *s = json_pack("{s:s,s:i}", "type", "string", "maxLength", i + 1);
        void *ud = NULL;
        CHECK(cv_constrain_for_schema(c, s, (cv_str){ "", 0 }, 50, &ud, NULL) == 0);
        cv_constrain_hook.destroy(ud);
        json_decref(s);
    }
    cv_constrain_get_info(c, &info);
    CHECK_EQ_INT(info.n_cached, CV_MAX_GRAMMAR_CACHE);
    /* the first hook's grammar was evicted but still serves it (ASan watches) */
    cv_buf text = { 0 };
    CHECK(run_hook(&h, first, 100, fill_noise, &text));
    check_address(text.data ? text.data : "", 7);
    cv_constrain_hook.destroy(first);
    CHECK(cv_constrain_for_schema(c, schema, (cv_str){ "", 0 }, 100, &first, NULL) == 0);
    cv_constrain_get_info(c, &info);
    CHECK_EQ_INT((int)info.misses, 1 + CV_MAX_GRAMMAR_CACHE + 2 + 1); /* compiled again */
    cv_constrain_hook.destroy(first);
    cv_buf_free(&text);
    json_decref(schema);
    cv_constrain_destroy(c);
    env_close(&h);
}

int main(void)
{
    test_require_data();
    cv_err err;
    cv_server_backend_opts o = { .model_path = test_data(MODEL), .n_ctx = 1024, .n_parallel = 2, .n_threads = 1 };
    if (cv_server_backend_open(&o, &be, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    RUN(a_json_schema_response_is_a_valid_document_from_the_real_engine);
    RUN(json_object_gives_an_object);
    RUN(a_small_max_tokens_still_ends_with_a_complete_document);
    RUN(tool_choice_required_gives_a_call_the_real_parser_reads_back);
    RUN(a_named_tool_choice_calls_that_tool);
    RUN(what_cannot_be_enforced_is_the_requests_error_naming_it);
    RUN(the_grammar_wins_over_logits_that_ban_every_allowed_token);
    RUN(padded_logit_rows_past_the_vocabulary_are_never_chosen);
    RUN(a_prompt_that_opened_think_gets_reasoning_first_then_the_document);
    RUN(a_forced_call_after_an_opened_think_block_is_read_back_as_reasoning_then_the_call);
    RUN(tool_choice_required_is_enforced_in_every_syntax_with_call_syntax);
    RUN(grammars_are_cached_by_text_and_an_evicted_one_lives_while_in_use);
    cv_server_backend_close(be);
    return test_report();
}
