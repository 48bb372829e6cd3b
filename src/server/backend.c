/* backend.c — the production cv_server_backend: one GGUF model served
 * through the layers below the server. It owns the model (mmap), the engine
 * and its scheduler thread, the tokenizer and the model's prompt
 * (cv_chat_prompt: template, syntax, special tokens), and fills the backend
 * table with them:
 *
 *   encode_chat  cv_chat_prompt_encode: the request rendered with the chat
 *                template (strict form on a raise) and tokenized, BOS
 *                prepended when the vocabulary wants one
 *   encode_text  cv_chat_encode_text (completions)
 *   detok_*      the tokenizer's streaming detokenizer (whole UTF-8 only)
 *   is_eog       the tokenizer's end-of-generation ids, also the stop tokens
 *   parser_*     cv_chat_parse (chat_parse.h) with the options
 *                cv_chat_request_parse_opts gives for the model's syntax
 *                (detected at open: template, then file name)
 *   submit/next  cv_sched, sized by the options: KV memory, tokens per
 *                step, the prefix cache and its file (saved at close)
 *   load/status/stats  the scheduler's figures (/health, /v1/status,
 *                /metrics)
 *   embeddings   an embedding model (its file's {arch}.pooling_type, or
 *                the pooling the caller gives a file without one) submits
 *                pooled requests to the same scheduler (/v1/embeddings)
 *
 * Everything here is read-only after open except the scheduler, which is
 * thread-safe, so HTTP threads call in concurrently without locks. */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/chat.h"
#include "model/model.h"
#include "sched/constrain.h"
#include "sched/sched.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

typedef struct model_backend {
    cv_server_backend be; /* first: the table handed to the server */
    cv_model *model;
    cv_engine *engine;
    cv_sched *sched;
    cv_tok *tok;
    cv_chat_prompt *prompt;
    char *name;
    const int32_t *eog;
    size_t n_eog;
    cv_constrain *constrain; /* response_format / forced tool calls (constrain.c) */
    cv_pooling pooling;      /* an embedding model's; CV_POOL_NONE: not one */
} model_backend;

/* ---- prompt ---- */

static int encode_chat(void *ctx, const cv_chat_request *r, int32_t **ids, int32_t *n, cv_buf *opener,
                       cv_err *err)
{
    return cv_chat_prompt_encode(((model_backend *)ctx)->prompt, r, ids, n, opener, err);
}

static int encode_text(void *ctx, cv_str text, int32_t **ids, int32_t *n, cv_err *err)
{
    return cv_chat_encode_text(((model_backend *)ctx)->tok, text, ids, n, err);
}

/* ---- detokenizing ---- */

static void *detok_create(void *ctx)
{
    model_backend *mb = ctx;
    cv_tok_stream *s = cv_xmalloc(sizeof *s);
    cv_tok_stream_init(s, mb->tok, CV_TOK_AT_START);
    return s;
}

static void detok_feed(void *d, int32_t token, cv_buf *out)
{
    /* An id out of range cannot come from our own sampler; if it did, it
     * is dropped rather than failing the request. */
    cv_tok_stream_feed(d, token, out, NULL);
}

static void detok_flush(void *d, cv_buf *out) { cv_tok_stream_flush(d, out); }
static void detok_destroy(void *d) { free(d); }

static bool is_eog(void *ctx, int32_t token) { return cv_tok_is_eog(((model_backend *)ctx)->tok, token); }

static void token_text(void *ctx, int32_t token, cv_buf *out)
{
    cv_tok_piece(((model_backend *)ctx)->tok, token, 0, out, NULL);
}

/* ---- output parser ---- */

/* cv_chat_parse in the server's terms. Call ids are always the wire's own
 * (call_ / toolu_ / fc_ + call_, made where the wire encodes the call): the
 * parser's ids are dropped, including those a format carries in its markup
 * (Kimi functions.NAME:IDX, Mistral [CALL_ID], Command R tool_call_id),
 * because those repeat across turns ("functions.bash:0" every time) and an
 * agent keys tool results by id for the whole conversation. */
typedef struct out_parser {
    cv_chat_parse *p;
    cv_chat_event_fn fn;
    void *ud;
} out_parser;

static void no_id(void *ud, int index, cv_buf *out)
{
    (void)ud;
    (void)index;
    (void)out;
}

static void forward(void *ud, const cv_chat_event *ev)
{
    out_parser *op = ud;
    cv_chat_event e = *ev;
    e.id = (cv_str){ "", 0 };
    op->fn(op->ud, &e);
}

