/* clients.c — the agent clients corvid knows how to set up: for each, the
 * environment, arguments and (for users who prefer a file) the persistent
 * config that point it at a corvid server. `corvid recipe` prints a setup,
 * `corvid launch` applies the same one, so the two cannot drift apart.
 *
 * The facts come from real sessions recorded against a local server
 * (shared/testdata/clients/CLIENTS.md): Claude Code takes the base URL
 * without /v1 and appends /v1/messages itself, and sends its background
 * work to the "haiku" model variable; Codex needs `model` set (without it
 * it speaks an internal format to a default model) and a provider with
 * wire_api = "responses" (the only value it accepts); opencode needs a
 * provider through @ai-sdk/openai-compatible with a token limit (else it asks
 * for 32000 output tokens); Qwen Code needs the openai auth type. launch
 * never edits a user's config file: Codex gets `-c` overrides, opencode its
 * inline-config variable, the others environment variables and flags. */
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "cli/models.h"

/* ---- building a setup ---- */

static void env(cv_client_setup *s, const char *name, const char *note, const char *fmt, ...) CV_PRINTF(4, 5);
static void env(cv_client_setup *s, const char *name, const char *note, const char *fmt, ...)
{
    if (s->n_env >= CV_CLIENT_MAX_ITEMS)
        return; /* the tables below stay far under the bound */
    cv_buf b = { 0 };
    va_list ap;
    va_start(ap, fmt);
    cv_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    s->env_name[s->n_env] = cv_xstrdup(name);
    s->env_value[s->n_env] = cv_buf_steal(&b);
    s->env_note[s->n_env] = note;
    s->n_env++;
}

static void arg(cv_client_setup *s, const char *fmt, ...) CV_PRINTF(2, 3);
static void arg(cv_client_setup *s, const char *fmt, ...)
{
    if (s->n_args >= CV_CLIENT_MAX_ITEMS)
        return;
    cv_buf b = { 0 };
    va_list ap;
    va_start(ap, fmt);
    cv_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    s->args[s->n_args++] = cv_buf_steal(&b);
}

static void file(cv_client_setup *s, const char *path, char *body)
{
    s->file_path = cv_xstrdup(path);
    s->file_body = body;
}

void cv_client_setup_fini(cv_client_setup *s)
{
    for (int i = 0; i < s->n_env; i++) {
        free(s->env_name[i]);
        free(s->env_value[i]);
    }
    for (int i = 0; i < s->n_args; i++)
        free(s->args[i]);
    free(s->file_path);
    free(s->file_body);
    memset(s, 0, sizeof *s);
}

/* A TOML basic string: quotes, backslashes and control characters escaped. */
static void toml_str(cv_buf *b, const char *v)
{
    cv_buf_putc(b, '"');
    for (; *v; v++) {
        unsigned char c = (unsigned char)*v;
        if (c == '"' || c == '\\')
            cv_buf_printf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            cv_buf_printf(b, "\\u%04X", c);
        else
            cv_buf_putc(b, (char)c);
    }
    cv_buf_putc(b, '"');
}

static char *toml_of(const char *v)
{
    cv_buf b = { 0 };
    toml_str(&b, v);
    return cv_buf_steal(&b);
}

static const char *key_of(const cv_client_params *p) { return p->api_key && *p->api_key ? p->api_key : "corvid"; }

/* Output tokens a client should ask for: an eighth of the context keeps
 * room for the long agent prompts, within what clients send by default. */
static int64_t out_tokens(const cv_client_params *p)
{
    return p->n_ctx > 0 ? CV_MAX((int64_t)1024, CV_MIN(p->n_ctx / 8, (int64_t)32000)) : 0;
}

static void base_url(const cv_client_params *p, char *out, size_t n)
{
    snprintf(out, n, "http://%s:%d", p->host, p->port);
}

/* ---- one function per client ---- */

