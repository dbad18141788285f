#!/usr/bin/env bash
# test_package_deb.sh BUILD_DIR PYTHON - the Debian package as an operator gets it:
# `cpack -G DEB` from the build, `dpkg -x` into a scratch root (no root privileges, nothing
# installed on the machine), then from that root only: `mooncake_master --version`, the master
# and the client daemon started from the shipped flagfiles in etc/mooncake (ports and sizes
# overridden after them: later flags win), a put and a get with mooncake_cli, and the packaged
# Python module reading the same key. Every process and file it creates is removed on exit.
set -eu
build=$1
py=${2:-python3}
# process start, READY parsing and cleanup: the shell drivers' helpers
. "$(dirname "$0")/../scripts/bench/lib.sh"
tmp=$(mktemp -d /tmp/mc-deb-XXXXXX)
rm_tmp() { rm -rf "$tmp"; }
mc_install_traps rm_tmp
fail() { echo "test_package_deb: $*" >&2; exit 1; }
MC_READY_SECS=10

cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log" >&2; fail "cpack failed"; }
deb=$(ls "$tmp"/pkg/*.deb)
dpkg-deb -I "$deb" >"$tmp/info"
grep -q '^ Package: mooncake-c' "$tmp/info" || fail "no package name"
grep -q '^ Depends:.*libprotobuf-c1' "$tmp/info" || fail "no shared-library dependencies"
dpkg-deb -I "$deb" conffiles | grep -qx '/etc/mooncake/mooncake_master.flags' ||
  fail "flagfiles are not conffiles"
r=$tmp/root
dpkg -x "$deb" "$r"

"$r/usr/bin/mooncake_master" --version | grep -q '^mooncake_master version ' ||
  fail "mooncake_master --version"
grep -qx 'ExecStart=/usr/bin/mooncake_master --flagfile=/etc/mooncake/mooncake_master.flags' \
  "$r/usr/lib/systemd/system/mooncake-master.service" || fail "master unit"

mc_start_ready "$tmp" master "$r/usr/bin/mooncake_master" \
  --flagfile="$r/etc/mooncake/mooncake_master.flags" --rpc_address=127.0.0.1 --rpc_port=0 \
  --metrics_host=127.0.0.1 --metrics_port=0 --log_level=warn ||
  { cat "$tmp/master.log" >&2; fail "master not ready: $MC_WHY"; }
addr=$MC_READY_RPC

mc_start_ready "$tmp" client "$r/usr/bin/mooncake_client" \
  --flagfile="$r/etc/mooncake/mooncake_client.flags" --master="$addr" --segment_size=16MiB \
  --log_level=warn || { cat "$tmp/client.log" >&2; fail "client daemon not ready: $MC_WHY"; }

printf 'hello from the package' >"$tmp/value"
"$r/usr/bin/mooncake_cli" --master="$addr" put pkg-key "$tmp/value" || fail "cli put"
"$r/usr/bin/mooncake_cli" --master="$addr" get pkg-key -o "$tmp/got" || fail "cli get"
cmp "$tmp/value" "$tmp/got" || fail "get returned other bytes"

(cd / && PYTHONPATH="$r/usr/lib/python3/dist-packages" "$py" -c '
import sys, mooncake_c
assert mooncake_c._native.lib._name.startswith(sys.argv[1]), mooncake_c._native.lib._name
s = mooncake_c.MooncakeDistributedStore()
assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", sys.argv[2]) == 0
assert s.get("pkg-key") == b"hello from the package", s.get("pkg-key")
s.close()
' "$r" "$addr") || fail "python from the package"
echo "test_package_deb: ok ($(basename "$deb"))"
