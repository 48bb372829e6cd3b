/* api_openai_embeddings.c — POST /v1/embeddings, OpenAI's embeddings API,
 * for embedding models (a GGUF with a pooling type: cv_server_backend's
 * pooling). The spec: platform.openai.com/docs/api-reference/embeddings.
 *
 *   request   {model, input, encoding_format?, dimensions?, user?}
 *             input: a string, an array of strings, an array of token ids
 *             (one input), or an array of such arrays; at most
 *             CV_MAX_EMBED_INPUTS inputs, none empty, each within the
 *             model's context
 *   response  {object:"list", data:[{object:"embedding", index,
 *             embedding}], model, usage:{prompt_tokens, total_tokens}}
 *             embedding: floats, or with encoding_format "base64" the
 *             little-endian float32 bytes in base64 (what the openai SDKs
 *             ask for by default and decode)
 *
 * Every input is one scheduler request (sched.h, cv_pooling): it is
 * prefilled beside whatever else the model runs, pooled, scaled to unit
 * length, and keeps no KV. At most CV_EMBED_IN_FLIGHT of a request's inputs
 * are submitted at a time, the next as each finishes, so one large batch
 * never fills the queue. dimensions below the model's length cut each
 * vector and scale it to unit length again (Matryoshka-trained models
 * only: cv_server_backend.min_dims). Failures are OpenAI's error shape. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "server/api.h"
#include "server/request.h"

int cv_openai_embeddings_parse(json_t *body, cv_chat_request *r, cv_err *err)
{
    const char *model = NULL;
    if (cv_json_get_str(body, "model", NULL, &model, err))
        return CV_EINVAL;
    if (model)
        r->model = cv_xstrdup(model);
    return 0;
}

/* ---- the request ---- */

typedef struct emb_input {
    const char *text;   /* a string input, or NULL */
    size_t len;
    json_t *ids;        /* a token-id input: the array */
} emb_input;

typedef struct emb_req {
    emb_input *in;
    int n;
    bool base64;
    int64_t dims;       /* 0: the model's */
} emb_req;

static bool is_id_array(json_t *a)
{
    if (!json_is_array(a) || !json_array_size(a))
        return false;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!json_is_integer(json_array_get(a, i)))
            return false;
    return true;
}

static int parse_input(json_t *b, emb_req *q, cv_err *err)
{
    json_t *in = json_object_get(b, "input");
    if (!in || json_is_null(in))
        return cv_err_set(err, CV_EINVAL, "'input' is required: a string, an array of strings, an array of token "
                          "ids, or an array of arrays of token ids");
    const size_t n = json_is_array(in) ? json_array_size(in) : 1;
    if (json_is_array(in) && n == 0)
        return cv_err_set(err, CV_EINVAL, "'input' is an empty array");
    if (n > CV_MAX_EMBED_INPUTS)
        return cv_err_set(err, CV_ELIMIT, "'input' has %zu items, at most %d", n, CV_MAX_EMBED_INPUTS);
    const bool one_ids = json_is_array(in) && json_is_integer(json_array_get(in, 0));
    q->n = one_ids ? 1 : (int)n;
    q->in = cv_xcalloc((size_t)q->n, sizeof *q->in);
    if (json_is_string(in)) {
        q->in[0] = (emb_input){ json_string_value(in), json_string_length(in), NULL };
    } else if (one_ids) {
        if (!is_id_array(in))
            return cv_err_set(err, CV_EINVAL, "'input' mixes token ids with other values");
        q->in[0].ids = in;
    } else if (json_is_array(in)) {
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(in, i);
            if (json_is_string(v))
                q->in[i] = (emb_input){ json_string_value(v), json_string_length(v), NULL };
            else if (is_id_array(v))
                q->in[i].ids = v;
            else
                return cv_err_set(err, CV_EINVAL, "'input[%zu]' must be a string or a non-empty array of token ids",
                                  i);
        }
    } else {
        return cv_err_set(err, CV_EINVAL, "'input' must be a string or an array");
    }
    for (int i = 0; i < q->n; i++)
        if (q->in[i].text && !q->in[i].len)
            return json_is_array(in) ? cv_err_set(err, CV_EINVAL, "'input[%d]' is an empty string", i)
                                     : cv_err_set(err, CV_EINVAL, "'input' is an empty string");
    return 0;
}