static void setup_claude(const cv_client_params *p, cv_client_setup *s)
{
    char base[300];
    base_url(p, base, sizeof base);
    env(s, "ANTHROPIC_BASE_URL", "no /v1: Claude Code appends /v1/messages itself", "%s", base);
    env(s, "ANTHROPIC_AUTH_TOKEN", "sent as Authorization: Bearer (corvid also accepts x-api-key)", "%s", key_of(p));
    env(s, "ANTHROPIC_MODEL", "the main model; unset, Claude Code asks for a claude-opus model", "%s", p->model);
    env(s, "ANTHROPIC_DEFAULT_HAIKU_MODEL", "background work (titles, summaries) goes to the haiku variable", "%s",
        p->small_model ? p->small_model : p->model);
    env(s, "ANTHROPIC_DEFAULT_SONNET_MODEL", "subagents that ask for sonnet", "%s", p->model);
    env(s, "ANTHROPIC_DEFAULT_OPUS_MODEL", "subagents that ask for opus", "%s", p->model);
    if (p->n_ctx > 0) {
        env(s, "CLAUDE_CODE_MAX_CONTEXT_TOKENS", "the served context (else it assumes 1M tokens for an unknown model)",
            "%lld", (long long)p->n_ctx);
        env(s, "CLAUDE_CODE_MAX_OUTPUT_TOKENS", "max_tokens it sends (else 32000)", "%lld", (long long)out_tokens(p));
    }
    env(s, "DISABLE_TELEMETRY", "no traffic to Anthropic's servers", "1");
    env(s, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", NULL, "1");
    env(s, "DISABLE_AUTOUPDATER", NULL, "1");
    env(s, "DISABLE_ERROR_REPORTING", NULL, "1");
    /* A real key in the environment would be sent to corvid and makes Claude
     * Code ask which credential to use. */
    s->unset[s->n_unset++] = "ANTHROPIC_API_KEY";
}

static void setup_codex(const cv_client_params *p, cv_client_setup *s)
{
    char base[300];
    base_url(p, base, sizeof base);
    env(s, "CORVID_API_KEY", "the provider's env_key: sent as Authorization: Bearer", "%s", key_of(p));
    char *m = toml_of(p->model), *u;
    cv_buf ub = { 0 };
    cv_buf_printf(&ub, "%s/v1", base);
    u = toml_of(ub.data);
    arg(s, "-c");
    arg(s, "model=%s", m);
    arg(s, "-c");
    arg(s, "model_provider=\"corvid\"");
    arg(s, "-c");
    arg(s, "model_providers.corvid.name=\"corvid\"");
    arg(s, "-c");
    arg(s, "model_providers.corvid.base_url=%s", u);
    arg(s, "-c");
    arg(s, "model_providers.corvid.env_key=\"CORVID_API_KEY\"");
    arg(s, "-c");
    arg(s, "model_providers.corvid.wire_api=\"responses\"");
    arg(s, "-c");
    arg(s, "check_for_update_on_startup=false");
    cv_buf f = { 0 };
    cv_buf_printf(&f,
                  "model = %s               # required: without it Codex asks for its own default model\n"
                  "model_provider = \"corvid\"\n"
                  "check_for_update_on_startup = false\n"
                  "\n"
                  "[model_providers.corvid]\n"
                  "name = \"corvid\"\n"
                  "base_url = %s\n"
                  "env_key = \"CORVID_API_KEY\"    # its value is sent as Authorization: Bearer\n"
                  "wire_api = \"responses\"        # the only value current Codex accepts\n"
                  "\n"
                  "[analytics]\n"
                  "enabled = false\n",
                  m, u);
    file(s, "~/.codex/config.toml  (or $CODEX_HOME/config.toml)", cv_buf_steal(&f));
    free(m);
    free(u);
    cv_buf_free(&ub);
}

static json_t *opencode_config(const cv_client_params *p)
{
    char base[300];
    base_url(p, base, sizeof base);
    cv_buf u = { 0 };
    cv_buf_printf(&u, "%s/v1", base);
    json_t *model = json_pack("{s:s}", "name", p->model);
    if (p->n_ctx > 0)
        json_object_set_new(model, "limit", json_pack("{s:I, s:I}", "context", (json_int_t)p->n_ctx, "output",
                                                      (json_int_t)out_tokens(p)));
    json_t *models = json_object();
    json_object_set_new(models, p->model, model);
    if (p->small_model && strcmp(p->small_model, p->model))
        json_object_set_new(models, p->small_model, json_pack("{s:s}", "name", p->small_model));
    cv_buf full = { 0 }, small = { 0 };
    cv_buf_printf(&full, "corvid/%s", p->model);
    cv_buf_printf(&small, "corvid/%s", p->small_model ? p->small_model : p->model);
    json_t *cfg = json_pack("{s:s, s:b, s:s, s:{s:{s:s, s:s, s:{s:s, s:s}, s:o}}, s:s, s:s}", "$schema",
                            "https://opencode.ai/config.json", "autoupdate", 0, "share", "disabled", "provider",
                            "corvid", "npm", "@ai-sdk/openai-compatible", "name", "corvid", "options", "baseURL",
                            u.data, "apiKey", key_of(p), "models", models, "model", full.data, "small_model",
                            small.data);
    cv_buf_free(&u);
    cv_buf_free(&full);
    cv_buf_free(&small);
    return cfg;
}

static void setup_opencode(const cv_client_params *p, cv_client_setup *s)
{
    json_t *cfg = opencode_config(p);
    char *inline_cfg = json_dumps(cfg, JSON_COMPACT | JSON_PRESERVE_ORDER);
    char *pretty = json_dumps(cfg, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    env(s, "OPENCODE_CONFIG_CONTENT", "inline config, merged over the user's own files (opencode >= 1.x)", "%s",
        inline_cfg);
    env(s, "OPENCODE_DISABLE_AUTOUPDATE", NULL, "1");
    env(s, "OPENCODE_DISABLE_MODELS_FETCH", "no fetch of the models.dev catalogue", "1");
    env(s, "OPENCODE_DISABLE_SHARE", NULL, "1");
    cv_buf f = { 0 };
    cv_buf_printf(&f, "%s\n", pretty);
    file(s, "~/.config/opencode/opencode.json  (or ./opencode.json in the project)", cv_buf_steal(&f));
    free(inline_cfg);
    free(pretty);
    json_decref(cfg);
}

static void setup_qwen(const cv_client_params *p, cv_client_setup *s)
{
    char base[300];
    base_url(p, base, sizeof base);
    env(s, "OPENAI_BASE_URL", NULL, "%s/v1", base);
    env(s, "OPENAI_API_KEY", "sent as Authorization: Bearer", "%s", key_of(p));
    env(s, "OPENAI_MODEL", NULL, "%s", p->model);
    arg(s, "--auth-type");
    arg(s, "openai");
    cv_buf f = { 0 };
    cv_buf_puts(&f, "{\n  \"security\": { \"auth\": { \"selectedType\": \"openai\" } },\n"
                    "  \"privacy\": { \"usageStatisticsEnabled\": false },\n"
                    "  \"telemetry\": { \"enabled\": false },\n"
                    "  \"general\": { \"disableAutoUpdate\": true, \"disableUpdateNag\": true }\n}\n");
    file(s, "~/.qwen/settings.json  (replaces --auth-type openai)", cv_buf_steal(&f));
}

static void setup_aider(const cv_client_params *p, cv_client_setup *s)
{
    char base[300];
    base_url(p, base, sizeof base);
    env(s, "OPENAI_API_BASE", "aider's name for the OpenAI-compatible base URL", "%s/v1", base);
    env(s, "OPENAI_API_KEY", NULL, "%s", key_of(p));
    arg(s, "--model");
    arg(s, "openai/%s", p->model);
    arg(s, "--no-show-model-warnings");
    if (p->n_ctx > 0) {
        json_t *meta = json_object();
        cv_buf name = { 0 };
        cv_buf_printf(&name, "openai/%s", p->model);
        json_object_set_new(meta, name.data,
                            json_pack("{s:I, s:I, s:I, s:i, s:i, s:s, s:s}", "max_input_tokens", (json_int_t)p->n_ctx,
                                      "max_output_tokens", (json_int_t)out_tokens(p), "max_tokens",
                                      (json_int_t)out_tokens(p), "input_cost_per_token", 0, "output_cost_per_token", 0,
                                      "litellm_provider", "openai", "mode", "chat"));
        char *body = json_dumps(meta, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        cv_buf f = { 0 };
        cv_buf_printf(&f, "%s\n", body);
        file(s, "~/.aider.model.metadata.json  (tells aider the context size)", cv_buf_steal(&f));
        free(body);
        json_decref(meta);
        cv_buf_free(&name);
    }
}

static void setup_openai_sdk(const cv_client_params *p, cv_client_setup *s)
{
    char base[300];
    base_url(p, base, sizeof base);
    env(s, "OPENAI_BASE_URL", "read by the official SDKs (Python, Node)", "%s/v1", base);
    env(s, "OPENAI_API_KEY", NULL, "%s", key_of(p));
    env(s, "OPENAI_MODEL", "not read by the SDK: pass it as model=", "%s", p->model);
    cv_buf f = { 0 };
    cv_buf_printf(&f,
                  "# Python\n"
                  "from openai import OpenAI\n"
                  "client = OpenAI(base_url=\"%s/v1\", api_key=\"%s\")\n"
                  "r = client.chat.completions.create(model=\"%s\", messages=[{\"role\": \"user\", \"content\": \"hi\"}])\n"
                  "\n"
                  "// Node\n"
                  "import OpenAI from \"openai\";\n"
                  "const client = new OpenAI({ baseURL: \"%s/v1\", apiKey: \"%s\" });\n",
                  base, key_of(p), p->model, base, key_of(p));
    file(s, "code", cv_buf_steal(&f));
}

static void setup_anthropic_sdk(const cv_client_params *p, cv_client_setup *s)
{
    char base[300];
    base_url(p, base, sizeof base);
    env(s, "ANTHROPIC_BASE_URL", "no /v1: the SDK appends /v1/messages", "%s", base);
    env(s, "ANTHROPIC_API_KEY", "0.x sends it as x-api-key, 1.x as Authorization: Bearer; corvid accepts both", "%s",
        key_of(p));
    cv_buf f = { 0 };
    cv_buf_printf(&f,
                  "# Python\n"
                  "import anthropic\n"
                  "client = anthropic.Anthropic(base_url=\"%s\", api_key=\"%s\")\n"
                  "m = client.messages.create(model=\"%s\", max_tokens=1024, messages=[{\"role\": \"user\", "
                  "\"content\": \"hi\"}])\n"
                  "\n"
                  "// Node\n"
                  "import Anthropic from \"@anthropic-ai/sdk\";\n"
                  "const client = new Anthropic({ baseURL: \"%s\", apiKey: \"%s\" });\n",
                  base, key_of(p), p->model, base, key_of(p));
    file(s, "code", cv_buf_steal(&f));
}

/* ---- the table ---- */

const cv_client cv_clients[] = {
    { "claude-code", "claude claude-cli", "Claude Code", "claude", "npm install -g @anthropic-ai/claude-code",
      "claude -p \"...\" < /dev/null", setup_claude,
      "Claude Code sends max_tokens far above a local context (32000-64000): corvid clamps it.\n"
      "It folds role:\"system\" messages and thinking blocks back into later turns; corvid accepts both.\n"
      "Interactive mode on a fresh install asks onboarding questions once; `claude -p` does not." },
    { "codex", "codex-cli", "Codex CLI", "codex", "npm install -g @openai/codex",
      "codex exec \"...\" < /dev/null", setup_codex,
      "Codex re-sends the whole history every turn over /v1/responses (store:false); the prefix cache\n"
      "makes that cheap. It warns that it has no metadata for the model: harmless.\n"
      "`codex exec` also reads stdin unless it is given < /dev/null." },
    { "opencode", "opencode-ai", "opencode", "opencode", "npm install -g opencode-ai",
      "opencode run \"...\"", setup_opencode,
      "opencode sends a title request on small_model next to the main turn: two requests at once.\n"
      "Without limit.output it asks for max_tokens 32000." },
    { "qwen-code", "qwen qwen-cli", "Qwen Code", "qwen", "npm install -g @qwen-code/qwen-code",
      "qwen -p \"...\" --yolo < /dev/null   (headless mode needs --yolo to run tools)",
      setup_qwen, "Qwen Code sends user and tool content as arrays of text parts; corvid accepts both shapes." },
    { "aider", NULL, "aider", "aider", "python -m pip install aider-install && aider-install",
      "aider --message \"...\"", setup_aider,
      "aider talks to OpenAI-compatible servers through the openai/ model prefix. It was not in the\n"
      "recorded client sessions (PyPI was unreachable there): this follows aider's documented setup." },
    { "openai-sdk", "openai", "OpenAI SDK (Python, Node)", NULL, "pip install openai  |  npm install openai",
      "corvid launch openai-sdk -- python app.py", setup_openai_sdk,
      "Streams end with finish_reason, a usage chunk (stream_options.include_usage) and [DONE].\n"
      "Unknown fields the SDK adds when objects are passed back (refusal, parsed) are ignored." },
    { "anthropic-sdk", "anthropic", "Anthropic SDK (Python, Node)", NULL,
      "pip install anthropic  |  npm install @anthropic-ai/sdk", "corvid launch anthropic-sdk -- node app.mjs",
      setup_anthropic_sdk, "Any anthropic-version header is accepted (1.x sends 2026-10-21, 0.x 2023-06-01)." },
};
const int cv_n_clients = (int)CV_ARRAY_LEN(cv_clients);

const cv_client *cv_client_find(const char *name)
{
    for (int i = 0; i < cv_n_clients; i++) {
        const cv_client *c = &cv_clients[i];
        if (!strcasecmp(c->name, name))
            return c;
        for (const char *a = c->aka; a && *a;) {
            size_t len = strcspn(a, " ");
            if (len == strlen(name) && !strncasecmp(a, name, len))
                return c;
            a += len;
            a += strspn(a, " ");
        }
    }
    return NULL;
}
