/* cmd_import.c — `corvid import KIND ...`: converts other formats to GGUF.
 * Each KIND is one row below, calling the layer that owns the format. */
#include <getopt.h>
#include <stdio.h>

#include "cli/cli.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

static int import_llama2c(const cv_cmd *cmd, int argc, char **argv)
{
    const char *out = NULL;
    static const struct option opts[] = { { "output", required_argument, 0, 'o' }, { 0, 0, 0, 0 } };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
        if (c == 'o') out = optarg;
        else return cv_cli_usage_error(cmd, "unknown option");
    }
    if (argc - optind != 2 || !out)
        return cv_cli_usage_error(cmd, "llama2c needs CHECKPOINT.bin TOKENIZER.bin -o OUT.gguf");
    cv_err err = { 0 };
    if (cv_import_llama2c(argv[optind], argv[optind + 1], out, &err) != 0) {
        fprintf(stderr, "corvid import: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}

static int import_tokenizer(const cv_cmd *cmd, int argc, char **argv)
{
    const char *out = NULL;
    static const struct option opts[] = { { "output", required_argument, 0, 'o' }, { 0, 0, 0, 0 } };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
        if (c == 'o') out = optarg;
        else return cv_cli_usage_error(cmd, "unknown option");
    }
    if (argc - optind != 1 || !out)
        return cv_cli_usage_error(cmd, "tokenizer needs DIR_OR_tokenizer.json -o OUT.gguf");
    cv_err err = { 0 };
    if (cv_tok_import_hf(argv[optind], out, &err) != 0) {
        fprintf(stderr, "corvid import: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}

typedef struct import_kind {
    const char *name;
    int (*fn)(const cv_cmd *cmd, int argc, char **argv);
} import_kind;

static const import_kind kinds[] = {
    { "llama2c", import_llama2c },
    { "tokenizer", import_tokenizer },
};

int cv_cmd_import(int argc, char **argv)
{
    const cv_cmd *cmd = cv_cli_find("import");
    if (argc < 2)
        return cv_cli_usage_error(cmd, "which kind of file?");
    for (size_t i = 0; i < CV_ARRAY_LEN(kinds); i++)
        if (!strcmp(argv[1], kinds[i].name))
            return kinds[i].fn(cmd, argc - 1, argv + 1);
    return cv_cli_usage_error(cmd, "unknown kind '%s'", argv[1]);
}