static int parse_request(json_t *b, emb_req *q, cv_err *err)
{
    int rc = parse_input(b, q, err);
    if (rc)
        return rc;
    const char *fmt = NULL;
    if (cv_json_get_str(b, "encoding_format", NULL, &fmt, err))
        return CV_EINVAL;
    if (fmt && strcmp(fmt, "float") && strcmp(fmt, "base64"))
        return cv_err_set(err, CV_EINVAL, "'encoding_format' is '%.40s'; it must be 'float' or 'base64'", fmt);
    q->base64 = fmt && !strcmp(fmt, "base64");
    bool has;
    if (cv_req_int(b, "dimensions", 1, INT32_MAX, &q->dims, &has, err))
        return CV_EINVAL;
    const char *user = NULL;
    return cv_json_get_str(b, "user", NULL, &user, err) ? CV_EINVAL : 0;
}

/* ---- computing ---- */

typedef struct emb_run {
    const cv_server_backend *be;
    int32_t **ids;      /* [n] each input's tokens */
    int32_t *n_ids;
    cv_sched_req **sr;  /* [n] NULL: not submitted (or done) */
    float *vec;         /* [n][n_embd] */
    int64_t tokens;
} emb_run;

/* Submits input i (waiting for earlier ones while the scheduler's queue is
 * full). */
static int submit_one(emb_run *e, int i, cv_err *err)
{
    cv_sched_params p = { .prompt = e->ids[i], .n_prompt = e->n_ids[i], .pooling = (cv_pooling)e->be->pooling };
    return e->be->submit(e->be->ctx, NULL, (cv_str){ "", 0 }, &p, &e->sr[i], err);
}

/* Reads input i's events to its end, polling the client. */
static int finish_one(emb_run *e, int i, int fd, const atomic_bool *stop, cv_err *err)
{
    const int32_t E = e->be->n_embd;
    cv_sched_event ev;
    for (;;) {
        int rc = e->be->next(e->sr[i], CV_MODEL_POLL_MS, &ev);
        if (rc == CV_EBUSY) {
            if (cv_http_client_gone(fd) || (stop && atomic_load(stop)))
                return cv_err_set(err, CV_ECANCELED, "the client left, or the server is stopping");
            continue;
        }
        if (rc)
            return cv_err_set(err, CV_SE_INTERNAL, "input %d: its events ended early", i);
        if (ev.type == CV_SCHED_EMBEDDING) {
            if (ev.n_embd != E)
                return cv_err_set(err, CV_SE_INTERNAL, "input %d: a vector of %d values, expected %d", i, ev.n_embd, E);
            memcpy(e->vec + (size_t)i * E, ev.embedding, (size_t)E * sizeof(float));
        } else if (ev.type == CV_SCHED_ERROR) {
            if (err)
                *err = ev.err;
            return ev.err.code ? ev.err.code : CV_SE_INTERNAL;
        } else if (ev.type == CV_SCHED_DONE) {
            if (ev.finish != CV_FINISH_STOP)
                return cv_err_set(err, CV_SE_UNAVAILABLE, "input %d was cancelled (the server is stopping)", i);
            e->be->release(e->sr[i]);
            e->sr[i] = NULL;
            return 0;
        }
    }
}

/* Every input through the scheduler, at most CV_EMBED_IN_FLIGHT at once. */
static int compute(emb_run *e, int n, int fd, const atomic_bool *stop, cv_err *err)
{
    int next = 0, done = 0, rc = 0;
    while (done < n && !rc) {
        while (next < n && next - done < CV_EMBED_IN_FLIGHT) {
            rc = submit_one(e, next, err);
            if (rc == CV_EBUSY && next > done) { /* the queue is full: wait for ours first */
                cv_err_clear(err);
                rc = 0;
                break;
            }
            if (rc)
                break;
            next++;
        }
        if (!rc)
            rc = finish_one(e, done++, fd, stop, err);
    }
    for (int i = 0; i < n; i++)
        if (e->sr[i]) {
            e->be->cancel(e->sr[i]);
            e->be->release(e->sr[i]);
        }
    return rc;
}

