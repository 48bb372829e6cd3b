#!/bin/sh
# oracle_at_level.sh LEVEL ORACLE — runs the release build's oracle
# (test_engine_reference) with CORVID_ISA=LEVEL. A level this CPU cannot
# run says so by name ("avx512: not on this CPU"), which CTest reports as a
# skip: the suite's totals then say which levels ran, and no level passes
# that did not run. Exit 77 when the release build is absent.
level=$1
oracle=$2
if [ ! -x "$oracle" ]; then
    echo "SKIP: no release build at $oracle"
    exit 77
fi
got=$(CORVID_ISA=$level "$oracle" --print-isa 2>/dev/null)
if [ "$got" != "$level" ]; then
    echo "$level: not on this CPU (CORVID_ISA=$level runs $got)"
    exit 0
fi
CORVID_ISA=$level exec "$oracle"
