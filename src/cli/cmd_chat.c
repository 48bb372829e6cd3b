/* cmd_chat.c — `corvid chat MODEL`: an interactive terminal chat. It runs a
 * private `corvid serve MODEL` (loopback, a random API key, dies with the
 * chat) or joins a running server (--url), and speaks the OpenAI chat wire
 * with streaming to it, so a chat turn goes through exactly what an agent's
 * turn goes through: the model's own chat template, the tokenizer, the
 * scheduler, stop handling and the reasoning/tool-call parser.
 *
 * The conversation (system prompt + turns) lives here and is re-sent each
 * turn; the server's prefix cache makes that cheap. Reasoning streams dimmed
 * on a terminal and inside <think>…</think> otherwise (or not at all with
 * --hide-reasoning). Ctrl-C during an answer stops it (the transfer is
 * dropped, which the server turns into a cancel at its next step) and keeps
 * what was shown as the assistant's turn; Ctrl-C at the prompt only says how
 * to quit. /reset, /system, /exit, /help; a line `"""` starts and ends a
 * multi-line message. Reads stdin line by line, so it can be driven through
 * a pipe (the tests do). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli/cli.h"
#include "cli/cli_int.h"
#include "cli/models.h"

static volatile sig_atomic_t interrupted; /* Ctrl-C: stop the answer */
static volatile sig_atomic_t quitting;    /* SIGTERM/SIGHUP: leave */

static void on_signal(int sig)
{
    if (sig == SIGINT)
        interrupted = 1;
    else
        quitting = 1;
}

typedef struct chat_opts {
    const char *model, *url, *api_key, *system;
    int think;            /* -1 template default, 0 off, 1 on */
    bool hide_reasoning, verbose;
    double temperature, top_p, min_p, repeat_penalty; /* < 0: unset */
    int32_t top_k, max_tokens, n_ctx;                 /* < 0 / 0: unset */
    int64_t seed;
    bool has_seed;
} chat_opts;

/* ---- one streamed turn ---- */

typedef struct turn {
    cv_buf sse;        /* bytes not yet split into lines */
    cv_buf content;    /* the answer, kept as the assistant's turn */
    cv_buf err_body;
    long status;
    bool in_reasoning, any_output, styled, hide_reasoning, done;
    bool failed;       /* the server sent an error event mid-stream */
    int64_t n_prompt, n_gen;
    double t_start, t_first;
    FILE *out;
} turn;

#define DIM "\033[2m"
#define RESET "\033[0m"

static void end_reasoning(turn *t)
{
    if (!t->in_reasoning)
        return;
    t->in_reasoning = false;
    if (t->hide_reasoning)
        return;
    fputs(t->styled ? RESET "\n\n" : "\n</think>\n", t->out);
}

