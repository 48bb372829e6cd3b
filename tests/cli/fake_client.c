/* fake_client.c — stands in for the agent CLIs in the tests of `corvid
 * launch`. The test links it under the real programs' names (claude, codex,
 * opencode, qwen, aider) in a folder put first on PATH; run by launch, it
 * reads its configuration the way that client does (CLIENTS.md) — Claude
 * Code's ANTHROPIC_* variables, Codex's `-c` overrides and the env_key they
 * name, opencode's inline config, Qwen Code's OPENAI_* and --auth-type,
 * aider's OPENAI_API_BASE and --model openai/NAME — sends one real request to
 * the server that configuration points at, and writes what it saw as JSON to
 * $FAKE_CLIENT_REPORT. Under any other name it acts as an SDK program
 * (OPENAI_BASE_URL or ANTHROPIC_BASE_URL). Exit 0 when the server answered
 * 200. Test-only. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

extern char **environ;

static size_t sink(char *p, size_t size, size_t n, void *ud)
{
    json_t *acc = ud;
    size_t len = size * n;
    const char *prev = json_string_value(json_object_get(acc, "body"));
    size_t plen = prev ? strlen(prev) : 0;
    if (plen < 2000) {
        char *b = malloc(plen + len + 1);
        memcpy(b, prev ? prev : "", plen);
        memcpy(b + plen, p, len);
        b[plen + len] = 0;
        json_object_set_new(acc, "body", json_stringn(b, plen + len));
        free(b);
    }
    return len;
}

/* POST body to url with the auth header; records url, status and body. */
static long post(json_t *rep, const char *url, const char *auth_header, json_t *body)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (auth_header)
        h = curl_slist_append(h, auth_header);
    char *s = json_dumps(body, JSON_COMPACT);
    json_t *acc = json_object();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, s);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, acc);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    json_object_set_new(acc, "url", json_string(url));
    json_object_set_new(acc, "status", json_integer(status));
    json_object_set_new(rep, "request", acc);
    free(s);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    json_decref(body);
    return status;
}

static const char *env_or(const char *k) { return getenv(k) ? getenv(k) : ""; }

/* A TOML basic string value from `-c key="value"`, unescaped. */
static char *toml_value(const char *v)
{
    size_t n = strlen(v);
    char *out = calloc(n + 1, 1), *o = out;
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        for (size_t i = 1; i + 1 < n; i++) {
            if (v[i] == '\\' && i + 2 < n)
                i++;
            *o++ = v[i];
        }
    } else {
        memcpy(out, v, n);
    }
    return out;
}

static char *codex_override(int argc, char **argv, const char *key)
{
    size_t kl = strlen(key);
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-c") && !strncmp(argv[i + 1], key, kl) && argv[i + 1][kl] == '=')
            return toml_value(argv[i + 1] + kl + 1);
    return NULL;
}

static json_t *chat_body(const char *model)
{
    return json_pack("{s:s, s:i, s:[{s:s, s:s}]}", "model", model, "max_tokens", 8, "messages", "role", "user",
                     "content", "hi");
}

