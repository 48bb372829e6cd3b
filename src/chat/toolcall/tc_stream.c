/* tc_stream.c — the streaming parser's engine (cv_chat_parse_*): input
 * buffering, the content state (scanning for reasoning openers and tool-call
 * sections with the common scanner), speculation (capture, commit, abort),
 * whitespace next to markup, and the call policy (declared tools,
 * tool_choice none, parallel calls, ids). The syntaxes themselves live in
 * the section readers and the tc_<format>.c files; the reasoning markers in
 * ../reasoning.c and what other rows' markers mean in tc_detect.c, which
 * decide and leave the writing to this file.
 *
 * Event order is the text's order. Between a call's BEGIN and END nothing
 * else is emitted. Text is emitted as soon as it cannot be markup; the only
 * text held is a possible marker prefix, a trailing whitespace run (dropped
 * if markup follows), and speculative sections — each bounded by limits.h.
 *
 * Cross-format fallback: while the chosen format has found no call and
 * tools are declared, the content scanner also watches the section markers
 * of every other format; one that reads as a call to a declared tool is
 * taken (speculatively, so prose that merely contains such a marker stays
 * content). This is how a Qwen model that drifts into <function=...> or a
 * Mistral model that writes <tool_call> still yields its call. With output
 * detection (opts.detect) the marker sets hold every row's markers instead,
 * and tc_detect.c says what each means: a switch of format, a weak bare
 * shape that must fit its tool, or a hand-over to a whole-stream row. Such a
 * row's own content (Harmony's final channel) holds the bare shapes too: it
 * hands each one it meets to tc_stream_shape, whose section runs here and
 * gives the stream back to the row where it ends. */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/toolcall/tc_int.h"

/* ---- input ---- */

void tc_eat(tc_run *r, size_t n)
{
    if (n > tc_n(r))
        n = tc_n(r);
    r->pos += n;
}

void tc_uneat(tc_run *r, size_t n)
{
    assert(n <= r->pos);
    r->pos -= n;
}

static void compact(tc_run *r)
{
    size_t keep = r->spec ? (r->spec_start < r->pos ? r->spec_start : r->pos) : r->pos;
    if (keep < 65536 || keep < r->in.len / 2)
        return;
    memmove(r->in.data, r->in.data + keep, r->in.len - keep);
    r->in.len -= keep;
    r->in.data[r->in.len] = 0;
    r->pos -= keep;
    if (r->spec)
        r->spec_start -= keep;
}

int tc_lit(tc_run *r, const char *lit, bool eat)
{
    size_t m = strlen(lit), n = tc_n(r);
    size_t k = n < m ? n : m;
    r->work += k + 1;
    if (memcmp(tc_p(r), lit, k))
        return TC_FAIL;
    if (n < m)
        return r->eof ? TC_FAIL : TC_MORE;
    if (eat)
        tc_eat(r, m);
    return TC_DONE;
}

int tc_word_then(tc_run *r, const char *mark, cv_buf *word)
{
    const char *p = tc_p(r);
    size_t n = tc_n(r), i = 0;
    while (i < n && p[i] != '<' && p[i] != '\n' && i <= CV_TC_MAX_NAME)
        i++;
    r->work += i + 1;
    if (i > CV_TC_MAX_NAME || (i == n && r->eof))
        return TC_FAIL;
    if (i == n)
        return TC_MORE;
    size_t m = strlen(mark), k = n - i < m ? n - i : m;
    if (memcmp(p + i, mark, k))
        return TC_FAIL;
    if (k < m)
        return r->eof ? TC_FAIL : TC_MORE;
    cv_buf_reset(word);
    cv_buf_append(word, p, i);
    tc_eat(r, i + m);
    return TC_DONE;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int tc_ws(tc_run *r)
{
    const char *p = tc_p(r);
    size_t n = tc_n(r), i = 0;
    while (i < n && is_ws(p[i]))
        i++;
    r->work += i + 1;
    tc_eat(r, i);
    if (i == n && !r->eof)
        return TC_MORE;
    return TC_DONE;
}

long tc_ident(tc_run *r, size_t off, bool dots)
{
    const char *p = tc_p(r) + off;
    size_t n = tc_n(r) > off ? tc_n(r) - off : 0, i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)p[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80 ||
                  (i > 0 && ((c >= '0' && c <= '9') || c == '-' || (dots && c == '.')));
        if (!ok)
            break;
        if (++i > CV_TC_MAX_NAME)
            return 0;
    }
    r->work += i + 1;
    if (i == n && !r->eof)
        return -1;
    return (long)i;
}

