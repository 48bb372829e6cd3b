/* gram_tools.c — grammars that force tool calls in a model's own syntax
 * (tool_choice required / named, Anthropic any / tool), and the lazy form for
 * tool_choice auto: free text that cannot contain the syntax's opening
 * marker, then, once the marker appears, a call that must be well formed.
 * Each syntax is one row of the table below: how a call is written around
 * the tool's name and arguments, what separates parallel calls, and which
 * marker opens a call. The arguments follow the tool's JSON Schema through
 * gram_schema.c; XML-style syntaxes write string parameters bare. The texts
 * here are what the tool-call parsers of src/chat read back (formats named
 * as in testdata/toolcalls/<format>.jsonl). */
#include <stdlib.h>

#include "grammar/grammar_int.h"

typedef struct tctx {
    gbuild *b;
    gschema *s;
    const char *syntax;
    json_t *keep; /* schemas made up here: the compiler keys rules by node address */
} tctx;

static gx *lit(tctx *t, const char *z) { return gx_litz(t->b, z); }

/* The arguments object of one tool. */
static gx *args_json(tctx *t, const json_t *fn, const char *name)
{
    const json_t *params = json_object_get(fn, "parameters");
    if (!params)
        params = json_object_get(fn, "input_schema");
    char where[300];
    snprintf(where, sizeof where, "tools/%s/parameters", name);
    gs_set_root(t->s, params, where);
    if (!params || (json_is_object(params) && json_object_size(params) == 0)) {
        json_t *obj = json_pack("{s:s}", "type", "object");
        json_array_append_new(t->keep, obj);
        gs_set_root(t->s, obj, where);
        params = obj;
    }
    return gs_value(t->s, params);
}

/* <parameter=K>\nV\n</parameter>\n for every parameter, in declared order. */
static gx *args_xml(tctx *t, const json_t *fn, const char *name)
{
    gbuild *b = t->b;
    const json_t *params = json_object_get(fn, "parameters");
    char where[300];
    snprintf(where, sizeof where, "tools/%s/parameters", name);
    gs_set_root(t->s, params, where);
    const json_t *props = json_object_get(params, "properties");
    const json_t *req = json_object_get(params, "required");
    int n = (int)json_object_size(props);
    if (n == 0)
        return gx_empty(b);
    gx **kids = cv_xcalloc((size_t)n, sizeof *kids);
    bool *need = cv_xcalloc((size_t)n, sizeof *need);
    int k = 0;
    const char *key;
    json_t *ps;
    json_object_foreach((json_t *)props, key, ps) {
        gx *v = gs_value_raw(t->s, ps, "</parameter>");
        kids[k] = gx_seq(b, 5, (gx *[]){ lit(t, "<parameter="), lit(t, key), lit(t, ">\n"), v, lit(t, "\n</parameter>\n") });
        size_t i;
        json_t *r;
        json_array_foreach(req, i, r) if (json_is_string(r) && !strcmp(json_string_value(r), key)) need[k] = true;
        k++;
    }
    gx *x = gx_members(b, k, kids, need, gx_empty(b));
    free(kids);
    free(need);
    return x;
}

static gx *one_call(tctx *t, const json_t *fn, const char *name)
{
    gbuild *b = t->b;
    gx *ws = gs_ws(t->s);
    const char *sx = t->syntax;
    if (!strcmp(sx, "hermes") || !strcmp(sx, "llama3_json") || !strcmp(sx, "mistral_pre_v11")) {
        const char *akey = !strcmp(sx, "llama3_json") ? "\"parameters\"" : "\"arguments\"";
        gx *obj = gx_seq(b, 13, (gx *[]){ lit(t, "{"), ws, lit(t, "\"name\""), ws, lit(t, ":"), ws,
                                          gs_json_string_lit(t->s, name), ws, lit(t, ","), ws, lit(t, akey), ws,
                                          gx_seq(b, 5, (gx *[]){ lit(t, ":"), ws, args_json(t, fn, name), ws, lit(t, "}") }) });
        if (!strcmp(sx, "hermes"))
            return gx_seq(b, 5, (gx *[]){ lit(t, "<tool_call>"), ws, obj, ws, lit(t, "</tool_call>") });
        return obj;
    }
    if (!strcmp(sx, "mistral_v11"))
        return gx_seq(b, 4, (gx *[]){ gx_special(b, "[TOOL_CALLS]"), lit(t, name),
                                      gx_opt(b, gx_special(b, "[ARGS]")), args_json(t, fn, name) });
    /* qwen3_coder_xml */
    return gx_seq(b, 5, (gx *[]){ lit(t, "<tool_call>\n<function="), lit(t, name), lit(t, ">\n"), args_xml(t, fn, name),
                                  lit(t, "</function>\n</tool_call>") });
}

static const char *const syntaxes[] = { "hermes", "qwen3_coder_xml", "llama3_json", "mistral_v11", "mistral_pre_v11" };

static const char *trigger_of(const char *sx)
{
    if (!strcmp(sx, "hermes") || !strcmp(sx, "qwen3_coder_xml"))
        return "<tool_call>";
    if (!strcmp(sx, "llama3_json"))
        return "{\"name\"";
    return "[TOOL_CALLS]";
}

