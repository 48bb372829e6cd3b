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
    { "version", "print the version and the CPU features in use", "corvid version", cv_cmd_version },
};
const int cv_n_cmds = (int)CV_ARRAY_LEN(cv_cmds);
