/* cmd_serve.c — `corvid serve [MODEL...]`: parses and checks the flags,
 * makes the model set the server serves (server.h, cv_model_set) and serves
 * HTTP until SIGINT/SIGTERM (cv_server_run: a drain of --drain-timeout
 * seconds), then closes every model (each saves its prefix cache) and exits 0.
 *
 * The models: each MODEL named (a path, an alias, ORG/REPO[:QUANT], a URL,
 * a name in the store; remote ones are pulled first), loaded at start as
 * far as --max-loaded and --memory-limit hold them; or, with no MODEL,
 * everything in the store, under the names `corvid ls` shows, none loaded
 * until asked for. One MODEL is the default (any model name reaches it, as
 * agents ask for claude-* and gpt-*); with several, --default-model names
 * one, or names that match no model nor --route are a 404.
 *
 * The backend (server/backend.c) is where the layers below the server meet:
 * the GGUF model, the engine and cv_sched, the tokenizer's streaming
 * detokenizer and the model's chat template. The scheduler flags (--kv-memory,
 * --batch-tokens, --draft, --no-prefix-cache, --cache-dir, --cache-max) go to
 * every model; defaults that need the environment (the cache directory, an
 * automatic memory limit) are resolved here, those that need the model (KV
 * memory) in the backend. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/cli_int.h"
#include "server/server.h"

/* --route and --model-key rules at most (each PATTERN=MODEL / MODEL=KEY). */
#define MAX_PAIRS 64

typedef struct pair {
    char *key, *value; /* the argument split at its first '=' (one allocation: key) */
} pair;

typedef struct pairs {
    pair v[MAX_PAIRS];
    int n;
} pairs;

typedef struct serve_opts {
    cv_server_config cfg;
    const char *served_name;
    pairs routes;       /* --route PATTERN=MODEL */
    pairs keys;         /* --model-key MODEL=KEY */
    const char *default_model;
    int32_t max_loaded;
    int64_t memory_limit; /* -1: auto */
    int64_t keep_alive_ms;
    int32_t n_ctx;      /* 0: the model's own */
    int32_t parallel;   /* sequences decoded together */
    int32_t threads;    /* compute threads; 0: all cores */
    double drain_s;     /* --drain-timeout */
    int64_t kv_bytes;   /* -1: a share of free memory (cv_sched_default_kv_bytes) */
    uint32_t kv_type;   /* CV_GGML_F16 (default), CV_GGML_F32 or CV_GGML_Q8_0 */
    int32_t batch_tokens;
    int32_t draft;      /* --draft: -1 unset (the scheduler's default), 0 off */
    bool no_prefix_cache;
    const char *cache_dir; /* NULL: cv_sched_default_cache_dir; "": no cache file */
    int64_t cache_max;
    int32_t max_queue;  /* 0: CV_MAX_SCHED_QUEUE */
    int64_t max_body;   /* 0: the server's default */
    bool grammar_lazy;  /* tool_choice auto: lazy tool-call grammar */
} serve_opts;

static int kv_type(void *opts, const char *v, cv_err *err)
{
    return cv_engine_kv_type_parse(v, &((serve_opts *)opts)->kv_type, err);
}

static int add_pair(pairs *p, const char *v, const char *form, cv_err *err)
{
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || !eq[1])
        return cv_err_set(err, CV_EINVAL, "'%s' is not %s", v, form);
    if (p->n == MAX_PAIRS)
        return cv_err_set(err, CV_ELIMIT, "more than %d of them", MAX_PAIRS);
    char *k = cv_xstrdup(v);
    k[eq - v] = 0;
    p->v[p->n++] = (pair){ k, k + (eq - v) + 1 };
    return 0;
}

static int route(void *opts, const char *v, cv_err *err)
{
    return add_pair(&((serve_opts *)opts)->routes, v, "PATTERN=MODEL", err);
}

