/* tc_call_env.c — the envelope reader shared by most formats: after a
 * section's start marker (<tool_call>, [TOOL_CALLS], <|python_tag|>,
 * functools, <tool_calls>, ...) it reads calls until the end marker, and
 * tells from each item's first bytes which syntax it is (tc_env.items):
 * a JSON object, a JSON list of objects, an XML invoke, a Python call or
 * list of them, GLM's NAME<arg_key>, or Mistral's NAME[ARGS]{...}.
 *
 * Sniffing makes a format tolerant of its neighbours' habits: a Qwen3-Coder
 * model writing Hermes JSON inside <tool_call>, or Hermes JSON in a list.
 * Whatever follows the last item that is not the end marker goes back to the
 * content (a missing end marker is repaired, not fatal). */
#include "chat/toolcall/tc_int.h"

enum { E_ITEM, E_IN, E_NJ_NAME, E_NJ_MID, E_NJ_ID, E_NJ_OPEN, E_NJ_ARGS };

const char *const tc_skip_fences[] = { "```json", "```", NULL };

static bool ident_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}

/* After an identifier of length len at the input: what follows it? Returns
 * the IT_* kind it starts, 0 for none, -1 for need more. */
static int after_ident(tc_run *r, const tc_env *e, size_t len)
{
    const char *p = tc_p(r);
    size_t n = tc_n(r), i = len;
    for (;;) {
        while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
            i++;
        if ((e->items & IT_GLM) && i + 1 < n && p[i] == '\\' && p[i + 1] == 'n') {
            i += 2;
            continue;
        }
        break;
    }
    r->work += i - len + 1;
    /* a bare name cut off by the end is GLM's call only where GLM is the
     * envelope's own syntax; elsewhere (Hermes) it is a word after a tag */
    bool glm_own = (e->items & IT_GLM) && e->xml && !e->xml->invoke;
    if (i >= n || (i + 1 >= n && p[i] == '\\'))
        return r->eof ? (glm_own ? IT_GLM : 0) : -1;
    const char *q = p + i;
    size_t m = n - i;
    if (q[0] == '(' && i == len)
        return IT_PY;
    if ((e->items & IT_NAMEJSON) && i == len) {
        if (q[0] == '{')
            return IT_NAMEJSON;
        static const char *const tags[] = { "[ARGS]", "[CALL_ID]" };
        for (int t = 0; t < 2; t++) {
            size_t k = strlen(tags[t]), a = m < k ? m : k;
            if (!memcmp(q, tags[t], a))
                return a == k ? IT_NAMEJSON : (r->eof ? 0 : -1);
        }
    }
    if (e->items & IT_GLM) {
        const char *tags[] = { "<arg_key>", e->end };
        for (int t = 0; t < 2; t++) {
            if (!tags[t])
                continue;
            size_t k = strlen(tags[t]), a = m < k ? m : k;
            if (!memcmp(q, tags[t], a))
                return a == k ? IT_GLM : (r->eof ? IT_GLM : -1);
        }
    }
    return 0;
}

static void item_fini(tc_sec *s)
{
    if (s->item == IT_JSON)
        tc_jcall_fini(&s->u.jc);
    else if (s->item == IT_XML || s->item == IT_GLM)
        tc_xcall_fini(&s->u.xc);
    else if (s->item == IT_PY)
        tc_pcall_fini(&s->u.pc);
}

