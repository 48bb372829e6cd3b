/* test_cli_cmds.c — the model and client commands as a user runs them: the
 * corvid binary of this build as a child process, against the fake hub
 * (hub_fake.h, in this process) and, for launch, the real HTTP server over
 * the test backend (tests/server/fake_serve) with fake agent clients
 * (fake_client.c) that read their configuration the way the real ones do and
 * send a real request with it.
 *
 * Covered: pull's progress bar on a terminal (a pty) and plain lines on a
 * pipe, the path on stdout, exit codes and messages; ls (table and --json)
 * over real GGUFs, an alias-named file, a partial and an invalid file; rm and
 * its refusal outside the store; recipe; launch for every client against a
 * running server with an API key, its errors, and starting `corvid serve`
 * itself (with --small: both models, and Claude Code given the pair).
 * Waits are bounded loops on observable state; nothing is timed. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include "test.h"

#include "base/base.h"
#include "hub_fake.h"
#include "proc.h"

#ifndef CV_CORVID_BIN
#error "CV_CORVID_BIN must name the corvid binary under test"
#endif

static char tmp[256], store[300], bin_dir[300], state_dir[300], report[300];
static cv_buf q4;
static hub_fake *hub;
static hub_file files[3];
static char hub_url[64];

#define CORVID(...) ((const char *const[]){ CV_CORVID_BIN, __VA_ARGS__, NULL })

/* ---- every command of the table ---- */

/* Walks the command table as `corvid help` prints it, so a new command is
 * covered the day it gets a row: its --help exits 0 with its usage (the
 * same text `corvid help NAME` prints), and an unknown flag exits 2 naming
 * the flag, with the usage. */
TEST(every_command_prints_its_usage_for_help_and_rejects_an_unknown_flag)
{
    proc_out po;
    run(CORVID("help"), NULL, &po);
    CHECK_EQ_INT(po.status, 0);
    const char *p = po.out.data ? strstr(po.out.data, "commands:\n") : NULL;
    CHECK(p != NULL);
    int n = 0;
    for (p = p ? strchr(p, '\n') + 1 : NULL; p && p[0] == ' ' && p[1] == ' ' && p[2] != ' '; p = strchr(p, '\n') + 1) {
        char name[64], want[96];
        if (sscanf(p, " %63s", name) != 1)
            break;
        n++;
        snprintf(want, sizeof want, "usage: corvid %s", name);
        proc_out h, h2, bad;
        run(CORVID(name, "--help"), NULL, &h);
        CHECK_MSG(h.status == 0 && h.out.data && strstr(h.out.data, want), "%s --help: exit %d, %.300s", name, h.status,
                  h.out.data ? h.out.data : h.err.data);
        run(CORVID("help", name), NULL, &h2);
        CHECK_MSG(h2.status == 0 && h.out.data && h2.out.data && !strcmp(h.out.data, h2.out.data),
                  "corvid help %s differs from %s --help", name, name);
        run(CORVID(name, "--no-such-flag"), NULL, &bad);
        CHECK_MSG(bad.status == 2 && bad.err.data && strstr(bad.err.data, "unknown flag '--no-such-flag'") &&
                      strstr(bad.err.data, want),
                  "%s --no-such-flag: exit %d, %.300s", name, bad.status, bad.err.data ? bad.err.data : "");
        proc_out_free(&h);
        proc_out_free(&h2);
        proc_out_free(&bad);
    }
    CHECK_MSG(n >= 20, "corvid help listed %d commands", n);
    proc_out_free(&po);
}

/* ---- pull ---- */