static int model_key(void *opts, const char *v, cv_err *err)
{
    return add_pair(&((serve_opts *)opts)->keys, v, "MODEL=KEY", err);
}

/* SIZE or auto: what /proc/meminfo calls available at start, less a tenth
 * for everything else the process and the machine hold. */
static int memory_limit(void *opts, const char *v, cv_err *err)
{
    double x;
    if (!strcmp(v, "auto"))
        x = -1;
    else if (!cv_cli_parse_size(v, &x) || x < 1048576.0 || x > 1125899906842624.0)
        return cv_err_set(err, CV_EINVAL, "'%s' is not a size from 1M (512M, 24G) or 'auto'", v);
    ((serve_opts *)opts)->memory_limit = (int64_t)x;
    return 0;
}

/* 30s, 5m, 1h, 250ms, or seconds. */
static int keep_alive(void *opts, const char *v, cv_err *err)
{
    char *end;
    double x = strtod(v, &end);
    double unit = !strcmp(end, "ms") ? 1e-3 : !strcmp(end, "m") ? 60 : !strcmp(end, "h") ? 3600
                : !*end || !strcmp(end, "s") ? 1 : 0;
    if (end == v || unit == 0 || !(x > 0) || x * unit > 365 * 86400.0)
        return cv_err_set(err, CV_EINVAL, "'%s' is not a duration above 0 (250ms, 30s, 5m, 1h); leave the flag "
                          "out to keep models loaded", v);
    ((serve_opts *)opts)->keep_alive_ms = CV_MAX((int64_t)1, (int64_t)(x * unit * 1000));
    return 0;
}

