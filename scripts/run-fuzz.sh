#!/bin/sh
# Runs every libFuzzer target in build-fuzz/fuzz for FUZZ_SECONDS each (default
# 60), with its seed corpus from fuzz/seeds/<name>/ when present. Crashes are
# written to fuzz/crash-<name>-*; exits non-zero if any target failed.
set -u
secs=${FUZZ_SECONDS:-60}
status=0
for bin in build-fuzz/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  corpus="fuzz/corpus-$name"
  mkdir -p "$corpus"
  seeds=""
  [ -d "fuzz/seeds/$name" ] && seeds="fuzz/seeds/$name"
  # Real files as seeds, read in place from ../shared/testdata.
  case "$name" in
    fuzz_gguf) [ -d ../shared/testdata/vocab ] && seeds="$seeds ../shared/testdata/vocab ../shared/testdata/reference/models" ;;
    fuzz_jinja) [ -d ../shared/testdata/templates ] && seeds="$seeds ../shared/testdata/templates ../shared/testdata/templates/vllm" ;;
    fuzz_grammar) seeds="$seeds tests/grammar/schemas" ;;
  esac
  echo "== $name ($secs s)"
  if ! "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="fuzz/crash-$name-" "$corpus" $seeds; then
    status=1
  fi
done
exit $status
