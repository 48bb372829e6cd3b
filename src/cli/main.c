/* main.c — `corvid` entry: dispatches argv[1] through the command table and
 * implements `help`, which is generated from that table (and, for one
 * command, from that command's flag rows: `corvid help X` is `corvid X
 * --help`). */
#include <stdio.h>

#include "cli/cli.h"

const cv_cmd *cv_cli_find(const char *name)
{
    for (int i = 0; i < cv_n_cmds; i++)
        if (!strcmp(cv_cmds[i].name, name))
            return &cv_cmds[i];
    return NULL;
}

static const cv_cli_spec spec = { .name = "help", .args = "[COMMAND]", .max_args = 1 };

int cv_cmd_help(int argc, char **argv)
{
    int n = 0, st;
    if (argc > 0 && !cv_cli_parse(&spec, NULL, argc, argv, &n, &st))
        return st;
    if (n == 1) {
        const cv_cmd *c = cv_cli_find(argv[1]);
        if (!c) {
            fprintf(stderr, "corvid: no command '%s'; try `corvid help`\n", argv[1]);
            return 2;
        }
        char *args[] = { (char *)c->name, "--help", NULL };
        return c->fn(2, args);
    }
    printf("corvid — a local LLM inference server for coding agents\n\nusage: corvid COMMAND [ARGS]\n\ncommands:\n");
    for (int i = 0; i < cv_n_cmds; i++)
        printf("  %-12s %s\n", cv_cmds[i].name, cv_cmds[i].summary);
    printf("\n`corvid help COMMAND` (or `corvid COMMAND --help`) shows the usage of one.\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return cv_cmd_help(0, NULL), 2;
    const char *name = argv[1];
    if (!strcmp(name, "-h") || !strcmp(name, "--help"))
        return cv_cmd_help(argc - 1, argv + 1);
    if (!strcmp(name, "--version"))
        name = "version";
    const cv_cmd *c = cv_cli_find(name);
    if (!c) {
        fprintf(stderr, "corvid: unknown command '%s'; try `corvid help`\n", name);
        return 2;
    }
    return c->fn(argc - 1, argv + 1);
}