int tc_skip_tokens(tc_run *r, const char *const *toks)
{
    if (!toks)
        return TC_FAIL;
    /* the longest token wins, so a prefix of a longer one waits */
    const char *best = NULL;
    for (int i = 0; toks[i]; i++) {
        int rc = tc_lit(r, toks[i], false);
        if (rc == TC_MORE)
            return TC_MORE;
        if (rc == TC_DONE && (!best || strlen(toks[i]) > strlen(best)))
            best = toks[i];
    }
    if (!best)
        return TC_FAIL;
    tc_eat(r, strlen(best));
    return TC_DONE;
}

/* ---- events ---- */

static void cap_put(cv_buf *b, const void *p, size_t n) { cv_buf_append(b, p, n); }

static void cap_str(cv_buf *b, cv_str s)
{
    uint32_t n = (uint32_t)s.len;
    cap_put(b, &n, sizeof n);
    cap_put(b, s.ptr ? s.ptr : "", s.len);
}

static void emit(tc_run *r, const cv_chat_event *ev)
{
    if (r->spec) {
        uint8_t t = (uint8_t)ev->type;
        int32_t idx = ev->index;
        cap_put(&r->cap, &t, 1);
        cap_put(&r->cap, &idx, sizeof idx);
        cap_str(&r->cap, ev->text);
        cap_str(&r->cap, ev->id);
        cap_str(&r->cap, ev->name);
        return;
    }
    r->fn(r->ud, ev);
}

static cv_str cap_get(const char **p)
{
    uint32_t n;
    memcpy(&n, *p, sizeof n);
    *p += sizeof n;
    cv_str s = { *p, n };
    *p += n;
    return s;
}

void tc_cap_each(const tc_run *r, cv_chat_event_fn fn, void *ud)
{
    if (!r->cap.data) /* nothing captured: no buffer either (NULL + 0 is undefined) */
        return;
    const char *p = r->cap.data, *end = r->cap.data + r->cap.len;
    while (p < end) {
        cv_chat_event ev = { 0 };
        ev.type = (cv_chat_event_type)(uint8_t)*p++;
        int32_t idx;
        memcpy(&idx, p, sizeof idx);
        p += sizeof idx;
        ev.index = idx;
        ev.text = cap_get(&p);
        ev.id = cap_get(&p);
        ev.name = cap_get(&p);
        fn(ud, &ev);
    }
}

static void replay(tc_run *r)
{
    tc_cap_each(r, r->fn, r->ud);
    cv_buf_reset(&r->cap);
}

static void emit_text(tc_run *r, int kind, const char *p, size_t n)
{
    if (!n)
        return;
    cv_chat_event ev = { .type = kind == K_REASONING ? CV_CHAT_REASONING : CV_CHAT_CONTENT, .text = { p, n } };
    emit(r, &ev);
}

static void flush_ws(tc_run *r)
{
    if (r->ws.len) {
        emit_text(r, r->ws_kind, r->ws.data, r->ws.len);
        cv_buf_reset(&r->ws);
    }
}

void tc_text(tc_run *r, int kind, const char *p, size_t n)
{
    if (!n)
        return;
    if (kind == K_CONTENT && r->drained)
        return;
    if (!r->started[kind]) {
        size_t i = 0;
        while (i < n && is_ws(p[i]))
            i++;
        p += i;
        n -= i;
        if (!n)
            return;
    }
    if (r->ws.len && r->ws_kind != kind)
        cv_buf_reset(&r->ws); /* the end of the other kind's text */
    size_t k = n;
    while (k > 0 && is_ws(p[k - 1]))
        k--;
    if (k > 0) {
        flush_ws(r);
        emit_text(r, kind, p, k);
        r->started[kind] = true;
        if (kind == K_CONTENT && r->mode != RM_REASON)
            r->any_text = true; /* (inline reasoning is not the reply's text) */
    }
    if (k < n) {
        r->ws_kind = kind;
        cv_buf_append(&r->ws, p + k, n - k);
        if (r->ws.len > CV_TC_MAX_WS_HOLD)
            flush_ws(r);
    }
}

/* ---- calls ---- */

static void trim_name(const char **p, size_t *n)
{
    while (*n && (is_ws(**p) || **p == '"' || **p == '\'')) {
        (*p)++;
        (*n)--;
    }
    while (*n && (is_ws((*p)[*n - 1]) || (*p)[*n - 1] == '"' || (*p)[*n - 1] == '\''))
        (*n)--;
}

const json_t *tc_resolve(const tc_run *r, const char *name, size_t nlen, size_t *name_off)
{
    *name_off = 0;
    if (!r->o.tools)
        return NULL;
    const json_t *t = tc_tool_find(r->o.tools, name, nlen);
    if (t)
        return t;
    /* "functions.get_weather" where get_weather is declared */
    static const char pre[] = "functions.";
    if (nlen > sizeof pre - 1 && !memcmp(name, pre, sizeof pre - 1)) {
        t = tc_tool_find(r->o.tools, name + sizeof pre - 1, nlen - (sizeof pre - 1));
        if (t)
            *name_off = sizeof pre - 1;
    }
    return t;
}

