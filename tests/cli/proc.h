/* proc.h — for the cli tests that drive processes: run a program with
 * extra environment and collect its exit status, stdout and stderr; start
 * a server (`corvid serve`, or tests/server's fake_serve: the real HTTP
 * server over the test backend) and read the port it prints. Test-only; static functions, one copy per test. */
#ifndef CV_TEST_PROC_H
#define CV_TEST_PROC_H

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"

typedef struct proc_out {
    int status; /* exit status, or 128+signal */
    cv_buf out, err;
} proc_out;

static void proc_out_free(proc_out *p)
{
    cv_buf_free(&p->out);
    cv_buf_free(&p->err);
}

/* In the child: "NAME=VALUE" sets, "-NAME" unsets. */
static void apply_env(const char *const *envs)
{
    for (int i = 0; envs && envs[i]; i++) {
        if (envs[i][0] == '-') {
            unsetenv(envs[i] + 1);
        } else {
            char k[256];
            const char *eq = strchr(envs[i], '=');
            snprintf(k, sizeof k, "%.*s", (int)(eq - envs[i]), envs[i]);
            setenv(k, eq + 1, 1);
        }
    }
}

/* Runs argv with envs applied and stdin from input (NULL: /dev/null);
 * collects both outputs. */
static void run_input(const char *const *argv, const char *const *envs, const char *input, proc_out *po)
{
    memset(po, 0, sizeof *po);
    int o[2], e[2], in[2];
    if (pipe(o) || pipe(e) || pipe(in)) {
        po->status = -1;
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        apply_env(envs);
        if (input) {
            dup2(in[0], 0);
        } else {
            int dn = open("/dev/null", O_RDONLY);
            dup2(dn, 0);
        }
        dup2(o[1], 1);
        dup2(e[1], 2);
        close(o[0]), close(e[0]), close(o[1]), close(e[1]), close(in[0]), close(in[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(o[1]), close(e[1]), close(in[0]);
    if (input) {
        size_t len = strlen(input), done = 0; /* inputs are small: they fit the pipe */
        while (done < len) {
            ssize_t w = write(in[1], input + done, len - done);
            if (w <= 0)
                break;
            done += (size_t)w;
        }
    }
    close(in[1]);
    struct pollfd fds[2] = { { o[0], POLLIN, 0 }, { e[0], POLLIN, 0 } };
    int open_n = 2;
    while (open_n) {
        if (poll(fds, 2, 120000) <= 0)
            break;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !fds[i].revents)
                continue;
            char buf[4096];
            ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_n--;
            } else {
                cv_buf_append(i ? &po->err : &po->out, buf, (size_t)n);
            }
        }
    }
    int st;
    waitpid(pid, &st, 0);
    po->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (!po->out.data) cv_buf_puts(&po->out, "");
    if (!po->err.data) cv_buf_puts(&po->err, "");
}

static void run(const char *const *argv, const char *const *envs, proc_out *po) { run_input(argv, envs, NULL, po); }

/* Starts argv (a server that prints "listening on http://127.0.0.1:PORT"
 * on stdout, as `corvid serve` and fake_serve do) with envs applied and its
 * stderr appended to log_path (NULL: this process's stderr); returns its pid once it
 * listens, and the port, or 0 (the process killed) when it never does. */
static pid_t start_server(const char *const *argv, const char *const *envs, const char *log_path, int *port)
{
    int o[2];
    if (pipe(o))
        return 0;
    pid_t pid = fork();
    if (pid == 0) {
        apply_env(envs);
        dup2(o[1], 1);
        close(o[0]);
        if (log_path)
            dup2(open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0600), 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(o[1]);
    cv_buf b = { 0 };
    char buf[256];
    ssize_t n;
    const char *p = NULL;
    static const char tag[] = "listening on http://127.0.0.1:";
    while (!(p = b.data ? strstr(b.data, tag) : NULL) && (n = read(o[0], buf, sizeof buf - 1)) > 0) {
        cv_buf_append(&b, buf, (size_t)n);
        cv_buf_putc(&b, 0);
        b.len--;
    }
    *port = p ? atoi(p + strlen(tag)) : 0;
    cv_buf_free(&b);
    close(o[0]);
    if (*port <= 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return 0;
    }
    return pid;
}

/* SIGTERM (a drain), then its exit status (128+signal when killed). */
static int stop_server(pid_t pid)
{
    kill(pid, SIGTERM);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Starts fake_serve on a free port with an API key and a 32k context;
 * returns its pid (0 on failure) and the port it printed. */
static pid_t start_fake_serve(const char *bin, const char *key, int *port)
{
    return start_server((const char *const[]){ bin, "--port", "0", "--api-key", key, "--ctx", "32768", NULL }, NULL,
                        NULL, port);
}

#endif
