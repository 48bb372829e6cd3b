/* cli — the `corvid` command. Each command lives in cmd_<name>.c and has one
 * row in the table in commands.c; `corvid help` is generated from the table. */
#ifndef CV_CLI_H
#define CV_CLI_H

#include "base/base.h"
#include "cli/models.h"

typedef struct cv_cmd {
    const char *name;
    const char *summary; /* one line for `corvid help` */
    const char *usage;   /* full usage text for `corvid help NAME` and errors */
    int (*fn)(int argc, char **argv); /* argv[0] is the command name; returns the exit status */
} cv_cmd;

extern const cv_cmd cv_cmds[];
extern const int cv_n_cmds;

/* Prints `corvid NAME: msg` and the usage line to stderr; returns 2 (bad usage). */
int cv_cli_usage_error(const cv_cmd *cmd, const char *fmt, ...) CV_PRINTF(2, 3);
const cv_cmd *cv_cli_find(const char *name);

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
int cv_cmd_parse_tools_bench(int argc, char **argv); /* `corvid parse-tools --bench DIR` (cmd_parse_tools_bench.c) */
int cv_cmd_synth(int argc, char **argv);
int cv_cmd_pull(int argc, char **argv);
int cv_cmd_ls(int argc, char **argv);
int cv_cmd_rm(int argc, char **argv);
int cv_cmd_recipe(int argc, char **argv);
int cv_cmd_launch(int argc, char **argv);
int cv_cmd_chat(int argc, char **argv);
int cv_cmd_parse_tools(int argc, char **argv);

#endif