static void on_delta(turn *t, json_t *delta)
{
    const char *r = json_string_value(json_object_get(delta, "reasoning_content"));
    const char *c = json_string_value(json_object_get(delta, "content"));
    if ((r && *r) || (c && *c)) {
        if (t->t_first == 0)
            t->t_first = cv_now_s();
    }
    if (r && *r) {
        if (!t->in_reasoning) {
            t->in_reasoning = true;
            if (!t->hide_reasoning)
                fputs(t->styled ? DIM : "<think>\n", t->out);
        }
        if (!t->hide_reasoning)
            fputs(r, t->out);
    }
    if (c && *c) {
        end_reasoning(t);
        fputs(c, t->out);
        cv_buf_puts(&t->content, c);
        t->any_output = true;
    }
    json_t *tc = json_object_get(delta, "tool_calls");
    if (json_array_size(tc)) {
        /* No tools are offered, but a model may still write a call. */
        end_reasoning(t);
        json_t *fn = json_object_get(json_array_get(tc, 0), "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        if (name)
            fprintf(t->out, "\n[tool call %s] ", name);
        if (args)
            fputs(args, t->out);
    }
    fflush(t->out);
}

static void on_line(turn *t, const char *line, size_t len)
{
    if (len < 6 || strncmp(line, "data:", 5))
        return;
    const char *p = line + 5;
    while (*p == ' ')
        p++;
    if (!strncmp(p, "[DONE]", 6)) {
        t->done = true;
        return;
    }
    json_t *j = cv_json_parse(p, len - (size_t)(p - line), NULL);
    if (!j)
        return;
    json_t *err = json_object_get(j, "error");
    if (err) {
        end_reasoning(t);
        const char *m = json_string_value(json_object_get(err, "message"));
        fprintf(t->out, "\n[error: %s]", m ? m : "the server failed this answer");
        t->failed = true;
    }
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
    if (ch)
        on_delta(t, json_object_get(ch, "delta"));
    json_t *u = json_object_get(j, "usage");
    if (json_is_object(u)) {
        t->n_prompt = json_integer_value(json_object_get(u, "prompt_tokens"));
        t->n_gen = json_integer_value(json_object_get(u, "completion_tokens"));
    }
    json_decref(j);
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    turn *t = ud;
    size_t len = size * n;
    if (t->status != 200) {
        if (t->err_body.len < 8192)
            cv_buf_append(&t->err_body, p, len);
        return len;
    }
    cv_buf_append(&t->sse, p, len);
    size_t start = 0;
    for (size_t i = 0; i < t->sse.len; i++) {
        if (t->sse.data[i] != '\n')
            continue;
        size_t e = i;
        if (e > start && t->sse.data[e - 1] == '\r')
            e--;
        t->sse.data[e] = 0;
        on_line(t, t->sse.data + start, e - start);
        start = i + 1;
    }
    cv_buf_consume(&t->sse, start);
    return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    turn *t = ud;
    if (size * n > 5 && !strncmp(p, "HTTP/", 5)) {
        const char *sp = memchr(p, ' ', size * n);
        if (sp)
            t->status = strtol(sp + 1, NULL, 10);
    }
    return size * n;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    return interrupted || quitting;
}

static void add_sampling(json_t *body, const chat_opts *o)
{
    if (o->temperature >= 0) json_object_set_new(body, "temperature", json_real(o->temperature));
    if (o->top_p >= 0) json_object_set_new(body, "top_p", json_real(o->top_p));
    if (o->min_p >= 0) json_object_set_new(body, "min_p", json_real(o->min_p));
    if (o->repeat_penalty >= 0) json_object_set_new(body, "repetition_penalty", json_real(o->repeat_penalty));
    if (o->top_k >= 0) json_object_set_new(body, "top_k", json_integer(o->top_k));
    if (o->max_tokens > 0) json_object_set_new(body, "max_tokens", json_integer(o->max_tokens));
    if (o->has_seed) json_object_set_new(body, "seed", json_integer(o->seed));
    if (o->think >= 0)
        json_object_set_new(body, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", o->think));
}

/* Sends the conversation, streams the answer to out, and returns the
 * answer's text (caller frees) or NULL when the turn failed. */
static char *ask(const char *base, const char *model, const chat_opts *o, json_t *messages, FILE *out, bool styled)
{
    json_t *body = json_pack("{s:s, s:O, s:b, s:{s:b}}", "model", model, "messages", messages, "stream", 1,
                             "stream_options", "include_usage", 1);
    add_sampling(body, o);
    char *payload = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char url[600], auth[1100];
    snprintf(url, sizeof url, "%s/v1/chat/completions", base);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (o->api_key && *o->api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->api_key);
        h = curl_slist_append(h, auth);
    }
    turn t = { .out = out, .styled = styled, .hide_reasoning = o->hide_reasoning, .t_start = cv_now_s() };
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    interrupted = 0;
    CURLcode cc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    free(payload);
    end_reasoning(&t);
    char *answer = NULL;
    if (cc == CURLE_ABORTED_BY_CALLBACK) {
        fputs(styled ? DIM " [stopped]" RESET "\n" : "\n[stopped]\n", out);
        answer = cv_buf_steal(&t.content);
    } else if (cc != CURLE_OK) {
        fprintf(stderr, "corvid chat: %s: %s\n", url, curl_easy_strerror(cc));
    } else if (t.status != 200) {
        json_t *j = t.err_body.len ? cv_json_parse(t.err_body.data, t.err_body.len, NULL) : NULL;
        const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        fprintf(stderr, "corvid chat: HTTP %ld: %s\n", t.status, m ? m : (t.err_body.data ? t.err_body.data : ""));
        json_decref(j);
    } else if (t.failed) {
        fputc('\n', out); /* a failed answer is not part of the conversation */
    } else {
        fputc('\n', out);
        answer = cv_buf_steal(&t.content);
        if (!answer)
            answer = cv_xstrdup("");
    }
    fflush(out);
    if (o->verbose && answer) {
        double now = cv_now_s();
        double gen_s = t.t_first > 0 ? now - t.t_first : 0;
        fprintf(stderr, "[prompt %lld tokens, %lld generated in %.2f s (%.1f tokens/s), first token after %.0f ms]\n",
                (long long)t.n_prompt, (long long)t.n_gen, now - t.t_start,
                gen_s > 0 && t.n_gen > 1 ? (double)(t.n_gen - 1) / gen_s : 0.0,
                t.t_first > 0 ? (t.t_first - t.t_start) * 1000 : 0.0);
    }
    cv_buf_free(&t.sse);
    cv_buf_free(&t.content);
    cv_buf_free(&t.err_body);
    return answer;
}

/* ---- the conversation ---- */

static json_t *conversation(const char *system, json_t *history)
{
    json_t *m = json_array();
    if (system && *system)
        json_array_append_new(m, json_pack("{s:s, s:s}", "role", "system", "content", system));
    json_array_extend(m, history);
    return m;
}

/* Reads one line without its newline. Returns -1 at EOF, -2 when a signal
 * interrupted the read. */
static ssize_t read_line(char **line, size_t *cap)
{
    errno = 0;
    ssize_t n = getline(line, cap, stdin);
    if (n < 0) {
        if (errno == EINTR) {
            clearerr(stdin);
            return -2;
        }
        return -1;
    }
    while (n && ((*line)[n - 1] == '\n' || (*line)[n - 1] == '\r'))
        (*line)[--n] = 0;
    return n;
}

static void help(void)
{
    fprintf(stderr, "  /system TEXT   set the system prompt (/system alone clears it)\n"
                    "  /reset         forget the conversation (the system prompt stays)\n"
                    "  /exit          quit (also /quit, /bye, Ctrl-D)\n"
                    "  \"\"\"            on its own line: start or end a multi-line message\n"
                    "  Ctrl-C         stop the answer being written\n");
}

static int chat_loop(const char *base, const char *model, chat_opts *o)
{
    bool tty_in = isatty(STDIN_FILENO), tty_out = isatty(STDOUT_FILENO);
    bool styled = tty_out && !getenv("NO_COLOR");
    char *system = o->system ? cv_xstrdup(o->system) : NULL;
    json_t *history = json_array();
    char *line = NULL;
    size_t cap = 0;
    cv_buf msg = { 0 };
    bool multi = false;
    if (tty_in)
        fprintf(stderr, "chatting with %s (/help for commands, Ctrl-D to quit)\n", model);
    while (!quitting) {
        if (tty_in) {
            fputs(multi ? "... " : ">>> ", stdout);
            fflush(stdout);
        }
        ssize_t n = read_line(&line, &cap);
        if (n == -2) {
            if (quitting)
                break;
            interrupted = 0;
            cv_buf_reset(&msg);
            multi = false;
            fputs("\n(Ctrl-D or /exit quits)\n", stderr);
            continue;
        }
        if (n == -1)
            break;
        if (!strcmp(line, "\"\"\"")) {
            multi = !multi;
            if (multi)
                continue;
        } else if (multi) {
            if (msg.len)
                cv_buf_putc(&msg, '\n');
            cv_buf_puts(&msg, line);
            continue;
        } else if (line[0] == '/' && !msg.len) {
            char *arg = line + strcspn(line, " ");
            size_t cmd_len = (size_t)(arg - line);
            while (*arg == ' ')
                arg++;
            if ((cmd_len == 5 && !strncmp(line, "/exit", 5)) || (cmd_len == 5 && !strncmp(line, "/quit", 5)) ||
                (cmd_len == 4 && !strncmp(line, "/bye", 4)))
                break;
            if ((cmd_len == 6 && !strncmp(line, "/reset", 6)) || (cmd_len == 6 && !strncmp(line, "/clear", 6))) {
                json_array_clear(history);
                fputs("(conversation cleared)\n", stderr);
            } else if (cmd_len == 7 && !strncmp(line, "/system", 7)) {
                free(system);
                system = *arg ? cv_xstrdup(arg) : NULL;
                fputs(system ? "(system prompt set)\n" : "(system prompt cleared)\n", stderr);
            } else if ((cmd_len == 5 && !strncmp(line, "/help", 5)) || (cmd_len == 2 && !strncmp(line, "/?", 2))) {
                help();
            } else {
                fprintf(stderr, "unknown command %.*s; /help lists them\n", (int)cmd_len, line);
            }
            continue;
        } else {
            cv_buf_puts(&msg, line);
        }
        if (!msg.len)
            continue;
        json_t *user = json_pack("{s:s, s:s%}", "role", "user", "content", msg.data, msg.len);
        json_array_append(history, user);
        json_t *conv = conversation(system, history);
        char *answer = ask(base, model, o, conv, stdout, styled);
        json_decref(conv);
        if (answer) {
            json_array_append_new(history, json_pack("{s:s, s:s}", "role", "assistant", "content", answer));
            free(answer);
        } else {
            json_array_remove(history, json_array_size(history) - 1); /* the turn did not happen */
        }
        json_decref(user);
        cv_buf_reset(&msg);
        if (tty_out)
            fputc('\n', stdout);
    }
    if (tty_in && !quitting)
        fputc('\n', stdout);
    free(line);
    free(system);
    cv_buf_free(&msg);
    json_decref(history);
    return 0;
}

/* ---- the command ---- */

static int seed(void *opts, const char *v, cv_err *err)
{
    chat_opts *o = opts;
    char *end;
    errno = 0;
    o->seed = strtoll(v, &end, 10);
    if (errno || *end || end == v)
        return cv_err_set(err, CV_EINVAL, "'%s' must be an integer", v);
    o->has_seed = true;
    return 0;
}

#define O(field) offsetof(chat_opts, field)
static const cv_flag flags[] = {
    CV_FLAG_ROW("--url", NULL, CV_FLAG_STR, O(url), 0, 0, "URL",
      "join a running server instead of starting one for MODEL"),
    CV_FLAG_ROW("--api-key", NULL, CV_FLAG_STR, O(api_key), 0, 0, "KEY",
      "with --url: its key (default: env CORVID_API_KEY)"),
    CV_FLAG_ROW("--system", NULL, CV_FLAG_STR, O(system), 0, 0, "TEXT", "the system prompt (/system TEXT changes it)"),
    CV_FLAG_ROW("--think", NULL, CV_FLAG_SET, O(think), 1, 0, NULL, "thinking on (enable_thinking)"),
    CV_FLAG_ROW("--no-think", NULL, CV_FLAG_SET, O(think), 0, 0, NULL, "thinking off (default: the template's)"),
    CV_FLAG_ROW("--hide-reasoning", NULL, CV_FLAG_BOOL, O(hide_reasoning), 0, 0, NULL, "do not print the reasoning"),
    CV_FLAG_ROW("--temperature", NULL, CV_FLAG_F64, O(temperature), 0, 2, "T",
      "sampling (default: the alias's, else the server's)"),
    CV_FLAG_ROW("--top-p", NULL, CV_FLAG_F64, O(top_p), 0, 1, "P", "nucleus sampling"),
    CV_FLAG_ROW("--top-k", NULL, CV_FLAG_I32, O(top_k), 0, 1 << 20, "K", "the K most likely tokens only"),
    CV_FLAG_ROW("--min-p", NULL, CV_FLAG_F64, O(min_p), 0, 1, "P", "drop tokens below P x the top probability"),
    CV_FLAG_ROW("--repeat-penalty", NULL, CV_FLAG_F64, O(repeat_penalty), 0, 10, "R", "penalise repeated tokens"),
    CV_FLAG_FN_ROW("--seed", NULL, "N", "the sampler's seed", seed, false),
    CV_FLAG_ROW("--max-tokens", NULL, CV_FLAG_I32, O(max_tokens), 1, 1 << 24, "N", "tokens an answer at most"),
    CV_FLAG_ROW("--ctx", NULL, CV_FLAG_I32, O(n_ctx), 256, 1 << 24, "N", "the context of the server chat starts"),
    CV_FLAG_ROW("--verbose", "-v", CV_FLAG_BOOL, O(verbose), 0, 0, NULL, "tokens and speed after each turn"),
};
#undef O
static const cv_cli_spec spec = {
    .name = "chat", .args = "(MODEL | --url URL)", .max_args = 1, .flags = flags, .n_flags = CV_ARRAY_LEN(flags),
    .notes = "In the chat: /system TEXT, /reset, /exit, \"\"\" for multi-line messages; Ctrl-C stops an answer."
};

int cv_cmd_chat(int argc, char **argv)
{
    chat_opts o = { .think = -1, .temperature = -1, .top_p = -1, .min_p = -1, .repeat_penalty = -1, .top_k = -1,
                    .api_key = getenv("CORVID_API_KEY") };
    int n, status;
    if (!cv_cli_parse(&spec, &o, argc, argv, &n, &status))
        return status;
    o.model = n ? argv[1] : NULL;
    if (!o.model == !o.url)
        return cv_cli_usage_error(&spec, o.url ? "give MODEL or --url, not both"
                                             : "MODEL is missing (or --url of a running server)");

    struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART: Ctrl-C interrupts a read */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    curl_global_init(CURL_GLOBAL_DEFAULT);

    char base[512], log[PATH_MAX], model_id[256] = "";
    pid_t child = 0;
    cv_err err = { 0 };
    int rc = 1;
    cv_buf body = { 0 };
    if (o.url) {
        snprintf(base, sizeof base, "%s", o.url);
        size_t len = strlen(base);
        while (len && base[len - 1] == '/')
            base[--len] = 0;
        if (len > 3 && !strcmp(base + len - 3, "/v1"))
            base[len - 3] = 0; /* accept the OpenAI-style base URL too */
    } else {
        const cv_model_alias *al = cv_model_alias_find(o.model);
        if (al) { /* the model authors' sampling, unless flags say otherwise */
            if (o.temperature < 0 && al->temperature > 0) o.temperature = al->temperature;
            if (o.top_p < 0 && al->top_p > 0) o.top_p = al->top_p;
            if (o.top_k < 0 && al->top_k > 0) o.top_k = al->top_k;
            if (o.min_p < 0 && al->min_p > 0) o.min_p = al->min_p;
            if (o.repeat_penalty < 0 && al->repeat_penalty > 0) o.repeat_penalty = al->repeat_penalty;
        }
        char path[PATH_MAX], dir[PATH_MAX - 64];
        cv_pull_opts po = { .progress = -1 };
        if (cv_model_ensure(o.model, &po, path, sizeof path, &err) || cv_cli_state_dir(dir, sizeof dir, &err)) {
            fprintf(stderr, "corvid chat: %s\n", err.msg);
            goto done;
        }
        snprintf(log, sizeof log, "%s/chat-%d.log", dir, (int)getpid());
        /* A private server: loopback, a free port and a random key. */
        unsigned char rnd[16];
        char key[40];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
            fprintf(stderr, "corvid chat: no random bytes for the server's key\n");
            goto done;
        }
        for (int i = 0; i < 16; i++)
            snprintf(key + 2 * i, 3, "%02x", rnd[i]);
        o.api_key = key;
        int port = cv_cli_free_port();
        const char *served = al ? al->name : NULL;
        long n_ctx = o.n_ctx ? o.n_ctx : (al ? al->n_ctx : 0);
        cv_serve_child sc = { .model_path = path, .served_name = served, .host = "127.0.0.1", .port = port,
                              .n_ctx = n_ctx, .api_key = key, .log_path = log, .die_with_parent = true };
        if (isatty(STDERR_FILENO))
            fprintf(stderr, "loading %s ...\n", path);
        if (port <= 0 || cv_serve_child_start(&sc, CV_LAUNCH_READY_TIMEOUT_S, &child, &err)) {
            fprintf(stderr, "corvid chat: %s\n", port <= 0 ? "no free loopback port" : err.msg);
            unlink(log);
            goto done;
        }
        snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
        o.api_key = cv_xstrdup(key); /* outlives this block */
    }
    char url[600];
    snprintf(url, sizeof url, "%s/v1/models", base);
    long st = cv_cli_http_get(url, o.api_key, 10000, &body);
    json_t *j = st == 200 ? cv_json_parse(body.data, body.len, NULL) : NULL;
    const char *id = json_string_value(json_object_get(json_array_get(json_object_get(j, "data"), 0), "id"));
    if (id)
        snprintf(model_id, sizeof model_id, "%s", id);
    json_decref(j);
    if (!model_id[0]) {
        fprintf(stderr, "corvid chat: %s answered %s%s\n", url, st ? "HTTP " : "nothing",
                st == 401 ? "401: it needs an API key (--api-key or CORVID_API_KEY)" : st ? "without a model" : "");
        goto done;
    }
    rc = chat_loop(base, model_id, &o);
done:
    cv_buf_free(&body);
    if (child > 0) {
        kill(child, SIGTERM);
        waitpid(child, NULL, 0);
        unlink(log);
        free((char *)o.api_key);
    }
    return rc;
}
