#!/usr/bin/env bash
# The RDMA hardware plan: what to run, in order, the first time the store meets a real NIC. Each
# step prints "== step: ..." lines and appends to $OUT/results.txt; any failure stops the run
# with "!!" and the last lines of the relevant log. Nothing here has run on hardware yet: the
# machines the transport was written on have no RDMA device (docs/rdma.md says what has run
# where).
#
#   0 environment   kernel, RLIMIT_MEMLOCK, devices, ports, link layer, the netdev and address
#                   used, `rdma res show` counts (the baseline the last steps come back to)
#   1 baselines     rping (connection set-up and a ping-pong over rdma_cm), then ib_write_bw and
#                   ib_read_bw (perftest) at 4 KiB .. 4 MiB on the same address: what the NIC
#                   can do with nothing of ours in the way
#   2 the store     a master and two mooncake_client daemons with --protocol=rdma; mooncake_cli
#                   put/get at 1 B .. 24 MiB compared byte for byte (and read back over tcp),
#                   the debug log must show an RDMA connection (no silent tcp); then
#                   mooncake_bench transfer --protocol=rdma at 4 KiB .. 4 MiB, single and batch
#                   (--batch 16), printed beside the step 1 figures as ratios
#   3 rkey reuse    the mount-epoch fence: a holder is stopped past its lease so the master
#                   fences its segment, then resumed; the re-mounted segment must carry a new
#                   rkey (mlx5's mkey cache can hand a just-revoked key back; the transport
#                   registers the new region before dropping the old one to prevent it)
#   4 holder kill   a Get loop on a key with a replica on each daemon while one holder is
#                   SIGKILLed: time to the first error and to the next success (failover), and
#                   `rdma res show qp` back to its count once the loop ends
#   5 link down     (MC_RDMA_LINK_TEST=1, needs root and a link you may take down) the same
#                   loop while the netdev goes down for 5 s: errors, the async port event in the
#                   daemons' logs, recovery after it comes back, `rdma res show` to baseline
#   6 token rounds  the cluster with one --auth_token_file: rdma put/get work, the connection
#                   proved the token (auth=1), a cli with another token gets nothing
#
# Needs a host with an RDMA device (InfiniBand, RoCE, or soft-RoCE: `rdma link add rxe0 type rxe
# netdev eth0`). Without one it prints "skipped: no RDMA device" and exits 77 (not part of CI).
#   BUILD_DIR         build directory (default build/, built with MC_WITH_RDMA=ON, the default)
#   MC_RDMA_HOST      the IPv4 address to serve on; default: the first IPv4 address of the netdev
#                     of the first RDMA device that has one (`rdma link`, else sysfs). No address:
#                     the run fails, saying so (a loopback address never works with rdma_cm)
#   MC_RDMA_DEVICE    the device for perftest and rdma_devices (default: the one of that netdev)
#   MC_RDMA_LINK_TEST 1 = run step 5 (takes the netdev down for 5 s)
#   MC_RDMA_QUICK     1 = sizes 4 KiB and 1 MiB only, fewer runs
#   OUT               where logs and results go (default: a new directory under ${TMPDIR:-/tmp},
#                     kept at the end and printed)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
bin=$BUILD_DIR/bin
# shellcheck source=bench/lib.sh
. scripts/bench/lib.sh

devs=$(ls /sys/class/infiniband 2>/dev/null || true)
if [ -z "$devs" ]; then
  echo "skipped: no RDMA device (/sys/class/infiniband is empty or missing)"
  exit 77
fi
for p in mooncake_master mooncake_client mooncake_cli mooncake_bench; do
  [ -x "$bin/$p" ] || { echo "!! $bin/$p is not built (scripts/build.sh)" >&2; exit 1; }
done

OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/mc_rdma_plan.XXXXXX")}
mkdir -p "$OUT"
LOG=$OUT/tools.log
RES=$OUT/results.txt
: >"$RES"
mc_install_traps
note() { echo "== $*"; echo "$*" >>"$RES"; }
fail() { # message [log file]
  echo "!! $1" >&2
  if [ -n "${2:-}" ] && [ -s "$2" ]; then
    echo "!! last lines of $2:" >&2
    tail -n 20 "$2" | sed 's/^/   /' >&2
  fi
  echo "!! logs and results so far: $OUT" >&2
  exit 1
}

