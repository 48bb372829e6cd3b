/* cmd_import.c — `corvid import KIND ...`: converts other formats to GGUF.
 * Each KIND is one row below: how many inputs it takes and the layer
 * function that owns the format; the flags are shared. */
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

typedef struct import_opts {
    const char *out;
} import_opts;

static const cv_flag flags[] = {
    CV_FLAG_ROW("--output", "-o", CV_FLAG_STR, offsetof(import_opts, out), 0, 0, "OUT.gguf",
      "where to write the GGUF (required)"),

};
static const cv_cli_spec spec_tokenizer = { .name = "import tokenizer", .args = "DIR_OR_tokenizer.json",
                                            .min_args = 1, .max_args = 3,
                                            .flags = flags, .n_flags = CV_ARRAY_LEN(flags) };
static const cv_cli_spec spec = { .name = "import llama2c", .args = "CHECKPOINT.bin TOKENIZER.bin", .min_args = 1,
                                  .max_args = 3, .flags = flags,
                                  .n_flags = CV_ARRAY_LEN(flags), .also = &spec_tokenizer };

int cv_cmd_import(int argc, char **argv)
{
    import_opts o = { 0 };
    int n_pos, st;
    if (!cv_cli_parse(&spec, &o, argc, argv, &n_pos, &st))
        return st;
    char **pos = argv + 1;
    const import_kind *k = NULL;
    for (size_t i = 0; i < CV_ARRAY_LEN(kinds); i++)
        if (!strcmp(pos[0], kinds[i].name))
            k = &kinds[i];
    if (!k)
        return cv_cli_usage_error(&spec, "unknown kind '%s'", pos[0]);
    if (n_pos - 1 != k->n_inputs || !o.out)
        return cv_cli_usage_error(&spec, "%s", k->usage);
    cv_err err = { 0 };
    if (k->fn(pos + 1, o.out, &err) != 0) {
        fprintf(stderr, "corvid import: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s\n", o.out);
    return 0;
}
