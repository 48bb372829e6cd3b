/* cli — the `corvid` command. Each command lives in cmd_<name>.c and has one
 * row in the table in commands.c; `corvid help` is generated from the table,
 * and each command's usage and --help from the flag rows its parser reads. */
#ifndef CV_CLI_H
#define CV_CLI_H

#include <stdio.h>

#include "base/base.h"
#include "cli/models.h"

typedef struct cv_cmd {
    const char *name;
    const char *summary; /* one line for `corvid help` */
    int (*fn)(int argc, char **argv); /* argv[0] is the command name; returns the exit status */
} cv_cmd;

extern const cv_cmd cv_cmds[];
extern const int cv_n_cmds;

const cv_cmd *cv_cli_find(const char *name);

/* ---- flags: one row per flag, read by the parser and by --help (flags.c) ---- */

typedef enum cv_flag_kind {
    CV_FLAG_BOOL, /* no value: the bool field becomes true */
    CV_FLAG_SET,  /* no value: the int field becomes lo (switches sharing one field: --think / --no-think) */
    CV_FLAG_STR,  /* the const char * field points at the value */
    CV_FLAG_I32,  /* an integer in [lo, hi] into an int32_t field */
    CV_FLAG_I64,  /* ... into an int64_t field */
    CV_FLAG_U64,  /* an integer from 0 to hi into a uint64_t field (seeds) */
    CV_FLAG_F32,  /* a number in [lo, hi] into a float field */
    CV_FLAG_F64,  /* ... into a double field */
    CV_FLAG_SIZE, /* bytes (512M, 2G, 1.5GiB) in [lo, hi] into an int64_t field */
    CV_FLAG_FN,   /* fn checks and stores the value (lists, choices, repeated flags) */
} cv_flag_kind;

typedef struct cv_flag {
    const char *name;  /* "--threads" */
    const char *alias; /* another spelling ("-t", "--kv-mem"), or NULL */
    cv_flag_kind kind;
    size_t offset;     /* of the field in the command's options struct (offsetof) */
    double lo, hi;
    const char *meta;  /* the value in the usage ("N", "SIZE", "f16|f32|q8_0"); NULL for a switch */
    const char *help;  /* what it does and its default; may span lines */
    /* CV_FLAG_FN: stores value into opts, or fails with err (the parser
     * names the flag). */
    int (*fn)(void *opts, const char *value, cv_err *err);
    bool repeat;       /* may be given more than once (shown as [--flag V]...) */
} cv_flag;

/* A row the parser stores itself, and one whose value fn stores. */
#define CV_FLAG_ROW(name, alias, kind, offset, lo, hi, meta, help) \
    { name, alias, kind, offset, lo, hi, meta, help, NULL, false }
#define CV_FLAG_FN_ROW(name, alias, meta, help, fn, repeat) { name, alias, CV_FLAG_FN, 0, 0, 0, meta, help, fn, repeat }

/* A command's (or one form's) arguments: the rows and the positional part. */
typedef struct cv_cli_spec {
    const char *name;                /* "bench", or a form: "bench --serve URL" */
    const char *args;                /* the positional arguments ("MODEL", "MODEL..."), or NULL */
    int min_args, max_args;          /* how many the parser accepts (max -1: any number) */
    const cv_flag *flags;
    int n_flags;
    const char *notes;               /* lines printed under the flags by --help (environment...), or NULL */
    const struct cv_cli_spec *also;  /* another form of the command, shown by --help and in usage errors */
} cv_cli_spec;

/* Parses argv[1..argc) (argv[0] is the command) into opts by s's rows.
 * Flags and positional arguments come in any order and "--" ends the flags
 * (flags.c says the rest of the syntax). The positional arguments are moved
 * to argv[1..*n_args], in order; fewer than s->min_args or more than
 * s->max_args is a usage error. Returns true to go on; false when the
 * command is done: --help printed (*status 0) or a usage error printed to
 * stderr with the usage (*status 2). */
bool cv_cli_parse(const cv_cli_spec *s, void *opts, int argc, char **argv, int *n_args, int *status);
/* "512M", "2G", "1.5GiB", "1048576": bytes (CV_FLAG_SIZE's syntax, for
 * flags whose fn takes a size or a word). */
bool cv_cli_parse_size(const char *v, double *out);
/* Prints `corvid NAME: msg` and the usage to stderr; returns 2 (bad usage). */
int cv_cli_usage_error(const cv_cli_spec *s, const char *fmt, ...) CV_PRINTF(2, 3);
/* The usage lines generated from s (and its other forms). */
void cv_cli_usage(const cv_cli_spec *s, FILE *f);

/* Command entry points (one per cmd_*.c). */
int cv_cmd_help(int argc, char **argv);
int cv_cmd_bench_kernels(int argc, char **argv);
int cv_cmd_doctor(int argc, char **argv);
int cv_cmd_version(int argc, char **argv);
int cv_cmd_serve(int argc, char **argv);
int cv_cmd_import(int argc, char **argv);
int cv_cmd_info(int argc, char **argv);
int cv_cmd_grammar(int argc, char **argv);
int cv_cmd_tokenize(int argc, char **argv);
int cv_cmd_detokenize(int argc, char **argv);
int cv_cmd_template(int argc, char **argv);
int cv_cmd_run(int argc, char **argv);
int cv_cmd_bench(int argc, char **argv);
int cv_cmd_bench_serve(int argc, char **argv); /* `corvid bench --serve URL` (cmd_bench_serve.c) */
extern const cv_cli_spec cv_bench_serve_spec; /* its flags, for `corvid bench --help` */
int cv_cmd_parse_tools_bench(int argc, char **argv); /* `corvid parse-tools --bench DIR` (cmd_parse_tools_bench.c) */
extern const cv_cli_spec cv_parse_tools_bench_spec; /* its flags, for `corvid parse-tools --help` */
int cv_cmd_synth(int argc, char **argv);
int cv_cmd_pull(int argc, char **argv);
int cv_cmd_ls(int argc, char **argv);
int cv_cmd_rm(int argc, char **argv);
int cv_cmd_recipe(int argc, char **argv);
int cv_cmd_launch(int argc, char **argv);
int cv_cmd_ps(int argc, char **argv);
int cv_cmd_chat(int argc, char **argv);
int cv_cmd_parse_tools(int argc, char **argv);

#endif