# ---- the RDMA netdev and its address ------------------------------------------------------

# "dev netdev" pairs: `rdma link` (iproute2) knows RoCE and IPoIB netdevs; sysfs is the fallback.
netdev_pairs() {
  if command -v rdma >/dev/null 2>&1; then
    rdma link show 2>/dev/null | sed -n 's|^link \([^/]*\)/[0-9]* .* netdev \([^ ]*\).*|\1 \2|p'
  fi
  local d n
  for d in $devs; do
    for n in /sys/class/infiniband/"$d"/device/net/*; do
      [ -e "$n" ] && echo "$d $(basename "$n")"
    done
  done
}
ipv4_of() { ip -4 -o addr show dev "$1" 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -n1; }

host=${MC_RDMA_HOST:-}
dev=${MC_RDMA_DEVICE:-}
netdev=""
while read -r d n; do
  [ -n "$d" ] || continue
  a=$(ipv4_of "$n")
  if [ -n "$host" ]; then
    [ "$a" = "$host" ] && { netdev=$n; dev=${dev:-$d}; break; }
  elif [ -n "$a" ]; then
    host=$a netdev=$n dev=${dev:-$d}
    break
  fi
done < <(netdev_pairs | sort -u)
if [ -z "$host" ]; then
  fail "no IPv4 address on any RDMA device's netdev ($(netdev_pairs | tr '\n' ' ')): give the \
netdev an address, or set MC_RDMA_HOST to this machine's address on the RDMA network"
fi
case $host in
  127.* | ::1 | localhost) fail "MC_RDMA_HOST=$host is loopback: rdma_cm cannot bind it (ENODEV)" ;;
esac
dev=${dev:-$(echo "$devs" | head -n1)}

# ---- 0: environment -----------------------------------------------------------------------
note "0 environment: kernel $(uname -r); memlock $(ulimit -l); devices $(tr '\n' ' ' <<<"$devs")"
note "0 serving on $host (netdev ${netdev:-unknown}, device $dev)"
for p in /sys/class/infiniband/"$dev"/ports/*; do
  note "0 $dev port $(basename "$p"): $(cat "$p/state" 2>/dev/null) $(cat "$p/link_layer" 2>/dev/null) $(cat "$p/rate" 2>/dev/null)"
done
[ "$(ulimit -l)" = unlimited ] || note "0 WARNING: memlock is $(ulimit -l) KiB: a large segment will fail to register (raise it: ulimit -l unlimited)"
res_count() { # kind: lines of `rdma res show KIND` (0 without the tool)
  if command -v rdma >/dev/null 2>&1; then rdma res show "$1" 2>/dev/null | grep -c . || true; else echo 0; fi
}
base_qp=$(res_count qp)
base_mr=$(res_count mr)
note "0 rdma res baseline: qp=$base_qp mr=$base_mr"

if [ "${MC_RDMA_QUICK:-0}" = 1 ]; then
  sizes=(4096 1048576)
  runs=200
else
  sizes=(4096 16384 65536 262144 1048576 4194304)
  runs=2000
fi

# ---- 1: baselines -------------------------------------------------------------------------
declare -A wbw rbw
if command -v rping >/dev/null 2>&1; then
  mc_start rping -s -a "$host" -p 19876 -C 10 >/dev/null 2>>"$LOG"
  srv=$!
  sleep 1
  if mc_bounded 30 "$OUT/rping.txt" rping -c -a "$host" -p 19876 -C 10 -S 4096 -v; then
    note "1 rping: 10 ping-pongs over rdma_cm to $host ok"
  else
    fail "rping failed: rdma_cm cannot connect on $host (fix the fabric before the store)" "$LOG"
  fi
  mc_stop "$srv"
  mc_forget "$srv"
else
  note "1 rping: not installed (rdmacm-utils), skipped"
fi
perftest() { # tool size -> "Gb/s" or ""
  local tool=$1 size=$2 port=$((18515 + RANDOM % 1000)) srv
  mc_start "$tool" -d "$dev" -p "$port" -s "$size" -n "$runs" -R --report_gbits >/dev/null 2>>"$LOG"
  srv=$!
  sleep 1
  if mc_bounded 60 "$OUT/$tool.$size.txt" "$tool" -d "$dev" -p "$port" -s "$size" -n "$runs" -R \
    --report_gbits "$host"; then
    awk -v s="$size" '$1 == s {print $4}' "$OUT/$tool.$size.txt" | tail -n1
  fi
  mc_stop "$srv"
  mc_forget "$srv"
}
for tool in ib_write_bw ib_read_bw; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    note "1 $tool: not installed (perftest), skipped"
    continue
  fi
  for s in "${sizes[@]}"; do
    g=$(perftest "$tool" "$s")
    [ -n "$g" ] || fail "$tool at $s bytes failed" "$OUT/$tool.$s.txt"
    if [ "$tool" = ib_write_bw ]; then wbw[$s]=$g; else rbw[$s]=$g; fi
    note "1 $tool size=$s Gb/s=$g"
  done
done

# ---- the cluster --------------------------------------------------------------------------
daemons=() # pids of the two holders
start_proc() { # name cmd... -> READY in $READY, pid in $PID
  local name=$1
  shift
  "$@" >"$OUT/$name.out" 2>"$OUT/$name.log" &
  PID=$!
  MC_CHILDREN+=("$PID")
  READY=""
  for _ in $(seq 200); do
    READY=$(grep -m1 '^READY ' "$OUT/$name.out" || true)
    [ -n "$READY" ] && break
    kill -0 "$PID" 2>/dev/null || fail "$name exited before READY" "$OUT/$name.log"
    sleep 0.1
  done
  [ -n "$READY" ] || fail "$name did not print READY within 20 s" "$OUT/$name.log"
}
client_flags=() # extra flags for the daemons only
cluster() { # tag [extra flags for everyone...]
  local tag=$1 n
  shift
  start_proc "$tag-master" "$bin/mooncake_master" --rpc_port=0 --metrics_port=0 \
    --rpc_address=127.0.0.1 --metrics_host=127.0.0.1 --log_level=warn "$@"
  rpc=$(sed -n 's/.*rpc=\([^ ]*\).*/\1/p' <<<"$READY")
  [ -n "$rpc" ] || fail "unexpected READY line from the master: $READY"
  daemons=()
  for n in 1 2; do
    start_proc "$tag-client$n" "$bin/mooncake_client" --master="$rpc" --host="$host" \
      --data_port=0 --segment_size=256MiB --protocol=rdma --log_level=info "$@" \
      ${client_flags[@]+"${client_flags[@]}"}
    grep -q 'comp=rdma msg="listening"' "$OUT/$tag-client$n.log" ||
      fail "client$n does not listen for RDMA connections" "$OUT/$tag-client$n.log"
    daemons+=("$PID")
  done
}
stop_cluster() { mc_cleanup; daemons=(); }
cli() { "$bin/mooncake_cli" --master="$rpc" --host="$host" --timeout=5000 "$@"; }

