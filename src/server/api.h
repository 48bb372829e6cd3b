/* api.h — the wire files' entry points, private to src/server/: the
 * route handlers the route table names, each wire's translator (request
 * body → neutral request) and encoder (neutral events → wire bytes), also
 * called by the unit tests. */
#ifndef CV_SERVER_API_H
#define CV_SERVER_API_H

#include "server/gen.h"
#include "server/resp_store.h"

int cv_api_anthropic_count_tokens(cv_http_req *req, cv_reply *rep);
int cv_api_models_list(cv_http_req *req, cv_reply *rep);
int cv_api_models_get(cv_http_req *req, cv_reply *rep);
int cv_api_root(cv_http_req *req, cv_reply *rep);
int cv_api_health(cv_http_req *req, cv_reply *rep);
int cv_api_live(cv_http_req *req, cv_reply *rep);
int cv_api_ready(cv_http_req *req, cv_reply *rep);
int cv_api_metrics(cv_http_req *req, cv_reply *rep);
int cv_api_status(cv_http_req *req, cv_reply *rep);
int cv_api_embeddings(cv_http_req *req, cv_reply *rep);

/* Sampling, limits and switches shared by OpenAI chat and completions. */
int cv_openai_sampling(json_t *body, cv_chat_request *r, cv_err *err);
/* A failure once generation has started, as OpenAI chat and completions
 * send it: in a stream a data frame carrying "error" (the openai SDK raises
 * APIError for it) then [DONE]; else the error body. */
void cv_openai_error(bool stream, const cv_err *err, cv_buf *out);

/* Translators (request bodies → neutral), called by the route table's parse
 * functions and by the unit tests. */
int cv_openai_chat_parse(json_t *body, cv_chat_request *r, cv_err *err);
int cv_openai_completions_parse(json_t *body, cv_chat_request *r, cv_err *err);
int cv_openai_responses_parse(json_t *body, cv_resp_store *store, cv_chat_request *r, cv_err *err);
int cv_anthropic_parse(json_t *body, bool count_only, cv_chat_request *r, cv_err *err);
/* /v1/embeddings: only the model name goes to the neutral request (the
 * handler reads the rest of the body itself). */
int cv_openai_embeddings_parse(json_t *body, cv_chat_request *r, cv_err *err);

/* Encoders, exposed for the unit tests (neutral events → wire bytes). The
 * returned ud is freed through the encoder's destroy. */
extern const cv_gen_enc cv_enc_openai_chat;
extern const cv_gen_enc cv_enc_openai_completions;
extern const cv_gen_enc cv_enc_openai_responses;
extern const cv_gen_enc cv_enc_anthropic;
void *cv_enc_openai_chat_new(bool stream);
void *cv_enc_openai_completions_new(bool stream);
void *cv_enc_openai_responses_new(bool stream, json_t *conversation, bool store);
void *cv_enc_anthropic_new(bool stream);

#endif
