#!/bin/sh
# check_prefetch.sh LIBRARY — every AVX2 matmul tile of the kernels library
# must contain prefetch instructions. GCC deletes the calls of a plain static
# helper around _mm_prefetch at -O1 and above (it judges it free of side
# effects); that went unnoticed for weeks, with every tile streaming its
# weights unprefetched and 7-16% slower, so the compiled code is checked.
set -eu
lib=$1
command -v objdump >/dev/null || { echo "objdump (binutils) not found"; exit 77; }
objdump -d "$lib" | awk '
    /file format/ { obj = $1; sub(/:$/, "", obj); next }
    /prefetcht0/ { n[obj]++ }
    END {
        split("q4_0 q4_1 q4_k q5_0 q5_1 q5_k q6_k q8_0 iq4_nl mxfp4", types, " ")
        bad = 0
        for (i in types) {
            o = "dt_" types[i] "_avx2.c.o"
            printf "%-20s %d prefetch instructions\n", o, n[o]
            if (n[o] == 0) bad = 1
        }
        exit bad
    }'
