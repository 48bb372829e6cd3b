#!/bin/sh
# build-deb.sh — corvid as a Debian package, built with dpkg-deb alone:
#   /usr/bin/corvid                        the release binary (stripped)
#   /lib/systemd/system/corvid.service     deploy/systemd/corvid.service
#   /etc/corvid/corvid.env                 deploy/systemd/corvid.env (a conffile)
#   /usr/share/doc/corvid/README.md        deploy/README.md
# and the maintainer scripts of deploy/debian/ (the system user corvid).
# Depends are the shared libraries' packages as dpkg-shlibdeps finds them,
# plus adduser. Install with `apt install ./corvid_VERSION_ARCH.deb`, then set
# the model in /etc/corvid/corvid.env and `systemctl enable --now corvid`.
#
# usage: scripts/build-deb.sh [BINARY [OUTDIR]]   (default build/corvid, build)
# Prints the .deb's path. Needs dpkg-dev (build-essential brings it).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/corvid}
out=${2:-$here/build}
[ -x "$bin" ] || { echo "build-deb: $bin is not built (make release)" >&2; exit 1; }
version=$("$bin" version | sed -n '1s/^corvid \([0-9][0-9A-Za-z.+~-]*\).*/\1/p')
[ -n "$version" ] || { echo "build-deb: cannot read the version from '$bin version'" >&2; exit 1; }
arch=$(dpkg --print-architecture)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/debian/corvid
install -d "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" "$root/etc/corvid" "$root/usr/share/doc/corvid"
install -m 0755 "$bin" "$root/usr/bin/corvid"
strip --strip-unneeded "$root/usr/bin/corvid"
install -m 0644 "$here/deploy/systemd/corvid.service" "$root/lib/systemd/system/corvid.service"
install -m 0600 "$here/deploy/systemd/corvid.env" "$root/etc/corvid/corvid.env"
install -m 0644 "$here/deploy/README.md" "$root/usr/share/doc/corvid/README.md"
for s in postinst prerm postrm; do
    install -m 0755 "$here/deploy/debian/$s" "$root/DEBIAN/$s"
done
echo /etc/corvid/corvid.env > "$root/DEBIAN/conffiles"

# dpkg-shlibdeps reads debian/control of a source tree: a minimal one.
printf 'Source: corvid\n\nPackage: corvid\nArchitecture: any\n' > "$work/debian/control"
shlibs=$(cd "$work" && dpkg-shlibdeps -O debian/corvid/usr/bin/corvid 2>/dev/null |
         sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "build-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: corvid
Version: $version
Architecture: $arch
Maintainer: corvid developers <corvid@localhost>
Installed-Size: $size
Depends: $shlibs, adduser
Section: net
Priority: optional
Description: local LLM inference server for coding agents
 corvid serves an open model (GGUF) behind OpenAI- and Anthropic-style HTTP
 APIs, so Claude Code, Codex CLI, OpenCode or an SDK need no adapter, with
 continuous batching, a prefix cache that survives restarts and tool calls
 for every model family. This package runs it as the systemd service
 corvid.service, configured in /etc/corvid/corvid.env.
CONTROL
mkdir -p "$out"
deb=$out/corvid_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
