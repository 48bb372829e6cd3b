#!/bin/sh
# check_vex.sh LIBRARY — no object of the avx-vnni level (*_avxvnni.c.o) in
# the static library may hold an EVEX-encoded (AVX-512) instruction: the
# CPUs of that level (Alder Lake and later desktop Intel) do not run them,
# and a test machine that has AVX-512 runs them without noticing. Inline
# assembly is where one slips in: without the {vex} pseudo-prefix the
# assembler writes vpdpbusd in its EVEX form. In 64-bit code an instruction
# whose first byte is 0x62 is EVEX (nothing may precede that prefix).
set -eu
lib=$1
command -v objdump >/dev/null || { echo "objdump (binutils) not found"; exit 77; }
objdump -d "$lib" | awk '
    /file format/ { obj = $1; sub(/:$/, "", obj); vnni = obj ~ /_avxvnni\.c\.o$/; n_obj += vnni; next }
    vnni && /^ *[0-9a-f]+:\t/ {
        # address, bytes, mnemonic; a long instruction continues its bytes on
        # a line of two fields, which is not an instruction start
        if (split($0, f, "\t") < 3) next
        n_insn++
        if (f[2] ~ /^62 /) { print obj ": " $0; bad++ }
    }
    END {
        printf "%d avx-vnni objects, %d instructions, %d EVEX-encoded\n", n_obj, n_insn, bad
        exit (bad > 0 || n_obj == 0)
    }'
