/* constrain.c — constrained decoding wired into generation (constrain.h): turns
 * a request's response_format / forced tool_choice into a grammar
 * (src/grammar/), and a grammar into the scheduler's per-request sampling
 * hook. It owns, per model, the grammar vocabulary (the tokenizer's pieces as
 * a byte trie, built at the first constrained request, since most servers
 * never see one) and a bounded LRU of compiled grammars keyed by the schema
 * or tools text plus every option that changes the grammar (agents resend the
 * same tools on every turn, and a grammar's token-mask cache is worth
 * keeping). Per request it holds a grammar state and scratch for one masked
 * copy of the logits.
 *
 * The hook draws from the raw logits first and keeps the token when the
 * grammar allows it (most steps inside a JSON string): the full mask is
 * computed only when the draw is refused, and the redraw from the masked
 * logits has the same distribution as masking first would. Near max_tokens
 * the budget rule of docs/grammar.md narrows the choice to tokens after
 * which the shortest completion still fits, so a structured output ends
 * complete instead of cut. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "chat/chat.h"
#include "grammar/grammar.h"
#include "sched/constrain.h"
#include "tokenizer/tokenizer.h"

/* ---- grammar cache ---- */

typedef struct entry {
    char *key;
    uint64_t hash;
    cv_grammar *g;
    int refs;       /* the cache's own plus one per live request */
    uint64_t used;  /* LRU clock */
    bool in_cache;
} entry;

struct cv_constrain {
    const cv_tok *tok;
    cv_constrain_opts o;
    char *syntax;
    pthread_mutex_t mu;
    cv_grammar_vocab *vocab; /* built on first use, under mu; read-only after */
    entry *cache[CV_MAX_GRAMMAR_CACHE];
    int n_cache;
    uint64_t clock;
    int64_t hits, misses;
};

static uint64_t hash_str(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static void entry_unref(entry *e)
{
    if (--e->refs == 0) {
        cv_grammar_destroy(e->g);
        free(e->key);
        free(e);
    }
}

/* Under mu. */
static entry *cache_find(cv_constrain *c, const char *key, uint64_t h)
{
    for (int i = 0; i < c->n_cache; i++)
        if (c->cache[i]->hash == h && !strcmp(c->cache[i]->key, key))
            return c->cache[i];
    return NULL;
}

/* Under mu: adds e (one reference for the cache), evicting the least
 * recently used entry when full. An evicted grammar lives on until the
 * requests using it end. */
static void cache_put(cv_constrain *c, entry *e)
{
    if (c->n_cache == CV_MAX_GRAMMAR_CACHE) {
        int old = 0;
        for (int i = 1; i < c->n_cache; i++)
            if (c->cache[i]->used < c->cache[old]->used)
                old = i;
        c->cache[old]->in_cache = false;
        entry_unref(c->cache[old]);
        c->cache[old] = c->cache[--c->n_cache];
    }
    e->refs++;
    e->in_cache = true;
    c->cache[c->n_cache++] = e;
}

/* ---- per-model object ---- */

int cv_constrain_create(const cv_tok *tok, const cv_constrain_opts *o, cv_constrain **out, cv_err *err)
{
    *out = NULL;
    if (!tok)
        return cv_err_set(err, CV_EINVAL, "constrained decoding needs the model's tokenizer");
    cv_constrain *c = cv_xcalloc(1, sizeof *c);
    c->tok = tok;
    if (o)
        c->o = *o;
    c->syntax = c->o.syntax ? cv_xstrdup(c->o.syntax) : NULL;
    c->o.syntax = c->syntax;
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return 0;
}

void cv_constrain_destroy(cv_constrain *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n_cache; i++)
        entry_unref(c->cache[i]);
    cv_grammar_vocab_destroy(c->vocab);
    pthread_mutex_destroy(&c->mu);
    free(c->syntax);
    free(c);
}