/* ---- the response ---- */

static void put_base64(cv_buf *out, const unsigned char *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                           (i + 2 < n ? (uint32_t)p[i + 2] : 0);
        cv_buf_putc(out, tab[v >> 18 & 63]);
        cv_buf_putc(out, tab[v >> 12 & 63]);
        cv_buf_putc(out, i + 1 < n ? tab[v >> 6 & 63] : '=');
        cv_buf_putc(out, i + 2 < n ? tab[v & 63] : '=');
    }
}

/* One vector as the response carries it: its first dims values (scaled to
 * unit length again when cut), as JSON numbers that read back as the same
 * float32 (9 significant digits), or base64 of their little-endian bytes. */
static int put_vector(cv_buf *out, const float *v, int32_t n_embd, int32_t dims, bool base64, cv_err *err)
{
    double ss = 0;
    for (int32_t i = 0; i < dims; i++)
        ss += (double)v[i] * v[i];
    const double scale = dims < n_embd && ss > 0 ? 1.0 / sqrt(ss) : 1.0;
    float *w = cv_xmalloc((size_t)dims * sizeof *w);
    for (int32_t i = 0; i < dims; i++) {
        w[i] = (float)(v[i] * scale);
        if (!isfinite(w[i])) {
            free(w);
            return cv_err_set(err, CV_SE_INTERNAL, "the model produced a value that is not finite");
        }
    }
    if (base64) {
        unsigned char *b = cv_xmalloc((size_t)dims * 4);
        for (int32_t i = 0; i < dims; i++) { /* little-endian whatever the host */
            uint32_t u;
            memcpy(&u, &w[i], 4);
            for (int k = 0; k < 4; k++)
                b[4 * i + k] = (unsigned char)(u >> (8 * k));
        }
        cv_buf_putc(out, '"');
        put_base64(out, b, (size_t)dims * 4);
        cv_buf_putc(out, '"');
        free(b);
    } else {
        cv_buf_putc(out, '[');
        for (int32_t i = 0; i < dims; i++)
            cv_buf_printf(out, i ? ",%.9g" : "%.9g", (double)w[i]);
        cv_buf_putc(out, ']');
    }
    free(w);
    return 0;
}