#define O(field) offsetof(serve_opts, field)
static const cv_flag flags[] = {
    CV_FLAG_ROW("--host", NULL, CV_FLAG_STR, O(cfg.host), 0, 0, "ADDR", "bind address (default 127.0.0.1)"),
    CV_FLAG_ROW("--port", NULL, CV_FLAG_I32, O(cfg.port), 0, 65535, "N", "port (default 8000; 0 picks a free one)"),
    CV_FLAG_ROW("--api-key", NULL, CV_FLAG_STR, O(cfg.api_key), 0, 0, "KEY",
      "require KEY as Bearer or x-api-key (or env CORVID_API_KEY)"),
    CV_FLAG_ROW("--cors-origins", NULL, CV_FLAG_STR, O(cfg.cors_origins), 0, 0, "LIST",
      "comma-separated origins allowed by CORS, or *"),
    CV_FLAG_ROW("--served-model-name", NULL, CV_FLAG_STR, O(served_name), 0, 0, "NAME",
      "the model id clients see, with one MODEL (default: the alias, else\nthe file name)"),
    CV_FLAG_FN_ROW("--route", NULL, "PATTERN=MODEL",
      "requests whose model name matches the glob PATTERN go to MODEL\n(--route 'claude-*haiku*=qwen3-4b'); tried "
      "in order after exact\nnames and aliases", route, true),
    CV_FLAG_ROW("--default-model", NULL, CV_FLAG_STR, O(default_model), 0, 0, "NAME",
      "the model of requests whose name matches nothing (default: the one\nMODEL; with several or none, such "
      "requests get a 404 listing\nwhat is served)"),
    CV_FLAG_ROW("--max-loaded", NULL, CV_FLAG_I32, O(max_loaded), 1, CV_MAX_SERVED_MODELS, "N",
      "models loaded at once at most; asking for another unloads the\nleast recently used idle one (default: no "
      "limit)"),
    CV_FLAG_FN_ROW("--memory-limit", NULL, "SIZE|auto",
      "what the loaded models may hold together (weights, KV cache,\nstates), unloading the least recently used "
      "idle ones to make\nroom; auto: the memory available at start less a tenth (default:\nauto with several "
      "models or none, no limit with one)", memory_limit, false),
    CV_FLAG_FN_ROW("--keep-alive", NULL, "DURATION",
      "unload a model idle this long (30s, 5m, 1h); its prefix cache is\nsaved and read back at its next load "
      "(default: keep models loaded)", keep_alive, false),
    CV_FLAG_FN_ROW("--model-key", NULL, "MODEL=KEY",
      "KEY also reaches MODEL (the --api-key reaches every model)", model_key, true),
    CV_FLAG_ROW("--ctx", NULL, CV_FLAG_I32, O(n_ctx), 16, 1 << 24, "N",
      "context length per sequence (default: the model's own, at most\n131072 and what --kv-memory holds)"),
    CV_FLAG_ROW("--parallel", NULL, CV_FLAG_I32, O(parallel), 1, 1024, "N", "sequences decoded together (default 4)"),
    CV_FLAG_ROW("--threads", NULL, CV_FLAG_I32, O(threads), 1, 1024, "N", "compute threads (default: every CPU)"),
    CV_FLAG_ROW("--kv-memory", "--kv-mem", CV_FLAG_SIZE, O(kv_bytes), 1048576.0, 1125899906842624.0, "SIZE",
      "KV cache memory, e.g. 2G or 512M, shared by every sequence and the\nprefix cache (default: half the free "
      "memory after the weights,\nat most 16M positions; never less than one context)"),
    CV_FLAG_FN_ROW("--kv-type", NULL, "f16|f32|q8_0",
      "KV cache precision (default f16, as llama.cpp's: twice the positions\nin the same memory and half the reads "
      "of a long context; f32 is exact;\nq8_0 holds 1.9x f16's positions, int8 with a factor per 32 values)", kv_type,
      false),
    CV_FLAG_ROW("--max-queue", NULL, CV_FLAG_I32, O(max_queue), 1, CV_MAX_SCHED_QUEUE, "N",
      "requests waiting for the engine at most; beyond it OpenAI clients\nget 503 and Anthropic clients 529, with "
      "Retry-After (default 256)"),
    CV_FLAG_ROW("--batch-tokens", NULL, CV_FLAG_I32, O(batch_tokens), 1, CV_MAX_BATCH_TOKENS, "N",
      "tokens per scheduler step: running streams' next tokens plus\nprefill chunks (default 256)"),
    CV_FLAG_ROW("--draft", NULL, CV_FLAG_I32, O(draft), 0, CV_SCHED_DRAFT_MAX, "N",
      "speculative decoding: tokens drafted per step from earlier text\n(prompt lookup) for a decoding stream; "
      "output is unchanged, edits\nthat repeat what the model was shown come faster; deep in a long\ncontext only "
      "drafts likely enough to pay for their attention are\nverified (default 3; 0: off)"),
    CV_FLAG_ROW("--no-prefix-cache", NULL, CV_FLAG_BOOL, O(no_prefix_cache), 0, 0, NULL,
      "compute every prompt in full (no reuse, no cache file)"),
    CV_FLAG_ROW("--cache-dir", NULL, CV_FLAG_STR, O(cache_dir), 0, 0, "DIR",
      "where the prefix cache is saved at shutdown and restored at start\n(default $XDG_CACHE_HOME/corvid or "
      "~/.cache/corvid; '' for none)"),
    CV_FLAG_ROW("--cache-max", NULL, CV_FLAG_SIZE, O(cache_max), 1048576.0, 1125899906842624.0, "SIZE",
      "the cache file's size at most (default 4G)"),
    CV_FLAG_ROW("--response-store", NULL, CV_FLAG_I32, O(cfg.response_store_size), 1, CV_MAX_RESPONSE_STORE, "N",
      "/v1/responses kept for previous_response_id (default 256)"),
    CV_FLAG_ROW("--max-body", NULL, CV_FLAG_I64, O(max_body), 1024, 2147483648.0, "BYTES",
      "request body limit (default 32 MiB; 413 beyond)"),
    CV_FLAG_ROW("--open-metrics", NULL, CV_FLAG_BOOL, O(cfg.open_metrics), 0, 0, NULL,
      "serve GET /metrics without the API key (Prometheus, gateways'\nendpoint pickers)"),
    CV_FLAG_ROW("--drain-timeout", NULL, CV_FLAG_F64, O(drain_s), 0, 3600, "SECONDS",
      "on SIGTERM/SIGINT: refuse new requests (503 + Retry-After,\n/health/ready 503), let running ones finish this "
      "long, cut the rest\n(their wire's error), save the prefix cache, exit 0 (default 10)"),
    CV_FLAG_ROW("--grammar-lazy", NULL, CV_FLAG_BOOL, O(grammar_lazy), 0, 0, NULL,
      "with tools and tool_choice auto, constrain a call once its marker starts"),

};
#undef O
static const cv_cli_spec spec = {
    .name = "serve", .args = "[MODEL...]", .min_args = 0, .max_args = CV_MAX_SERVED_MODELS, .flags = flags,
    .n_flags = CV_ARRAY_LEN(flags),
    .notes = "MODEL: a .gguf path, an alias (corvid ls --aliases), ORG/REPO[:QUANT], a URL or a name in the store;\n"
             "a remote one not yet pulled is downloaded first. Several: each request's model field picks one.\n"
             "None: every model in the store, each loaded when first asked for."
};

