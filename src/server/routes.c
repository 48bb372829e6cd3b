/* routes.c — the route table: method, path, the wire whose error shape the
 * route answers in, whether it is open without the API key, and the handler.
 * A new wire API is one api_<name>.c plus rows here (STYLE.md "Wire API").
 * Paths are matched exactly (the query string is not part of the path, so
 * Claude Code's /v1/messages?beta=true lands on /v1/messages); a prefix row
 * matches the path plus at least one more character. */
#include "server/server_int.h"

const cv_route cv_routes[] = {
    { "GET", "/", false, CV_WIRE_OPENAI, true, cv_api_root, "root" },
    { "GET", "/health", false, CV_WIRE_OPENAI, true, cv_api_health, "health" },
    { "GET", "/livez", false, CV_WIRE_OPENAI, true, cv_api_livez, "livez" },
    { "GET", "/readyz", false, CV_WIRE_OPENAI, true, cv_api_readyz, "readyz" },
    { "GET", "/metrics", false, CV_WIRE_OPENAI, false, cv_api_metrics, "metrics" },
    { "GET", "/v1/status", false, CV_WIRE_OPENAI, false, cv_api_status, "status" },
    { "GET", "/v1/models", false, CV_WIRE_OPENAI, false, cv_api_models_list, "models" },
    { "GET", "/v1/models/", true, CV_WIRE_OPENAI, false, cv_api_models_get, "models_get" },
    { "POST", "/v1/chat/completions", false, CV_WIRE_OPENAI, false, cv_api_openai_chat, "chat_completions" },
    { "POST", "/v1/completions", false, CV_WIRE_OPENAI, false, cv_api_openai_completions, "completions" },
    { "POST", "/v1/responses", false, CV_WIRE_OPENAI, false, cv_api_openai_responses, "responses" },
    { "POST", "/v1/messages", false, CV_WIRE_ANTHROPIC, false, cv_api_anthropic_messages, "messages" },
    { "POST", "/v1/messages/count_tokens", false, CV_WIRE_ANTHROPIC, false, cv_api_anthropic_count_tokens,
      "count_tokens" },
};
const int cv_n_routes = (int)CV_ARRAY_LEN(cv_routes);
