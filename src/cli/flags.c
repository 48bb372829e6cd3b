/* flags.c — the one flag parser of every `corvid` command, and the usage and
 * --help text generated from the same rows it reads (cli.h cv_flag), so a
 * command's documentation cannot drift from what it accepts.
 *
 * Conventions, as getopt_long and the common CLIs have them: flags and
 * positional arguments in any order; `--name value`, `--name=value`, a
 * one-letter alias as `-p value` or `-pvalue`; a unique prefix of a long
 * name is that flag (`--kv-mem`); `--` ends the flags; `-` alone is a
 * positional argument (stdin). A flag that takes a value takes the next
 * argument whatever it looks like, so `--draft -1` is a value out of range,
 * not a flag. Every error is one line naming the flag and the allowed
 * range, then the usage, exit status 2. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

/* CV_FLAG_I32 rows also fill the int fields of cv_server_config (port,
 * response_store_size): the two must be one type. */
_Static_assert(sizeof(int) == sizeof(int32_t), "int is int32_t on the platforms corvid builds for");

/* ---- usage and help ---- */

/* Usage lines and the flag list wrap at HELP_WIDTH columns; help text
 * starts at column HELP_COL. */
#define HELP_COL 31
#define HELP_WIDTH 110

static void usage_line(const cv_cli_spec *s, FILE *f, const char *lead)
{
    cv_buf b = { 0 };
    cv_buf_printf(&b, "%scorvid %s", lead, s->name);
    if (s->args)
        cv_buf_printf(&b, " %s", s->args);
    size_t line_start = 0, indent = strlen(lead) + strlen("corvid ") + strlen(s->name) + 1;
    for (int i = 0; i < s->n_flags; i++) {
        const cv_flag *fl = &s->flags[i];
        char item[160];
        snprintf(item, sizeof item, "[%s%s%s]%s", fl->name, fl->meta ? " " : "", fl->meta ? fl->meta : "",
                 fl->repeat ? "..." : "");
        if (b.len - line_start + 1 + strlen(item) > HELP_WIDTH) {
            cv_buf_putc(&b, '\n');
            line_start = b.len;
            cv_buf_printf(&b, "%*s", (int)indent - 1, "");
        }
        cv_buf_printf(&b, " %s", item);
    }
    fprintf(f, "%s\n", b.data);
    cv_buf_free(&b);
}

void cv_cli_usage(const cv_cli_spec *s, FILE *f)
{
    usage_line(s, f, "usage: ");
    for (const cv_cli_spec *a = s->also; a; a = a->also)
        usage_line(a, f, "       ");
}

/* "  --name, -n META   help", the help wrapped at HELP_WIDTH columns (and
 * at its own newlines) under a column of HELP_COL. */
static void flag_list(const cv_cli_spec *s)
{
    for (int i = 0; i < s->n_flags; i++) {
        const cv_flag *fl = &s->flags[i];
        char head[128];
        int n = snprintf(head, sizeof head, "  %s%s%s%s%s", fl->name, fl->alias ? ", " : "", fl->alias ? fl->alias : "",
                         fl->meta ? " " : "", fl->meta ? fl->meta : "");
        fputs(head, stdout);
        int col = n;
        if (col >= HELP_COL - 1) {
            putchar('\n');
            col = 0;
        }
        for (const char *p = fl->help; *p;) {
            size_t w = strcspn(p, " \n");
            if (col > HELP_COL && col + 1 + (int)w > HELP_WIDTH) {
                putchar('\n');
                col = 0;
            }
            if (col < HELP_COL) {
                printf("%*s", HELP_COL - col, "");
                col = HELP_COL;
            } else {
                putchar(' ');
                col++;
            }
            fwrite(p, 1, w, stdout);
            col += (int)w;
            p += w;
            if (*p == '\n')
                col = HELP_WIDTH; /* the next word starts a line */
            if (*p)
                p++;
        }
        putchar('\n');
    }
}

static void help(const cv_cli_spec *s)
{
    const char *sp = strchr(s->name, ' ');
    char first[64];
    snprintf(first, sizeof first, "%.*s", sp ? (int)(sp - s->name) : (int)strlen(s->name), s->name);
    const cv_cmd *c = cv_cli_find(first);
    if (c)
        printf("%s\n\n", c->summary);
    cv_cli_usage(s, stdout);
    for (const cv_cli_spec *a = s; a; a = a->also) {
        if (a != s)
            printf("\ncorvid %s:\n", a->name);
        else
            putchar('\n');
        flag_list(a);
        if (a->notes)
            printf("\n%s\n", a->notes);
    }
}

int cv_cli_usage_error(const cv_cli_spec *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "corvid %s: ", s->name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    cv_cli_usage(s, stderr);
    return 2;
}

/* ---- values ---- */

bool cv_cli_parse_size(const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1048576.0; end++; break;
    case 'g': case 'G': mult = 1073741824.0; end++; break;
    case 't': case 'T': mult = 1099511627776.0; end++; break;
    default: break;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    *out = x * mult;
    return !errno && end != v && !*end && isfinite(*out);
}

static void human(double bytes, char *out, size_t n)
{
    static const char units[] = "KMGT";
    int u = -1;
    while (u < 3 && bytes >= 1024 && fmod(bytes, 1024) == 0)
        bytes /= 1024, u++;
    if (u < 0)
        snprintf(out, n, "%.0f", bytes);
    else
        snprintf(out, n, "%.0f%c", bytes, units[u]);
}

