/* commands.c — the command table: one row per `corvid` command. Adding a
 * command is a new cmd_<name>.c plus one row here (STYLE.md "CLI command"). */
#include "cli/cli.h"

const cv_cmd cv_cmds[] = {
    { "help", "show commands, or the usage of one", "corvid help [COMMAND]", cv_cmd_help },
    { "serve", "serve a model over OpenAI- and Anthropic-style HTTP APIs",
      "corvid serve MODEL [--host 127.0.0.1] [--port 8000] [--api-key KEY | env CORVID_API_KEY] "
      "[--cors-origins LIST] [--ctx N] [--parallel N] [--threads N] [--served-model-name NAME] "
      "[--response-store N] [--max-body BYTES] [--grace-ms MS]",
      cv_cmd_serve },
    { "import", "convert another format to GGUF",
      "corvid import llama2c CHECKPOINT.bin TOKENIZER.bin -o OUT.gguf", cv_cmd_import },
    { "info", "show a GGUF file's metadata and tensors (and validate it)", "corvid info [--all] MODEL.gguf",
      cv_cmd_info },
    { "template", "render a conversation with a model's chat template (debugging aid)",
      "corvid template (MODEL.gguf | FILE.jinja) --messages CONV.json [--tools TOOLS.json]\n"
      "    [--no-generation-prompt] [--kw key=value]... [--bos S] [--eos S] [--now UNIXTIME] [--bench N]",
      cv_cmd_template },
    { "version", "print the version and the CPU features in use", "corvid version", cv_cmd_version },
};
const int cv_n_cmds = (int)CV_ARRAY_LEN(cv_cmds);
