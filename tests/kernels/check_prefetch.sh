#!/bin/sh
# check_prefetch.sh LIBRARY INSTRUCTION OBJECT... — every object named (a
# tile's file, e.g. dt_q4_0_avx2.c.o) of the static library must contain
# the prefetch instruction named (prefetcht0, prefetcht1). GCC deletes the
# calls of a plain static helper around _mm_prefetch at -O1 and above (it
# judges it free of side effects); that went unnoticed for weeks, with every
# matmul tile streaming its weights unprefetched and 7-16% slower, so the
# compiled code is checked.
set -eu
lib=$1
insn=$2
shift 2
command -v objdump >/dev/null || { echo "objdump (binutils) not found"; exit 77; }
objdump -d "$lib" | awk -v insn="$insn" -v objs="$*" '
    /file format/ { obj = $1; sub(/:$/, "", obj); next }
    $0 ~ insn { n[obj]++ }
    END {
        split(objs, want, " ")
        bad = 0
        for (i in want) {
            printf "%-24s %d %s instructions\n", want[i], n[want[i]], insn
            if (n[want[i]] == 0) bad = 1
        }
        exit bad
    }'