TEST(pull_on_a_terminal_draws_a_bar_and_prints_the_path)
{
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    if (pid == 0) {
        setenv("HF_ENDPOINT", hub_url, 1);
        setenv("CORVID_MODELS", store, 1);
        execl(CV_CORVID_BIN, CV_CORVID_BIN, "pull", "test/tiny-qwen3-GGUF/tiny-qwen3-Q4_K_M.gguf", (char *)NULL);
        _exit(127);
    }
    cv_buf all = { 0 };
    for (;;) {
        char buf[4096];
        ssize_t n = read(master, buf, sizeof buf);
        if (n <= 0)
            break; /* EIO once the child is gone */
        cv_buf_append(&all, buf, (size_t)n);
    }
    int st;
    waitpid(pid, &st, 0);
    close(master);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    const char *s = all.data ? all.data : "";
    CHECK_MSG(strchr(s, '\r') && strstr(s, "100% [==============================]"), "no bar in: %s", s);
    CHECK(strstr(s, "sha256 verified") != NULL);
    CHECK(strstr(s, "GGUF qwen3 Q4_K_M") != NULL);
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s/test/tiny-qwen3-GGUF/tiny-qwen3-Q4_K_M.gguf", store);
    CHECK_MSG(strstr(s, want) != NULL, "path missing: %s", s);
    cv_buf_free(&all);
}

TEST(pull_on_a_pipe_prints_plain_lines_and_only_the_path_on_stdout)
{
    const char *env[] = { "HF_ENDPOINT=", NULL, NULL };
    char e0[128], e1[400];
    snprintf(e0, sizeof e0, "HF_ENDPOINT=%s", hub_url);
    snprintf(e1, sizeof e1, "CORVID_MODELS=%s", store);
    env[0] = e0;
    env[1] = e1;
    proc_out po;
    run(CORVID("pull", "test/tiny-qwen3-GGUF:Q8_0"), env, &po);
    CHECK_EQ_INT(po.status, 0);
    CHECK_MSG(!strchr(po.err.data, '\r') && strstr(po.err.data, "(100%)"), "stderr: %s", po.err.data);
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s/test/tiny-qwen3-GGUF/tiny-qwen3-Q8_0.gguf\n", store);
    CHECK_EQ_STR(po.out.data, want);
    proc_out_free(&po);

    /* Pulling it again fetches nothing and says so. */
    hub_fake_reset_log(hub);
    run(CORVID("pull", "test/tiny-qwen3-GGUF:Q8_0"), env, &po);
    CHECK(po.status == 0 && strstr(po.err.data, "already in the store"));
    CHECK_EQ_INT(hub_fake_n_requests(hub), 0);
    proc_out_free(&po);
}

TEST(pull_failures_exit_1_with_the_reason_and_usage_errors_exit_2)
{
    char e0[128], e1[400];
    snprintf(e0, sizeof e0, "HF_ENDPOINT=%s", hub_url);
    snprintf(e1, sizeof e1, "CORVID_MODELS=%s", store);
    const char *env[] = { e0, e1, "-HF_TOKEN", NULL };
    proc_out po;
    run(CORVID("pull", "nobody/nothing-GGUF:Q4_K_M"), env, &po);
    CHECK_EQ_INT(po.status, 1);
    CHECK_MSG(strstr(po.err.data, "HF_TOKEN") != NULL, "%s", po.err.data);
    proc_out_free(&po);
    run(CORVID("pull", "test/tiny-qwen3-GGUF:Q2_K"), env, &po);
    CHECK(po.status == 1 && strstr(po.err.data, "no GGUF of quant Q2_K"));
    proc_out_free(&po);
    run(CORVID("pull"), env, &po);
    CHECK(po.status == 2 && strstr(po.err.data, "usage:"));
    proc_out_free(&po);
    run(CORVID("pull", "--progress", "sideways", "x"), env, &po);
    CHECK_EQ_INT(po.status, 2);
    proc_out_free(&po);
}

/* ---- ls and rm ---- */

static void copy_into_store(const char *rel, const void *data, size_t len)
{
    char path[PATH_MAX], cmd[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", store, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    CHECK(system(cmd) == 0);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        fwrite(data, 1, len, f);
        fclose(f);
    }
}