static void on_listen(void *ud, int port)
{
    const cv_server_config *cfg = ud;
    /* stdout, whatever the log level: scripts (and the tests) read the port. */
    printf("corvid serve: listening on http://%s:%d\n", cfg->host, port);
    fflush(stdout);
    cv_info("serving on http://%s:%d (OpenAI: /v1/chat/completions, /v1/completions, /v1/responses; "
            "Anthropic: /v1/messages)%s",
            cfg->host, port, cfg->api_key && *cfg->api_key ? "; API key required" : "");
}

/* ---- the models ---- */

/* The file's name without its folder and .gguf. */
static void stem(const char *path, char *out, size_t n)
{
    const char *b = strrchr(path, '/');
    snprintf(out, n, "%s", b ? b + 1 : path);
    size_t len = strlen(out);
    if (len > 5 && !strcasecmp(out + len - 5, ".gguf"))
        out[len - 5] = 0;
}

/* Each MODEL named: pulled if need be, served under the alias the user
 * typed (or the file's name), with the other spellings as aliases. */
static int add_named(cv_model_set *set, const serve_opts *o, char **models, int n, char *first, size_t n_first,
                     cv_err *err)
{
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX], name[256], file[256];
        cv_pull_opts po = { .progress = -1 };
        if (cv_model_ensure(models[i], &po, path, sizeof path, err))
            return err->code;
        const cv_model_alias *al = cv_model_alias_find(models[i]);
        stem(path, file, sizeof file);
        snprintf(name, sizeof name, "%s", o->served_name ? o->served_name : al ? al->name : file);
        const char *aliases[2] = { file, strcmp(models[i], path) ? models[i] : file };
        cv_model_spec m = { .name = name, .path = path, .aliases = aliases, .n_aliases = 2,
                            .pooling = al ? al->pooling : 0, .min_dims = al ? al->min_dims : 0, .preload = true };
        int rc = cv_model_set_add(set, &m, err);
        if (rc == CV_EINVAL && strcmp(name, file)) { /* the same model named twice, or two files alike */
            cv_err_clear(err);
            m.n_aliases = 0;
            rc = cv_model_set_add(set, &m, err);
        }
        if (rc)
            return rc;
        if (i == 0)
            snprintf(first, n_first, "%s", name);
    }
    return 0;
}

/* Every model in the store, not loaded, named as `corvid ls` names it,
 * with its file name as another name when no other model has it. */
