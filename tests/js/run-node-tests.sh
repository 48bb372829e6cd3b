#!/bin/sh
# Runs node's built-in test runner over tests/js/SUITE/*.test.mjs (one file at
# a time, so server processes do not compete for the 2 cores). Exits 77 (CTest
# skip) when node or tests/js/node_modules is missing: scripts/install-deps.sh
# installs them with `npm ci`.
set -u
suite=$1
cd "$(dirname "$0")" || exit 1
command -v node >/dev/null 2>&1 || { echo "SKIP: node is not installed"; exit 77; }
[ -d node_modules ] || { echo "SKIP: tests/js/node_modules is absent (run scripts/install-deps.sh)"; exit 77; }
exec node --test --test-concurrency=1 "$suite"/*.test.mjs
