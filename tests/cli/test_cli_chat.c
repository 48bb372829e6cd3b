/* test_cli_chat.c — `corvid chat` driven through a pipe, as a script or a
 * user with a terminal would drive it, against the real HTTP server over the
 * test backend (tests/server/fake_serve: a byte-level model, so a prompt's
 * token count is exactly the bytes of its rendered conversation). That lets
 * each turn's prompt size prove what history was sent: multi-turn, /system,
 * /reset and multi-line messages are checked by exact token counts, not by
 * looking at chat's own state. Also: streaming output, reasoning in
 * <think> tags on a pipe and hidden with --hide-reasoning, --think reaching
 * the template, server errors, Ctrl-C stopping an answer without ending the
 * program, and `chat MODEL` starting its own server. */
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>

#include "test.h"

#include "proc.h"

#define CHAT(...) ((const char *const[]){ CV_CORVID_BIN, "chat", __VA_ARGS__, NULL })

static pid_t serve_pid;
static int serve_port;
static char url[64];
static const char *KEY = "chat-test-key";
static char tmp[256];

/* The fake backend's rendering: "<|role|>content\n" per message, then
 * "<|assistant|>" (tests/server/fake_backend.c). */
static int rendered(const char *const *turns, int n, const char *system)
{
    int len = 0;
    if (system)
        len += (int)(strlen("<|system|>") + strlen(system) + 1);
    for (int i = 0; i < n; i++)
        len += (int)(strlen(i % 2 ? "<|assistant|>" : "<|user|>") + strlen(turns[i]) + 1);
    return len + (int)strlen("<|assistant|>");
}

/* The prompt sizes --verbose printed, in order. */
static int prompt_sizes(const char *err, int *out, int max)
{
    int n = 0;
    for (const char *p = err; n < max && (p = strstr(p, "[prompt ")); p++)
        out[n++] = atoi(p + 8);
    return n;
}

TEST(turns_carry_the_history_and_slash_commands_change_it)
{
    const char *input = "[[say:Hello there]]\n"
                        "[[say:<think>pondering</think>Second answer]]\n"
                        "/system You are terse.\n"
                        "third [[say:ok3]]\n"
                        "/reset\n"
                        "\"\"\"\n"
                        "line one\n"
                        "[[say:multi ok]]\n"
                        "\"\"\"\n"
                        "\n"
                        "/bogus\n"
                        "/exit\n"
                        "[[say:never sent]]\n";
    proc_out po;
    run_input(CHAT("--url", url, "--api-key", KEY, "--verbose"), NULL, input, &po);
    CHECK_EQ_INT(po.status, 0);
    CHECK_EQ_STR(po.out.data, "Hello there\n<think>\npondering\n</think>\nSecond answer\nok3\nmulti ok\n");
    int got[8];
    int n = prompt_sizes(po.err.data, got, 8);
    CHECK_EQ_INT(n, 4);
    const char *t2[] = { "[[say:Hello there]]", "Hello there", "[[say:<think>pondering</think>Second answer]]" };
    const char *t3[] = { t2[0], t2[1], t2[2], "Second answer", "third [[say:ok3]]" };
    const char *t4[] = { "line one\n[[say:multi ok]]" };
    int want[4] = { rendered(t2, 1, NULL), rendered(t2, 3, NULL), rendered(t3, 5, "You are terse."),
                    rendered(t4, 1, "You are terse.") };
    for (int i = 0; i < CV_MIN(n, 4); i++)
        CHECK_MSG(got[i] == want[i], "turn %d: prompt %d tokens, want %d", i + 1, got[i], want[i]);
    CHECK(strstr(po.err.data, "unknown command /bogus") != NULL);
    proc_out_free(&po);
}

TEST(reasoning_can_be_hidden_and_thinking_switched_on)
{
    proc_out po;
    run_input(CHAT("--url", url, "--api-key", KEY, "--hide-reasoning"), NULL,
              "[[say:<think>secret plan</think>visible]]\n", &po);
    CHECK_EQ_INT(po.status, 0);
    CHECK_EQ_STR(po.out.data, "visible\n");
    proc_out_free(&po);
    /* --think sets enable_thinking for the template; the test backend then
     * thinks before it answers. */
    run_input(CHAT("--url", url, "--api-key", KEY, "--think"), NULL, "list the files\n", &po);
    CHECK_EQ_INT(po.status, 0);
    CHECK_MSG(!strncmp(po.out.data, "<think>\nThe user wants the files listed", 39) &&
                  strstr(po.out.data, "</think>\nThere are 3 files"),
              "%s", po.out.data);
    proc_out_free(&po);
    run_input(CHAT("--url", url, "--api-key", KEY, "--no-think"), NULL, "list the files\n", &po);
    CHECK(po.status == 0 && !strstr(po.out.data, "<think>") && strstr(po.out.data, "There are 3 files"));
    proc_out_free(&po);
}