TEST(ls_shows_each_model_with_what_its_header_says)
{
    /* The pulls above left two real files; add one under an alias's name, a
     * partial and a file that is not GGUF. */
    copy_into_store("Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf", q4.data, q4.len);
    copy_into_store("org/repo/half-Q4_0.gguf.part", q4.data, q4.len / 4);
    char meta[128];
    snprintf(meta, sizeof meta, "{\"url\":\"u\",\"total\":%zu,\"etag\":\"\"}", q4.len);
    copy_into_store("org/repo/half-Q4_0.gguf.part.json", meta, strlen(meta));
    copy_into_store("org/repo/broken-Q4_0.gguf", "GGUF\x03\0\0\0truncated", 17);
    char e1[400];
    snprintf(e1, sizeof e1, "CORVID_MODELS=%s", store);
    const char *env[] = { e1, NULL };
    proc_out po;
    run(CORVID("ls"), env, &po);
    CHECK_EQ_INT(po.status, 0);
    const char *s = po.out.data;
    CHECK(strstr(s, "NAME") && strstr(s, "QUANT") && strstr(s, "CONTEXT"));
    /* One line per model, its facts from the GGUF header. */
    const char *line = strstr(s, "test/tiny-qwen3-GGUF/tiny-qwen3-Q4_K_M ");
    CHECK_MSG(line != NULL, "%s", s);
    if (line) {
        char l[512];
        snprintf(l, sizeof l, "%.*s", (int)strcspn(line, "\n"), line);
        CHECK_MSG(strstr(l, "Q4_K_M") && strstr(l, "qwen3") && strstr(l, "2048") && strstr(l, "1.9 MB"), "%s", l);
    }
    CHECK_MSG(strstr(s, "qwen3-0.6b ") != NULL, "alias name missing: %s", s);
    CHECK_MSG(strstr(s, "(partial)") && strstr(s, "25%"), "partial missing: %s", s);
    CHECK_MSG(strstr(s, "(invalid)") != NULL, "invalid file not marked: %s", s);
    proc_out_free(&po);

    run(CORVID("ls", "--json"), env, &po);
    CHECK_EQ_INT(po.status, 0);
    json_t *j = cv_json_parse(po.out.data, po.out.len, NULL);
    CHECK(json_is_array(j) && json_array_size(j) == 5);
    size_t i;
    json_t *e;
    int seen = 0;
    json_array_foreach(j, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *state = json_string_value(json_object_get(e, "state"));
        if (!strcmp(name, "test/tiny-qwen3-GGUF/tiny-qwen3-Q8_0")) {
            seen++;
            CHECK_EQ_STR(state, "ok");
            CHECK_EQ_STR(json_string_value(json_object_get(e, "quant")), "Q8_0");
            CHECK_EQ_STR(json_string_value(json_object_get(e, "arch")), "qwen3");
            CHECK_EQ_INT(JSON_INT(e, "context"), 2048);
            CHECK(JSON_INT(e, "params") > 1000000);
        } else if (!strcmp(name, "org/repo/broken-Q4_0")) {
            seen++;
            CHECK_EQ_STR(state, "invalid");
            CHECK(json_string_value(json_object_get(e, "error")) != NULL);
        } else if (!strcmp(name, "org/repo/half-Q4_0")) {
            seen++;
            CHECK_EQ_STR(state, "partial");
            CHECK_EQ_INT(JSON_INT(e, "total"), (json_int_t)q4.len);
        }
    }
    CHECK_EQ_INT(seen, 3);
    json_decref(j);
    proc_out_free(&po);

    run(CORVID("ls", "--aliases"), env, &po);
    CHECK(po.status == 0 && strstr(po.out.data, "qwen2.5-coder-7b") && strstr(po.out.data, "llama3.2-3b"));
    const char *q = strstr(po.out.data, "qwen3-0.6b ");
    CHECK(q && !strncmp(q + 25, "yes", 3)); /* it is pulled */
    proc_out_free(&po);
}

