/* commands.c — the command table: one row per `corvid` command. Adding a
 * command is a new cmd_<name>.c plus one row here (STYLE.md "CLI command"). */
#include "cli/cli.h"

const cv_cmd cv_cmds[] = {
    { "bench-kernels", "measure the matmul kernels against the machine's bandwidth and int8 peak",
      "corvid bench-kernels [--model qwen2.5-0.5b|llama3.2-1b|all] [--dtype q4_0,q4_k_m,q8_0,f16|all]\n"
      "                     [--case decode,batch8,prefill,tiles|all] [--threads N] [--repeats N] [--clock wall|cpu]",
      cv_cmd_bench_kernels },
    { "doctor", "show CPU features, the kernel paths chosen, a self-check and the machine's ceilings",
      "corvid doctor [--quick] [--threads N]", cv_cmd_doctor },
    { "grammar", "compile a JSON Schema or tool list to a grammar; check a document; time token masks",
      "corvid grammar SCHEMA.json [--check DOC] [--dump] [--vocab VOCAB.gguf --bench N [--max-tokens T] [--seed S] [--json]]\n"
      "       corvid grammar --tools FILE --syntax hermes|qwen3_coder_xml|llama3_json|mistral_v11|mistral_pre_v11\n"
      "                      [--force NAME] [--parallel] [--lazy] [--check DOC] [--vocab V --bench N]",
      cv_cmd_grammar },
    { "help", "show commands, or the usage of one", "corvid help [COMMAND]", cv_cmd_help },
    { "serve", "serve a model over OpenAI- and Anthropic-style HTTP APIs",
      "corvid serve MODEL [--host 127.0.0.1] [--port 8000] [--api-key KEY | env CORVID_API_KEY] "
      "[--cors-origins LIST] [--ctx N] [--parallel N] [--threads N] [--served-model-name NAME] "
      "[--kv-memory SIZE] [--max-queue N] [--batch-tokens N] [--draft N] [--no-prefix-cache] [--cache-dir DIR] "
      "[--cache-max SIZE] [--kv-type f16|f32|q8_0] [--response-store N] [--max-body BYTES] [--grace-ms MS] "
      "[--grammar-lazy]",
      cv_cmd_serve },
    { "run", "generate a continuation of a prompt (text, or token ids with --ids)",
      "corvid run MODEL -p PROMPT [-n N] [--temp T] [--top-p P] [--top-k K] [--min-p P] [--repeat-penalty R] "
      "[--seed S] [--threads N] [--ctx N] [--ids] [--exact] [--ignore-eos] [--json-schema FILE]",
      cv_cmd_run },
    { "bench", "measure prefill and decode speed against the machine's ceilings",
      "corvid bench MODEL [-p 512] [-n 128] [--batch 1,2,4,8] [--depth D [--shared]] [--kv-type f32|f16|q8_0]\n"
      "                   [--threads N] [--repeats R] [--json] [--exact] [--no-probe]\n"
      "       corvid bench --serve URL [--case decode,agents,first] [--streams 1,2,4,8,16] [-p 128] [-n 128] "
      "[--repeats R]\n"
      "                    [--agents 4] [--turns 10] [--system 12000] [--turn-tokens 300] [--reply 64] "
      "[--tool-ms 0] [--in-flight 0]\n"
      "                    [--id-range 500] [--ban ID]... [--favor ID]... [--temp T] [--seed S] [--api-key KEY]",
      cv_cmd_bench },
    { "synth", "write a random-weight model with a real model's shape (tests, benchmarks)",
      "corvid synth [--arch llama|qwen2|qwen3|qwen3moe|qwen35|qwen35moe] --shape tiny|qwen2.5-0.5b|qwen3-0.6b|"
      "llama3.2-1b|qwen3-30b-a3b|qwen3-coder-30b-a3b|qwen3.5-4b|qwen3.5-9b|qwen3.6-35b-a3b\n"
      "             "
      "[--dtype f32|f16|q8_0|q4_0|q4_k_m|q5_k_m|q6_k] [--vocab VOCAB.gguf] [--seed S] [--threads N] -o OUT.gguf",
      cv_cmd_synth },
    { "import", "convert another format to GGUF",
      "corvid import llama2c CHECKPOINT.bin TOKENIZER.bin -o OUT.gguf\n"
      "       corvid import tokenizer DIR_OR_tokenizer.json -o OUT.gguf", cv_cmd_import },
    { "info", "show a GGUF file's metadata and tensors (and validate it)", "corvid info [--all] MODEL.gguf",
      cv_cmd_info },
    { "template", "render a conversation with a model's chat template (debugging aid)",
      "corvid template (MODEL.gguf | FILE.jinja) --messages CONV.json [--tools TOOLS.json]\n"
      "    [--no-generation-prompt] [--kw key=value]... [--bos S] [--eos S] [--now UNIXTIME] [--bench N]",
      cv_cmd_template },
    { "pull", "download a model into the store (alias, ORG/REPO[:QUANT], ORG/REPO/FILE.gguf or URL)",
      "corvid pull MODEL... [--quiet | --progress bar|lines|none]     corvid pull --bench (hashing speed)\n"
      "    env: HF_TOKEN (gated/private repos), HF_ENDPOINT (mirror), CORVID_MODELS (store folder)", cv_cmd_pull },
    { "ls", "list the models in the store (or the alias table)", "corvid ls [--aliases] [--json]", cv_cmd_ls },
    { "rm", "delete models (and partial downloads) from the store", "corvid rm MODEL...", cv_cmd_rm },
    { "recipe", "print the exact set-up that points an agent client or SDK at corvid",
      "corvid recipe [CLIENT] [--host H] [--port N] [--model NAME] [--api-key KEY] [--ctx N]\n"
      "    CLIENT: claude-code, codex, opencode, qwen-code, aider, openai-sdk, anthropic-sdk", cv_cmd_recipe },
    { "launch", "start corvid serve if needed, configure an agent client for it and run the client",
      "corvid launch CLIENT [MODEL] [--host H] [--port N] [--ctx N] [--api-key KEY] [-- CLIENT_ARGS...]",
      cv_cmd_launch },
    { "chat", "chat with a model in the terminal (streaming, reasoning shown dimmed, Ctrl-C stops an answer)",
      "corvid chat (MODEL | --url URL [--api-key KEY]) [--system TEXT] [--think | --no-think] [--hide-reasoning]\n"
      "    [--temperature T] [--top-p P] [--top-k K] [--min-p P] [--repeat-penalty R] [--seed N]\n"
      "    [--max-tokens N] [--ctx N] [--verbose]\n"
      "    in the chat: /system TEXT, /reset, /exit, \"\"\" for multi-line messages", cv_cmd_chat },
    { "version", "print the version and the CPU features in use", "corvid version", cv_cmd_version },
    { "tokenize", "text to token ids with a model's vocabulary (or --bench its speed)",
      "corvid tokenize MODEL [--ids|--pieces|--count] [--no-bos] [--special] (TEXT | -)\n"
      "       corvid tokenize --bench MODEL [FILE]", cv_cmd_tokenize },
    { "detokenize", "token ids to text with a model's vocabulary",
      "corvid detokenize MODEL [--skip-special] ID...", cv_cmd_detokenize },
    { "parse-tools", "parse model output (stdin) into content, reasoning and tool calls",
      "corvid parse-tools [--format NAME|auto] [--template FILE.jinja] [--model NAME] [--tools TOOLS.json]\n"
      "                   [--stream-chunks N] [--reasoning-open TEXT] [--reasoning-inline] [--tool-choice-none]\n"
      "                   [--no-parallel] [--json-response] [--events] [--list]\n"
      "       corvid parse-tools --bench DIR [--chunk 4] [--repeats 5]",
      cv_cmd_parse_tools },
};
const int cv_n_cmds = (int)CV_ARRAY_LEN(cv_cmds);
