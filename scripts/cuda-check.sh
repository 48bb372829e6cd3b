#!/bin/sh
# cuda-check.sh — the CUDA backend's check on a real GPU, in one call of the
# device tool (docs/CUDA.md). The GPU machine has the NVIDIA driver, CUDA's
# libraries (NVRTC among them) and CMake, but none of the Debian libraries
# corvid links, so the binaries are built on the developer's machine and
# carried:
#
#   scripts/cuda-check.sh prepare   here: release build; copies corvid, the
#                                   CUDA tests and every library they load
#                                   (but glibc's) into cuda-carry/
#   scripts/cuda-check.sh run       on the GPU machine, carry: ["cuda-carry"]:
#                                   the device, `corvid doctor`'s CUDA lines,
#                                   test_cuda_kernels (every kernel against
#                                   the CPU on random inputs), its --bench
#                                   table, and a summary table last
#
# `run` stays under 8 minutes: each step has a timeout (90 + 270 + 120 s);
# the kernels compile once (18 NVRTC programs, the matmul ones in
# parallel) into a cache the bench reuses.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
carry=$here/cuda-carry

prepare() {
    cd "$here" || exit 1
    make release >/dev/null || { echo "cuda-check: the release build failed" >&2; exit 1; }
    rm -rf "$carry"
    mkdir -p "$carry/lib"
    cp build/corvid build/tests/backend/test_cuda_kernels "$carry/"
    for bin in "$carry/corvid" "$carry/test_cuda_kernels"; do
        # every library the loader resolves but glibc's own, which the GPU
        # machine has (a newer one reads an older binary)
        ldd "$bin" | awk '$3 ~ /^\// { print $3 }' | while read -r lib; do
            case $(basename "$lib") in
            libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | libresolv.so.* | libutil.so.* | ld-linux*) ;;
            *) cp -L "$lib" "$carry/lib/" ;;
            esac
        done
    done
    # the newest glibc symbol version the binaries need: the GPU machine's
    # glibc must be at least this
    need=$(objdump -T "$carry/corvid" "$carry/test_cuda_kernels" "$carry"/lib/* 2>/dev/null |
        grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -k3,3n -u | tail -1)
    echo "cuda-check: $(du -sh "$carry" | cut -f1) in $carry; needs glibc ${need#GLIBC_} or newer"
}

run() {
    cd "$here" || exit 1
    if [ ! -x "$carry/test_cuda_kernels" ]; then
        echo "cuda-check: no $carry: run 'scripts/cuda-check.sh prepare' first and carry cuda-carry" >&2
        exit 1
    fi
    export LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export CORVID_CUDA_CACHE=/tmp/corvid-cuda-check-cache
    log=/tmp/corvid-cuda-check
    mkdir -p "$log"
    summary=""
    failed=0
    step() { # name timeout command...: runs it, its output to log/name and
        # (but for doctor's, of which the cuda lines are shown) the screen
        name=$1 limit=$2
        shift 2
        t0=$(date +%s)
        timeout "$limit" "$@" >"$log/$name" 2>&1
        rc=$?
        if [ "$name" = doctor ]; then grep '^cuda ' "$log/$name"; else cat "$log/$name"; fi
        if grep -q '^cuda: no usable GPU here' "$log/$name"; then
            result="NOT RUN: no usable GPU"
            rc=1
        elif [ $rc = 0 ]; then
            result=ok
        elif [ $rc = 124 ]; then
            result="timed out ($limit s)"
        else
            result="FAILED ($rc)"
        fi
        [ $rc = 0 ] || failed=1
        summary="$summary$(printf '| %s | %s | %ss |' "$name" "$result" $(($(date +%s) - t0)))
"
    }
    echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | head -4
    step doctor 90 "$carry/corvid" doctor --quick --threads 4
    step kernels 270 "$carry/test_cuda_kernels"
    step bench 120 "$carry/test_cuda_kernels" --bench
    echo
    echo "== kernels: $(grep -c '^ok' "$log/kernels") ok, $(grep -c '^FAIL' "$log/kernels") failed;" \
        "$(grep -E '^[0-9]+ cases' "$log/kernels")"
    grep -A12 '^| llama3.1-8b' "$log/bench"
    echo
    echo "| step | result | time |"
    echo "|---|---|---|"
    printf '%s' "$summary"
    return $failed
}

case ${1:-} in
prepare) prepare ;;
run) run || exit 1 ;;
*)
    echo "usage: scripts/cuda-check.sh prepare|run (docs/CUDA.md)" >&2
    exit 2
    ;;
esac
