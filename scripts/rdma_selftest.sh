#!/usr/bin/env bash
# The RDMA transport on real hardware: mooncake_master plus two mooncake_client daemons with
# --protocol=rdma (64 MiB segments), then for a range of sizes `mooncake_cli --protocol=rdma put`
# (one-sided RDMA WRITE into a daemon's segment) and `get` (RDMA READ), comparing the bytes with
# cmp, and a tcp `get` of the same key (the two data planes must agree). The cli's debug log must
# show an RDMA connection, so a silent fall-back to tcp cannot pass. Stops everything with
# SIGTERM and checks every exit status. Then the same cluster again with one --auth_token_file
# for everyone (every RDMA connection proves the token at set-up): an rdma put and get must
# work, and a cli with another token must get nothing.
#
# Needs a host with an RDMA device (InfiniBand, RoCE, or soft-RoCE: `rdma link add rxe0 type rxe
# netdev eth0`). Without one it prints "skipped: no RDMA device" and exits 77 (the conventional
# "skipped" status): it is not part of CI, which has no device.
#   BUILD_DIR         build directory (default build/, built with MC_WITH_RDMA=ON, the default)
#   MC_RDMA_HOST      the IP address the daemons serve on (an address of the RDMA device's
#                     network interface); default: the first IPv4 address of the netdev behind
#                     the first RDMA device, else 127.0.0.1 (rdma_cm loopback)
#   TMPDIR            where the temporary directory goes (default /tmp)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
bin=$BUILD_DIR/bin

devs=$(ls /sys/class/infiniband 2>/dev/null || true)
if [ -z "$devs" ]; then
  echo "skipped: no RDMA device (/sys/class/infiniband is empty or missing)"
  exit 77
fi
for p in mooncake_master mooncake_client mooncake_cli; do
  [ -x "$bin/$p" ] || { echo "!! $bin/$p is not built (scripts/build.sh)" >&2; exit 1; }
done

host=${MC_RDMA_HOST:-}
if [ -z "$host" ]; then
  dev=$(echo "$devs" | head -n1)
  nd=$(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/ndevs/0" 2>/dev/null || true)
  if [ -n "$nd" ] && command -v ip >/dev/null; then
    host=$(ip -4 -o addr show dev "$nd" 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -n1)
  fi
  host=${host:-127.0.0.1}
fi
protected=()
case $host in
  127.*) ;;
  *) protected=(--protected_mode=false) ;; # peers on the device's address are not loopback
esac
echo "== RDMA devices: $(tr '\n' ' ' <<<"$devs"); serving on $host"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mc_rdma_selftest.XXXXXX")
pids=()
names=()
cleanup() {
  local i pid
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[i]}
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  pids=()
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() { # message [log file]
  echo "!! $1" >&2
  if [ -n "${2:-}" ] && [ -s "$2" ]; then
    echo "!! last lines of $2:" >&2
    tail -n 20 "$2" | sed 's/^/   /' >&2
  fi
  exit 1
}

# Starts a daemon (stdout $tmp/NAME.out, stderr $tmp/NAME.log) and waits up to 20 s for READY.
start() { # name cmd...
  local name=$1 pid
  shift
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.log" &
  pid=$!
  pids+=("$pid")
  names+=("$name")
  READY=""
  for _ in $(seq 200); do
    READY=$(grep -m1 '^READY ' "$tmp/$name.out" || true)
    [ -n "$READY" ] && break
    kill -0 "$pid" 2>/dev/null || fail "$name exited before READY" "$tmp/$name.log"
    sleep 0.1
  done
  [ -n "$READY" ] || fail "$name did not print READY within 20 s" "$tmp/$name.log"
  echo "== $name (pid $pid): $READY"
}

stop_all() {
  local i pid st
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[i]}
    kill -TERM "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && fail "${names[i]} did not stop within 10 s of SIGTERM"
    st=0
    wait "$pid" || st=$?
    unset 'pids[i]'
    echo "== ${names[i]} exited with status $st"
    [ "$st" = 0 ] || fail "${names[i]} exited with status $st" "$tmp/${names[i]}.log"
  done
}

start master "$bin/mooncake_master" --rpc_port=0 --metrics_port=0 --rpc_address=127.0.0.1 \
  --metrics_host=127.0.0.1 --log_level=warn