static void gen_id(tc_run *r, int index, cv_buf *out)
{
    if (r->o.id_fn) {
        r->o.id_fn(r->o.id_ud, index, out);
        return;
    }
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    int len = 24;
    if (r->fmt->flags & TC_F_ID9)
        len = 9; /* Mistral templates reject ids that are not 9 letters/digits */
    else
        cv_buf_puts(out, "call_");
    for (int i = 0; i < len; i++)
        cv_buf_putc(out, al[cv_rng_below(&r->rng, sizeof al - 1)]);
}

bool tc_call_begin(tc_run *r, const char *name, size_t nlen, const char *id, size_t idlen)
{
    r->call_open = false;
    trim_name(&name, &nlen);
    if (!nlen || nlen > CV_TC_MAX_NAME)
        return false;
    const json_t *tool = NULL;
    if (r->o.tools) {
        size_t off;
        tool = tc_resolve(r, name, nlen, &off);
        if (!tool) {
            cv_debug("tool call to undeclared '%.*s' dropped", (int)nlen, name);
            return false;
        }
        name += off;
        nlen -= off;
    } else if (nlen > 10 && !memcmp(name, "functions.", 10)) {
        name += 10;
        nlen -= 10;
    }
    if (r->o.tool_choice_none || (r->o.no_parallel_calls && r->n_calls >= 1) || r->n_calls >= CV_TC_MAX_CALLS)
        return false;
    int index = r->n_calls++;
    cv_buf idb = { 0 };
    trim_name(&id, &idlen);
    if (idlen && idlen <= CV_TC_MAX_NAME)
        cv_buf_append(&idb, id, idlen);
    else
        gen_id(r, index, &idb);
    cv_chat_event ev = { .type = CV_CHAT_TOOL_BEGIN, .index = index, .id = { idb.data, idb.len }, .name = { name, nlen } };
    emit(r, &ev);
    cv_buf_free(&idb);
    r->call_open = true;
    r->call_index = index;
    memset(&r->at, 0, sizeof r->at);
    r->call_props = tc_tool_props(tool);
    return true;
}

/* ---- argument structure (tc_argtrack) ---- */

enum { A_START, A_KEY, A_COLON, A_VALUE, A_AFTER, A_DONE };

static void at_value_done(tc_argtrack *t) { t->exp = t->depth ? A_AFTER : A_DONE; }

static bool scalar_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '+' ||
           c == '-';
}

static void at_feed(tc_argtrack *t, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        t->any = true;
        if (t->in_str) {
            if (t->esc)
                t->esc = false;
            else if (c == '\\')
                t->esc = true;
            else if (c == '"') {
                t->in_str = false;
                if (t->str_is_key)
                    t->exp = A_COLON;
                else
                    at_value_done(t);
            }
            continue;
        }
        if (t->in_scalar) {
            if (scalar_char(c))
                continue;
            t->in_scalar = false;
            at_value_done(t);
        }
        if (c != ' ' && c != '\n' && c != '\t' && c != '\r')
            t->last_comma = c == ',';
        switch (c) {
        case ' ': case '\n': case '\t': case '\r': break;
        case '{':
        case '[':
            if (t->depth < CV_MAX_JSON_DEPTH + 1)
                t->stack[t->depth++] = (uint8_t)c;
            t->exp = c == '{' ? A_KEY : A_VALUE;
            break;
        case '}':
        case ']':
            if (t->depth)
                t->depth--;
            at_value_done(t);
            break;
        case '"':
            t->in_str = true;
            t->str_is_key = t->exp == A_KEY;
            break;
        case ':': t->exp = A_VALUE; break;
        case ',': t->exp = t->depth && t->stack[t->depth - 1] == '{' ? A_KEY : A_VALUE; break;
        default: t->in_scalar = true;
        }
    }
}

/* What closes the arguments emitted so far into one valid object. */
static void at_close(const tc_argtrack *t0, cv_buf *b)
{
    tc_argtrack t = *t0;
    if (!t.any) {
        cv_buf_puts(b, "{}");
        return;
    }
    if (t.in_scalar) /* readers emit whole tokens: it is complete */
        t.exp = t.depth ? A_AFTER : A_DONE;
    if (t.in_str) {
        if (t.esc)
            cv_buf_putc(b, '\\');
        cv_buf_putc(b, '"');
        t.exp = t.str_is_key ? A_COLON : A_AFTER;
    }
    bool obj = t.depth && t.stack[t.depth - 1] == '{';
    if (t.exp == A_COLON)
        cv_buf_puts(b, ": null");
    else if (t.exp == A_VALUE && (obj || t.last_comma))
        cv_buf_puts(b, "null");
    else if (t.exp == A_KEY && t.last_comma)
        cv_buf_puts(b, "\"\": null"); /* after a trailing comma */
    while (t.depth)
        cv_buf_putc(b, t.stack[--t.depth] == '{' ? '}' : ']');
}