void *cv_server_parser_create(const cv_tc_format *f, const cv_chat_request *req, cv_str opener, cv_chat_event_fn fn,
                              void *ud)
{
    out_parser *op = cv_xcalloc(1, sizeof *op);
    op->fn = fn;
    op->ud = ud;
    cv_chat_parse_opts o;
    cv_chat_request_parse_opts(req, f, opener, &o);
    o.id_fn = no_id;
    cv_err err = { 0 };
    if (cv_chat_parse_create(&o, forward, op, &op->p, &err)) {
        /* The wires hand over tools they validated, so this is a tool list
         * the parser reads differently: parse without declared tools (any
         * name counts) rather than fail a request already accepted. */
        cv_warn("tool-call parser: %s; parsing without the tool list", err.msg);
        o.tools = NULL;
        if (cv_chat_parse_create(&o, forward, op, &op->p, NULL)) {
            free(op);
            return NULL; /* gen.c: every byte is content */
        }
    }
    return op;
}

void cv_server_parser_feed(void *p, cv_str text)
{
    out_parser *op = p;
    /* Fails only after finish, which gen.c never does. */
    cv_chat_parse_feed(op->p, text.ptr, text.len, NULL);
}

void cv_server_parser_finish(void *p) { cv_chat_parse_finish(((out_parser *)p)->p, NULL); }

void cv_server_parser_destroy(void *p)
{
    out_parser *op = p;
    if (!op)
        return;
    cv_chat_parse_destroy(op->p);
    free(op);
}

static void *parser_create(void *ctx, const cv_chat_request *req, cv_str opener, cv_chat_event_fn fn, void *ud)
{
    return cv_server_parser_create(cv_chat_prompt_format(((model_backend *)ctx)->prompt, NULL), req, opener, fn, ud);
}

/* ---- scheduler ---- */

static void load(void *ctx, cv_server_load *out)
{
    cv_sched_stats st;
    cv_sched_get_stats(((model_backend *)ctx)->sched, &st);
    out->queue_depth = st.queue_depth;
    out->running = st.running;
    out->kv_blocks_used = st.kv_blocks_used;
    out->kv_blocks_free = st.kv_blocks_free;
}

static json_t *status(void *ctx) { return cv_sched_status(((model_backend *)ctx)->sched); }
static void stats(void *ctx, cv_sched_stats *out) { cv_sched_get_stats(((model_backend *)ctx)->sched, out); }

static int submit(void *ctx, const cv_chat_request *req, cv_str opener, const cv_sched_params *p,
                  cv_sched_req **out, cv_err *err)
{
    model_backend *mb = ctx;
    if (p->pooling) /* an embedding: nothing is sampled */
        return cv_sched_submit(mb->sched, p, out, err);
    cv_sched_params q = *p;
    if (!q.n_stop_tokens) {
        q.stop_tokens = mb->eog;
        q.n_stop_tokens = (int32_t)mb->n_eog;
    }
    int rc;
    if (!q.hook && (rc = cv_constrain_for_request(mb->constrain, req, opener, q.max_tokens, &q.hook_ud, err)))
        return rc;
    if (q.hook_ud)
        q.hook = &cv_constrain_hook;
    if ((rc = cv_sched_submit(mb->sched, &q, out, err)) && q.hook_ud && q.hook == &cv_constrain_hook)
        cv_constrain_hook.destroy(q.hook_ud); /* not submitted: still ours */
    return rc;
}

static bool ready(void *ctx) { return ((model_backend *)ctx)->sched != NULL; }

/* ---- lifecycle ---- */

static char *model_name(const char *path)
{
    char *copy = cv_xstrdup(path);
    char *base = cv_xstrdup(basename(copy));
    free(copy);
    size_t n = strlen(base);
    if (n > 5 && !strcmp(base + n - 5, ".gguf"))
        base[n - 5] = 0;
    return base;
}

void cv_server_backend_close(cv_server_backend *be)
{
    model_backend *mb = (model_backend *)be;
    if (!mb)
        return;
    if (mb->sched)
        cv_sched_destroy(mb->sched);
    if (mb->engine)
        cv_engine_destroy(mb->engine);
    cv_constrain_destroy(mb->constrain);
    cv_chat_prompt_destroy(mb->prompt);
    if (mb->tok)
        cv_tok_destroy(mb->tok);
    if (mb->model)
        cv_model_close(mb->model);
    free(mb->name);
    free(mb);
}

/* The pooling of an embedding model: the file's {arch}.pooling_type (GGUF,
 * as llama.cpp writes it for sentence-transformers models: 1 mean, 2 cls,
 * 3 last; 0 none), else what the caller says of a file without the key
 * (an alias row of a known embedding GGUF). A rank head (4, rerankers) is
 * not served. */
