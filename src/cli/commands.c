/* commands.c — the command table: one row per `corvid` command. Adding a
 * command is a new cmd_<name>.c plus one row here (STYLE.md "CLI command"). */
#include "cli/cli.h"

const cv_cmd cv_cmds[] = {
    { "help", "show commands, or the usage of one", "corvid help [COMMAND]", cv_cmd_help },
    { "import", "convert another format to GGUF",
      "corvid import llama2c CHECKPOINT.bin TOKENIZER.bin -o OUT.gguf\n"
      "       corvid import tokenizer DIR_OR_tokenizer.json -o OUT.gguf", cv_cmd_import },
    { "info", "show a GGUF file's metadata and tensors (and validate it)", "corvid info [--all] MODEL.gguf",
      cv_cmd_info },
    { "version", "print the version and the CPU features in use", "corvid version", cv_cmd_version },
    { "tokenize", "text to token ids with a model's vocabulary (or --bench its speed)",
      "corvid tokenize MODEL [--ids|--pieces|--count] [--no-bos] [--special] (TEXT | -)\n"
      "       corvid tokenize --bench MODEL [FILE]", cv_cmd_tokenize },
    { "detokenize", "token ids to text with a model's vocabulary",
      "corvid detokenize MODEL [--skip-special] ID...", cv_cmd_detokenize },
};
const int cv_n_cmds = (int)CV_ARRAY_LEN(cv_cmds);