void tc_call_args(tc_run *r, const char *p, size_t n)
{
    if (!r->call_open || !n)
        return;
    at_feed(&r->at, p, n);
    r->work += n;
    cv_chat_event ev = { .type = CV_CHAT_TOOL_ARGS, .index = r->call_index, .text = { p, n } };
    emit(r, &ev);
}

void tc_call_end(tc_run *r)
{
    if (!r->call_open)
        return;
    if (r->at.exp != A_DONE || r->at.in_str || r->at.in_scalar || !r->at.any) {
        /* a reader stopped mid-arguments (broken or cut-off output): close
         * them, so every call ends with arguments that parse */
        cv_buf fix = { 0 };
        at_close(&r->at, &fix);
        if (fix.len) {
            at_feed(&r->at, fix.data, fix.len);
            cv_chat_event ae = { .type = CV_CHAT_TOOL_ARGS, .index = r->call_index, .text = { fix.data, fix.len } };
            emit(r, &ae);
        }
        cv_buf_free(&fix);
    }
    cv_chat_event ev = { .type = CV_CHAT_TOOL_END, .index = r->call_index };
    emit(r, &ev);
    r->call_open = false;
    r->call_props = NULL;
}

/* ---- speculation ---- */

void tc_commit(tc_run *r)
{
    if (!r->spec || r->spec_hold || r->spec_weak)
        return;
    r->spec = false;
    /* a switch made by detection stays; the row is what was found */
    r->spec_prev = NULL;
    r->detected = r->spec_syntax ? r->spec_syntax : r->fmt;
    replay(r);
}

static void commit_now(tc_run *r)
{
    r->spec_hold = false;
    r->spec_weak = false;
    tc_commit(r);
}

/* The speculative text was not a call: forget its events and release its
 * raw text (up to end) as ordinary text; parsing resumes at end. */
static void abort_spec(tc_run *r, size_t end)
{
    if (end <= r->spec_start)
        end = r->spec_start + 1;
    if (end > r->in.len)
        end = r->in.len;
    cv_buf_reset(&r->cap);
    r->n_calls = r->spec_n_calls;
    r->rng = r->spec_rng; /* ids as if the speculative calls had never begun, in any chunking */
    r->call_open = false;
    r->spec = false;
    r->spec_hold = false;
    r->spec_weak = false;
    r->spec_fit = false;
    if (r->spec_prev) /* a detection switch that found prose: back to the format before */
        r->fmt = r->spec_prev;
    r->spec_prev = NULL;
    size_t start = r->spec_start;
    r->pos = end;
    r->mode = r->spec_mode;
    tc_text(r, r->spec_kind, r->in.data + start, end - start);
}

/* A section of row f was begun by detection: weak shapes must fit their
 * tools (tc_detect_fits at its end); strong markers switch the format
 * until the section is aborted. */
static void detect_begin(tc_run *r, const cv_tc_format *f, bool weak)
{
    r->spec_syntax = f;
    r->sec.syntax = f;
    if (weak) {
        r->spec_fit = true;
        return;
    }
    r->spec_prev = r->fmt;
    r->fmt = f;
}

static bool detect_fits(tc_run *r)
{
    r->work += r->cap.len; /* the captured events are read once more */
    return tc_detect_fits(r);
}

/* ---- sections ---- */

static void sec_reset(tc_sec *s)
{
    /* u is a union: only the reader that is in use owns memory */
    if (s->item == IT_JSON)
        tc_jcall_fini(&s->u.jc);
    else if (s->item == IT_XML || s->item == IT_GLM)
        tc_xcall_fini(&s->u.xc);
    else if (s->item == IT_PY)
        tc_pcall_fini(&s->u.pc);
    cv_buf_free(&s->tmp);
    cv_buf_free(&s->tmp2);
    tc_json_fini(&s->j);
    memset(s, 0, sizeof *s);
}

/* Starts speculation: events are captured and the raw text from raw_start
 * (an offset in r->in) kept; an abort releases it as kind and resumes mode. */
static void spec_begin(tc_run *r, size_t raw_start, int kind, int mode)
{
    r->spec = true;
    r->spec_start = raw_start;
    r->spec_kind = kind;
    r->spec_mode = mode;
    r->spec_n_calls = r->n_calls;
    r->spec_rng = r->rng;
    r->spec_prev = NULL;
    r->spec_fit = false;
    r->spec_at_start = !r->any_text;
    cv_buf_reset(&r->cap);
}

/* Starts the section reader for start st at the current position; the raw
 * text from raw_start (an offset in r->in) is kept until commit. */