void cv_constrain_get_info(cv_constrain *c, cv_constrain_info *out)
{
    pthread_mutex_lock(&c->mu);
    *out = (cv_constrain_info){ .n_cached = c->n_cache, .hits = c->hits, .misses = c->misses,
                                .vocab_built = c->vocab != NULL };
    pthread_mutex_unlock(&c->mu);
}

static int get_vocab(cv_constrain *c, const cv_grammar_vocab **out, cv_err *err)
{
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    if (!c->vocab) {
        uint64_t t0 = cv_now_ns();
        rc = cv_grammar_vocab_from_tok(c->tok, &c->vocab, err);
        if (!rc)
            cv_info("constrained decoding: grammar vocabulary of %d tokens built in %.1f ms",
                    cv_grammar_vocab_n(c->vocab), (double)(cv_now_ns() - t0) / 1e6);
    }
    *out = c->vocab;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---- what a request asks for ---- */

/* One grammar's recipe: its cache key is the text of all of it. */
typedef struct recipe {
    const json_t *schema; /* a JSON document grammar, or */
    const json_t *tools;  /* a tool-call grammar */
    const char *force_name;
    bool parallel, lazy;
    const char *think_open, *think_close;
} recipe;

static char *recipe_key(const cv_constrain *c, const recipe *r)
{
    cv_buf k = { 0 };
    /* object keys keep their order: it is the order properties are written in */
    char *doc = json_dumps(r->schema ? r->schema : r->tools, JSON_COMPACT | JSON_ENCODE_ANY);
    cv_buf_printf(&k, "%s\x1f%s\x1f%s\x1f%d%d\x1f%s\x1f%s\x1f%s", r->schema ? "schema" : "tools",
                  r->schema ? "" : c->syntax, r->force_name ? r->force_name : "", r->parallel, r->lazy,
                  r->think_open ? r->think_open : "", r->think_close ? r->think_close : "", doc ? doc : "");
    free(doc);
    return cv_buf_steal(&k);
}

static int compile(const cv_constrain *c, const recipe *r, cv_grammar **g, cv_err *err)
{
    cv_buf warn = { 0 };
    int rc;
    if (r->schema) {
        cv_grammar_opts o = { .warnings = &warn, .think_open = r->think_open, .think_close = r->think_close };
        rc = cv_grammar_from_schema(r->schema, &o, g, err);
    } else {
        cv_grammar_tools_opts o = { .syntax = cv_tc_format_syntax(cv_tc_format_find(c->syntax)), .tools = r->tools,
                                    .force_name = r->force_name,
                                    .parallel = r->parallel, .lazy = r->lazy, .think_open = r->think_open,
                                    .think_close = r->think_close, .warnings = &warn };
        rc = cv_grammar_from_tools(&o, g, err);
        /* a named tool that is not declared is the request's mistake: 400 */
        if (rc == CV_ENOTFOUND)
            rc = err ? (err->code = CV_EINVAL) : CV_EINVAL;
    }
    if (!rc && warn.len)
        cv_debug("constrained decoding: not enforced: %.*s", (int)warn.len, warn.data);
    cv_buf_free(&warn);
    return rc;
}

/* A reference to the compiled grammar of r, from the cache or compiled now
 * (outside the lock: a big schema takes milliseconds, and two requests
 * compiling the same one at once is harmless). */
static int acquire(cv_constrain *c, const recipe *r, entry **out, cv_err *err)
{
    char *key = recipe_key(c, r);
    size_t klen = strlen(key);
    uint64_t h = hash_str(key, klen);
    pthread_mutex_lock(&c->mu);
    entry *e = cache_find(c, key, h);
    if (e) {
        e->refs++;
        e->used = ++c->clock;
        c->hits++;
        pthread_mutex_unlock(&c->mu);
        free(key);
        *out = e;
        return 0;
    }
    c->misses++;
    pthread_mutex_unlock(&c->mu);
    cv_grammar *g = NULL;
    int rc = compile(c, r, &g, err);
    if (rc) {
        free(key);
        return rc;
    }
    pthread_mutex_lock(&c->mu);
    e = cache_find(c, key, h);
    if (e) { /* compiled twice at once: keep the cached one */
        cv_grammar_destroy(g);
        free(key);
    } else {
        e = cv_xcalloc(1, sizeof *e);
        *e = (entry){ .key = key, .hash = h, .g = g };
        if (klen <= CV_MAX_GRAMMAR_CACHE_KEY)
            cache_put(c, e);
    }
    e->refs++;
    e->used = ++c->clock;
    pthread_mutex_unlock(&c->mu);
    *out = e;
    return 0;
}

static void release(cv_constrain *c, entry *e)
{
    pthread_mutex_lock(&c->mu);
    entry_unref(e);
    pthread_mutex_unlock(&c->mu);
}

/* ---- the hook ---- */

typedef struct hook_ud {
    cv_constrain *c;
    entry *e;
    cv_grammar_state *st;
    int32_t max_tokens, n_gen;
    int32_t n_vocab;  /* the grammar vocabulary's tokens */
    int32_t n_logits; /* the model's logits (>= n_vocab when padded), from the first step */
    int32_t reserve_end; /* 1: keep the last token for end-of-generation */
    float *work;     /* masked logits [n_logits] */
    uint64_t *mask;  /* [ceil(n_vocab / 64)] */
    cv_constrain_stats stats;
} hook_ud;

static inline bool bit(const uint64_t *m, int32_t t) { return (m[t >> 6] >> (t & 63)) & 1; }

static int choose(void *ud, cv_sampler *smp, const float *logits, int32_t n_vocab, int32_t *token, cv_err *err)
{
    hook_ud *h = ud;
    uint64_t t0 = cv_now_ns();
    /* The output matrix may be padded past the tokenizer's last id (Qwen's
     * 151,936 rows for 151,669 tokens): those rows are never allowed. */
    if (!h->work) {
        h->n_logits = n_vocab;
        h->work = cv_xmalloc((size_t)n_vocab * sizeof *h->work);
    } else if (n_vocab != h->n_logits) {
        return cv_err_set(err, CV_EINVAL, "constrained decoding: %d logits after %d at the first step", n_vocab,
                          h->n_logits);
    }
    cv_grammar_state *st = h->st;
    /* Tokens left after this one, less one for the end-of-generation token
     * in a document (complete but not ended would read as cut by length;
     * lazy free text cut at max_tokens is what `length` means).
     * When even that cannot be met (max_tokens below the shortest output),
     * every token must still bring the end nearer: min_bytes - 1. */
    int32_t left = h->max_tokens - h->n_gen; /* this token included */
    int32_t min_now = cv_grammar_state_min_bytes(st);
    bool budget = left <= min_now + CV_GRAMMAR_BUDGET_WINDOW;
    int32_t max_bytes = CV_MAX(left - 1 - h->reserve_end, min_now - 1);
    uint64_t ts = cv_now_ns();
    int32_t tok = cv_sampler_sample(smp, logits);
    uint64_t t_smp = cv_now_ns() - ts;
    if (tok < 0 || tok >= h->n_vocab || !cv_grammar_state_allows(st, tok) ||
        (budget && cv_grammar_state_min_bytes_after(st, tok) > max_bytes)) {
        uint64_t tm = cv_now_ns();
        int rc = cv_grammar_state_mask(st, h->mask, err);
        uint64_t tb = cv_now_ns();
        h->stats.ns_mask += tb - tm;
        if (!rc && budget) {
            rc = cv_grammar_state_mask_budget(st, h->mask, max_bytes, err);
            h->stats.ns_budget += cv_now_ns() - tb;
        }
        if (rc)
            return rc;
        h->stats.n_masked++;
        h->stats.n_budget += budget;
        int32_t best = -1;
        for (int32_t i = 0; i < n_vocab; i++) {
            bool ok = i < h->n_vocab && bit(h->mask, i);
            h->work[i] = ok ? logits[i] : -INFINITY;
            if (ok && (best < 0 || logits[i] > logits[best]))
                best = i;
        }
        if (best < 0)
            return cv_err_set(err, CV_EINVAL, "constrained decoding: no token continues the output after %d tokens",
                              h->n_gen);
        ts = cv_now_ns();
        tok = cv_sampler_sample(smp, h->work);
        t_smp += cv_now_ns() - ts;
        /* every allowed logit can be -inf (a logit_bias ban): the grammar
         * wins, its most likely token is taken */
        if (tok < 0 || tok >= h->n_vocab || !bit(h->mask, tok))
            tok = best;
    }
    int rc = cv_grammar_state_accept(st, tok, err);
    if (rc)
        return rc;
    h->n_gen++;
    h->stats.n_tokens++;
    uint64_t t = cv_now_ns() - t0;
    h->stats.ns += t;
    h->stats.ns_grammar += t - CV_MIN(t, t_smp);
    *token = tok;
    return 0;
}

static void destroy(void *ud)
{
    hook_ud *h = ud;
    if (!h)
        return;
    if (h->stats.n_tokens)
        cv_debug("constrained decoding: %lld tokens, %lld masked (%lld near the budget), grammar %.1f us/token "
                 "(full masks %.1f, budget masks %.1f)",
                 (long long)h->stats.n_tokens, (long long)h->stats.n_masked, (long long)h->stats.n_budget,
                 (double)h->stats.ns_grammar / 1e3 / (double)h->stats.n_tokens,
                 (double)h->stats.ns_mask / 1e3 / (double)h->stats.n_tokens,
                 (double)h->stats.ns_budget / 1e3 / (double)h->stats.n_tokens);
    cv_grammar_state_destroy(h->st);
    release(h->c, h->e);
    free(h->work);
    free(h->mask);
    free(h);
}

const cv_sched_hook cv_constrain_hook = { choose, destroy };

void cv_constrain_hook_stats(const void *ud, cv_constrain_stats *out) { *out = ((const hook_ud *)ud)->stats; }

bool cv_constrain_hook_done(const void *ud)
{
    const hook_ud *h = ud;
    return cv_grammar_state_can_end(h->st) || cv_grammar_state_done(h->st);
}

static int make_hook(cv_constrain *c, const recipe *r, int32_t max_tokens, void **out, cv_err *err)
{
    *out = NULL;
    const cv_grammar_vocab *v = NULL;
    entry *e = NULL;
    int rc;
    if ((rc = get_vocab(c, &v, err)) || (rc = acquire(c, r, &e, err)))
        return rc;
    hook_ud *h = cv_xcalloc(1, sizeof *h);
    h->c = c;
    h->e = e;
    h->max_tokens = max_tokens > 0 ? max_tokens : INT32_MAX;
    h->reserve_end = !r->lazy;
    h->n_vocab = cv_grammar_vocab_n(v);
    if ((rc = cv_grammar_state_create(e->g, v, &h->st, err))) {
        destroy(h);
        return rc;
    }
    h->mask = cv_xcalloc(((size_t)h->n_vocab + 63) / 64, sizeof *h->mask);
    *out = h;
    return 0;
}

/* The reasoning block a grammar lets come first: inside it already when the
 * prompt left an opener ("<think>\n" → close with "</think>"), optional when
 * the model reasons and thinking is not switched off. */
static void think_tags(const cv_constrain *c, cv_str opener, cv_thinking thinking, char close[64], recipe *r)
{
    size_t n = opener.len;
    while (n && (opener.ptr[n - 1] == '\n' || opener.ptr[n - 1] == ' ' || opener.ptr[n - 1] == '\r'))
        n--;
    if (n >= 3 && n < 60 && opener.ptr[0] == '<' && opener.ptr[n - 1] == '>') {
        snprintf(close, 64, "</%.*s", (int)(n - 1), opener.ptr + 1);
        r->think_open = NULL;
        r->think_close = close;
    } else if (n == 0 && c->o.reasoning && thinking != CV_THINKING_OFF) {
        r->think_open = "<think>";
        r->think_close = "</think>";
    }
}

int cv_constrain_for_schema(cv_constrain *c, const json_t *schema, cv_str opener, int32_t max_tokens, void **hook_ud,
                            cv_err *err)
{
    char close[64];
    recipe r = { .schema = schema };
    think_tags(c, opener, CV_THINKING_DEFAULT, close, &r);
    return make_hook(c, &r, max_tokens, hook_ud, err);
}

/* The schema a response_format asks for, or NULL (new reference). */
static json_t *format_schema(const json_t *rf, cv_err *err, int *rc)
{
    *rc = 0;
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!type || !strcmp(type, "text"))
        return NULL;
    if (!strcmp(type, "json_object"))
        return json_pack("{s:s}", "type", "object");
    if (strcmp(type, "json_schema")) {
        *rc = cv_err_set(err, CV_EINVAL, "'response_format.type' is '%.40s', must be text, json_object or json_schema",
                         type);
        return NULL;
    }
    const json_t *js = json_object_get(rf, "json_schema");
    const json_t *schema = json_object_get(js, "schema");
    if (!schema)
        return json_object(); /* a named format without a schema: any JSON value */
    if (!json_is_object(schema) && !json_is_boolean(schema)) {
        *rc = cv_err_set(err, CV_EINVAL, "'response_format.json_schema.schema' must be a JSON Schema object");
        return NULL;
    }
    return json_incref((json_t *)schema);
}