/* Stores value into the row's field; a usage error (2) names the flag. */
static int set_value(const cv_cli_spec *s, const cv_flag *fl, void *opts, const char *v)
{
    char *dst = (char *)opts + fl->offset;
    char *end;
    errno = 0;
    switch (fl->kind) {
    case CV_FLAG_BOOL: *(bool *)(void *)dst = true; return 0;
    case CV_FLAG_SET: *(int *)(void *)dst = (int)fl->lo; return 0;
    case CV_FLAG_STR: *(const char **)(void *)dst = v; return 0;
    case CV_FLAG_I32:
    case CV_FLAG_I64: {
        long long x = strtoll(v, &end, 10);
        if (errno || *end || end == v || x < fl->lo || x > fl->hi)
            return cv_cli_usage_error(s, "%s '%s' must be an integer from %.0f to %.0f", fl->name, v, fl->lo, fl->hi);
        if (fl->kind == CV_FLAG_I32)
            *(int32_t *)(void *)dst = (int32_t)x;
        else
            *(int64_t *)(void *)dst = (int64_t)x;
        return 0;
    }
    case CV_FLAG_U64: {
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end || end == v || v[0] == '-' || (double)x > fl->hi)
            return cv_cli_usage_error(s, "%s '%s' must be an integer from 0 to %.0f", fl->name, v, fl->hi);
        *(uint64_t *)(void *)dst = (uint64_t)x;
        return 0;
    }
    case CV_FLAG_F32:
    case CV_FLAG_F64: {
        double x = strtod(v, &end);
        if (errno || *end || end == v || !(x >= fl->lo && x <= fl->hi))
            return cv_cli_usage_error(s, "%s '%s' must be a number from %g to %g", fl->name, v, fl->lo, fl->hi);
        if (fl->kind == CV_FLAG_F32)
            *(float *)(void *)dst = (float)x;
        else
            *(double *)(void *)dst = x;
        return 0;
    }
    case CV_FLAG_SIZE: {
        double x;
        if (!cv_cli_parse_size(v, &x) || !(x >= fl->lo && x <= fl->hi)) {
            char lo[32], hi[32];
            human(fl->lo, lo, sizeof lo);
            human(fl->hi, hi, sizeof hi);
            return cv_cli_usage_error(s, "%s '%s' must be a size from %s to %s (e.g. 512M, 2G)", fl->name, v, lo, hi);
        }
        *(int64_t *)(void *)dst = (int64_t)x;
        return 0;
    }
    case CV_FLAG_FN: {
        cv_err err = { 0 };
        if (fl->fn(opts, v, &err))
            return cv_cli_usage_error(s, "%s: %s", fl->name, err.msg);
        return 0;
    }
    }
    return cv_cli_usage_error(s, "%s: unknown flag kind", fl->name);
}

/* ---- the parser ---- */

/* The row for a flag as typed (up to '=' when eq): its name or alias
 * exactly, else the one long name it is a prefix of. */
static const cv_flag *lookup(const cv_cli_spec *s, const char *a, size_t len)
{
    for (int i = 0; i < s->n_flags; i++) {
        const cv_flag *fl = &s->flags[i];
        if ((strlen(fl->name) == len && !memcmp(fl->name, a, len)) ||
            (fl->alias && strlen(fl->alias) == len && !memcmp(fl->alias, a, len)))
            return fl;
    }
    const cv_flag *hit = NULL;
    if (len < 3 || a[1] != '-')
        return NULL;
    for (int i = 0; i < s->n_flags; i++) {
        if (!strncmp(s->flags[i].name, a, len)) {
            if (hit)
                return NULL; /* ambiguous */
            hit = &s->flags[i];
        }
    }
    return hit;
}

static bool takes_value(const cv_flag *fl) { return fl->kind != CV_FLAG_BOOL && fl->kind != CV_FLAG_SET; }

bool cv_cli_parse(const cv_cli_spec *s, void *opts, int argc, char **argv, int *n_args, int *status)
{
    int n = 0;
    bool flags_end = false;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (flags_end || a[0] != '-' || !a[1]) {
            argv[1 + n++] = a; /* never past i: the flags seen so far made room */
            continue;
        }
        if (!strcmp(a, "--")) {
            flags_end = true;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help(s);
            *status = 0;
            return false;
        }
        const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const char *attached = NULL;
        const cv_flag *fl = lookup(s, a, len);
        if (!fl && a[1] != '-' && a[2]) {
            fl = lookup(s, a, 2); /* -p512 */
            if (fl && takes_value(fl))
                attached = a + 2;
            else
                fl = NULL;
        }
        if (!fl) {
            *status = cv_cli_usage_error(s, "unknown flag '%.*s'", (int)len, a);
            return false;
        }
        const char *v = eq ? eq + 1 : attached;
        if (takes_value(fl) && !v) {
            if (i + 1 >= argc) {
                *status = cv_cli_usage_error(s, "%s needs a value (%s)", fl->name, fl->meta ? fl->meta : "");
                return false;
            }
            v = argv[++i];
        } else if (!takes_value(fl) && v) {
            *status = cv_cli_usage_error(s, "%s takes no value", fl->name);
            return false;
        }
        if ((*status = set_value(s, fl, opts, v)) != 0)
            return false;
    }
    if (n < s->min_args) {
        *status = cv_cli_usage_error(s, "needs %s", s->args ? s->args : "arguments");
        return false;
    }
    if (s->max_args >= 0 && n > s->max_args) {
        *status = s->max_args ? cv_cli_usage_error(s, "unexpected argument '%s'", argv[1 + s->max_args])
                              : cv_cli_usage_error(s, "'%s': only flags are taken", argv[1]);
        return false;
    }
    *n_args = n;
    *status = 0;
    return true;
}