int cv_grammar_from_tools(const cv_grammar_tools_opts *o, cv_grammar **out, cv_err *err)
{
    *out = NULL;
    bool known = false;
    for (size_t i = 0; i < CV_ARRAY_LEN(syntaxes); i++)
        known |= o->syntax && !strcmp(o->syntax, syntaxes[i]);
    if (!known)
        return cv_err_set(err, CV_EUNSUPPORTED, "grammar: tool-call syntax '%s' has no grammar (supported: hermes, "
                          "qwen3_coder_xml, llama3_json, mistral_v11, mistral_pre_v11)", o->syntax ? o->syntax : "(none)");
    if (!json_is_array(o->tools) || json_array_size(o->tools) == 0)
        return cv_err_set(err, CV_EINVAL, "grammar: forcing a tool call needs a non-empty tools array");
    if (json_array_size(o->tools) > CV_MAX_GRAMMAR_ALTS)
        return cv_err_set(err, CV_ELIMIT, "grammar: %zu tools, limit CV_MAX_GRAMMAR_ALTS = %d",
                          json_array_size(o->tools), CV_MAX_GRAMMAR_ALTS);
    for (const char *z = o->think_close; z && *z; z++)
        if ((unsigned char)*z >= 0x80 || (unsigned char)*z == 0)
            return cv_err_set(err, CV_EINVAL, "grammar: think_close '%s' must be ASCII", o->think_close);
    gbuild b;
    gb_init(&b, o->warnings);
    gschema *s = gs_new(&b, err);
    tctx t = { &b, s, o->syntax, json_array() };
    int root = gb_rule_new(&b, "root");
    int calls_rule = gb_rule_new(&b, "tool-call");
    gx_list alts = { 0 };
    size_t i;
    json_t *tool;
    int rc = 0;
    json_array_foreach(o->tools, i, tool) {
        const json_t *fn = json_object_get(tool, "function");
        if (!fn)
            fn = tool; /* Anthropic shape: {name, input_schema} */
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (!name || !*name) {
            rc = cv_err_set(err, CV_EINVAL, "grammar: tools[%zu] has no function name", i);
            goto fail;
        }
        if (o->force_name && strcmp(o->force_name, name))
            continue;
        if (strpbrk(name, "<>\"\\\n") && strcmp(o->syntax, "hermes") && strcmp(o->syntax, "llama3_json") &&
            strcmp(o->syntax, "mistral_pre_v11")) {
            rc = cv_err_set(err, CV_EINVAL, "grammar: tool name '%s' cannot be written in the %s syntax", name,
                            o->syntax);
            goto fail;
        }
        int r = gb_rule_new(&b, name);
        gb_rule_set(&b, r, one_call(&t, fn, name));
        if ((rc = gs_status(s)))
            goto fail;
        gxl_push(&b, &alts, gx_call(&b, r));
    }
    if (alts.n == 0) {
        rc = cv_err_set(err, CV_ENOTFOUND, "grammar: tool_choice names '%s', which is not among the tools",
                        o->force_name ? o->force_name : "");
        goto fail;
    }
    gb_rule_set(&b, calls_rule, gx_alt(&b, alts.n, alts.v));
    gx *ws = gs_ws(s);
    gx *call = gx_call(&b, calls_rule);
    gx *calls;
    if (!strcmp(o->syntax, "mistral_pre_v11")) {
        gx *more = o->parallel ? gx_rep(&b, gx_seq3(&b, ws, gx_litz(&b, ","), gx_seq2(&b, ws, call)), 0, -1) : gx_empty(&b);
        calls = gx_seq(&b, 7, (gx *[]){ gx_special(&b, "[TOOL_CALLS]"), ws, gx_litz(&b, "["), ws, call, more,
                                        gx_seq2(&b, ws, gx_litz(&b, "]")) });
    } else {
        gx *sep = !strcmp(o->syntax, "llama3_json") ? gx_seq3(&b, ws, gx_litz(&b, ";"), ws) : ws;
        calls = o->parallel ? gx_seq2(&b, call, gx_rep(&b, gx_seq2(&b, sep, call), 0, -1)) : call;
    }
    gx *body;
    if (o->lazy) {
        const char *trig = trigger_of(o->syntax);
        body = gx_seq2(&b, gx_until(&b, trig, strlen(trig)), gx_opt(&b, gx_seq2(&b, calls, ws)));
    } else {
        body = gx_seq2(&b, calls, ws);
    }
    if (o->think_close) {
        gx *think = gx_seq3(&b, gx_until(&b, o->think_close, strlen(o->think_close)), gx_litz(&b, o->think_close), ws);
        if (o->think_open)
            think = gx_opt(&b, gx_seq2(&b, gx_litz(&b, o->think_open), think));
        body = gx_seq2(&b, think, body);
    }
    gb_rule_set(&b, root, body);
    rc = gb_compile(&b, root, out, err);
fail:
    free(alts.v);
    gs_free(s);
    gb_fini(&b);
    json_decref(t.keep);
    return rc;
}
