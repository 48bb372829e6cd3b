/* gram_tools.c — grammars that force tool calls in a model's own syntax
 * (tool_choice required / named, Anthropic any / tool), and the lazy form for
 * tool_choice auto: free text that cannot contain the syntax's opening
 * marker, then, once the marker appears, a call that must be well formed.
 * A syntax is not known here by name: it is a cv_tool_syntax descriptor
 * (grammar.h), the one its tool-call parser row in src/chat/toolcall carries,
 * so the text written is what that parser reads back, for every syntax the
 * parser has (tests/grammar/test_grammar_tools.c walks them all). The
 * arguments follow the tool's JSON Schema through gram_schema.c; XML-style
 * syntaxes write string parameters bare, Python-style ones K=V. */
#include <stdlib.h>

#include "grammar/grammar_int.h"

typedef struct tctx {
    gbuild *b;
    gschema *s;
    const cv_tool_syntax *sx;
    json_t *keep; /* schemas made up here: the compiler keys rules by node address */
} tctx;

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Literal bytes p[0..n): the descriptor's special tokens among them match as
 * tokens too; blanks at either end of each piece between them are the
 * blanks a parser skips there (loose), except where exact_head/exact_tail
 * keep them (the text borders a raw value). */
static gx *piece(tctx *t, const char *p, size_t n, bool exact_head, bool exact_tail)
{
    gx_list l = { 0 };
    size_t head = 0;
    while (head < n && is_blank(p[head]))
        head++;
    size_t start = 0;
    if (!exact_head && head) {
        start = head;
        gxl_push(t->b, &l, gs_ws(t->s));
    }
    /* a kept head ("\n" after a name) is not trimmed as a tail either */
    size_t end = n, floor = exact_head ? head : start;
    while (!exact_tail && end > floor && is_blank(p[end - 1]))
        end--;
    if (end > start)
        gxl_push(t->b, &l, gx_lit(t->b, p + start, end - start));
    if (end < n)
        gxl_push(t->b, &l, gs_ws(t->s));
    gx *x = l.n ? gx_seq(t->b, l.n, l.v) : gx_empty(t->b);
    free(l.v);
    return x;
}

static gx *text_x(tctx *t, const char *z, bool exact_head, bool exact_tail)
{
    if (!z || !*z)
        return gx_empty(t->b);
    gx_list l = { 0 };
    const char *p = z;
    for (;;) {
        /* the earliest special token, the longest there */
        const char *at = NULL, *sp = NULL;
        for (const char *const *s = t->sx->specials; s && *s; s++) {
            const char *q = strstr(p, *s);
            if (q && (!at || q < at || (q == at && strlen(*s) > strlen(sp)))) {
                at = q;
                sp = *s;
            }
        }
        size_t n = at ? (size_t)(at - p) : strlen(p);
        if (n)
            gxl_push(t->b, &l, piece(t, p, n, exact_head && p == z, exact_tail && !at));
        if (!at)
            break;
        gxl_push(t->b, &l, gx_special(t->b, sp));
        p = at + strlen(sp);
        if (!*p)
            break;
    }
    gx *x = l.n ? gx_seq(t->b, l.n, l.v) : gx_empty(t->b);
    free(l.v);
    return x;
}

static gx *text(tctx *t, const char *z) { return text_x(t, z, false, false); }

static bool ident(const char *s, bool dots)
{
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return false;
    for (s++; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '-' || (dots && *s == '.')))
            return false;
    return true;
}

/* ---- arguments ---- */

static const json_t *params_of(const json_t *fn)
{
    const json_t *params = json_object_get(fn, "parameters");
    return params ? params : json_object_get(fn, "input_schema");
}