rpc=$(sed -n 's/.*rpc=\([^ ]*\).*/\1/p' <<<"$READY")
[ -n "$rpc" ] || fail "unexpected READY line from the master: $READY"
for n in 1 2; do
  start "client$n" "$bin/mooncake_client" --master="$rpc" --host="$host" --data_port=0 \
    --segment_size=64MiB --protocol=rdma "${protected[@]}" --log_level=info
  grep -q 'comp=rdma msg="listening"' "$tmp/client$n.log" ||
    fail "client$n does not listen for RDMA connections" "$tmp/client$n.log"
done

cli() { "$bin/mooncake_cli" --master="$rpc" --timeout=5000 "$@"; }

sizes=(1 4095 4096 65535 65536 65537 1048576 $((4 * 1048576 + 123)) $((24 * 1048576 + 7)))
for s in "${sizes[@]}"; do
  key=rdma/selftest/$s
  head -c "$s" /dev/urandom >"$tmp/in.bin"
  cli --protocol=rdma --log_level=debug put "$key" "$tmp/in.bin" 2>"$tmp/put.log" ||
    fail "rdma put of $s bytes failed" "$tmp/put.log"
  grep -q 'comp=rdma msg="connected"' "$tmp/put.log" ||
    fail "the put of $s bytes did not use an RDMA connection" "$tmp/put.log"
  cli --protocol=rdma --log_level=debug get "$key" -o "$tmp/out.bin" 2>"$tmp/get.log" ||
    fail "rdma get of $s bytes failed" "$tmp/get.log"
  grep -q 'comp=rdma msg="connected"' "$tmp/get.log" ||
    fail "the get of $s bytes did not use an RDMA connection" "$tmp/get.log"
  cmp "$tmp/in.bin" "$tmp/out.bin" || fail "rdma: the $s bytes read back differ"
  cli get "$key" -o "$tmp/out_tcp.bin" || fail "tcp get of $s bytes failed"
  cmp "$tmp/in.bin" "$tmp/out_tcp.bin" || fail "tcp read of an rdma-written value differs"
  echo "== $s bytes: rdma put, rdma get and tcp get agree"
done

stop_all

# ---- with an auth token: the rdma_cm set-up proves it (hello, challenge, prove) ----
printf '%s\n' "rdma-selftest-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$tmp/token"
printf '%s\n' "another-token-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$tmp/wrong"
chmod 600 "$tmp/token" "$tmp/wrong"
tok=(--auth_token_file="$tmp/token")
start master "$bin/mooncake_master" --rpc_port=0 --metrics_port=0 --rpc_address=127.0.0.1 \
  --metrics_host=127.0.0.1 --log_level=warn "${tok[@]}"
rpc=$(sed -n 's/.*rpc=\([^ ]*\).*/\1/p' <<<"$READY")
for n in 1 2; do
  start "tclient$n" "$bin/mooncake_client" --master="$rpc" --host="$host" --data_port=0 \
    --segment_size=64MiB --protocol=rdma "${tok[@]}" --log_level=info
done
key=rdma/selftest/token
head -c 1048583 /dev/urandom >"$tmp/in.bin"
cli --protocol=rdma "${tok[@]}" --log_level=debug put "$key" "$tmp/in.bin" 2>"$tmp/put.log" ||
  fail "rdma put with a token failed" "$tmp/put.log"
grep -q 'comp=rdma msg="connected".*auth=1' "$tmp/put.log" ||
  fail "the put with a token did not use an authenticated RDMA connection" "$tmp/put.log"
cli --protocol=rdma "${tok[@]}" get "$key" -o "$tmp/out.bin" 2>"$tmp/get.log" ||
  fail "rdma get with a token failed" "$tmp/get.log"
cmp "$tmp/in.bin" "$tmp/out.bin" || fail "rdma with a token: the bytes read back differ"
if cli --protocol=rdma --auth_token_file="$tmp/wrong" get "$key" -o "$tmp/out2.bin" 2>/dev/null; then
  fail "a cli with the wrong token read the value"
fi
echo "== with a token: rdma put and get agree, a wrong token is refused"
stop_all
echo "== rdma selftest passed"