static void section_begin(tc_run *r, const tc_start *st, const cv_tc_format *f, size_t raw_start, int kind, bool weak)
{
    sec_reset(&r->sec);
    r->sec.start = st;
    r->sec.fmt = f;
    r->sec.syntax = f;
    if (!r->spec)
        spec_begin(r, raw_start, kind, r->mode);
    r->spec_syntax = f;
    r->spec_weak = weak;
    r->sec_return = r->spec_hold ? RM_HELD : r->mode; /* content, or a whole-stream row's own */
    r->mode = RM_SECTION;
}

static bool own_marker(const cv_tc_format *f, const char *m)
{
    for (const tc_start *s = f->starts; s && s->marker; s++)
        if (!strcmp(s->marker, m))
            return true;
    return false;
}

/* Builds the marker sets of run r's row and options into c and rs. */
static void build_marks(const tc_run *r, tc_markset *c, tc_markset *rs)
{
    const cv_tc_format *f = r->fmt;
    if (f->stream_marks) {
        f->stream_marks(f, c, rs);
        /* the bare shapes its content may hold (Harmony's text form scans
         * its bodies with the reasoning set) */
        tc_detect_shapes(r, c);
        tc_detect_shapes(r, rs);
        tc_markset_build(c);
        tc_markset_build(rs);
        return;
    }
    /* the first registration of a text wins: stray-markup drops come first */
    for (const char *const *d = f->drops; d && *d; d++)
        tc_markset_add(c, *d, MK_DROP, 0, NULL, f);
    tc_reason_marks(f, c, rs);
    for (const tc_start *s = f->starts; s && s->marker; s++) {
        tc_markset_add(c, s->marker, MK_START, 0, s, f);
        if (!s->weak)
            tc_markset_add(rs, s->marker, MK_START, 0, s, f);
    }
    if (r->o.json_response) {
        tc_markset_add(c, "```json", MK_FENCE, 0, NULL, f);
        tc_markset_add(c, "```", MK_FENCE, 0, NULL, f);
    }
    if (r->o.detect) {
        tc_detect_marks(r, c, rs); /* every other row's markers, which subsume the fallback's */
    } else if ((!r->o.tools || json_array_size(r->o.tools)) && !r->o.tool_choice_none) {
        /* fallback: only when calls are possible (tools unknown, or some declared) */
        for (int i = 0; i < cv_tc_n_formats; i++) {
            const cv_tc_format *g = cv_tc_formats[i];
            if (g == f || (g->flags & TC_F_NO_FALLBACK))
                continue;
            for (const tc_start *s = g->starts; s && s->marker; s++)
                if (!s->weak && !s->at_start && strlen(s->marker) >= 4 && !own_marker(f, s->marker))
                    tc_markset_add(c, s->marker, MK_FALLBACK, 0, s, g);
        }
    }
    tc_markset_build(c);
    tc_markset_build(rs);
}

/* The marker sets depend on the row and three options only, and building
 * them (several hundred markers with output detection, sorted and indexed)
 * costs more than parsing a short reply: each pair is built once per
 * process, on first use, and shared read-only by every parser. */
typedef struct marks_pair {
    tc_markset c, r;
    bool built;
} marks_pair;

static pthread_mutex_t marks_mu = PTHREAD_MUTEX_INITIALIZER;
static marks_pair *marks_cache; /* per row, 8 option combinations each */

static void use_marks(tc_run *r)
{
    /* what build_marks reads of the options (shapes_may_call in tc_detect.c
     * is calls && !json_response) */
    bool calls = (!r->o.tools || json_array_size(r->o.tools)) && !r->o.tool_choice_none;
    int f = 0;
    while (f < cv_tc_n_formats && cv_tc_formats[f] != r->fmt)
        f++;
    assert(f < cv_tc_n_formats); /* rows come from the registry (cv_tc_format_find, cv_tc_detect) */
    size_t k = (size_t)f * 8 + (r->o.json_response ? 4u : 0u) + (r->o.detect ? 2u : 0u) + (calls ? 1u : 0u);
    pthread_mutex_lock(&marks_mu);
    if (!marks_cache)
        marks_cache = cv_xcalloc((size_t)cv_tc_n_formats * 8, sizeof *marks_cache);
    marks_pair *m = &marks_cache[k];
    if (!m->built) {
        build_marks(r, &m->c, &m->r);
        m->built = true;
    }
    pthread_mutex_unlock(&marks_mu);
    r->cmarks = &m->c;
    r->rmarks = &m->r;
}

/* A row that reads the whole stream itself was recognised (TC_SWITCH): it
 * rereads the text from where its section began, as if chosen from the
 * start. Nothing of that text was emitted (it was speculative). */
static void hand_over(tc_run *r)
{
    const cv_tc_format *f = r->sec.fmt;
    if (r->spec) {
        r->pos = r->spec_start;
        cv_buf_reset(&r->cap);
        r->n_calls = r->spec_n_calls;
        r->rng = r->spec_rng;
        r->call_open = false;
        r->spec = r->spec_hold = r->spec_weak = r->spec_fit = false;
        r->spec_prev = NULL;
    }
    sec_reset(&r->sec);
    r->fmt = f;
    r->detected = f;
    r->os_st = 0;
    r->os_text = false;
    r->mode = RM_STREAM;
    if (f->stream_marks)
        use_marks(r);
}