static int add_store(cv_model_set *set, const serve_opts *o, int *n_added, cv_err *err)
{
    char dir[PATH_MAX];
    int rc = cv_models_dir(dir, sizeof dir, err);
    if (rc)
        return rc;
    cv_store_entry *v = NULL;
    int n = 0;
    if ((rc = cv_store_list(dir, &v, &n, err)))
        return rc;
    *n_added = 0;
    for (int i = 0; i < n && !rc; i++) {
        if (v[i].partial)
            continue;
        char name[PATH_MAX], file[256];
        cv_store_entry_name(&v[i], name, sizeof name);
        stem(v[i].path, file, sizeof file);
        char repo[PATH_MAX];
        snprintf(repo, sizeof repo, "%s", v[i].rel);
        char *last = strrchr(repo, '/');
        const cv_model_alias *al = NULL;
        if (last) {
            *last = 0;
            al = cv_model_alias_by_file(repo, last + 1);
        }
        const char *aliases[1] = { file };
        cv_model_spec m = { .name = name, .path = v[i].path, .aliases = aliases, .n_aliases = 1,
                            .pooling = al ? al->pooling : 0, .min_dims = al ? al->min_dims : 0 };
        rc = cv_model_set_add(set, &m, err);
        if (rc == CV_EINVAL) { /* another file has this name: only its path in the store */
            cv_err_clear(err);
            m.n_aliases = 0;
            rc = cv_model_set_add(set, &m, err);
        }
        *n_added += rc == 0;
    }
    free(v);
    if (!rc && !*n_added)
        rc = cv_err_set(err, CV_ENOTFOUND, "no MODEL was given and the store (%s) holds none: name one, or pull one "
                        "first (corvid pull qwen3-0.6b)", dir);
    return rc;
}

/* /proc/meminfo's MemAvailable, less a tenth; 0 when unknown. */
static int64_t auto_memory_limit(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024 / 10 * 9;
}

/* --route, --default-model and --model-key rules, which name models of the
 * set; one MODEL is the default without asking. */
static int add_rules(cv_model_set *set, const serve_opts *o, const char *only, cv_err *err)
{
    for (int i = 0; i < o->routes.n; i++) {
        int rc = cv_model_set_route(set, o->routes.v[i].key, o->routes.v[i].value, err);
        if (rc)
            return rc;
    }
    for (int i = 0; i < o->keys.n; i++) {
        int rc = cv_model_set_key(set, o->keys.v[i].key, o->keys.v[i].value, err);
        if (rc)
            return rc;
    }
    return cv_model_set_default(set, o->default_model ? o->default_model : only, err);
}

