#!/bin/sh
# check_prometheus.sh — deploy/prometheus/ as Prometheus's own tool reads it:
# `promtool check config` (the config and its rule file) and `promtool test
# rules` (prometheus_rules_test.yml: the recording rules' values and the
# alerts over series a replica exports). Exit 77 (CTest: skipped; a failure
# in CI) without promtool.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
command -v promtool >/dev/null || { echo "SKIP: promtool is not installed (scripts/install-deps.sh)"; exit 77; }
promtool check config "$here/deploy/prometheus/prometheus.yml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$here/deploy/prometheus/corvid.rules.yml" "$here/tests/deploy/prometheus_rules_test.yml" "$tmp/"
promtool test rules "$tmp/prometheus_rules_test.yml"