int tc_section_step(tc_run *r)
{
    int rc = r->sec.start->read(r, &r->sec);
    if (rc == TC_SWITCH) {
        hand_over(r);
        return TC_OK;
    }
    if (rc == TC_MORE) {
        if (r->spec && r->pos + tc_n(r) - r->spec_start > CV_TC_MAX_HOLD) {
            cv_debug("speculative tool-call text over %u bytes released as text", CV_TC_MAX_HOLD);
            tc_call_end(r);
            abort_spec(r, r->pos);
            sec_reset(&r->sec);
            return TC_OK;
        }
        return TC_MORE;
    }
    if (rc == TC_OK)
        return TC_OK;
    if (rc == TC_DONE) {
        tc_call_end(r);
        if (r->spec && !r->spec_hold) {
            if (r->spec_weak && (r->n_calls == r->spec_n_calls || (r->spec_fit && !detect_fits(r)))) {
                abort_spec(r, r->pos);
                sec_reset(&r->sec);
                return TC_OK;
            }
            r->spec_syntax = r->sec.syntax;
            r->spec_weak = false;
            if (r->spec_fit && r->sec.py) {
                /* a detected Python list is a call only as the whole reply:
                 * held until the end, like a call ending reasoning */
                r->spec_hold = true;
                r->mode = RM_HELD;
                sec_reset(&r->sec);
                return TC_OK;
            }
            tc_commit(r);
        }
        r->mode = r->sec_return;
        if ((r->fmt->flags & TC_F_DRAIN) && r->mode == RM_CONTENT)
            r->drained = true;
        sec_reset(&r->sec);
        return TC_OK;
    }
    /* TC_FAIL */
    if (r->spec) {
        abort_spec(r, r->pos);
    } else {
        tc_call_end(r);
        r->mode = RM_CONTENT;
    }
    sec_reset(&r->sec);
    return TC_OK;
}

/* The start a mark in the reasoning set means to the format in use, or
 * NULL (another row's: tool-call markup inside reasoning switches nothing). */
static const tc_start *held_start(tc_run *r, const tc_mark *m)
{
    if (m->kind != MK_START)
        return NULL;
    return m->fmt == r->fmt ? m->start : tc_own_start(r->fmt, m);
}

/* Held: after a call section inside reasoning, only whitespace or another
 * call may follow for it to count; anything else (more thinking, the
 * closer) makes it text inside the reasoning. A detected Python list is
 * held the same way, in content, with no second section. */
static int held_step(tc_run *r)
{
    int w = tc_ws(r);
    if (tc_n(r) == 0) {
        if (!r->eof)
            return TC_MORE;
        commit_now(r);
        r->mode = r->spec_mode == RM_STREAM ? RM_STREAM : RM_CONTENT;
        return TC_OK;
    }
    (void)w;
    size_t at;
    const tc_mark *hit;
    int s = tc_scan(r->rmarks, tc_p(r), tc_n(r), r->eof, &at, &hit, &r->work);
    if (at == 0 && s == SCAN_PARTIAL)
        return TC_MORE;
    const tc_start *st = at == 0 && s == SCAN_HIT && r->spec_mode == RM_REASON ? held_start(r, hit) : NULL;
    if (st) {
        size_t raw = r->pos;
        if (!st->keep)
            tc_eat(r, hit->len);
        section_begin(r, st, r->fmt, raw, r->spec_kind, false);
        return TC_OK;
    }
    abort_spec(r, r->pos); /* back to the mode the held text came from */
    return TC_OK;
}

/* ---- reasoning ----
 *
 * Tool-call markup inside reasoning is the model thinking about a call, not
 * making one — unless the reasoning never closes and the call is the last
 * thing generated (models that forget </think> before acting). So a call
 * section met inside reasoning is read speculatively and held (RM_HELD):
 * if only whitespace or further calls follow up to the end of generation,
 * the calls count; if the thinking goes on or closes, the held text is
 * reasoning after all. The markers are reasoning.c's. */

static void reason_enter(tc_run *r, int pair, const char *opener, size_t olen)
{
    r->rpair = pair;
    r->mode = RM_REASON;
    if (r->o.reasoning_inline) {
        tc_text(r, K_CONTENT, opener, olen);
        return;
    }
    if (r->fmt->flags & TC_F_OPENER_TEXT)
        tc_text(r, K_REASONING, opener, olen);
}

/* Emits the text before the first mark of set (or all of it that cannot
 * be one) as kind and consumes it; returns tc_scan's result. */