static int respond(const emb_run *e, int n, const char *model, int32_t dims, bool base64, cv_reply *rep,
                   cv_err *err)
{
    cv_buf *out = &rep->body;
    cv_buf_reset(out);
    cv_buf_puts(out, "{\"object\":\"list\",\"data\":[");
    for (int i = 0; i < n; i++) {
        cv_buf_printf(out, "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "", i);
        int rc = put_vector(out, e->vec + (size_t)i * e->be->n_embd, e->be->n_embd, dims, base64, err);
        if (rc)
            return rc;
        cv_buf_putc(out, '}');
    }
    cv_buf_puts(out, "],\"model\":");
    json_t *m = cv_json_strz(model);
    cv_json_dump(out, m);
    json_decref(m);
    cv_buf_printf(out, ",\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}}", (long long)e->tokens,
                  (long long)e->tokens);
    rep->status = 200;
    rep->content_type = "application/json";
    return 0;
}

/* ---- the handler ---- */

/* Tokens of every input: text through the model's tokenizer (its BOS and
 * EOS as the vocabulary says: Qwen3-Embedding pools at the EOS it
 * appends), ids as given; each within the context. */
static int tokenize(emb_run *e, const emb_req *q, cv_err *err)
{
    const cv_server_backend *be = e->be;
    for (int i = 0; i < q->n; i++) {
        const emb_input *in = &q->in[i];
        int rc = 0;
        if (in->text) {
            rc = be->encode_text(be->ctx, (cv_str){ in->text, in->len }, &e->ids[i], &e->n_ids[i], err);
        } else {
            const size_t k = json_array_size(in->ids);
            if (k > (size_t)be->n_ctx)
                return cv_err_set(err, CV_EINVAL, "input %d is %zu tokens; the model's context is %d", i, k, be->n_ctx);
            e->ids[i] = cv_xmalloc(k * sizeof **e->ids);
            e->n_ids[i] = (int32_t)k;
            for (size_t j = 0; j < k; j++) {
                const json_int_t t = json_integer_value(json_array_get(in->ids, j));
                if (t < 0 || t > INT32_MAX)
                    return cv_err_set(err, CV_EINVAL, "input %d: token id %lld is out of range", i, (long long)t);
                e->ids[i][j] = (int32_t)t;
            }
        }
        if (rc)
            return rc;
        if (e->n_ids[i] <= 0)
            return cv_err_set(err, CV_EINVAL, "input %d has no tokens", i);
        if (e->n_ids[i] > be->n_ctx)
            return cv_err_set(err, CV_EINVAL, "input %d is %d tokens; the model's context is %d tokens", i,
                              e->n_ids[i], be->n_ctx);
        e->tokens += e->n_ids[i];
    }
    return 0;
}

int cv_api_embeddings(cv_http_req *hr, cv_reply *rep)
{
    json_t *body;
    cv_chat_request *r = cv_api_request_or_reply(hr, rep, &body);
    if (!r)
        return CV_EINVAL;
    cv_err err = { 0 };
    emb_req q = { 0 };
    emb_run e = { 0 };
    cv_model_slot *slot = NULL;
    int rc = parse_request(body, &q, &err);
    if (rc)
        goto done;
    if (!(slot = cv_api_model_or_reply(hr, rep, r->model, &e.be))) {
        rc = CV_EINVAL;
        goto done;
    }
    const char *name = cv_model_slot_name(slot);
    if (!e.be->pooling) {
        rc = cv_err_set(&err, CV_EINVAL, "model '%s' is not an embedding model (its GGUF has no pooling type); ask "
                        "for an embedding model (corvid ls --aliases lists some)", name);
        goto done;
    }
    const int32_t E = e.be->n_embd;
    if (q.dims && (q.dims > E || (q.dims < E && (!e.be->min_dims || q.dims < e.be->min_dims)))) {
        if (q.dims > E || !e.be->min_dims)
            rc = cv_err_set(&err, CV_EINVAL, "'dimensions' is %lld; model '%s' gives vectors of %d values%s",
                            (long long)q.dims, name, E, q.dims > E ? "" : " and was not trained to be cut shorter");
        else
            rc = cv_err_set(&err, CV_EINVAL, "'dimensions' is %lld; model '%s' may be cut to %d..%d values",
                            (long long)q.dims, name, e.be->min_dims, E);
        goto done;
    }
    e.ids = cv_xcalloc((size_t)q.n, sizeof *e.ids);
    e.n_ids = cv_xcalloc((size_t)q.n, sizeof *e.n_ids);
    e.sr = cv_xcalloc((size_t)q.n, sizeof *e.sr);
    e.vec = cv_xmalloc((size_t)q.n * (size_t)E * sizeof *e.vec);
    if ((rc = tokenize(&e, &q, &err)) || (rc = compute(&e, q.n, hr->fd, &hr->srv->stopping, &err)))
        goto done;
    rc = respond(&e, q.n, r->model && *r->model ? r->model : name, q.dims ? (int32_t)q.dims : E, q.base64, rep, &err);
    if (!rc) {
        cv_metrics_tokens(&hr->srv->metrics, e.tokens, 0, 0);
        cv_metrics_tokens(cv_model_slot_metrics(slot), e.tokens, 0, 0);
    }
done:
    if (rc && err.code)
        cv_reply_err(rep, CV_WIRE_OPENAI, &err);
    for (int i = 0; e.ids && i < q.n; i++)
        free(e.ids[i]);
    free(e.ids), free(e.n_ids), free(e.sr), free(e.vec), free(q.in);
    if (slot)
        cv_model_release(hr->srv->models, slot);
    json_decref(body);
    cv_chat_request_fini(r);
    free(r);
    return rc;
}