/* Mistral: NAME{...}, NAME[ARGS]{...}, NAME[CALL_ID]ID[ARGS]{...} */
static int namejson_step(tc_run *r, tc_sec *s)
{
    int rc;
    switch (s->st) {
    case E_NJ_NAME: {
        long len = tc_ident(r, 0, true);
        if (len <= 0)
            return len < 0 ? TC_MORE : TC_FAIL;
        cv_buf_reset(&s->tmp);
        cv_buf_reset(&s->tmp2);
        cv_buf_append(&s->tmp, tc_p(r), (size_t)len);
        tc_eat(r, (size_t)len);
        s->st = E_NJ_MID;
        return TC_OK;
    }
    case E_NJ_MID:
        if (tc_ws(r) == TC_MORE)
            return TC_MORE;
        rc = tc_lit(r, "[CALL_ID]", true);
        if (rc == TC_MORE)
            return TC_MORE;
        if (rc == TC_DONE) {
            s->st = E_NJ_ID;
            return TC_OK;
        }
        rc = tc_lit(r, "[ARGS]", true);
        if (rc == TC_MORE)
            return TC_MORE;
        /* its own state: [ARGS] eaten and the input ending in the
         * whitespace after it must not read [ARGS] or [CALL_ID] again when
         * more comes (NAME[ARGS][CALL_ID]..., which is no call whole) */
        s->st = E_NJ_OPEN;
        return TC_OK;
    case E_NJ_OPEN:
        if (tc_ws(r) == TC_MORE)
            return TC_MORE;
        if (!tc_n(r) || *tc_p(r) != '{')
            return TC_FAIL;
        s->aux = tc_call_begin(r, s->tmp.data, s->tmp.len, s->tmp2.data, s->tmp2.len);
        tc_commit(r);
        cv_buf_reset(&r->scratch);
        tc_json_init(&s->j, TJ_OBJECT, (tc_type){ 0 }, r->call_props, &r->scratch, &r->work);
        s->j_live = true;
        s->st = E_NJ_ARGS;
        return TC_OK;
    case E_NJ_ID: {
        const char *p = tc_p(r);
        size_t n = tc_n(r), i = 0;
        while (i < n && p[i] != '[' && p[i] != '{' && p[i] != '\n' && s->tmp2.len + i < CV_TC_MAX_NAME)
            i++;
        r->work += i + 1;
        cv_buf_append(&s->tmp2, p, i);
        tc_eat(r, i);
        if (s->tmp2.len >= CV_TC_MAX_NAME)
            return TC_FAIL;
        if (i == n && !r->eof)
            return TC_MORE;
        s->st = E_NJ_MID;
        return TC_OK;
    }
    case E_NJ_ARGS:
        rc = tc_stream_args(r, &s->j, &r->scratch);
        if (rc == TC_MORE)
            return TC_MORE;
        tc_json_fini(&s->j);
        s->j_live = false;
        if (rc == TC_FAIL) {
            tc_call_end(r);
            return TC_FAIL;
        }
        tc_call_end(r);
        return TC_DONE;
    }
    return TC_FAIL;
}

static int item_step(tc_run *r, tc_sec *s)
{
    switch (s->item) {
    case IT_JSON: return tc_jcall_step(r, &s->u.jc);
    case IT_XML:
    case IT_GLM: return tc_xcall_step(r, &s->u.xc);
    case IT_PY: return tc_pcall_step(r, &s->u.pc);
    case IT_NAMEJSON: return namejson_step(r, s);
    }
    return TC_FAIL;
}

/* Output detection takes Python calls only as the whole reply and reports
 * them as the row they belong to. */
static void python_seen(const tc_env *e, tc_sec *s)
{
    s->py = true;
    if (e->py_row)
        s->syntax = e->py_row;
}

/* Starts the item at the input, if one of the allowed kinds starts here.
 * Returns TC_OK (started), TC_MORE, or TC_FAIL (nothing here). */
static int sniff(tc_run *r, const tc_env *e, tc_sec *s)
{
    const char *p = tc_p(r);
    size_t n = tc_n(r);
    unsigned char c = (unsigned char)p[0];
    /* inside a list its elements are calls of the list's kind */
    bool json_ok = (e->items & IT_JSON) || s->in_list == 1;
    bool py_ok = (e->items & IT_PY) || s->in_list == 2;
    if (c == '{' && json_ok) {
        tc_jcall_init(&s->u.jc, e->shape);
        s->item = IT_JSON;
        return TC_OK;
    }
    if (c == '[' && (e->items & (IT_LIST | IT_PYLIST)) && !s->in_list) {
        size_t i = 1;
        while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\t' || p[i] == '\r'))
            i++;
        if (i == n)
            return r->eof ? TC_FAIL : TC_MORE;
        unsigned char d = (unsigned char)p[i];
        if ((d == '{' && (e->items & IT_LIST)) || (ident_start(d) && (e->items & IT_PYLIST)) || d == ']') {
            tc_eat(r, 1);
            s->in_list = d == '{' ? 1 : ident_start(d) ? 2 : 3;
            if (s->in_list == 2)
                python_seen(e, s);
            return TC_OK + 10; /* the list opened; no item yet */
        }
        return TC_FAIL;
    }
    if (c == '<' && (e->items & IT_XML) && e->xml && e->xml->invoke) {
        int rc = tc_lit(r, e->xml->invoke, false);
        if (rc == TC_MORE)
            return TC_MORE;
        if (rc == TC_DONE) {
            tc_xcall_init(&s->u.xc, e->xml);
            s->item = IT_XML;
            return TC_OK;
        }
    }
    if (ident_start(c) && (py_ok || (e->items & (IT_GLM | IT_NAMEJSON)))) {
        long len = tc_ident(r, 0, true);
        if (len < 0)
            return TC_MORE;
        if (len == 0)
            return TC_FAIL;
        int k = after_ident(r, e, (size_t)len);
        if (k < 0)
            return TC_MORE;
        if (k == IT_PY && py_ok) {
            python_seen(e, s);
            tc_pcall_init(&s->u.pc);
            s->item = IT_PY;
            return TC_OK;
        }
        if (k == IT_NAMEJSON) {
            s->item = IT_NAMEJSON;
            s->st = E_NJ_NAME;
            return TC_OK;
        }
        if (k == IT_GLM && (e->glm || e->xml)) {
            /* the GLM dialect, not the envelope's XML one (Hermes reads both) */
            tc_xcall_init(&s->u.xc, e->glm ? e->glm : e->xml);
            s->item = IT_GLM;
            return TC_OK;
        }
    }
    return TC_FAIL;
}

