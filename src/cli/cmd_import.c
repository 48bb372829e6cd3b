/* cmd_import.c — `corvid import KIND ...`: converts other formats to GGUF.
 * Each KIND is one row below: how many inputs it takes and the layer
 * function that owns the format; option parsing is shared. */
#include <getopt.h>
#include <stdio.h>

#include "cli/cli.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

static int llama2c(char **in, const char *out, cv_err *err) { return cv_import_llama2c(in[0], in[1], out, err); }
static int tokenizer(char **in, const char *out, cv_err *err) { return cv_tok_import_hf(in[0], out, err); }

typedef struct import_kind {
    const char *name;
    int n_inputs;
    const char *usage; /* said when the arguments do not fit */
    int (*fn)(char **inputs, const char *out, cv_err *err);
} import_kind;

static const import_kind kinds[] = {
    { "llama2c", 2, "llama2c needs CHECKPOINT.bin TOKENIZER.bin -o OUT.gguf", llama2c },
    { "tokenizer", 1, "tokenizer needs DIR_OR_tokenizer.json -o OUT.gguf", tokenizer },
};

static int run_kind(const cv_cmd *cmd, const import_kind *k, int argc, char **argv)
{
    const char *out = NULL;
    static const struct option opts[] = { { "output", required_argument, 0, 'o' }, { 0, 0, 0, 0 } };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
        if (c == 'o')
            out = optarg;
        else
            return cv_cli_usage_error(cmd, "unknown option");
    }
    if (argc - optind != k->n_inputs || !out)
        return cv_cli_usage_error(cmd, "%s", k->usage);
    cv_err err = { 0 };
    if (k->fn(argv + optind, out, &err) != 0) {
        fprintf(stderr, "corvid import: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}

int cv_cmd_import(int argc, char **argv)
{
    const cv_cmd *cmd = cv_cli_find("import");
    if (argc < 2)
        return cv_cli_usage_error(cmd, "which kind of file?");
    for (size_t i = 0; i < CV_ARRAY_LEN(kinds); i++)
        if (!strcmp(argv[1], kinds[i].name))
            return run_kind(cmd, &kinds[i], argc - 1, argv + 1);
    return cv_cli_usage_error(cmd, "unknown kind '%s'", argv[1]);
}
