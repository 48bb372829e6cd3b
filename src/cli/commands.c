/* commands.c — the command table: one row per `corvid` command. Adding a
 * command is a new cmd_<name>.c plus one row here (STYLE.md "CLI command"). */
#include "cli/cli.h"

const cv_cmd cv_cmds[] = {
    { "help", "show commands, or the usage of one", "corvid help [COMMAND]", cv_cmd_help },
    { "version", "print the version and the CPU features in use", "corvid version", cv_cmd_version },
    { "parse-tools", "parse model output (stdin) into content, reasoning and tool calls",
      "corvid parse-tools [--format NAME|auto] [--template FILE.jinja] [--model NAME] [--tools TOOLS.json]\n"
      "                   [--stream-chunks N] [--reasoning-open TEXT] [--reasoning-inline] [--tool-choice-none]\n"
      "                   [--no-parallel] [--json-response] [--events] [--list]",
      cv_cmd_parse_tools },
};
const int cv_n_cmds = (int)CV_ARRAY_LEN(cv_cmds);
