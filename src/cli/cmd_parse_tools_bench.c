/* cmd_parse_tools_bench.c — `corvid parse-tools --bench DIR`: the tool-call
 * and reasoning parser's throughput per syntax over a folder of fixture
 * files (one FORMAT.jsonl each, as ../shared/testdata/toolcalls: one case a
 * line with "format", "text" and maybe "tools"). Every case of a file is
 * parsed as the server parses it: a fresh parser with the case's tools,
 * reasoning split, output detection on (--no-detect: the format alone, to
 * see what detection costs), the text fed in pieces of --chunk bytes (default 4,
 * about one token) and finished; the same again with the whole text in one
 * feed. Fixture outputs are short (tens to hundreds of bytes), so those
 * figures are mostly the cost of one response (creating the parser, reading
 * the tools' schemas): reported as microseconds per response. The steady
 * state is measured on 1 MiB of code-like prose (brackets, braces, '<' and
 * quotes, which make every syntax hold text back and look again) fed in the
 * same pieces. Each figure is the median of --repeats timed passes of at
 * least 50 ms; the parser's own work count (bytes examined per input byte,
 * cv_chat_parse_work) does not depend on the machine's load. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/chat.h"
#include "cli/cli.h"

typedef struct pcase {
    const cv_tc_format *fmt;
    bool detect;   /* output detection on, as the server parses */
    json_t *tools; /* or NULL */
    char *text;
    size_t len;
} pcase;

static void sink(void *ud, const cv_chat_event *ev)
{
    (void)ev;
    (*(uint64_t *)ud)++;
}

