/* api_models.c — GET /v1/models and /v1/models/{id}: the one served model in
 * OpenAI's list shape {object:"list", data:[{id, object:"model", created,
 * owned_by}]}, plus the fields the Anthropic SDK's models.list reads (type,
 * display_name, created_at), the context length, which agents use to size
 * their prompts, and what the model is (architecture, parameters, for a
 * mixture of experts its expert count and active parameters, and the KV
 * cache bytes a position takes). Any id other
 * than the served one is 404 in OpenAI's shape. */
#include <stdio.h>
#include <time.h>

#include "server/server_int.h"

static json_t *model_obj(const cv_server_backend *be)
{
    char iso[32];
    time_t t = (time_t)be->created;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:i, s:i}", "id", be->model_id, "object", "model",
                          "created", (json_int_t)be->created, "owned_by", "corvid", "type", "model", "display_name",
                          be->model_id, "created_at", iso, "context_length", be->n_ctx, "max_model_len", be->n_ctx);
    if (be->arch)
        json_object_set_new(o, "architecture", json_string(be->arch));
    if (be->n_params > 0)
        json_object_set_new(o, "parameters", json_integer(be->n_params));
    if (be->kv_bytes_per_token > 0)
        json_object_set_new(o, "kv_bytes_per_token", json_integer(be->kv_bytes_per_token));
    if (be->n_expert > 0) {
        json_object_set_new(o, "moe", json_pack("{s:i, s:i, s:I}", "experts", be->n_expert, "experts_used",
                                                be->n_expert_used, "active_parameters",
                                                (json_int_t)be->n_params_active));
    }
    return o;
}

int cv_api_models_list(cv_http_req *hr, cv_reply *rep)
{
    const cv_server_backend *be = hr->srv->be;
    json_t *list = json_pack("{s:s, s:[o], s:b, s:s, s:s}", "object", "list", "data", model_obj(be), "has_more", 0,
                             "first_id", be->model_id, "last_id", be->model_id);
    cv_reply_json(rep, 200, list);
    return 0;
}

int cv_api_models_get(cv_http_req *hr, cv_reply *rep)
{
    const cv_server_backend *be = hr->srv->be;
    const char *id = hr->path + strlen("/v1/models/");
    if (strcmp(id, be->model_id)) {
        char msg[400];
        snprintf(msg, sizeof msg, "model '%.200s' does not exist; this server serves '%.64s'", id, be->model_id);
        cv_reply_error(rep, CV_WIRE_OPENAI, CV_ENOTFOUND, msg);
        return CV_ENOTFOUND;
    }
    cv_reply_json(rep, 200, model_obj(be));
    return 0;
}
