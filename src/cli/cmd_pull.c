/* cmd_pull.c — `corvid pull MODEL...`: resolves each MODEL (alias, repo,
 * URL) and downloads it into the store with download.c. Progress and notes go
 * to stderr; each model's path goes to stdout, so `m=$(corvid pull x)` gives
 * a script the file. Ctrl-C stops the transfer and keeps the partial file for
 * the next pull to resume. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/models.h"

static volatile int interrupted;

static void on_sigint(int sig)
{
    CV_UNUSED(sig);
    interrupted = 1;
}

static void describe(const cv_model_ref *r, cv_buf *b)
{
    if (r->url[0])
        cv_buf_puts(b, r->url);
    else if (r->file[0])
        cv_buf_printf(b, "%s/%s", r->repo, r->file);
    else
        cv_buf_printf(b, "%s:%s", r->repo, r->quant[0] ? r->quant : "(default quant)");
}

/* `corvid pull --bench`: what hashing costs a download, per CPU-second (the
 * thread's CPU time, so other load on the machine does not count), for the
 * path this CPU takes and for the portable one; medians of 7 over 128 MiB. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int bench_sha256(void)
{
    size_t n = 128u << 20;
    unsigned char *b = cv_xmalloc(n);
    cv_rng rng;
    cv_rng_seed(&rng, 1);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = cv_rng_u64(&rng);
        memcpy(b + i, &v, 8);
    }
    cv_sha256 probe;
    cv_sha256_init(&probe);
    for (int pass = 0; pass < 2; pass++) {
        bool ni = pass == 0 && probe.use_ni;
        if (pass == 0 && !probe.use_ni)
            continue;
        double t[7];
        char hex[65];
        for (int r = 0; r < 7; r++) {
            double t0 = thread_cpu_s();
            cv_sha256 s;
            cv_sha256_init(&s);
            s.use_ni = ni;
            for (size_t o = 0; o < n; o += 1u << 20)
                cv_sha256_update(&s, b + o, 1u << 20);
            cv_sha256_final(&s, hex);
            t[r] = thread_cpu_s() - t0;
        }
        qsort(t, 7, sizeof t[0], cmp_double);
        printf("sha256 %-8s %7.0f MB/s per CPU-second (median of 7 over 128 MiB; best %.0f), digest %.16s\n",
               ni ? "SHA-NI" : "portable", (double)n / t[3] / 1e6, (double)n / t[0] / 1e6, hex);
    }
    if (!probe.use_ni)
        printf("(this CPU has no SHA extensions)\n");
    free(b);
    return 0;
}

typedef struct pull_flags {
    cv_pull_opts o;
    bool bench;
} pull_flags;

static int progress_mode(void *opts, const char *v, cv_err *err)
{
    pull_flags *f = opts;
    if (!strcmp(v, "bar"))
        f->o.progress = 1;
    else if (!strcmp(v, "lines"))
        f->o.progress = 2;
    else if (!strcmp(v, "none"))
        f->o.progress = 0;
    else
        return cv_err_set(err, CV_EINVAL, "'%s' must be bar, lines or none", v);
    return 0;
}

static const cv_flag flags[] = {
    CV_FLAG_ROW("--quiet", "-q", CV_FLAG_SET, offsetof(pull_flags, o.progress), 0, 0, NULL,
      "no progress; only the path on stdout (the same as --progress none)"),
    CV_FLAG_FN_ROW("--progress", NULL, "bar|lines|none",
      "how progress is shown on stderr (default: a bar on a terminal, lines otherwise)", progress_mode, false),
    CV_FLAG_ROW("--bench", NULL, CV_FLAG_BOOL, offsetof(pull_flags, bench), 0, 0, NULL,
      "time the download's sha256 (MB/s)"),

};
static const cv_cli_spec spec = {
    .name = "pull", .args = "MODEL...", .max_args = -1, .flags = flags, .n_flags = CV_ARRAY_LEN(flags),
    .notes = "MODEL: an alias (corvid ls --aliases), ORG/REPO[:QUANT], ORG/REPO/FILE.gguf or a URL.\n"
             "Environment: HF_TOKEN (gated or private repos), HF_ENDPOINT (a mirror), CORVID_MODELS (the store)."
};

int cv_cmd_pull(int argc, char **argv)
{
    pull_flags f = { .o = { .progress = -1, .cancel = &interrupted } };
    int n_models, st;
    if (!cv_cli_parse(&spec, &f, argc, argv, &n_models, &st))
        return st;
    char **models = argv + 1;
    if (f.bench)
        return bench_sha256();
    cv_pull_opts o = f.o;
    if (!n_models)
        return cv_cli_usage_error(&spec, "MODEL is missing (an alias such as qwen3-0.6b, ORG/REPO[:QUANT] or a URL)");
    struct sigaction sa = { .sa_handler = on_sigint };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int failed = 0;
    for (int i = 0; i < n_models && !interrupted; i++) {
        cv_model_ref ref;
        cv_err err = { 0 };
        cv_pull_result res;
        cv_buf what = { 0 };
        if (cv_model_resolve(models[i], &ref, &err) != 0) {
            fprintf(stderr, "corvid pull: %s\n", err.msg);
            failed++;
            continue;
        }
        if (ref.kind != CV_MODEL_REMOTE) {
            fprintf(stderr, "corvid pull: '%s' is already a local file (%s): nothing to pull\n", models[i], ref.path);
            printf("%s\n", ref.path);
            continue;
        }
        describe(&ref, &what);
        if (o.progress && !ref.local)
            fprintf(stderr, "pulling %s%s%s\n", models[i], strcmp(models[i], what.data) ? ": " : "",
                    strcmp(models[i], what.data) ? what.data : "");
        if (cv_model_pull(&ref, &o, &res, &err) != 0) {
            fprintf(stderr, "corvid pull: %s\n", err.msg);
            failed++;
            cv_buf_free(&what);
            continue;
        }
        if (o.progress) {
            if (res.already_present) {
                fprintf(stderr, "%s is already in the store\n", models[i]);
            } else {
                cv_model_facts f;
                cv_model_facts_read(ref.path, &f, NULL);
                fprintf(stderr, "%s: %lld bytes, %s, GGUF %s %s\n", models[i], (long long)res.bytes,
                        res.sha256_checked ? "sha256 verified" : "size checked (the server published no sha256)",
                        f.arch[0] ? f.arch : "?", f.quant[0] ? f.quant : "?");
            }
        }
        printf("%s\n", ref.path);
        fflush(stdout);
        cv_buf_free(&what);
    }
    if (interrupted && !failed)
        failed = 1;
    return failed ? 1 : 0;
}
