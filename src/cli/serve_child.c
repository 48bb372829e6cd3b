/* serve_child.c — `corvid serve` as a child process, and the small HTTP GET
 * the cli uses to probe a local server. launch starts a server that outlives
 * it (the next launch finds the model warm); chat starts a private one that
 * dies with it. Either way the child runs in its own session, so a Ctrl-C
 * meant for generation in the terminal never kills the server, and it gets
 * its API key through the environment, where `ps` does not show it. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli/cli_int.h"

static size_t grab(char *p, size_t size, size_t n, void *ud)
{
    cv_buf *b = ud;
    if (b->len + size * n > (1u << 20))
        return 0; /* probe answers are a few hundred bytes */
    cv_buf_append(b, p, size * n);
    return size * n;
}

long cv_cli_http_get(const char *url, const char *key, long timeout_ms, cv_buf *body)
{
    CURL *c = curl_easy_init();
    if (!c)
        return 0;
    struct curl_slist *h = NULL;
    if (key && *key) {
        char auth[1024];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
        h = curl_slist_append(h, auth);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    }
    cv_buf_reset(body);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, grab);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*"); /* a local server: a proxy must not see it */
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

int cv_cli_free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(s, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(s);
    return port;
}

int cv_cli_state_dir(char *out, size_t n, cv_err *err)
{
    const char *x = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    int len;
    if (x && x[0] == '/') len = snprintf(out, n, "%s/corvid", x);
    else if (home && home[0] == '/') len = snprintf(out, n, "%s/.local/state/corvid", home);
    else len = snprintf(out, n, "/tmp/corvid-%d", (int)getuid());
    if (len < 0 || (size_t)len >= n)
        return cv_err_set(err, CV_ELIMIT, "the state folder path is longer than %zu bytes", n - 1);
    for (char *s = out + 1;; s++) {
        if (*s == '/' || !*s) {
            char c = *s;
            *s = 0;
            if (mkdir(out, 0755) != 0 && errno != EEXIST)
                return cv_err_set(err, CV_EIO, "cannot create %s: %s", out, strerror(errno));
            *s = c;
            if (!c)
                break;
        }
    }
    return 0;
}

/* The last `lines` lines of a file, for an error message. */
static void log_tail(const char *path, int lines, cv_buf *out)
{
    cv_buf b = { 0 };
    if (cv_read_file(path, &b, 1 << 24, NULL) != 0 || !b.len) {
        cv_buf_free(&b);
        return;
    }
    while (b.len && b.data[b.len - 1] == '\n')
        b.data[--b.len] = 0;
    const char *p = b.data + b.len;
    int seen = 0;
    while (p > b.data && seen < lines)
        if (*--p == '\n')
            seen++;
    if (*p == '\n')
        p++;
    cv_buf_puts(out, p);
    cv_buf_free(&b);
}

int cv_serve_child_start(const cv_serve_child *c, int timeout_s, pid_t *pid_out, cv_err *err)
{
    char self[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0)
        return cv_err_set(err, CV_EIO, "cannot find the corvid binary (/proc/self/exe): %s", strerror(errno));
    self[sl] = 0;
    char port[16], ctx[24];
    snprintf(port, sizeof port, "%d", c->port);
    snprintf(ctx, sizeof ctx, "%ld", c->n_ctx);
    if (c->n_extra < 0 || c->n_extra > 32)
        return cv_err_set(err, CV_ELIMIT, "%d more arguments for corvid serve, at most 32", c->n_extra);
    const char *args[16 + 32];
    int k = 0;
    args[k++] = self;
    args[k++] = "serve";
    args[k++] = c->model_path;
    args[k++] = "--host";
    args[k++] = c->host;
    args[k++] = "--port";
    args[k++] = port;
    if (c->served_name) {
        args[k++] = "--served-model-name";
        args[k++] = c->served_name;
    }
    if (c->n_ctx > 0) {
        args[k++] = "--ctx";
        args[k++] = ctx;
    }
    for (int i = 0; i < c->n_extra; i++)
        args[k++] = c->extra[i];
    args[k] = NULL;
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return cv_err_set(err, CV_EIO, "fork: %s", strerror(errno));
    if (pid == 0) {
        setsid();
        if (c->die_with_parent) {
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() != parent)
                _exit(0); /* the parent is already gone */
        }
        int in = open("/dev/null", O_RDONLY);
        int out = open(c->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in >= 0) dup2(in, 0);
        if (out >= 0) dup2(out, 1), dup2(out, 2);
        if (c->api_key && *c->api_key) setenv("CORVID_API_KEY", c->api_key, 1);
        else unsetenv("CORVID_API_KEY");
        execv(self, (char *const *)args);
        fprintf(stderr, "exec %s: %s\n", self, strerror(errno));
        _exit(127);
    }
    char url[400];
    snprintf(url, sizeof url, "http://%s:%d/readyz",
             strcmp(c->host, "0.0.0.0") && strcmp(c->host, "::") ? c->host : "127.0.0.1", c->port);
    cv_buf body = { 0 };
    double t0 = cv_now_s();
    int rc = 0;
    for (;;) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            cv_buf tail = { 0 };
            log_tail(c->log_path, 12, &tail);
            rc = cv_err_set(err, CV_EIO, "corvid serve exited (%s %d) before it was ready; its log (%s) ends:\n%s",
                            WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
                            c->log_path, tail.data ? tail.data : "(empty)");
            cv_buf_free(&tail);
            break;
        }
        if (cv_cli_http_get(url, c->api_key, 2000, &body) == 200)
            break;
        if (cv_now_s() - t0 > timeout_s) {
            kill(pid, SIGTERM);
            waitpid(pid, NULL, 0);
            rc = cv_err_set(err, CV_EIO, "corvid serve was not ready after %d s; see %s", timeout_s, c->log_path);
            break;
        }
        struct timespec ts = { 0, 200 * 1000000L };
        nanosleep(&ts, NULL);
    }
    cv_buf_free(&body);
    if (rc == 0)
        *pid_out = pid;
    return rc;
}
