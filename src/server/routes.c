/* routes.c — the route table: method, path, the wire whose error shape the
 * route answers in, whether it is open without the API key, the handler,
 * and for a generating API the two halves the one generic handler
 * (cv_api_generate, gen.c) needs: how the body becomes the neutral request
 * and the encoder that turns the neutral events back into the wire. A new
 * wire API is one api_<name>.c (its translator and its cv_gen_enc) plus a
 * row here (STYLE.md "Wire API").
 * Paths are matched exactly (the query string is not part of the path, so
 * Claude Code's /v1/messages?beta=true lands on /v1/messages); a prefix row
 * matches the path plus at least one more character. */
#include "server/api.h"

/* ---- request bodies → the neutral request ---- */

static int parse_chat(const cv_http_req *hr, json_t *b, cv_chat_request *r, cv_err *err)
{
    return cv_openai_chat_parse(b, r, err);
}

static int parse_completions(const cv_http_req *hr, json_t *b, cv_chat_request *r, cv_err *err)
{
    return cv_openai_completions_parse(b, r, err);
}

/* previous_response_id reads the server's store. */
static int parse_responses(const cv_http_req *hr, json_t *b, cv_chat_request *r, cv_err *err)
{
    return cv_openai_responses_parse(b, hr->srv->store, r, err);
}

static int parse_messages(const cv_http_req *hr, json_t *b, cv_chat_request *r, cv_err *err)
{
    return cv_anthropic_parse(b, false, r, err);
}

/* count_tokens takes an empty conversation (it counts the system prompt and tools). */
static int parse_count_tokens(const cv_http_req *hr, json_t *b, cv_chat_request *r, cv_err *err)
{
    return cv_anthropic_parse(b, true, r, err);
}

static int parse_embeddings(const cv_http_req *hr, json_t *b, cv_chat_request *r, cv_err *err)
{
    return cv_openai_embeddings_parse(b, r, err);
}

/* ---- the table ---- */

#define OPEN true
#define KEYED false

const cv_route cv_routes[] = {
    { "GET", "/", false, CV_WIRE_OPENAI, OPEN, cv_api_root, "root", NULL, NULL },
    { "GET", "/health", false, CV_WIRE_OPENAI, OPEN, cv_api_health, "health", NULL, NULL },
    { "GET", "/health/live", false, CV_WIRE_OPENAI, OPEN, cv_api_live, "health_live", NULL, NULL },
    { "GET", "/health/ready", false, CV_WIRE_OPENAI, OPEN, cv_api_ready, "health_ready", NULL, NULL },
    { "GET", "/livez", false, CV_WIRE_OPENAI, OPEN, cv_api_live, "livez", NULL, NULL },
    { "GET", "/readyz", false, CV_WIRE_OPENAI, OPEN, cv_api_ready, "readyz", NULL, NULL },
    { "GET", "/metrics", false, CV_WIRE_OPENAI, KEYED, cv_api_metrics, "metrics", NULL, NULL },
    { "GET", "/v1/status", false, CV_WIRE_OPENAI, KEYED, cv_api_status, "status", NULL, NULL },
    { "GET", "/v1/models", false, CV_WIRE_OPENAI, KEYED, cv_api_models_list, "models", NULL, NULL },
    { "GET", "/v1/models/", true, CV_WIRE_OPENAI, KEYED, cv_api_models_get, "models_get", NULL, NULL },
    { "POST", "/v1/chat/completions", false, CV_WIRE_OPENAI, KEYED, cv_api_generate, "chat_completions", parse_chat,
      &cv_enc_openai_chat },
    { "POST", "/v1/completions", false, CV_WIRE_OPENAI, KEYED, cv_api_generate, "completions", parse_completions,
      &cv_enc_openai_completions },
    { "POST", "/v1/responses", false, CV_WIRE_OPENAI, KEYED, cv_api_generate, "responses", parse_responses,
      &cv_enc_openai_responses },
    { "POST", "/v1/messages", false, CV_WIRE_ANTHROPIC, KEYED, cv_api_generate, "messages", parse_messages,
      &cv_enc_anthropic },
    { "POST", "/v1/messages/count_tokens", false, CV_WIRE_ANTHROPIC, KEYED, cv_api_anthropic_count_tokens,
      "count_tokens", parse_count_tokens, NULL },
    { "POST", "/v1/embeddings", false, CV_WIRE_OPENAI, KEYED, cv_api_embeddings, "embeddings", parse_embeddings,
      NULL },
};
const int cv_n_routes = (int)CV_ARRAY_LEN(cv_routes);