TEST(server_errors_are_reported_and_the_chat_goes_on)
{
    proc_out po;
    run_input(CHAT("--url", url, "--api-key", "wrong"), NULL, "hi\n", &po);
    CHECK_EQ_INT(po.status, 1);
    CHECK_MSG(strstr(po.err.data, "401") && strstr(po.err.data, "API key"), "%s", po.err.data);
    proc_out_free(&po);
    /* A turn the server fails mid-answer, then a normal one with the failed
     * turn left out of the history. */
    run_input(CHAT("--url", url, "--api-key", KEY, "--verbose"), NULL, "[[fail]]\n[[say:fine]]\n", &po);
    CHECK_EQ_INT(po.status, 0);
    CHECK_MSG(strstr(po.out.data, "[error:") && strstr(po.out.data, "fine\n"), "%s", po.out.data);
    int got[4];
    const char *t[] = { "[[say:fine]]" };
    CHECK(prompt_sizes(po.err.data, got, 4) == 1 && got[0] == rendered(t, 1, NULL));
    proc_out_free(&po);
    run(CHAT("--url", "http://127.0.0.1:1"), NULL, &po);
    CHECK(po.status == 1 && strstr(po.err.data, "answered nothing"));
    proc_out_free(&po);
    run((const char *const[]){ CV_CORVID_BIN, "chat", NULL }, NULL, &po);
    CHECK(po.status == 2 && strstr(po.err.data, "MODEL is missing"));
    proc_out_free(&po);
    run(CHAT("--temperature", "9", "m"), NULL, &po);
    CHECK_EQ_INT(po.status, 2);
    proc_out_free(&po);
}

/* Ctrl-C while an answer streams: the answer stops, the program does not. */
TEST(ctrl_c_stops_the_answer_not_the_program)
{
    int in[2], out[2];
    CHECK(pipe(in) == 0 && pipe(out) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execl(CV_CORVID_BIN, CV_CORVID_BIN, "chat", "--url", url, "--api-key", KEY, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    /* 400 'a's at 20 ms each: 8 s if nobody stops it. */
    char msg[600] = "[[slow:20]][[say:";
    size_t k = strlen(msg);
    memset(msg + k, 'a', 400);
    strcpy(msg + k + 400, "]]\n");
    CHECK(write(in[1], msg, strlen(msg)) == (ssize_t)strlen(msg));
    cv_buf got = { 0 };
    char buf[512];
    while (got.len < 10) { /* some of the answer has arrived */
        ssize_t n = read(out[0], buf, sizeof buf);
        if (n <= 0)
            break;
        cv_buf_append(&got, buf, (size_t)n);
    }
    CHECK(kill(pid, SIGINT) == 0);
    const char *next = "[[say:still here]]\n/exit\n";
    CHECK(write(in[1], next, strlen(next)) == (ssize_t)strlen(next));
    close(in[1]);
    for (;;) {
        ssize_t n = read(out[0], buf, sizeof buf);
        if (n <= 0)
            break;
        cv_buf_append(&got, buf, (size_t)n);
    }
    close(out[0]);
    int st;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
    const char *s = got.data ? got.data : "";
    size_t n_a = strspn(s, "a");
    CHECK_MSG(n_a >= 10 && n_a < 400, "%zu of 400 a's were printed", n_a);
    CHECK_MSG(strstr(s, "[stopped]") && strstr(s, "still here\n"), "%s", s);
    cv_buf_free(&got);
}

/* `chat MODEL` runs its own server. Whether this build's serve can load the
 * model decides which of two real outcomes follows; each is checked. */
TEST(chat_with_a_model_starts_a_private_server_or_says_why_not)
{
    char st_env[400], e1[400];
    snprintf(st_env, sizeof st_env, "XDG_STATE_HOME=%s", tmp);
    snprintf(e1, sizeof e1, "CORVID_MODELS=%s/store", tmp);
    /* The server saves its prefix cache under XDG_CACHE_HOME: not the user's. */
    char cache_env[400];
    snprintf(cache_env, sizeof cache_env, "XDG_CACHE_HOME=%s/cache", tmp);
    const char *env[] = { st_env, e1, cache_env, "-CORVID_API_KEY", NULL };
    proc_out po;
    run_input(CHAT(test_data("reference/models/tiny-qwen3-gpt2-Q8_0.gguf"), "--max-tokens", "8", "--verbose"), env,
              "hello\n", &po);
    if (po.status == 0) {
        CHECK(strstr(po.err.data, "[prompt ") != NULL); /* a turn ran */
    } else {
        CHECK_EQ_INT(po.status, 1);
        CHECK_MSG(strstr(po.err.data, "corvid serve exited") && strstr(po.err.data, "cannot serve"), "%s",
                  po.err.data);
    }
    /* Either way its log is cleaned up (chat also reaps its server: it
     * waits for it before exiting). */
    char log_dir[300];
    snprintf(log_dir, sizeof log_dir, "%s/corvid", tmp);
    int logs = 0;
    DIR *d = opendir(log_dir);
    for (struct dirent *e; d && (e = readdir(d));)
        logs += !strncmp(e->d_name, "chat-", 5);
    if (d)
        closedir(d);
    CHECK_EQ_INT(logs, 0);
    proc_out_free(&po);
    run(CHAT("no-such-model-anywhere"), env, &po);
    CHECK(po.status == 1 && strstr(po.err.data, "no model 'no-such-model-anywhere'"));
    proc_out_free(&po);
}

int main(void)
{
    test_require_data();
    snprintf(tmp, sizeof tmp, "/tmp/cv_test_chat_XXXXXX");
    if (!mkdtemp(tmp))
        return 1;
    if ((serve_pid = start_fake_serve(CV_FAKE_SERVE, KEY, &serve_port)) <= 0) {
        fprintf(stderr, "cannot start fake_serve\n");
        return 1;
    }
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", serve_port);
    RUN(turns_carry_the_history_and_slash_commands_change_it);
    RUN(reasoning_can_be_hidden_and_thinking_switched_on);
    RUN(server_errors_are_reported_and_the_chat_goes_on);
    RUN(ctrl_c_stops_the_answer_not_the_program);
    RUN(chat_with_a_model_starts_a_private_server_or_says_why_not);
    stop_server(serve_pid);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp);
    return test_report();
}