static int text_to_mark(tc_run *r, const tc_markset *set, int kind, const tc_mark **hit)
{
    const char *p = tc_p(r);
    size_t at;
    int s = tc_scan(set, p, tc_n(r), r->eof, &at, hit, &r->work);
    tc_text(r, kind, p, at);
    tc_eat(r, at);
    return s;
}

static int reason_step(tc_run *r)
{
    int kind = r->o.reasoning_inline ? K_CONTENT : K_REASONING;
    if (!tc_n(r))
        return TC_MORE;
    const tc_mark *hit;
    int s = text_to_mark(r, r->rmarks, kind, &hit);
    if (s != SCAN_HIT)
        return TC_MORE;
    /* the set may hold other rows' markers (output detection): only the
     * closer of the pair in use closes, only the format's own starts start */
    const tc_start *st = NULL;
    if (hit->kind == MK_START)
        st = hit->fmt == r->fmt ? hit->start : tc_own_start(r->fmt, hit);
    if ((hit->kind == MK_RCLOSE && tc_own_pair(r->fmt, hit, true) != r->rpair) || (hit->kind == MK_START && !st)) {
        tc_text(r, kind, tc_p(r), 1);
        tc_eat(r, 1);
        return TC_OK;
    }
    if (hit->kind == MK_RCLOSE) {
        tc_eat(r, hit->len);
        if (r->o.reasoning_inline)
            tc_text(r, K_CONTENT, hit->s, hit->len);
        r->mode = RM_CONTENT;
        return TC_OK;
    }
    /* a tool-call section inside reasoning: read it, hold it */
    size_t raw = r->pos;
    spec_begin(r, raw, kind, RM_REASON);
    r->spec_hold = true;
    r->spec_weak = false;
    if (!st->keep)
        tc_eat(r, hit->len);
    section_begin(r, st, r->fmt, raw, kind, false);
    return TC_OK;
}

/* ---- content ---- */

static bool mark_applies(tc_run *r, int kind, const tc_start *st)
{
    switch (kind) {
    case MK_START:
        return !(st->at_start && r->any_text);
    case MK_FALLBACK:
        return r->n_calls == 0 && !st->weak;
    case MK_FENCE:
        return r->fenced || !r->any_text;
    case MK_RCLOSE:
        return !r->o.reasoning_inline && !r->started[K_CONTENT] && !r->started[K_REASONING] && r->n_calls == 0;
    }
    return true;
}

/* Starts the section mark hit begins (st of row f, as resolved), reading
 * from the mark (or after it when the reader does not read its marker). */
static void mark_section(tc_run *r, const tc_mark *hit, const tc_start *st, const cv_tc_format *f)
{
    size_t raw = r->pos;
    if (!st->keep)
        tc_eat(r, hit->len);
    section_begin(r, st, f, raw, K_CONTENT, st->weak || hit->kind == MK_FALLBACK);
    /* another row's mark, or a detection shape of the row in use */
    if (hit->kind == MK_START && (f != r->fmt || !tc_own_start(f, hit)))
        detect_begin(r, f, st->weak);
}

bool tc_stream_shape(tc_run *r, const tc_mark *m)
{
    const tc_start *st = m->start;
    const cv_tc_format *f = m->fmt;
    int pair;
    if (m->kind != MK_START || !tc_detect_resolve(r, m, &st, &f, &pair) || !mark_applies(r, MK_START, st))
        return false;
    mark_section(r, m, st, f);
    return true;
}

static int content_step(tc_run *r)
{
    if (!tc_n(r))
        return TC_MORE;
    const tc_mark *hit;
    int s = text_to_mark(r, r->cmarks, K_CONTENT, &hit);
    if (s == SCAN_NONE)
        return TC_MORE;
    if (s == SCAN_PARTIAL)
        return TC_MORE;
    const tc_start *st = hit->start;
    const cv_tc_format *f = hit->fmt;
    int pair = hit->arg;
    /* a mark of another row than the one in use (output detection, or the
     * one chosen before a switch): what it means now */
    bool ours = f == r->fmt || hit->kind == MK_FALLBACK || hit->kind == MK_FENCE;
    if ((!ours && !tc_detect_resolve(r, hit, &st, &f, &pair)) || !mark_applies(r, hit->kind, st)) {
        tc_text(r, K_CONTENT, tc_p(r), 1);
        tc_eat(r, 1);
        return TC_OK;
    }
    switch (hit->kind) {
    case MK_ROPEN:
        tc_eat(r, hit->len);
        r->fmt = f; /* another row's reasoning opener: its syntax from here on */
        reason_enter(r, pair, hit->s, hit->len);
        break;
    case MK_START:
    case MK_FALLBACK:
        mark_section(r, hit, st, f);
        break;
    case MK_DROP:
    case MK_RCLOSE:
        tc_eat(r, hit->len);
        break;
    case MK_FENCE:
        tc_eat(r, hit->len);
        r->fenced = !r->fenced;
        break;
    }
    return TC_OK;
}