TEST(info_and_tokenize_find_a_pulled_model_by_its_names)
{
    char e1[400];
    snprintf(e1, sizeof e1, "CORVID_MODELS=%s", store);
    const char *env[] = { e1, NULL };
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s/test/tiny-qwen3-GGUF/tiny-qwen3-Q8_0.gguf: GGUF v3", store);
    proc_out po;
    run(CORVID("info", "test/tiny-qwen3-GGUF:Q8_0"), env, &po);
    CHECK_MSG(po.status == 0 && strstr(po.out.data, want), "%s%s", po.out.data, po.err.data);
    proc_out_free(&po);
    run(CORVID("info", "tiny-qwen3-Q8_0"), env, &po);
    CHECK(po.status == 0 && strstr(po.out.data, want));
    proc_out_free(&po);
    run(CORVID("tokenize", "tiny-qwen3-Q8_0", "--count", "Hello world"), env, &po);
    CHECK_MSG(po.status == 0 && atoi(po.out.data) > 0, "%s%s", po.out.data, po.err.data);
    proc_out_free(&po);
    run(CORVID("info", "./no-such.gguf"), env, &po); /* a path's own error is unchanged */
    CHECK(po.status == 1 && strstr(po.err.data, "no-such.gguf"));
    proc_out_free(&po);
}

TEST(rm_deletes_models_and_partials_and_nothing_outside_the_store)
{
    char e1[400];
    snprintf(e1, sizeof e1, "CORVID_MODELS=%s", store);
    const char *env[] = { e1, NULL };
    proc_out po;
    run(CORVID("rm", "qwen3-0.6b"), env, &po);
    CHECK_MSG(po.status == 0 && strstr(po.out.data, "deleted"), "%s%s", po.out.data, po.err.data);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/Qwen", store);
    struct stat st;
    CHECK(stat(p, &st) != 0); /* emptied folders are gone */
    proc_out_free(&po);
    run(CORVID("rm", "org/repo/half-Q4_0.gguf"), env, &po);
    CHECK(po.status == 0 && strstr(po.out.data, "partial download"));
    proc_out_free(&po);
    /* A file outside the store is never deleted. */
    char outside[PATH_MAX];
    snprintf(outside, sizeof outside, "%s/mine.gguf", tmp);
    FILE *f = fopen(outside, "w");
    if (f) fclose(f);
    run(CORVID("rm", outside), env, &po);
    CHECK(po.status == 1 && strstr(po.err.data, "not in the store"));
    CHECK(stat(outside, &st) == 0);
    proc_out_free(&po);
    run(CORVID("rm", "qwen3-0.6b"), env, &po); /* already gone */
    CHECK(po.status == 1 && strstr(po.err.data, "not in the store"));
    proc_out_free(&po);
}

/* ---- recipe ---- */

TEST(recipe_prints_each_client_setup_and_refuses_unknown_clients)
{
    proc_out po;
    run(CORVID("recipe", "claude-code", "--port", "8123", "--model", "m1", "--ctx", "65536"), NULL, &po);
    CHECK_EQ_INT(po.status, 0);
    const char *s = po.out.data;
    CHECK(strstr(s, "export ANTHROPIC_BASE_URL=http://127.0.0.1:8123 ") != NULL);
    CHECK(strstr(s, "export ANTHROPIC_DEFAULT_HAIKU_MODEL=m1 ") != NULL);
    CHECK(strstr(s, "export CLAUDE_CODE_MAX_OUTPUT_TOKENS=8192 ") != NULL);
    CHECK(strstr(s, "unset ANTHROPIC_API_KEY") != NULL);
    proc_out_free(&po);
    run(CORVID("recipe", "codex", "--host", "0.0.0.0"), NULL, &po);
    CHECK(strstr(po.out.data, "base_url = \"http://127.0.0.1:8000/v1\"") != NULL); /* loopback, with /v1 */
    CHECK(strstr(po.out.data, "wire_api = \"responses\"") != NULL);
    proc_out_free(&po);
    static const char *clients[] = { "opencode", "qwen-code", "aider", "openai-sdk", "anthropic-sdk", "claude", "qwen" };
    for (size_t i = 0; i < CV_ARRAY_LEN(clients); i++) {
        run(CORVID("recipe", clients[i]), NULL, &po);
        CHECK_MSG(po.status == 0 && strstr(po.out.data, "http://127.0.0.1:8000"), "%s: %s", clients[i], po.err.data);
        proc_out_free(&po);
    }
    run(CORVID("recipe"), NULL, &po);
    CHECK(po.status == 0 && strstr(po.out.data, "anthropic-sdk"));
    proc_out_free(&po);
    run(CORVID("recipe", "vim"), NULL, &po);
    CHECK(po.status == 2 && strstr(po.err.data, "no client 'vim'"));
    proc_out_free(&po);
    run(CORVID("recipe", "codex", "--port", "99999"), NULL, &po);
    CHECK_EQ_INT(po.status, 2);
    proc_out_free(&po);
}

