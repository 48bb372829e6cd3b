/* commands.c — the command table: one row per `corvid` command. Adding a
 * command is a new cmd_<name>.c (its flag rows, from which its usage and
 * --help are generated) plus one row here (STYLE.md "CLI command"). */
#include "cli/cli.h"

const cv_cmd cv_cmds[] = {
    { "bench-kernels",
      "measure the matmul kernels against the machine's bandwidth and int8 peak",
      cv_cmd_bench_kernels },
    { "doctor", "show CPU features, the kernel paths chosen, a self-check and the machine's ceilings", cv_cmd_doctor },
    { "grammar",
      "compile a JSON Schema or tool list to a grammar; check a document; time token masks",
      cv_cmd_grammar },
    { "help", "show commands, or the usage of one", cv_cmd_help },
    { "serve", "serve a model over OpenAI- and Anthropic-style HTTP APIs", cv_cmd_serve },
    { "run", "generate a continuation of a prompt (text, or token ids with --ids)", cv_cmd_run },
    { "bench", "measure prefill and decode speed against the machine's ceilings", cv_cmd_bench },
    { "synth", "write a random-weight model with a real model's shape (tests, benchmarks)", cv_cmd_synth },
    { "import", "convert another format to GGUF", cv_cmd_import },
    { "info", "show a GGUF file's metadata and tensors (and validate it)", cv_cmd_info },
    { "template", "render a conversation with a model's chat template (debugging aid)", cv_cmd_template },
    { "pull", "download a model into the store (alias, ORG/REPO[:QUANT], ORG/REPO/FILE.gguf or URL)", cv_cmd_pull },
    { "ls", "list the models in the store (or the alias table)", cv_cmd_ls },
    { "rm", "delete models (and partial downloads) from the store", cv_cmd_rm },
    { "recipe", "print the exact set-up that points an agent client or SDK at corvid", cv_cmd_recipe },
    { "launch", "start corvid serve if needed, configure an agent client for it and run the client", cv_cmd_launch },
    { "ps", "show what a running server has loaded: memory, idle time, queue, loads", cv_cmd_ps },
    { "chat",
      "chat with a model in the terminal (streaming, reasoning shown dimmed, Ctrl-C stops an answer)",
      cv_cmd_chat },
    { "version", "print the version and the CPU features in use", cv_cmd_version },
    { "tokenize", "text to token ids with a model's vocabulary (or --bench its speed)", cv_cmd_tokenize },
    { "detokenize", "token ids to text with a model's vocabulary", cv_cmd_detokenize },
    { "parse-tools", "parse model output (stdin) into content, reasoning and tool calls", cv_cmd_parse_tools },
};
const int cv_n_cmds = (int)CV_ARRAY_LEN(cv_cmds);
