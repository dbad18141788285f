#!/bin/sh
# test_package_deb.sh BUILD_DIR PYTHON - the Debian package as an operator gets it:
# `cpack -G DEB` from the build, `dpkg -x` into a scratch root (no root privileges, nothing
# installed on the machine), then from that root only: `mooncake_master --version`, the master
# and the client daemon started from the shipped flagfiles in etc/mooncake (ports and sizes
# overridden after them: later flags win), a put and a get with mooncake_cli, and the packaged
# Python module reading the same key. Every process and file it creates is removed on exit.
set -eu
build=$1
py=${2:-python3}
tmp=$(mktemp -d /tmp/mc-deb-XXXXXX)
pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "test_package_deb: $*" >&2; exit 1; }

# wait_ready FILE: up to 10 s for a READY line in FILE
wait_ready() {
  i=0
  while [ $i -lt 100 ]; do
    grep -q '^READY ' "$1" 2>/dev/null && return 0
    sleep 0.1
    i=$((i + 1))
  done
  return 1
}

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

"$r/usr/bin/mooncake_master" --flagfile="$r/etc/mooncake/mooncake_master.flags" \
  --rpc_address=127.0.0.1 --rpc_port=0 --metrics_host=127.0.0.1 --metrics_port=0 \
  --log_level=warn >"$tmp/master.out" 2>"$tmp/master.err" &
pids="$pids $!"
wait_ready "$tmp/master.out" || { cat "$tmp/master.err" >&2; fail "master not ready"; }
addr=$(sed -n 's/^READY rpc=\([^ ]*\).*/\1/p' "$tmp/master.out")

"$r/usr/bin/mooncake_client" --flagfile="$r/etc/mooncake/mooncake_client.flags" \
  --master="$addr" --segment_size=16MiB --log_level=warn >"$tmp/client.out" 2>"$tmp/client.err" &
pids="$pids $!"
wait_ready "$tmp/client.out" || { cat "$tmp/client.err" >&2; fail "client daemon not ready"; }

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