/* ---- launch ---- */

static pid_t serve_pid;
static int serve_port;
static const char *SERVE_KEY = "launch-test-key";

static json_t *read_report(void)
{
    cv_buf b = { 0 };
    json_t *j = NULL;
    if (cv_read_file(report, &b, 1 << 20, NULL) == 0)
        j = cv_json_parse(b.data, b.len, NULL);
    cv_buf_free(&b);
    return j;
}

static const char *rep_env(json_t *r, const char *k)
{
    return json_string_value(json_object_get(json_object_get(r, "env"), k));
}

TEST(launch_configures_every_client_for_the_running_server_and_execs_it)
{
    char port[16], path_env[PATH_MAX + 8], key_env[128], rep_env_s[400], st_env[400];
    snprintf(port, sizeof port, "%d", serve_port);
    snprintf(path_env, sizeof path_env, "PATH=%s:%s", bin_dir, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    snprintf(key_env, sizeof key_env, "CORVID_API_KEY=%s", SERVE_KEY);
    snprintf(rep_env_s, sizeof rep_env_s, "FAKE_CLIENT_REPORT=%s", report);
    snprintf(st_env, sizeof st_env, "XDG_STATE_HOME=%s", state_dir);
    const char *env[] = { path_env, key_env, rep_env_s, st_env, "ANTHROPIC_API_KEY=sk-real-key-must-not-leak", NULL };
    static const char *clients[] = { "claude-code", "codex", "opencode", "qwen-code", "aider" };
    for (size_t i = 0; i < CV_ARRAY_LEN(clients); i++) {
        unlink(report);
        proc_out po;
        run(CORVID("launch", clients[i], "--port", port, "--", "--user-flag", "two words"), env, &po);
        CHECK_MSG(po.status == 0, "%s: exit %d: %s", clients[i], po.status, po.err.data);
        json_t *r = read_report();
        CHECK_MSG(r != NULL, "%s: the client did not run", clients[i]);
        if (r) {
            json_t *req = json_object_get(r, "request");
            CHECK_MSG(JSON_INT(req, "status") == 200, "%s: request %s -> %lld: %s",
                      clients[i], json_string_value(json_object_get(req, "url")),
                      (long long)JSON_INT(req, "status"),
                      json_string_value(json_object_get(req, "body")));
            /* The user's arguments come last, unchanged. */
            json_t *av = json_object_get(r, "argv");
            size_t n = json_array_size(av);
            CHECK(n >= 2 && !strcmp(json_string_value(json_array_get(av, n - 2)), "--user-flag") &&
                  !strcmp(json_string_value(json_array_get(av, n - 1)), "two words"));
            if (!strcmp(clients[i], "claude-code")) {
                CHECK(rep_env(r, "ANTHROPIC_API_KEY") == NULL);
                CHECK_EQ_STR(rep_env(r, "CLAUDE_CODE_MAX_CONTEXT_TOKENS"), "32768");
                CHECK_EQ_STR(rep_env(r, "ANTHROPIC_MODEL"), rep_env(r, "ANTHROPIC_DEFAULT_HAIKU_MODEL"));
            }
            if (!strcmp(clients[i], "codex"))
                CHECK_EQ_STR(json_string_value(json_object_get(r, "wire_api")), "responses");
            json_decref(r);
        }
        proc_out_free(&po);
    }
    /* An SDK program named after -- gets the SDK's variables. */
    unlink(report);
    proc_out po;
    char prog[PATH_MAX];
    snprintf(prog, sizeof prog, "%s/my-sdk-app", bin_dir);
    run(CORVID("launch", "openai-sdk", "--port", port, "--", prog), env, &po);
    CHECK_MSG(po.status == 0, "openai-sdk: %s", po.err.data);
    json_t *r = read_report();
    CHECK(r && JSON_INT(json_object_get(r, "request"), "status") == 200);
    json_decref(r);
    proc_out_free(&po);
    unlink(report);
    run(CORVID("launch", "anthropic-sdk", "--port", port, "--", prog), env, &po);
    CHECK_MSG(po.status == 0, "anthropic-sdk: %s", po.err.data);
    proc_out_free(&po);
}

TEST(launch_errors_name_what_is_missing)
{
    char port[16], path_env[PATH_MAX + 8], rep_env_s[400], st_env[400], free_port[16];
    snprintf(port, sizeof port, "%d", serve_port);
    snprintf(path_env, sizeof path_env, "PATH=%s:/usr/bin:/bin", bin_dir);
    snprintf(rep_env_s, sizeof rep_env_s, "FAKE_CLIENT_REPORT=%s", report);
    snprintf(st_env, sizeof st_env, "XDG_STATE_HOME=%s", state_dir);
    /* A port nothing listens on: bind one, close it. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    bind(s, (struct sockaddr *)&a, sizeof a);
    getsockname(s, (struct sockaddr *)&a, &al);
    snprintf(free_port, sizeof free_port, "%d", ntohs(a.sin_port));
    close(s);
    const char *env[] = { path_env, rep_env_s, st_env, "-CORVID_API_KEY", NULL };
    proc_out po;
    unlink(report);
    run(CORVID("launch", "claude-code", "--port", free_port), env, &po);
    CHECK(po.status == 1 && strstr(po.err.data, "no corvid server answers") && strstr(po.err.data, "MODEL"));
    proc_out_free(&po);
    run(CORVID("launch", "claude-code", "--port", port), env, &po); /* the server wants a key */
    CHECK_MSG(po.status == 1 && strstr(po.err.data, "API key"), "%s", po.err.data);
    proc_out_free(&po);
    const char *env2[] = { "PATH=/nonexistent", rep_env_s, NULL };
    run(CORVID("launch", "codex", "--port", port), env2, &po);
    CHECK(po.status == 1 && strstr(po.err.data, "not on PATH") && strstr(po.err.data, "@openai/codex"));
    proc_out_free(&po);
    run(CORVID("launch", "openai-sdk", "--port", port), env, &po);
    CHECK(po.status == 2 && strstr(po.err.data, "after --"));
    proc_out_free(&po);
    run(CORVID("launch", "emacs"), env, &po);
    CHECK(po.status == 2 && strstr(po.err.data, "no client 'emacs'"));
    proc_out_free(&po);
    struct stat st;
    CHECK(stat(report, &st) != 0); /* no client ran in any of these */
}

/* Starting a server: launch runs `corvid serve MODEL` and waits for /readyz.
 * Whether this build's serve can load the model decides which of two real
 * outcomes follows; each is checked in full. */
TEST(launch_starts_corvid_serve_when_none_listens)
{
    char path_env[PATH_MAX + 8], rep_env_s[400], st_env[400], free_port[16], e1[400];
    snprintf(path_env, sizeof path_env, "PATH=%s:/usr/bin:/bin", bin_dir);
    snprintf(rep_env_s, sizeof rep_env_s, "FAKE_CLIENT_REPORT=%s", report);
    snprintf(st_env, sizeof st_env, "XDG_STATE_HOME=%s", state_dir);
    snprintf(e1, sizeof e1, "CORVID_MODELS=%s", store);
    /* The server saves its prefix cache under XDG_CACHE_HOME: not the user's. */
    char cache_env[400];
    snprintf(cache_env, sizeof cache_env, "XDG_CACHE_HOME=%s/cache", tmp);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    bind(s, (struct sockaddr *)&a, sizeof a);
    getsockname(s, (struct sockaddr *)&a, &al);
    snprintf(free_port, sizeof free_port, "%d", ntohs(a.sin_port));
    close(s);
    const char *env[] = { path_env, rep_env_s, st_env, e1, cache_env, "-CORVID_API_KEY", NULL };
    unlink(report);
    proc_out po;
    /* A MODEL in the store, by its name there. */
    run(CORVID("launch", "qwen-code", "tiny-qwen3-Q4_K_M", "--port", free_port, "--ctx", "1024"), env, &po);
    CHECK_MSG(strstr(po.err.data, "starting corvid serve") != NULL, "%s", po.err.data);
    char log[PATH_MAX], pidf[PATH_MAX];
    snprintf(log, sizeof log, "%s/corvid/serve-%s.log", state_dir, free_port);
    snprintf(pidf, sizeof pidf, "%s/corvid/serve-%s.pid", state_dir, free_port);
    struct stat st;
    CHECK(stat(log, &st) == 0);
    if (po.status == 0) {
        /* serve loaded it: the client talked to the server launch started. */
        json_t *r = read_report();
        CHECK(r && JSON_INT(json_object_get(r, "request"), "status") == 200);
        CHECK_EQ_STR(rep_env(r, "OPENAI_MODEL"), "tiny-qwen3-Q4_K_M");
        json_decref(r);
        cv_buf b = { 0 };
        CHECK(cv_read_file(pidf, &b, 64, NULL) == 0);
        int pid = b.data ? atoi(b.data) : 0;
        CHECK(pid > 0 && kill(pid, SIGTERM) == 0);
        cv_buf_free(&b);
    } else {
        /* serve could not load it: launch says so with serve's own reason,
         * and does not run the client. */
        CHECK_EQ_INT(po.status, 1);
        CHECK(strstr(po.err.data, "corvid serve exited") != NULL);
        CHECK_MSG(strstr(po.err.data, "cannot serve") || strstr(po.err.data, "corvid serve:"), "%s", po.err.data);
        CHECK(stat(report, &st) != 0);
        CHECK(stat(pidf, &st) != 0);
    }
    proc_out_free(&po);
}

/* launch --small: the server it starts serves both models, Claude Code's
 * haiku variable names the small one and the main ones the large one, and
 * the server routes claude-*haiku* to the small one. */
TEST(launch_small_serves_both_models_and_gives_claude_code_the_pair)
{
    char path_env[PATH_MAX + 8], rep_env_s[400], st_env[400], free_port[16], e1[400], cache_env[400];
    snprintf(path_env, sizeof path_env, "PATH=%s:/usr/bin:/bin", bin_dir);
    snprintf(rep_env_s, sizeof rep_env_s, "FAKE_CLIENT_REPORT=%s", report);
    snprintf(st_env, sizeof st_env, "XDG_STATE_HOME=%s", state_dir);
    snprintf(e1, sizeof e1, "CORVID_MODELS=%s", store);
    snprintf(cache_env, sizeof cache_env, "XDG_CACHE_HOME=%s/cache", tmp);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    bind(s, (struct sockaddr *)&a, sizeof a);
    getsockname(s, (struct sockaddr *)&a, &al);
    snprintf(free_port, sizeof free_port, "%d", ntohs(a.sin_port));
    close(s);
    const char *env[] = { path_env, rep_env_s, st_env, e1, cache_env, "-CORVID_API_KEY", NULL };
    unlink(report);
    proc_out po;
    run(CORVID("launch", "claude-code", "tiny-qwen3-Q4_K_M", "--small", "tiny-qwen3-Q8_0", "--port", free_port, "--ctx",
               "1024"),
        env, &po);
    CHECK_MSG(po.status == 0, "launch --small: exit %d: %s", po.status, po.err.data);
    json_t *r = read_report();
    CHECK(r && JSON_INT(json_object_get(r, "request"), "status") == 200);
    CHECK_EQ_STR(rep_env(r, "ANTHROPIC_MODEL"), "tiny-qwen3-Q4_K_M");
    CHECK_EQ_STR(rep_env(r, "ANTHROPIC_DEFAULT_SONNET_MODEL"), "tiny-qwen3-Q4_K_M");
    CHECK_EQ_STR(rep_env(r, "ANTHROPIC_DEFAULT_HAIKU_MODEL"), "tiny-qwen3-Q8_0");
    json_decref(r);
    proc_out_free(&po);
    /* the server holds both, loaded */
    run(CORVID("ps", "--port", free_port, "--json"), env, &po);
    json_t *ps = cv_json_parse(po.out.data, po.out.len, NULL);
    CHECK_MSG(json_array_size(ps) == 2, "ps: %s", po.out.data);
    for (size_t i = 0; i < json_array_size(ps); i++)
        CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(ps, i), "state")), "loaded");
    json_decref(ps);
    proc_out_free(&po);
    char pidf[PATH_MAX];
    snprintf(pidf, sizeof pidf, "%s/corvid/serve-%s.pid", state_dir, free_port);
    cv_buf b = { 0 };
    CHECK(cv_read_file(pidf, &b, 64, NULL) == 0);
    int pid = b.data ? atoi(b.data) : 0;
    CHECK(pid > 0 && kill(pid, SIGTERM) == 0);
    cv_buf_free(&b);
}