# ---- 2: the store's own put/get beside the baselines ---------------------------------------
# Without a token, protected mode admits RDMA peers from this host's own addresses, but the TCP
# peer port (tcp reads, PeerDiskRead) admits loopback only, and everyone here serves on $host
client_flags=(--protected_mode=false)
cluster plain
for s in 1 4095 4096 65537 1048576 $((4 * 1048576 + 123)) $((24 * 1048576 + 7)); do
  key=rdma/plan/$s
  head -c "$s" /dev/urandom >"$OUT/in.bin"
  cli --protocol=rdma --log_level=debug put "$key" "$OUT/in.bin" 2>"$OUT/put.log" ||
    fail "rdma put of $s bytes failed" "$OUT/put.log"
  grep -q 'comp=rdma msg="connected"' "$OUT/put.log" ||
    fail "the put of $s bytes did not use an RDMA connection" "$OUT/put.log"
  cli --protocol=rdma --log_level=debug get "$key" -o "$OUT/out.bin" 2>"$OUT/get.log" ||
    fail "rdma get of $s bytes failed" "$OUT/get.log"
  cmp "$OUT/in.bin" "$OUT/out.bin" || fail "rdma: the $s bytes read back differ"
  cli get "$key" -o "$OUT/out_tcp.bin" 2>/dev/null || fail "tcp get of $s bytes failed"
  cmp "$OUT/in.bin" "$OUT/out_tcp.bin" || fail "tcp read of an rdma-written value differs"