int tc_read_env(tc_run *r, tc_sec *s)
{
    const tc_env *e = s->start->cfg;
    for (;;) {
        if (s->item) {
            int rc = item_step(r, s);
            if (rc == TC_MORE || rc == TC_FAIL)
                return rc;
            if (rc == TC_OK)
                continue;
            s->n_items++;
            s->n_calls++;
            item_fini(s);
            s->item = 0;
            s->st = E_ITEM;
            continue;
        }
        /* Whitespace between items is looked at, not consumed, until what
         * follows it is known: when the section ends here, it belongs to
         * the text after the section ("{call} and more" keeps its space). */
        const char *p = tc_p(r);
        size_t n = tc_n(r);
        while (s->scan < n && (p[s->scan] == ' ' || p[s->scan] == '\n' || p[s->scan] == '\t' || p[s->scan] == '\r'))
            s->scan++;
        r->work += 1;
        if (s->scan == n && !r->eof) {
            if (s->scan > CV_TC_MAX_WS_HOLD) {
                s->scan = 0;
                return TC_DONE;
            }
            return TC_MORE;
        }
        if (s->scan == n) {
            s->scan = 0;
            return TC_DONE; /* end of generation: whatever is open is closed */
        }
        /* the whitespace is consumed only with what follows it: every
         * "need more input" below gives it back (the next step sees it again
         * and knows its length from s->scan) */
        size_t ws = s->scan;
        s->scan = 0;
        tc_eat(r, ws);
#define MORE_KEEPING_WS() \
    do {                  \
        tc_uneat(r, ws);  \
        s->scan = ws;     \
        return TC_MORE;   \
    } while (0)
        char c = *tc_p(r);
        if (s->in_list) {
            if (c == ']') {
                tc_eat(r, 1);
                s->in_list = 0;
                s->n_items++;
                continue;
            }
            if (c == ',') {
                tc_eat(r, 1);
                continue;
            }
        }
        if (e->seps && strchr(e->seps, c)) {
            tc_eat(r, 1);
            continue;
        }
        int rc = tc_skip_tokens(r, e->skip);
        if (rc == TC_DONE)
            continue;
        if (rc == TC_MORE)
            MORE_KEEPING_WS();
        if (e->end) {
            rc = tc_lit(r, e->end, true);
            if (rc == TC_DONE)
                return TC_DONE;
            if (rc == TC_MORE)
                MORE_KEEPING_WS();
        }
        rc = tc_skip_tokens(r, e->alt_end);
        if (rc == TC_DONE)
            return TC_DONE;
        if (rc == TC_MORE)
            MORE_KEEPING_WS();
        if (e->one && s->n_items >= 1 && !s->in_list) {
            tc_uneat(r, ws);
            return TC_DONE;
        }
        rc = sniff(r, e, s);
        if (rc == TC_MORE)
            MORE_KEEPING_WS();
#undef MORE_KEEPING_WS
        if (rc == TC_OK || rc == TC_OK + 10)
            continue;
        /* not an item: the section is over (its end marker missing) */
        if (s->n_items == 0 && s->n_calls == 0)
            return TC_FAIL;
        tc_uneat(r, ws); /* eaten in this same step */
        return TC_DONE;
    }
}