int main(void)
{
    test_require_data();
    if (cv_read_file(test_data("reference/models/tiny-qwen3-gpt2-Q4_K_M.gguf"), &q4, 64u << 20, NULL))
        return 1;
    static cv_buf q8;
    if (cv_read_file(test_data("reference/models/tiny-qwen3-gpt2-Q8_0.gguf"), &q8, 64u << 20, NULL))
        return 1;
    snprintf(tmp, sizeof tmp, "/tmp/cv_test_cmds_XXXXXX");
    if (!mkdtemp(tmp))
        return 1;
    snprintf(store, sizeof store, "%s/store", tmp);
    snprintf(bin_dir, sizeof bin_dir, "%s/bin", tmp);
    snprintf(state_dir, sizeof state_dir, "%s/state", tmp);
    snprintf(report, sizeof report, "%s/report.json", tmp);
    mkdir(bin_dir, 0755);
    mkdir(state_dir, 0755);
    /* The fake clients, under the names launch runs. */
    const char *names[] = { "claude", "codex", "opencode", "qwen", "aider", "my-sdk-app" };
    for (size_t i = 0; i < CV_ARRAY_LEN(names); i++) {
        char link[PATH_MAX];
        snprintf(link, sizeof link, "%s/%s", bin_dir, names[i]);
        if (symlink(CV_FAKE_CLIENT, link) != 0)
            return 1;
    }
    unsetenv("HF_TOKEN");
    files[0] = (hub_file){ "test/tiny-qwen3-GGUF", "tiny-qwen3-Q4_K_M.gguf", q4.data, q4.len, HUB_OK, 0, false };
    files[1] = (hub_file){ "test/tiny-qwen3-GGUF", "tiny-qwen3-Q8_0.gguf", q8.data, q8.len, HUB_OK, 0, false };
    hub = hub_fake_start(files, 2, "tok");
    if (!hub || (serve_pid = start_fake_serve(CV_FAKE_SERVE, SERVE_KEY, &serve_port)) <= 0) {
        fprintf(stderr, "cannot start the fake hub or fake_serve\n");
        return 1;
    }
    snprintf(hub_url, sizeof hub_url, "http://127.0.0.1:%d", hub_fake_port(hub));

    RUN(every_command_prints_its_usage_for_help_and_rejects_an_unknown_flag);
    RUN(pull_on_a_terminal_draws_a_bar_and_prints_the_path);
    RUN(pull_on_a_pipe_prints_plain_lines_and_only_the_path_on_stdout);
    RUN(pull_failures_exit_1_with_the_reason_and_usage_errors_exit_2);
    RUN(ls_shows_each_model_with_what_its_header_says);
    RUN(info_and_tokenize_find_a_pulled_model_by_its_names);
    RUN(rm_deletes_models_and_partials_and_nothing_outside_the_store);
    RUN(recipe_prints_each_client_setup_and_refuses_unknown_clients);
    RUN(launch_configures_every_client_for_the_running_server_and_execs_it);
    RUN(launch_errors_name_what_is_missing);
    RUN(launch_starts_corvid_serve_when_none_listens);
    RUN(launch_small_serves_both_models_and_gives_claude_code_the_pair);

    stop_server(serve_pid);
    hub_fake_stop(hub);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp);
    cv_buf_free(&q4);
    cv_buf_free(&q8);
    return test_report();
}