static cv_pooling embedding_pooling(const cv_model *m, const cv_server_backend_opts *o)
{
    char key[96];
    snprintf(key, sizeof key, "%s.pooling_type", m->arch->name);
    int64_t v;
    if (cv_gguf_get_int(m->gguf, key, &v, NULL) != 0)
        return (cv_pooling)o->pooling;
    if (v == CV_POOL_MEAN || v == CV_POOL_CLS || v == CV_POOL_LAST) {
        cv_info("%s: an embedding model (%s = %lld)", o->model_path, key, (long long)v);
        return (cv_pooling)v;
    }
    if (v != CV_POOL_NONE)
        cv_warn("%s: %s = %lld is a pooling corvid does not serve (mean 1, cls 2, last 3); serving it as a "
                "generative model", o->model_path, key, (long long)v);
    return CV_POOL_NONE;
}

/* The engine with its KV pool sized from o->kv_bytes (server.h). A pool
 * smaller than one full context could never admit a long prompt: an
 * explicit size is refused, the automatic one raised to the context. */
static int open_engine(model_backend *mb, const cv_server_backend_opts *o, cv_err *err)
{
    cv_engine_params ep = {
        .n_threads = o->n_threads,
        .n_ctx = o->n_ctx,
        .n_seq_max = o->n_parallel > 0 ? o->n_parallel : 1,
        .kv_type = o->kv_type,
    };
    /* An embedding model's requests come in batches of inputs, short ones
     * mostly: enough sequences at once that a step fills its token budget. */
    if (mb->pooling)
        ep.n_seq_max = CV_MAX(ep.n_seq_max, CV_SERVE_EMBED_PARALLEL);
    int64_t bytes = o->kv_bytes < 0 ? cv_sched_default_kv_bytes(mb->model) : o->kv_bytes;
    if (bytes > 0) {
        int64_t t = cv_sched_kv_tokens_for_bytes(mb->model, ep.kv_type, bytes);
        if (o->kv_bytes < 0)
            t = CV_MIN(t, (int64_t)CV_SERVE_MAX_KV_TOKENS);
        ep.n_kv_tokens = (int32_t)CV_MIN(t, (int64_t)INT32_MAX - 4096);
        if (ep.n_kv_tokens <= 0)
            ep.n_kv_tokens = 1; /* the check below names the sizes */
    }
    if (ep.n_ctx <= 0) {
        int64_t c = CV_MIN((int64_t)mb->model->hp.n_ctx_train, (int64_t)CV_SERVE_DEFAULT_CTX);
        if (ep.n_kv_tokens > 0)
            c = CV_MIN(c, (int64_t)ep.n_kv_tokens);
        ep.n_ctx = (int32_t)CV_MAX(c, 1);
    }
    int rc = cv_engine_create(mb->model, &ep, &mb->engine, err);
    if (rc)
        return rc;
    const cv_engine_params *p = cv_engine_params_get(mb->engine);
    if (p->n_kv_tokens < p->n_ctx) {
        int32_t n_kv = p->n_kv_tokens, n_ctx = p->n_ctx;
        cv_engine_destroy(mb->engine);
        mb->engine = NULL;
        if (o->kv_bytes > 0)
            return cv_err_set(err, CV_EINVAL,
                              "KV memory of %lld bytes holds %d positions of this model, less than the context of %d; "
                              "give more (--kv-memory) or a shorter context (--ctx)",
                              (long long)o->kv_bytes, n_kv, n_ctx);
        ep.n_kv_tokens = n_ctx;
        if ((rc = cv_engine_create(mb->model, &ep, &mb->engine, err)))
            return rc;
        p = cv_engine_params_get(mb->engine);
    }
    /* The pool is mapped without reserve and committed page by page as
     * sequences and the prefix cache write it, so its size is a bound, not
     * what the process takes: say both (a tiny model's bound of 16M
     * positions is GiBs it never commits). */
    const double per = (double)cv_engine_kv_block_bytes(mb->model, p->kv_type) / CV_KV_BLOCK;
    cv_mem_info mi;
    cv_engine_mem_info(mb->engine, &mi);
    cv_info("KV cache (%s): %.1f KiB a position, committed as sequences and the prefix cache write it (%.1f MiB a "
            "full context of %d); room for %d positions (%.0f MiB mapped, %.1f MiB committed at load: the first "
            "sequence's), %d sequences at once",
            cv_engine_kv_type_name(p->kv_type), per / 1024.0, per * p->n_ctx / 1048576.0, p->n_ctx, p->n_kv_tokens,
            per * p->n_kv_tokens / 1048576.0, (double)mi.committed_bytes / 1048576.0, p->n_seq_max);
    return 0;
}