done
note "2 cli: rdma put, rdma get and tcp get agree at 1 B .. 24 MiB"
size_list=$(IFS=,; echo "${sizes[*]}")
for b in 1 16; do
  mc_bounded 600 "$OUT/bench.b$b.json" "$bin/mooncake_bench" transfer --master="$rpc" \
    --protocol=rdma --host="$host" --mode=between --sizes="$size_list" --batch="$b" \
    --segment_size=256MiB || fail "mooncake_bench transfer --batch=$b failed" "$LOG"
  while read -r line; do
    op=$(sed -n 's/.*"op":"\([a-z]*\)".*/\1/p' <<<"$line")
    sz=$(sed -n 's/.*"size":\([0-9]*\).*/\1/p' <<<"$line")
    bps=$(sed -n 's/.*"bytes_per_s":\([0-9.e+]*\).*/\1/p' <<<"$line")
    [ -n "$op" ] && [ -n "$bps" ] || continue
    ref=${wbw[$sz]:-}
    [ "$op" = get ] && ref=${rbw[$sz]:-}
    ours=$(awk -v b="$bps" 'BEGIN {printf "%.2f", b * 8 / 1e9}')
    ratio=$([ -n "$ref" ] && awk -v o="$ours" -v r="$ref" 'BEGIN {printf "%.2f", o / r}' || echo n/a)
    note "2 store $op batch=$b size=$sz Gb/s=$ours perftest=${ref:-n/a} ratio=$ratio"
  done <"$OUT/bench.b$b.json"
done

# ---- 3: the rkey-reuse probe ----------------------------------------------------------------
stat_field() { # key field -> the first replica's field (stat --json)
  cli stat "$1" --json 2>/dev/null | sed -n "s/.*\"$2\":\"\{0,1\}\([^\",}]*\).*/\1/p" | head -n1
}
# the daemon whose endpoint holds key (index into daemons), from the READY lines
holder_of() { # key -> 0 or 1
  local ep n
  ep=$(stat_field "$1" endpoint)
  for n in 1 2; do
    grep -q "endpoint=$ep\$" "$OUT/$tag_now-client$n.out" && { echo $((n - 1)); return; }
  done
  echo -1
}
tag_now="plain"
head -c 65536 /dev/urandom >"$OUT/in.bin"
cli --protocol=rdma put rdma/plan/probe/0 "$OUT/in.bin" 2>/dev/null || fail "probe put failed"
h=$(holder_of rdma/plan/probe/0)
[ "$h" -ge 0 ] || fail "cannot tell which daemon holds the probe key"
ep=$(stat_field rdma/plan/probe/0 endpoint)
k_before=$(stat_field rdma/plan/probe/0 rkey)
[ -n "$k_before" ] && [ "$k_before" != 0 ] || fail "the probe key's replica has no rkey"
kill -STOP "${daemons[$h]}"
sleep 12 # past --client_ttl (10 s): the master expires the holder and fences its segment
kill -CONT "${daemons[$h]}"
k_after=""
for i in $(seq 1 60); do # new keys until one lands on the re-mounted segment
  cli --protocol=rdma put "rdma/plan/probe/$i" "$OUT/in.bin" 2>/dev/null || { sleep 0.5; continue; }
  [ "$(stat_field "rdma/plan/probe/$i" endpoint)" = "$ep" ] || continue
  k_after=$(stat_field "rdma/plan/probe/$i" rkey)
  break
done
[ -n "$k_after" ] || fail "no key landed on the re-mounted segment of $ep" "$OUT/plain-client$((h + 1)).log"
[ "$k_after" != "$k_before" ] ||
  fail "the re-mounted segment carries the revoked rkey $k_before: a stale descriptor would reach new bytes"
grep -q 're-registered\|reregister\|ReMount\|remount' "$OUT/plain-client$((h + 1)).log" || true
note "3 rkey reuse: the re-mount changed $ep's rkey $k_before -> $k_after"

