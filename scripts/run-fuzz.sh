#!/bin/sh
# Runs fuzz targets; run from the repository root. Usage:
#   run-fuzz.sh seeds BIN...      each target once over each file of its seed corpus
#                                 (the suite runs this for every target; libFuzzer or
#                                 plain build)
#   run-fuzz.sh time [BIN...]     FUZZ_SECONDS each (default 60): `make fuzz`
#   run-fuzz.sh long [BIN...]     FUZZ_RUNS executions each (default 10000000, at most
#                                 FUZZ_MAX_SECONDS each when set): `make fuzz-long`;
#                                 one line per target appended to FUZZ_LOG
#                                 (default build-fuzz/fuzz-long.log) for docs/fuzzing.md
#   run-fuzz.sh clang-compile CLANG FLAGS... -- SOURCES...
#                                 compiles each source as libFuzzer code (the suite)
# BIN defaults to every build-fuzz/fuzz/fuzz_*. Seeds are fuzz/seeds/<name>/ plus, for
# some targets, real files read in place from ../shared/testdata (below). A new
# corpus found by fuzzing goes to fuzz/corpus-<name>/ (ignored by git); a crash to
# fuzz/crash-<name>-*, and a fixed one's input belongs in fuzz/seeds/<name>/.
# Exits non-zero if any target failed.
set -u
mode=${1:-time}
[ $# -gt 0 ] && shift

# The seed corpus of target $1: its own folder, and real files where they help.
seeds_of() {
  s=""
  [ -d "fuzz/seeds/$1" ] && s="fuzz/seeds/$1"
  case "$1" in
    fuzz_gguf) for d in ../shared/testdata/vocab ../shared/testdata/reference/models; do
                 [ -d "$d" ] && s="$s $d"; done ;;
    fuzz_jinja) [ -d ../shared/testdata/templates ] && s="$s ../shared/testdata/templates" ;;
    fuzz_grammar) s="$s tests/grammar/schemas" ;;
  esac
  echo "$s"
}

if [ "$mode" = clang-compile ]; then
  clang=$1; shift
  if [ -z "$clang" ] || ! command -v "$clang" >/dev/null 2>&1; then
    echo "SKIP: clang is not installed (scripts/install-deps.sh installs it)"; exit 77
  fi
  flags=""
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do flags="$flags $1"; shift; done
  shift
  status=0
  for src in "$@"; do
    # shellcheck disable=SC2086
    if "$clang" $flags -c -o /dev/null "$src"; then echo "ok   $src"; else echo "FAIL $src"; status=1; fi
  done
  exit $status
fi

[ $# -eq 0 ] && set -- build-fuzz/fuzz/fuzz_*
status=0
for bin in "$@"; do
  [ -x "$bin" ] || { echo "run-fuzz: $bin is not a program (make fuzz builds them)"; status=1; continue; }
  name=$(basename "$bin")
  seeds=$(seeds_of "$name")
  case "$mode" in
  seeds)
    # Files, not folders: libFuzzer runs named files once each and leaves
    # the folders alone (given a folder it would add to it).
    # shellcheck disable=SC2086
    files=$(find $seeds -type f ! -name '.*' 2>/dev/null | LC_ALL=C sort)
    if [ -z "$files" ]; then
      echo "SKIP: $name has no seed files (fuzz/seeds/$name, ../shared/testdata)"; status=77; continue
    fi
    # shellcheck disable=SC2086
    "$bin" $files; rc=$?
    [ $rc -ne 0 ] && status=$rc ;;
  time|long)
    corpus="fuzz/corpus-$name"
    mkdir -p "$corpus"
    if [ "$mode" = time ]; then
      limit="-max_total_time=${FUZZ_SECONDS:-60}"
    else
      limit="-runs=${FUZZ_RUNS:-10000000}"
      [ -n "${FUZZ_MAX_SECONDS:-}" ] && limit="$limit -max_total_time=$FUZZ_MAX_SECONDS"
    fi
    echo "== $name ($limit)"
    out=$(mktemp)
    t0=$(date +%s)
    # A small quarantine keeps the address sanitizer's memory (and page
    # faults) low over millions of runs; use-after-free is still caught.
    # shellcheck disable=SC2086
    ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=16} "$bin" $limit -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="fuzz/crash-$name-" "$corpus" $seeds >"$out" 2>&1
    rc=$?
    t1=$(date +%s)
    tail -n 20 "$out"
    if [ "$mode" = long ]; then
      runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -n 1)
      log=${FUZZ_LOG:-build-fuzz/fuzz-long.log}
      printf '%s %s runs=%s seconds=%s exit=%s\n' "$(date -u +%Y-%m-%dT%H:%MZ)" "$name" "${runs:-?}" \
        "$((t1 - t0))" "$rc" >>"$log"
    fi
    rm -f "$out"
    [ $rc -ne 0 ] && status=1 ;;
  *)
    echo "run-fuzz: unknown mode '$mode' (seeds, time, long, clang-compile)"; exit 2 ;;
  esac
done
exit $status
