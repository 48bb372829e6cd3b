/* api_models.c — GET /v1/models and /v1/models/{id}: every model the
 * server serves, loaded or not, in OpenAI's list shape {object:"list",
 * data:[{id, object:"model", created, owned_by}]}, plus the fields the
 * Anthropic SDK's models.list reads (type, display_name, created_at),
 * whether it is loaded (status) and its other names (aliases). A loaded
 * model also says its context length, which agents use to size their
 * prompts, and what it is (architecture, parameters, for a mixture of
 * experts its expert count and active parameters, the KV cache bytes a
 * position takes, and for an embedding model its vector length); a model
 * not loaded is not opened to say it. An id that names no model (by name
 * or alias) is 404 in OpenAI's shape. */
#include <stdio.h>
#include <time.h>

#include "server/server_int.h"

/* What every model shows: its name, when it was (or the server) started. */
static json_t *base_obj(const char *id, int64_t created)
{
    char iso[32];
    time_t t = (time_t)created;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s}", "id", id, "object", "model", "created",
                     (json_int_t)created, "owned_by", "corvid", "type", "model", "display_name", id, "created_at", iso);
}

static json_t *model_obj(cv_server *s, cv_model_slot *m, const cv_server_backend *be)
{
    json_t *o = base_obj(cv_model_slot_name(m), be ? be->created : s->started);
    json_t *info = cv_model_slot_json(s->models, m);
    json_object_set_new(o, "status", json_string(be ? "loaded" : "unloaded"));
    json_object_set(o, "aliases", json_object_get(info, "aliases"));
    json_decref(info);
    if (!be)
        return o;
    json_object_set_new(o, "context_length", json_integer(be->n_ctx));
    json_object_set_new(o, "max_model_len", json_integer(be->n_ctx));
    if (be->pooling)
        json_object_set_new(o, "embedding_dimensions", json_integer(be->n_embd));
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

typedef struct listing {
    cv_server *s;
    json_t *data;
} listing;

static void list_one(void *ud, cv_model_slot *m, const cv_server_backend *be)
{
    listing *l = ud;
    json_array_append_new(l->data, model_obj(l->s, m, be));
}

int cv_api_models_list(cv_http_req *hr, cv_reply *rep)
{
    listing l = { hr->srv, json_array() };
    cv_model_set_visit(hr->srv->models, list_one, &l);
    const size_t n = json_array_size(l.data);
    json_t *list = json_pack("{s:s, s:o, s:b}", "object", "list", "data", l.data, "has_more", 0);
    if (n) {
        json_object_set(list, "first_id", json_object_get(json_array_get(l.data, 0), "id"));
        json_object_set(list, "last_id", json_object_get(json_array_get(l.data, n - 1), "id"));
    }
    cv_reply_json(rep, 200, list);
    return 0;
}

typedef struct finding {
    cv_server *s;
    cv_model_slot *want;
    json_t *obj;
} finding;

static void get_one(void *ud, cv_model_slot *m, const cv_server_backend *be)
{
    finding *f = ud;
    if (m == f->want)
        f->obj = model_obj(f->s, m, be);
}

int cv_api_models_get(cv_http_req *hr, cv_reply *rep)
{
    const char *id = hr->path + strlen("/v1/models/");
    finding f = { hr->srv, cv_model_set_named(hr->srv->models, id), NULL };
    if (f.want)
        cv_model_set_visit(hr->srv->models, get_one, &f);
    if (!f.obj) {
        char msg[400];
        snprintf(msg, sizeof msg, "model '%.200s' does not exist here (GET /v1/models lists what is served)", id);
        cv_reply_error(rep, CV_WIRE_OPENAI, CV_ENOTFOUND, msg);
        return CV_ENOTFOUND;
    }
    cv_reply_json(rep, 200, f.obj);
    return 0;
}