/* The arguments object of one tool. */
static gx *args_json(tctx *t, const json_t *fn, const char *name)
{
    const json_t *params = params_of(fn);
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

/* Where a raw string value ends: param_close from its first non-blank byte
 * to the next blank ("</parameter>", "]<]minimax[>[</"). */
static void raw_end(const char *close, char out[128])
{
    const char *p = close ? close : "";
    while (is_blank(*p))
        p++;
    size_t n = 0;
    while (p[n] && !is_blank(p[n]) && n < 127)
        n++;
    memcpy(out, p, n);
    out[n] = 0;
}

/* One element per declared property (XML) or K=V pairs (Python), in
 * declared order, optional ones skippable. */
static gx *args_members(tctx *t, const json_t *fn, const char *name, cv_err *err, int *rc)
{
    gbuild *b = t->b;
    const cv_tool_syntax *sx = t->sx;
    const json_t *params = params_of(fn);
    char where[300];
    snprintf(where, sizeof where, "tools/%s/parameters", name);
    gs_set_root(t->s, params, where);
    const json_t *props = json_object_get(params, "properties");
    const json_t *req = json_object_get(params, "required");
    int n = (int)json_object_size(props);
    if (n == 0)
        return gx_empty(b);
    bool py = sx->args_as == CV_TS_ARGS_PYTHON;
    char end[128];
    raw_end(sx->param_close, end);
    gx **kids = cv_xcalloc((size_t)n, sizeof *kids);
    bool *need = cv_xcalloc((size_t)n, sizeof *need);
    int k = 0;
    const char *key;
    json_t *ps;
    json_object_foreach((json_t *)props, key, ps) {
        if (py ? !ident(key, false) : (!*key || strpbrk(key, "<>\"\\\n ") != NULL)) {
            *rc = cv_err_set(err, CV_EINVAL, "grammar: parameter '%s' of tool '%s' cannot be written in the %s syntax",
                             key, name, sx->name);
            break;
        }
        if (py) {
            kids[k] = gx_seq3(b, gx_litz(b, key), gx_litz(b, "="), gs_value(t->s, ps));
        } else {
            gx *v = sx->values_json ? gs_value(t->s, ps) : gs_value_raw(t->s, ps, end);
            gx *tail = sx->param_tail ? gx_seq2(b, gx_litz(b, key), text(t, sx->param_tail)) : gx_empty(b);
            kids[k] = gx_seq(b, 6, (gx *[]){ text(t, sx->param_open), gx_litz(b, key),
                                              text_x(t, sx->param_mid, false, true), v,
                                              text_x(t, sx->param_close, true, false), tail });
        }
        size_t i;
        json_t *r;
        json_array_foreach(req, i, r) if (json_is_string(r) && !strcmp(json_string_value(r), key)) need[k] = true;
        k++;
    }
    gx *sep = py ? gx_seq3(b, gs_ws(t->s), gx_litz(b, ","), gs_ws(t->s)) : gx_empty(b);
    gx *x = *rc ? gx_none(b) : gx_members(b, k, kids, need, sep);
    free(kids);
    free(need);
    return x;
}

/* ---- one call ---- */

static gx *one_call(tctx *t, const json_t *fn, const char *name, cv_err *err, int *rc)
{
    gbuild *b = t->b;
    const cv_tool_syntax *sx = t->sx;
    gx *ws = gs_ws(t->s);
    gx *body;
    if (sx->name_as == CV_TS_NAME_BARE) {
        if (!ident(name, true)) {
            *rc = cv_err_set(err, CV_EINVAL, "grammar: tool name '%s' cannot be written in the %s syntax", name,
                             sx->name);
            return gx_none(b);
        }
        gx *args = sx->args_as == CV_TS_ARGS_JSON ? args_json(t, fn, name) : args_members(t, fn, name, err, rc);
        /* exact where the name ends: readers end a bare name at the next
         * byte (a newline, '>', ':'), so it is written as given */
        gx *post = text_x(t, sx->name_post, true, false);
        if (sx->name_post_opt)
            post = gx_opt(b, post);
        gx *idx = sx->index ? gx_rep(b, gx_byterange(b, '0', '9'), 1, 4) : gx_empty(b);
        body = gx_seq(b, 5, (gx *[]){ text(t, sx->name_pre), gx_litz(b, name), post, idx,
                                      gx_seq3(b, text(t, sx->args_pre), args, text(t, sx->args_post)) });
    } else if (sx->name_as == CV_TS_NAME_KEY) {
        body = gx_seq(b, 7, (gx *[]){ gx_litz(b, "{"), ws, gs_json_string_lit(t->s, name), ws, gx_litz(b, ":"),
                                      gx_seq2(b, ws, args_json(t, fn, name)), gx_seq2(b, ws, gx_litz(b, "}")) });
    } else {
        char nk[128], ak[128];
        snprintf(nk, sizeof nk, "\"%s\"", sx->name_key ? sx->name_key : "name");
        snprintf(ak, sizeof ak, "\"%s\"", sx->args_key ? sx->args_key : "arguments");
        body = gx_seq(b, 13, (gx *[]){ gx_litz(b, "{"), ws, gx_litz(b, nk), ws, gx_litz(b, ":"), ws,
                                       gs_json_string_lit(t->s, name), ws, gx_litz(b, ","), ws, gx_litz(b, ak), ws,
                                       gx_seq(b, 5, (gx *[]){ gx_litz(b, ":"), ws, args_json(t, fn, name), ws,
                                                              gx_litz(b, "}") }) });
    }
    return gx_seq3(b, text(t, sx->call_open), body, text(t, sx->call_close));
}

/* ---- the grammar ---- */

static bool valid_syntax(const cv_tool_syntax *sx)
{
    /* a JSON-object call carries JSON arguments */
    return sx && sx->name && (sx->name_as == CV_TS_NAME_BARE || sx->args_as == CV_TS_ARGS_JSON);
}

int cv_grammar_from_tools(const cv_grammar_tools_opts *o, cv_grammar **out, cv_err *err)
{
    *out = NULL;
    const cv_tool_syntax *sx = o->syntax;
    if (!valid_syntax(sx))
        return cv_err_set(err, CV_EUNSUPPORTED, "grammar: tool-call syntax '%s' has no call grammar",
                          sx && sx->name ? sx->name : "(none)");
    if (!json_is_array(o->tools) || json_array_size(o->tools) == 0)
        return cv_err_set(err, CV_EINVAL, "grammar: forcing a tool call needs a non-empty tools array");
    if (json_array_size(o->tools) > CV_MAX_GRAMMAR_ALTS)
        return cv_err_set(err, CV_ELIMIT, "grammar: %zu tools, limit CV_MAX_GRAMMAR_ALTS = %d",
                          json_array_size(o->tools), CV_MAX_GRAMMAR_ALTS);
    for (const char *z = o->think_close; z && *z; z++)
        if ((unsigned char)*z >= 0x80 || (unsigned char)*z == 0)
            return cv_err_set(err, CV_EINVAL, "grammar: think_close '%s' must be ASCII", o->think_close);
    /* free text before a lazy call ends at the trigger, matched over ASCII
     * (gx_until); a syntax whose calls start unmarked has no lazy form */
    if (o->lazy && (!sx->trigger || !*sx->trigger))
        return cv_err_set(err, CV_EUNSUPPORTED, "grammar: the %s syntax has no call marker: no lazy grammar", sx->name);
    for (const char *z = o->lazy ? sx->trigger : NULL; z && *z; z++)
        if ((unsigned char)*z >= 0x80)
            return cv_err_set(err, CV_EUNSUPPORTED, "grammar: the %s syntax's call marker '%s' is not ASCII: no lazy "
                              "grammar", sx->name, sx->trigger);
    gbuild b;
    gb_init(&b, o->warnings);
    gschema *s = gs_new(&b, err);
    tctx t = { &b, s, sx, json_array() };
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
        int r = gb_rule_new(&b, name);
        gx *call = one_call(&t, fn, name, err, &rc);
        if (rc)
            goto fail;
        gb_rule_set(&b, r, call);
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
    gx *more = o->parallel && !sx->single ? gx_rep(&b, gx_seq2(&b, text(&t, sx->sep), call), 0, -1) : gx_empty(&b);
    gx *calls = gx_seq(&b, 4, (gx *[]){ text(&t, sx->open), call, more, text(&t, sx->close) });
    gx *body;
    if (o->lazy)
        body = gx_seq2(&b, gx_until(&b, sx->trigger, strlen(sx->trigger)), gx_opt(&b, gx_seq2(&b, calls, ws)));
    else
        body = gx_seq2(&b, calls, ws);
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