int cv_server_backend_open(const cv_server_backend_opts *o, cv_server_backend **out, cv_err *err)
{
    *out = NULL;
    model_backend *mb = cv_xcalloc(1, sizeof *mb);
    int rc;
    if ((rc = cv_model_open(o->model_path, NULL, &mb->model, err)))
        goto fail;
    if ((rc = cv_tok_load(mb->model->gguf, &mb->tok, err))) {
        cv_err_prefix(err, "%s: ", o->model_path);
        goto fail;
    }
    mb->name = o->served_name && *o->served_name ? cv_xstrdup(o->served_name) : model_name(o->model_path);
    /* By the file's name, not the served one (which may be "gpt-4o"). */
    char *file_name = model_name(o->model_path);
    cv_chat_prompt_opts po = { .gguf = mb->model->gguf, .tok = mb->tok, .name = o->model_path,
                               .model_name = { file_name, strlen(file_name) }, .chatml_on_error = true };
    rc = cv_chat_prompt_create(&po, &mb->prompt, err);
    free(file_name);
    if (rc)
        goto fail;
    const char *why = "";
    const cv_tc_format *format = cv_chat_prompt_format(mb->prompt, &why);
    cv_info("tool calls and reasoning: %s syntax (by %s)", cv_tc_format_name(format), why);
    mb->eog = cv_tok_eog_ids(mb->tok, &mb->n_eog);
    if (mb->n_eog > CV_MAX_STOP_TOKENS)
        mb->n_eog = CV_MAX_STOP_TOKENS;
    mb->pooling = embedding_pooling(mb->model, o);
    cv_constrain_opts co = { .syntax = cv_tc_format_name(format), .lazy = o->grammar_lazy,
                             .reasoning = cv_chat_prompt_thinks(mb->prompt) };
    if ((rc = cv_constrain_create(mb->tok, &co, &mb->constrain, err)))
        goto fail;
    if ((rc = open_engine(mb, o, err)))
        goto fail;
    cv_sched_config sc = {
        .queue_max = o->max_queue,
        .batch_tokens = o->batch_tokens,
        .draft_tokens = o->draft_tokens,
        .no_prefix_cache = o->no_prefix_cache,
        .cache_dir = o->no_prefix_cache ? NULL : o->cache_dir,
        .cache_max_bytes = o->cache_max_bytes,
        .share = o->share,
    };
    if ((rc = cv_sched_create(mb->engine, &sc, &mb->sched, err)))
        goto fail;
    const cv_engine_params *ep = cv_engine_params_get(mb->engine);
    cv_mem_info mi;
    cv_engine_mem_info(mb->engine, &mi);
    const int64_t mem = (int64_t)cv_gguf_file_bytes(mb->model->gguf) +
                        (int64_t)cv_engine_kv_block_bytes(mb->model, ep->kv_type) * ((ep->n_kv_tokens + CV_KV_BLOCK - 1) /
                                                                                    CV_KV_BLOCK) +
                        2 * (int64_t)ep->n_seq_max * (int64_t)mi.state_bytes;
    mb->be = (cv_server_backend){
        .ctx = mb,
        .model_id = mb->name,
        .n_ctx = cv_engine_params_get(mb->engine)->n_ctx,
        .created = cv_unix_time(),
        .arch = mb->model->arch->name,
        .n_params = mb->model->n_params,
        .n_params_active = mb->model->n_params_active,
        .n_expert = mb->model->hp.n_expert,
        .n_expert_used = mb->model->hp.n_expert_used,
        .kv_bytes_per_token = (int64_t)(cv_engine_kv_block_bytes(mb->model, ep->kv_type) / CV_KV_BLOCK),
        .mem_bytes = mem,
        .pooling = mb->pooling,
        .n_embd = mb->model->hp.n_embd,
        .min_dims = mb->pooling ? o->min_dims : 0,
        .ready = ready,
        .encode_chat = encode_chat,
        .encode_text = encode_text,
        .detok_create = detok_create,
        .detok_feed = detok_feed,
        .detok_flush = detok_flush,
        .detok_destroy = detok_destroy,
        .is_eog = is_eog,
        .token_text = token_text,
        .parser_create = parser_create,
        .parser_feed = cv_server_parser_feed,
        .parser_finish = cv_server_parser_finish,
        .parser_destroy = cv_server_parser_destroy,
        .submit = submit,
        .next = cv_sched_next,
        .cancel = cv_sched_cancel,
        .release = cv_sched_release,
        .load = load,
        .status = status,
        .stats = stats,
    };
    *out = &mb->be;
    return 0;
fail:
    cv_server_backend_close(&mb->be);
    return rc;
}