int main(int argc, char **argv)
{
    const char *me = strrchr(argv[0], '/');
    me = me ? me + 1 : argv[0];
    json_t *rep = json_object();
    json_object_set_new(rep, "client", json_string(me));
    json_t *av = json_array();
    for (int i = 1; i < argc; i++)
        json_array_append_new(av, json_string(argv[i]));
    json_object_set_new(rep, "argv", av);
    json_t *env = json_object();
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (eq && eq > *e && eq - *e < 255) {
            char k[256];
            memcpy(k, *e, (size_t)(eq - *e));
            k[eq - *e] = 0;
            json_object_set_new(env, k, json_string(eq + 1));
        }
    }
    json_object_set_new(rep, "env", env);
    curl_global_init(CURL_GLOBAL_DEFAULT);

    char url[2048], auth[1024];
    long status = 0;
    if (!strcmp(me, "claude")) {
        snprintf(url, sizeof url, "%s/v1/messages?beta=true", env_or("ANTHROPIC_BASE_URL"));
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", env_or("ANTHROPIC_AUTH_TOKEN"));
        status = post(rep, url, auth, chat_body(env_or("ANTHROPIC_MODEL")));
    } else if (!strcmp(me, "codex")) {
        char *provider = codex_override(argc, argv, "model_provider");
        char key[256];
        snprintf(key, sizeof key, "model_providers.%s.base_url", provider ? provider : "");
        char *base = codex_override(argc, argv, key);
        snprintf(key, sizeof key, "model_providers.%s.env_key", provider ? provider : "");
        char *env_key = codex_override(argc, argv, key);
        snprintf(key, sizeof key, "model_providers.%s.wire_api", provider ? provider : "");
        char *wire = codex_override(argc, argv, key);
        char *model = codex_override(argc, argv, "model");
        json_object_set_new(rep, "wire_api", json_string(wire ? wire : ""));
        snprintf(url, sizeof url, "%s/responses", base ? base : "");
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", env_or(env_key ? env_key : "NONE"));
        status = post(rep, url, auth, json_pack("{s:s, s:s, s:b}", "model", model ? model : "", "input", "hi",
                                                "store", 0));
        free(provider), free(base), free(env_key), free(wire), free(model);
    } else if (!strcmp(me, "opencode")) {
        json_error_t je;
        json_t *cfg = json_loads(env_or("OPENCODE_CONFIG_CONTENT"), 0, &je);
        const char *full = json_string_value(json_object_get(cfg, "model")); /* "provider/model" */
        const char *slash = full ? strchr(full, '/') : NULL;
        char prov[128] = "";
        if (slash && slash - full < 127)
            memcpy(prov, full, (size_t)(slash - full));
        json_t *opt = json_object_get(json_object_get(json_object_get(cfg, "provider"), prov), "options");
        snprintf(url, sizeof url, "%s/chat/completions", json_string_value(json_object_get(opt, "baseURL")));
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", json_string_value(json_object_get(opt, "apiKey")));
        status = post(rep, url, auth, chat_body(slash ? slash + 1 : ""));
        json_decref(cfg);
    } else if (!strcmp(me, "qwen") || !strcmp(me, "aider")) {
        bool aider = !strcmp(me, "aider");
        const char *model = env_or("OPENAI_MODEL");
        for (int i = 1; aider && i + 1 < argc; i++)
            if (!strcmp(argv[i], "--model") && !strncmp(argv[i + 1], "openai/", 7))
                model = argv[i + 1] + 7;
        snprintf(url, sizeof url, "%s/chat/completions", env_or(aider ? "OPENAI_API_BASE" : "OPENAI_BASE_URL"));
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", env_or("OPENAI_API_KEY"));
        status = post(rep, url, auth, chat_body(model));
    } else if (getenv("OPENAI_BASE_URL")) {
        snprintf(url, sizeof url, "%s/chat/completions", env_or("OPENAI_BASE_URL"));
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", env_or("OPENAI_API_KEY"));
        status = post(rep, url, auth, chat_body("any"));
    } else {
        snprintf(url, sizeof url, "%s/v1/messages", env_or("ANTHROPIC_BASE_URL"));
        snprintf(auth, sizeof auth, "x-api-key: %s", env_or("ANTHROPIC_API_KEY"));
        status = post(rep, url, auth, chat_body("any"));
    }
    const char *out = getenv("FAKE_CLIENT_REPORT");
    if (out) {
        FILE *f = fopen(out, "w");
        if (f) {
            char *s = json_dumps(rep, JSON_INDENT(1));
            fputs(s, f);
            free(s);
            fclose(f);
        }
    }
    json_decref(rep);
    curl_global_cleanup();
    return status == 200 ? 0 : 3;
}
