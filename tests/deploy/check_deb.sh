#!/bin/sh
# check_deb.sh CORVID — the .deb scripts/build-deb.sh makes from the release
# binary CORVID, checked without installing it on this machine:
#   - its control data: the package, the libraries it needs (found by
#     dpkg-shlibdeps) and adduser, /etc/corvid/corvid.env a conffile;
#   - `dpkg -x` into a throwaway root puts every file where the unit expects
#     it: the binary the unit runs (and it runs), the EnvironmentFile (mode
#     0600: it holds the API key), every variable ExecStart uses defined in it;
#   - `systemd-analyze verify` of the unit in that root (the host's own units
#     beside it, for the targets it names) says nothing at all, and
#     `systemd-analyze security` rates its exposure 2.0 or less (the
#     hardening is there);
#   - ExecStart, expanded from the env file as systemd does, is a command line
#     `corvid serve` accepts (a missing model is exit 1, not a usage error);
#   - the maintainer scripts parse.
# Exit 77 (CTest: skipped; a failure in CI) when a tool is missing.
set -u
bin=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
for t in dpkg-deb dpkg-shlibdeps systemd-analyze strip; do
    command -v $t >/dev/null || { echo "SKIP: $t is not installed (scripts/install-deps.sh)"; exit 77; }
done
[ -x "$bin" ] || { echo "SKIP: $bin is not built (make release)"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
check() { # NAME COMMAND...: passes when the command succeeds
    name=$1; shift
    if "$@" >"$tmp/out" 2>&1; then ok "$name"; else fail "$name"; sed 's/^/     /' "$tmp/out"; fi
}

deb=$("$here/scripts/build-deb.sh" "$bin" "$tmp") || { echo "FAIL build-deb.sh"; exit 1; }
version=$("$bin" version | sed -n '1s/^corvid //p')
check "the package is corvid $version" sh -c "[ \"\$(dpkg-deb -f '$deb' Package Version)\" = 'Package: corvid
Version: $version' ]"
check "it depends on the libraries the binary links and on adduser" sh -c "dpkg-deb -f '$deb' Depends |
    grep -q 'libmicrohttpd12' && dpkg-deb -f '$deb' Depends | grep -q 'libjansson4' &&
    dpkg-deb -f '$deb' Depends | grep -q 'adduser'"
check "corvid.env is a conffile" sh -c "dpkg-deb --ctrl-tarfile '$deb' | tar -xO ./conffiles | grep -qx /etc/corvid/corvid.env"

root=$tmp/root
dpkg -x "$deb" "$root"
unit=$root/lib/systemd/system/corvid.service
check "the unit is in /lib/systemd/system" test -f "$unit"
exe=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
envf=$(sed -n 's/^EnvironmentFile=-\{0,1\}//p' "$unit")
check "the binary the unit runs ($exe) is in the package and runs" sh -c "'$root$exe' version | grep -qx 'corvid $version'"
check "the unit's EnvironmentFile ($envf) is in the package, mode 0600" sh -c "[ \"\$(stat -c %a '$root$envf')\" = 600 ]"
vars=$(sed -n 's/^ExecStart=//p' "$unit" | grep -o '\$[{]\{0,1\}[A-Z_]*' | tr -d '${' | sort -u)
for v in $vars; do
    check "ExecStart's \$$v is set in corvid.env" grep -q "^$v=" "$root$envf"
done
check "the maintainer scripts parse" sh -c "dpkg-deb --ctrl-tarfile '$deb' | tar -x -C '$tmp' ./postinst ./prerm ./postrm &&
    sh -n '$tmp/postinst' && sh -n '$tmp/prerm' && sh -n '$tmp/postrm'"

# The targets the unit names come from the host's units, beside it.
cp -rn /lib/systemd/system/. "$root/lib/systemd/system/" 2>/dev/null
systemd-analyze verify --root="$root" /lib/systemd/system/corvid.service >"$tmp/verify" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ ! -s "$tmp/verify" ]; then ok "systemd-analyze verify finds nothing"; else
    fail "systemd-analyze verify finds nothing (exit $rc)"; sed 's/^/     /' "$tmp/verify"; fi
level=$(systemd-analyze security --offline=true --root="$root" /lib/systemd/system/corvid.service 2>/dev/null |
        sed -n 's/.*Overall exposure level for corvid.service: \([0-9.]*\).*/\1/p')
check "systemd-analyze security rates the exposure ${level:-?} (at most 2.0)" \
    awk -v l="${level:-99}" 'BEGIN { exit !(l <= 2.0) }'

# ExecStart as systemd expands it: ${V} one word, $V split on blanks.
set -a
. "$root$envf"
set +a
CORVID_MODEL=$tmp/no-such-model.gguf
cmd=$(sed -n 's/^ExecStart=//p' "$unit" | sed 's/\${\([A-Z_]*\)}/"$\1"/g')
eval "set -- $cmd"
shift
"$root$exe" "$@" >"$tmp/serve" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "no-such-model" "$tmp/serve"; then ok "corvid serve accepts the unit's command line"; else
    fail "corvid serve accepts the unit's command line (exit $rc)"; sed 's/^/     /' "$tmp/serve"; fi

echo "$fails failed"
[ $fails -eq 0 ]