/* ---- lifecycle ---- */

static int check_tools(const json_t *tools, cv_err *err)
{
    if (!tools)
        return 0;
    if (!json_is_array(tools))
        return cv_err_set(err, CV_EINVAL, "tools must be an array of tool objects");
    if (json_array_size(tools) > CV_TC_MAX_TOOLS)
        return cv_err_set(err, CV_ELIMIT, "tools has %zu entries, at most %u are allowed", json_array_size(tools),
                          CV_TC_MAX_TOOLS);
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        const json_t *f = json_object_get(t, "function");
        if (!json_is_object(f))
            f = t;
        if (!json_is_string(json_object_get(f, "name")))
            return cv_err_set(err, CV_EINVAL, "tools[%zu] has no function name", i);
    }
    return 0;
}

int cv_chat_parse_create(const cv_chat_parse_opts *opts, cv_chat_event_fn fn, void *ud, cv_chat_parse **out,
                         cv_err *err)
{
    *out = NULL;
    cv_chat_parse_opts o = opts ? *opts : (cv_chat_parse_opts){ 0 };
    int rc = check_tools(o.tools, err);
    if (rc)
        return rc;
    tc_run *r = cv_xcalloc(1, sizeof *r);
    r->o = o;
    r->fn = fn;
    r->ud = ud;
    r->fmt = o.format ? o.format : cv_tc_detect(o.template_src, o.model_name);
    /* readers form tc_p before they look at tc_n: at the end of an empty
     * response that would be NULL + 0, which is undefined */
    cv_buf_reserve(&r->in, 0);
    cv_rng_seed(&r->rng, o.id_seed ? o.id_seed : cv_now_ns() ^ (uint64_t)(uintptr_t)r);
    use_marks(r);
    r->mode = r->fmt->stream ? RM_STREAM : RM_CONTENT;
    if (o.reasoning_open.len && !r->fmt->stream) {
        const tc_reason *rs = tc_reasons(r->fmt);
        int pair = 0;
        for (int i = 0; rs[i].open; i++)
            if (cv_str_starts(o.reasoning_open, cv_str_of(rs[i].open)))
                pair = i;
        reason_enter(r, pair, o.reasoning_open.ptr, o.reasoning_open.len);
    }
    *out = r;
    return 0;
}

static void run(tc_run *r)
{
    for (;;) {
        int rc = TC_MORE;
        switch (r->mode) {
        case RM_CONTENT: rc = content_step(r); break;
        case RM_REASON: rc = reason_step(r); break;
        case RM_SECTION: rc = tc_section_step(r); break;
        case RM_STREAM: rc = r->fmt->stream(r); break;
        case RM_HELD: rc = held_step(r); break;
        }
        if (rc == TC_MORE)
            break;
    }
    compact(r);
}

int cv_chat_parse_feed(cv_chat_parse *p, const char *text, size_t len, cv_err *err)
{
    if (p->finished)
        return cv_err_set(err, CV_EINVAL, "parser fed after finish");
    if (!len)
        return 0;
    cv_buf_append(&p->in, text, len);
    run(p);
    return 0;
}

int cv_chat_parse_finish(cv_chat_parse *p, cv_err *err)
{
    if (p->finished)
        return cv_err_set(err, CV_EINVAL, "parser finished twice");
    p->eof = true;
    run(p);
    /* every reader consumes everything at eof; a section still open here is
     * one whose reader stopped early: close it */
    if (p->spec)
        commit_now(p);
    tc_call_end(p);
    cv_buf_reset(&p->ws); /* trailing whitespace of the response */
    p->finished = true;
    return 0;
}

void cv_chat_parse_destroy(cv_chat_parse *p)
{
    if (!p)
        return;
    sec_reset(&p->sec);
    cv_buf_free(&p->in);
    cv_buf_free(&p->cap);
    cv_buf_free(&p->ws);
    cv_buf_free(&p->scratch);
    cv_buf_free(&p->os_hdr);
    free(p);
}

const cv_tc_format *cv_chat_parse_format(const cv_chat_parse *p) { return p->fmt; }
const cv_tc_format *cv_chat_parse_detected(const cv_chat_parse *p) { return p->detected; }
uint64_t cv_chat_parse_work(const cv_chat_parse *p) { return p->work; }

int tc_stream_args(tc_run *r, tc_json *j, cv_buf *out)
{
    size_t used = 0;
    int rc = tc_json_feed(j, tc_p(r), tc_n(r), r->eof, &used);
    tc_eat(r, used);
    if (rc == TC_FAIL && tc_json_started(j)) {
        /* close what was emitted as if the text ended here */
        size_t u;
        tc_json_feed(j, "", 0, true, &u);
    }
    if (out->len) {
        tc_call_args(r, out->data, out->len);
        cv_buf_reset(out);
    }
    return rc;
}