# ---- 4: a holder killed during a Get loop --------------------------------------------------
getloop() { # seconds key -> lines "ms rc" in $OUT/loop.txt
  local end=$((SECONDS + $1)) t0 rc
  : >"$OUT/loop.txt"
  while [ $SECONDS -lt $end ]; do
    t0=$(date +%s%3N)
    rc=0
    cli --protocol=rdma get "$2" -o "$OUT/loop.bin" 2>/dev/null || rc=$?
    echo "$(($(date +%s%3N) - t0)) $rc" >>"$OUT/loop.txt"
  done
}
summarize_loop() { # label: calls, errors, the first error and the time it took to report
  awk -v l="$1" '{n++; if ($2 != 0) {e++; if (!fe) {fe = NR; fms = $1}}}
    END {printf "%s: %d gets, %d errors, first error at call %d after %d ms\n", l, n, e, fe, fms}' \
    "$OUT/loop.txt"
}
head -c 1048576 /dev/urandom >"$OUT/in.bin"
cli --protocol=rdma put rdma/plan/kill "$OUT/in.bin" 2>/dev/null || fail "put for the kill test failed"
h=$(holder_of rdma/plan/kill)
[ "$h" -ge 0 ] || fail "cannot tell which daemon holds the kill test's key"
victim=${daemons[$h]}
(sleep 3; kill -KILL "$victim") &
getloop 10 rdma/plan/kill
wait $! 2>/dev/null || true
mc_forget "$victim"
note "4 holder kill: $(summarize_loop 'get loop')"
stop_cluster
sleep 2
note "4 rdma res after the cluster stopped: qp=$(res_count qp) (baseline $base_qp) mr=$(res_count mr) (baseline $base_mr)"
[ "$(res_count qp)" -le "$base_qp" ] || fail "queue pairs left behind after every process ended"

# ---- 5: link down during a Get loop (opt-in) -----------------------------------------------
if [ "${MC_RDMA_LINK_TEST:-0}" = 1 ] && [ -n "$netdev" ]; then
  client_flags=(--protected_mode=false)
  cluster link
  tag_now="link"
  cli --protocol=rdma put rdma/plan/link "$OUT/in.bin" || fail "put for the link test failed"
  (sleep 3; ip link set "$netdev" down; sleep 5; ip link set "$netdev" up) &
  getloop 20 rdma/plan/link
  wait $! 2>/dev/null || true
  note "5 link down: $(summarize_loop 'get loop')"
  grep -h 'lost its link\|port active' "$OUT"/link-client*.log | head -n 4 >>"$RES" || true
  stop_cluster
  sleep 2
  note "5 rdma res after: qp=$(res_count qp) (baseline $base_qp)"
else
  note "5 link down: skipped (MC_RDMA_LINK_TEST=1 runs it; needs root)"
fi

# ---- 6: token rounds ------------------------------------------------------------------------
printf '%s\n' "rdma-plan-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$OUT/token"
printf '%s\n' "another-token-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$OUT/wrong"
chmod 600 "$OUT/token" "$OUT/wrong"
client_flags=()
cluster token --auth_token_file="$OUT/token"
head -c 1048583 /dev/urandom >"$OUT/in.bin"
for round in 1 2 3; do
  key=rdma/plan/token/$round
  cli --protocol=rdma --auth_token_file="$OUT/token" --log_level=debug put "$key" "$OUT/in.bin" \
    2>"$OUT/put.log" || fail "rdma put with a token failed (round $round)" "$OUT/put.log"
  grep -q 'comp=rdma msg="connected".*auth=1' "$OUT/put.log" ||
    fail "the put with a token did not use an authenticated RDMA connection" "$OUT/put.log"
  cli --protocol=rdma --auth_token_file="$OUT/token" get "$key" -o "$OUT/out.bin" 2>/dev/null ||
    fail "rdma get with a token failed (round $round)"
  cmp "$OUT/in.bin" "$OUT/out.bin" || fail "rdma with a token: the bytes read back differ"
  if cli --protocol=rdma --auth_token_file="$OUT/wrong" get "$key" -o "$OUT/out2.bin" 2>/dev/null; then
    fail "a cli with the wrong token read the value"
  fi
done
note "6 token: 3 rounds of rdma put/get with the token agree, a wrong token is refused"
stop_cluster
note "rdma hardware plan finished; results in $RES"
cat "$RES"