/* One parse of c; returns the parser's work count. */
static uint64_t parse_once(const pcase *c, size_t chunk, uint64_t *events)
{
    cv_chat_parse_opts o = { .format = c->fmt, .tools = c->tools, .detect = c->detect, .id_seed = 1 };
    cv_chat_parse *p;
    if (cv_chat_parse_create(&o, sink, events, &p, NULL))
        return 0;
    size_t step = chunk ? chunk : c->len;
    for (size_t i = 0; i < c->len; i += step)
        cv_chat_parse_feed(p, c->text + i, CV_MIN(step, c->len - i), NULL);
    cv_chat_parse_finish(p, NULL);
    uint64_t w = cv_chat_parse_work(p);
    cv_chat_parse_destroy(p);
    return w;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median MB/s over repeats of parsing every case (iters times each pass). */
static double rate(const pcase *cs, int n, size_t chunk, int repeats, size_t bytes)
{
    uint64_t ev = 0;
    /* Calibrate: passes of at least 50 ms. */
    int iters = 1;
    for (;;) {
        uint64_t t0 = cv_now_ns();
        for (int k = 0; k < iters; k++)
            for (int i = 0; i < n; i++)
                parse_once(&cs[i], chunk, &ev);
        uint64_t dt = cv_now_ns() - t0;
        if (dt >= 50000000ull || iters >= (1 << 20))
            break;
        iters *= dt ? CV_MAX(2, (int)CV_MIN(50000000ull / dt + 1, 16ull)) : 16;
    }
    double v[64];
    repeats = CV_MIN(repeats, 64);
    for (int r = 0; r < repeats; r++) {
        uint64_t t0 = cv_now_ns();
        for (int k = 0; k < iters; k++)
            for (int i = 0; i < n; i++)
                parse_once(&cs[i], chunk, &ev);
        double s = (double)(cv_now_ns() - t0) / 1e9;
        v[r] = s > 0 ? (double)bytes * iters / s / 1e6 : 0;
    }
    qsort(v, (size_t)repeats, sizeof *v, cmp_d);
    return v[repeats / 2];
}

static int load_file(const char *path, bool detect, pcase **cs, int *n)
{
    cv_buf b = { 0 };
    cv_err err = { 0 };
    if (cv_read_file(path, &b, 64u << 20, &err)) {
        fprintf(stderr, "corvid parse-tools: %s\n", err.msg);
        return -1;
    }
    int cap = 0;
    for (char *line = b.data; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        json_t *j = *line ? json_loads(line, 0, NULL) : NULL;
        const char *f = json_string_value(json_object_get(j, "format"));
        const char *t = json_string_value(json_object_get(j, "text"));
        const cv_tc_format *fmt = f ? cv_tc_format_find(f) : NULL;
        if (fmt && t) {
            if (*n == cap) {
                cap = cap ? cap * 2 : 64;
                *cs = cv_xrealloc(*cs, (size_t)cap * sizeof **cs);
            }
            json_t *tools = json_object_get(j, "tools");
            (*cs)[(*n)++] = (pcase){ fmt, detect, json_is_array(tools) ? json_incref(tools) : NULL, cv_xstrdup(t),
                                     strlen(t) };
        }
        json_decref(j);
        line = nl ? nl + 1 : NULL;
    }
    cv_buf_free(&b);
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int cv_cmd_parse_tools_bench(int argc, char **argv)
{
    const cv_cmd *cmd = cv_cli_find("parse-tools");
    const char *dir = NULL;
    long chunk = 4, repeats = 5;
    bool detect = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--bench") && v)
            dir = argv[++i];
        else if (!strcmp(a, "--chunk") && v && (chunk = strtol(v, &end, 10), *end == 0) && chunk >= 1 && chunk <= 65536)
            i++;
        else if (!strcmp(a, "--repeats") && v && (repeats = strtol(v, &end, 10), *end == 0) && repeats >= 1 &&
                 repeats <= 64)
            i++;
        else if (!strcmp(a, "--no-detect"))
            detect = false;
        else
            return cv_cli_usage_error(cmd, "--bench DIR [--chunk 1..65536] [--repeats 1..64] [--no-detect]: bad '%s'",
                                      a);
    }
    if (!dir)
        return cv_cli_usage_error(cmd, "--bench needs a folder of FORMAT.jsonl files");
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "corvid parse-tools: cannot open the folder %s\n", dir);
        return 1;
    }
    char *names[256];
    int nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 256) {
        size_t l = strlen(e->d_name);
        if (l > 6 && !strcmp(e->d_name + l - 6, ".jsonl"))
            names[nn++] = cv_xstrdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, by_name);
    /* 1 MiB of code-like text with no call in it. */
    static const char line[] = "    if (x < y && v[i] != '{') { out = {\"k\": [1, 2]}; } // <b> [TODO] f(a=1)\n";
    pcase prose = { .detect = detect };
    prose.len = 1u << 20;
    prose.text = cv_xmalloc(prose.len);
    for (size_t i = 0; i < prose.len; i++)
        prose.text[i] = line[i % (sizeof line - 1)];
    printf("%-18s %6s %8s %9s %9s %9s %7s %10s %7s\n", "format", "cases", "bytes", "MB/s", "MB/s", "us/resp",
           "work/B", "prose MB/s", "work/B");
    printf("%-18s %6s %8s %9s %9s %9s %7s %10s %7s\n", "", "", "", "chunked", "whole", "chunked", "", "chunked", "");
    size_t all_bytes = 0;
    double all_s_chunked = 0, all_s_whole = 0;
    int status = 0;
    for (int f = 0; f < nn; f++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[f]);
        pcase *cs = NULL;
        int n = 0;
        if (load_file(path, detect, &cs, &n))
            status = 1;
        size_t bytes = 0;
        uint64_t work = 0, ev = 0;
        for (int i = 0; i < n; i++) {
            bytes += cs[i].len;
            work += parse_once(&cs[i], (size_t)chunk, &ev);
        }
        if (n && bytes) {
            double rc = rate(cs, n, (size_t)chunk, (int)repeats, bytes);
            double rw = rate(cs, n, 0, (int)repeats, bytes);
            prose.fmt = cs[0].fmt;
            uint64_t pw = parse_once(&prose, (size_t)chunk, &ev);
            double rp = rate(&prose, 1, (size_t)chunk, (int)repeats, prose.len);
            names[f][strlen(names[f]) - 6] = 0;
            printf("%-18s %6d %8zu %9.1f %9.1f %9.1f %7.2f %10.1f %7.2f\n", names[f], n, bytes, rc, rw,
                   (double)bytes / n / rc, (double)work / bytes, rp, (double)pw / prose.len);
            fflush(stdout);
            all_bytes += bytes;
            all_s_chunked += bytes / (rc * 1e6);
            all_s_whole += bytes / (rw * 1e6);
        }
        for (int i = 0; i < n; i++) {
            json_decref(cs[i].tools);
            free(cs[i].text);
        }
        free(cs);
        free(names[f]);
    }
    if (all_bytes)
        printf("%-18s %6s %8zu %9.1f %9.1f\n", "all", "", all_bytes, all_bytes / all_s_chunked / 1e6,
               all_bytes / all_s_whole / 1e6);
    free(prose.text);
    return status;
}
