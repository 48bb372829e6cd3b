/* errors.c — one table per wire mapping corvid's error codes (CV_E* and the
 * server's CV_SE_*) to that API's documented HTTP status and error type, and
 * the error bodies in each API's own shape:
 *   OpenAI:    {"error":{"message":..,"type":..,"param":..,"code":..}}
 *   Anthropic: {"type":"error","error":{"type":..,"message":..}}
 * (OpenAI: platform.openai.com/docs/guides/error-codes; Anthropic:
 * docs.anthropic.com/en/api/errors.) The SDKs pick their error class from the
 * status, so the status is what must be right; the type is what users read. */
#include "server/request.h"
#include "server/server_int.h"

typedef struct wire_err {
    int code;
    int status;
    const char *type;
    const char *oai_code; /* OpenAI "code", or NULL */
} wire_err;

static const wire_err openai_errors[] = {
    { CV_EINVAL, 400, "invalid_request_error", NULL },
    { CV_ELIMIT, 400, "invalid_request_error", "limit_exceeded" },
    { CV_EUNSUPPORTED, 400, "invalid_request_error", "unsupported" },
    { CV_ECORRUPT, 400, "invalid_request_error", NULL },
    { CV_ENOTFOUND, 404, "invalid_request_error", "not_found" },
    { CV_SE_NO_MODEL, 404, "invalid_request_error", "model_not_found" },
    { CV_SE_AUTH, 401, "invalid_request_error", "invalid_api_key" },
    { CV_SE_NO_ROUTE, 404, "invalid_request_error", "unknown_url" },
    { CV_SE_METHOD, 405, "invalid_request_error", "method_not_allowed" },
    { CV_SE_TIMEOUT, 408, "invalid_request_error", "request_timeout" },
    { CV_SE_TOO_LARGE, 413, "invalid_request_error", "request_too_large" },
    /* A full scheduler queue: OpenAI's documented "overloaded, try again
     * later" is 503 (429 is its per-key rate limit), with Retry-After
     * (http.c adds the header) so clients back off and retry. */
    { CV_EBUSY, 503, "server_error", "server_overloaded" },
    { CV_SE_UNAVAILABLE, 503, "server_error", "service_unavailable" },
    { CV_ECANCELED, 499, "invalid_request_error", "canceled" },
    { CV_ENOMEM, 500, "server_error", NULL },
    { CV_EIO, 500, "server_error", NULL },
    { CV_SE_INTERNAL, 500, "server_error", NULL },
    { CV_SE_LOAD, 500, "server_error", "model_load_failed" },
};

static const wire_err anthropic_errors[] = {
    { CV_EINVAL, 400, "invalid_request_error", NULL },
    { CV_ELIMIT, 400, "invalid_request_error", NULL },
    { CV_EUNSUPPORTED, 400, "invalid_request_error", NULL },
    { CV_ECORRUPT, 400, "invalid_request_error", NULL },
    { CV_ENOTFOUND, 404, "not_found_error", NULL },
    { CV_SE_NO_MODEL, 404, "not_found_error", NULL },
    { CV_SE_AUTH, 401, "authentication_error", NULL },
    { CV_SE_NO_ROUTE, 404, "not_found_error", NULL },
    { CV_SE_METHOD, 405, "invalid_request_error", NULL },
    { CV_SE_TIMEOUT, 408, "timeout_error", NULL },
    { CV_SE_TOO_LARGE, 413, "request_too_large", NULL },
    { CV_EBUSY, 529, "overloaded_error", NULL },
    { CV_SE_UNAVAILABLE, 503, "api_error", NULL },
    { CV_ECANCELED, 499, "invalid_request_error", NULL },
    { CV_ENOMEM, 500, "api_error", NULL },
    { CV_EIO, 500, "api_error", NULL },
    { CV_SE_INTERNAL, 500, "api_error", NULL },
    { CV_SE_LOAD, 500, "api_error", NULL },
};

static const wire_err *lookup(cv_wire w, int code)
{
    const wire_err *t = w == CV_WIRE_ANTHROPIC ? anthropic_errors : openai_errors;
    size_t n = w == CV_WIRE_ANTHROPIC ? CV_ARRAY_LEN(anthropic_errors) : CV_ARRAY_LEN(openai_errors);
    for (size_t i = 0; i < n; i++)
        if (t[i].code == code)
            return &t[i];
    /* Every unknown code is our bug, not the client's: the last row (500). */
    return &t[n - 1];
}

int cv_wire_status(cv_wire w, int code) { return lookup(w, code)->status; }

const char *cv_wire_error_type(cv_wire w, int code) { return lookup(w, code)->type; }

void cv_wire_error_body(cv_wire w, int code, const char *msg, const char *param, cv_buf *out)
{
    const wire_err *e = lookup(w, code);
    json_t *inner = json_object();
    if (w == CV_WIRE_ANTHROPIC) {
        json_object_set_new(inner, "type", json_string(e->type));
        json_object_set_new(inner, "message", cv_json_strz(msg));
        json_t *root = json_object();
        json_object_set_new(root, "type", json_string("error"));
        json_object_set_new(root, "error", inner);
        cv_json_dump(out, root);
        json_decref(root);
        return;
    }
    json_object_set_new(inner, "message", cv_json_strz(msg));
    json_object_set_new(inner, "type", json_string(e->type));
    json_object_set_new(inner, "param", param ? json_string(param) : json_null());
    json_object_set_new(inner, "code", e->oai_code ? json_string(e->oai_code) : json_null());
    json_t *root = json_object();
    json_object_set_new(root, "error", inner);
    cv_json_dump(out, root);
    json_decref(root);
}