int cv_cmd_serve(int argc, char **argv)
{
    serve_opts o = { .cfg = { .host = "127.0.0.1", .port = 8000, .api_key = getenv("CORVID_API_KEY") },
                     .parallel = 4, .drain_s = 10, .kv_bytes = -1, .kv_type = CV_GGML_F16, .draft = -1,
                     .memory_limit = -2 /* unset */ };
    int n, st;
    if (!cv_cli_parse(&spec, &o, argc, argv, &n, &st))
        return st;
    if (o.served_name && n != 1)
        return cv_cli_usage_error(&spec, "--served-model-name names one MODEL; %d were given", n);
    cv_server_config cfg = o.cfg;
    if (o.max_body)
        cfg.max_body_bytes = (size_t)o.max_body;
    cv_err err = { 0 };
    char cache_dir[PATH_MAX];
    if (!o.cache_dir && !o.no_prefix_cache) {
        /* No HOME and no XDG_CACHE_HOME (a bare container): serve without
         * a cache file rather than refuse. */
        if (cv_sched_default_cache_dir(cache_dir, sizeof cache_dir, &err) == 0)
            o.cache_dir = cache_dir;
        else
            cv_warn("%s; the prefix cache will not be saved (give --cache-dir)", err.msg);
        cv_err_clear(&err);
    }
    if (o.cache_dir && *o.cache_dir && !o.no_prefix_cache && mkdir(o.cache_dir, 0700) && errno != EEXIST)
        cv_warn("cannot create the cache directory %s (%s); the prefix cache will not be saved", o.cache_dir,
                strerror(errno));
    /* One model is held whatever its size, as it always was; several share
     * what is available unless told otherwise. */
    if (o.memory_limit == -2)
        o.memory_limit = n == 1 ? 0 : -1;
    if (o.memory_limit == -1)
        o.memory_limit = auto_memory_limit();
    cv_model_set_opts mo = {
        .backend = { .n_ctx = o.n_ctx, .n_parallel = o.parallel, .n_threads = o.threads, .kv_bytes = o.kv_bytes,
                     .kv_type = o.kv_type, .batch_tokens = o.batch_tokens, .no_prefix_cache = o.no_prefix_cache,
                     .draft_tokens = o.draft < 0 ? 0 : o.draft == 0 ? -1 : o.draft, .cache_dir = o.cache_dir,
                     .cache_max_bytes = o.cache_max, .max_queue = o.max_queue, .grammar_lazy = o.grammar_lazy },
        .max_loaded = o.max_loaded,
        .memory_limit = o.memory_limit,
        .keep_alive_ms = o.keep_alive_ms,
        .n_threads = o.threads,
    };
    cv_model_set *set = NULL;
    char first[256] = "";
    int n_models = n, rc;
    if ((rc = cv_model_set_create(&mo, &set, &err)) ||
        (rc = n ? add_named(set, &o, argv + 1, n, first, sizeof first, &err) : add_store(set, &o, &n_models, &err)) ||
        (rc = add_rules(set, &o, n == 1 ? first : NULL, &err)) || (rc = cv_model_set_preload(set, &err))) {
        fprintf(stderr, "corvid serve: %s\n", err.msg);
        cv_model_set_destroy(set);
        for (int i = 0; i < o.routes.n; i++)
            free(o.routes.v[i].key);
        for (int i = 0; i < o.keys.n; i++)
            free(o.keys.v[i].key);
        return rc == CV_EINVAL && !n ? 2 : 1;
    }
    const bool saved = o.cache_dir && *o.cache_dir && !o.no_prefix_cache;
    const int draft = o.draft < 0 ? CV_SCHED_DRAFT_DEFAULT : o.draft;
    char spec_txt[48] = "off", limit_txt[64] = "none", ka_txt[32] = "never", max_txt[24] = "no limit";
    if (draft > 0)
        snprintf(spec_txt, sizeof spec_txt, "up to %d drafted tokens a step", draft);
    if (o.memory_limit > 0)
        cv_human_bytes(o.memory_limit, limit_txt, sizeof limit_txt);
    if (o.max_loaded > 0)
        snprintf(max_txt, sizeof max_txt, "%d", o.max_loaded);
    if (o.keep_alive_ms > 0)
        snprintf(ka_txt, sizeof ka_txt, "%.1f s", (double)o.keep_alive_ms / 1e3);
    cv_info("serving %d model%s (%s); %d parallel sequences each; prefix cache %s%s%s; speculation %s; "
            "max loaded %s, memory limit %s, keep-alive %s", n_models, n_models == 1 ? "" : "s",
            n ? "loaded at start as far as the limits hold them" : "each loaded when first asked for", o.parallel,
            o.no_prefix_cache ? "off" : "on", saved ? ", saved in " : "", saved ? o.cache_dir : "", spec_txt,
            max_txt, limit_txt, ka_txt);
    cfg.models = set;
    rc = cv_server_run(&cfg, NULL, (int)(o.drain_s * 1000), on_listen, &cfg, &err);
    cv_model_set_destroy(set);
    for (int i = 0; i < o.routes.n; i++)
        free(o.routes.v[i].key);
    for (int i = 0; i < o.keys.n; i++)
        free(o.keys.v[i].key);
    if (rc) {
        fprintf(stderr, "corvid serve: %s\n", err.msg);
        return 1;
    }
    return 0;
}