int cv_constrain_for_request(cv_constrain *c, const cv_chat_request *req, cv_str opener, int32_t max_tokens,
                             void **hook_ud, cv_err *err)
{
    *hook_ud = NULL;
    char close[64];
    recipe r = { 0 };
    think_tags(c, opener, req->thinking, close, &r);
    bool has_tools = json_array_size(req->tools) > 0;
    bool forced = req->tool_choice == CV_TOOL_CHOICE_REQUIRED || req->tool_choice == CV_TOOL_CHOICE_NAMED;
    if (has_tools && (forced || (c->o.lazy && req->tool_choice == CV_TOOL_CHOICE_AUTO && !req->response_format))) {
        /* every parser row with call syntax carries how a call is written */
        if (!cv_tc_format_syntax(cv_tc_format_find(c->syntax))) {
            /* The call is still asked for in the prompt and parsed back;
             * refusing the request would break the agent over a guarantee
             * it did not know it had. */
            if (forced)
                cv_debug("constrained decoding: the %s tool-call syntax has no grammar; tool_choice is not enforced",
                         c->syntax ? c->syntax : "(unknown)");
            return 0;
        }
        r.tools = req->tools;
        r.force_name = req->tool_choice == CV_TOOL_CHOICE_NAMED ? req->tool_choice_name : NULL;
        r.parallel = req->parallel_tool_calls;
        r.lazy = !forced;
        int rc = make_hook(c, &r, max_tokens, hook_ud, err);
        if (rc == CV_EUNSUPPORTED && r.lazy) {
            /* no lazy form for this syntax (its call marker is not ASCII):
             * tool_choice auto stays free, as without --grammar-lazy */
            cv_debug("constrained decoding: %s", err ? err->msg : "no lazy grammar");
            cv_err_clear(err);
            return 0;
        }
        if (rc)
            cv_err_prefix(err, "tool_choice: ");
        return rc;
    }
    if (forced && !has_tools)
        return cv_err_set(err, CV_EINVAL, "'tool_choice' asks for a tool call but no tools were given");
    if (!req->response_format)
        return 0;
    int rc;
    json_t *schema = format_schema(req->response_format, err, &rc);
    if (!schema)
        return rc;
    r.schema = schema;
    if ((rc = make_hook(c, &r, max_tokens, hook_ud, err)))
        cv_err_prefix(err, "response format: ");
    json_decref(schema);
    return rc;
}
