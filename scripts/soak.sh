#!/usr/bin/env bash
# Soak: a small cluster under mixed load for DURATION, checking that nothing leaks or lies.
#   scripts/soak.sh [DURATION_S]        (default 120)
# Starts mooncake_master and 3 mooncake_client daemons (64 MiB of DRAM each, and a LOCAL_DISK
# tier of 256 MiB each under $OUT) on loopback; the master offloads on eviction and promotes
# disk-only objects that are read again (--enable_offload --offload_on_evict --promotion_on_hit),
# so the disk tier runs throughout. Then
# soak_load (tests/soak_load.c): 4 threads of Get 50% / Put 35% / Remove 15% over 4096 keys of
# 32..128 KiB, Zipf 0.9 -- about 320 MiB of values for 192 MiB of DRAM, so eviction runs all
# the time. Every Get is verified against the value's own header and content hash.
# Every 5 s it samples the RSS and open descriptors of the master and each daemon
# ($OUT/samples.csv). It fails (exit 1) when:
#   - any Get returned wrong bytes, or any call failed with an unexpected error;
#   - a process's RSS still grows in the last third of the run: its peak there exceeds its peak
#     in the middle third by more than 10% + 16 MiB (warm-up is the first third);
#   - a process's open descriptors at the end exceed those after warm-up by more than 8;
#   - a process died;
#   - no offload or no promotion completed (the master's metrics at the end): the tier never
#     ran.
# Uses $BUILD_DIR (default build, built with -DMC_TEST_HOOKS=ON as scripts/test.sh does);
# results go to $OUT (default $BUILD_DIR/soak). Only loopback is used.
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-120}
dir=${BUILD_DIR:-build}
out=${OUT:-$dir/soak}
bin=$dir/bin
if [ ! -x "$bin/soak_load" ] || [ ! -x "$bin/mooncake_master" ] || [ ! -x "$bin/mooncake_client" ]; then
  BUILD_DIR=$dir ./scripts/build.sh -DMC_TEST_HOOKS=ON >/dev/null
fi
rm -rf "$out"
mkdir -p "$out"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# master: ephemeral ports, READY line on stdout
"$bin/mooncake_master" --rpc_address=127.0.0.1 --rpc_port=0 --metrics_host=127.0.0.1 \
  --metrics_port=0 --log_level=warn --enable_offload --offload_on_evict --promotion_on_hit \
  >"$out/master.out" 2>"$out/master.log" &
pids+=($!)
master_pid=$!
for _ in $(seq 100); do grep -q READY "$out/master.out" && break; sleep 0.1; done
rpc=$(sed -n 's/^READY rpc=\([^ ]*\).*/\1/p' "$out/master.out")
[ -n "$rpc" ] || { echo "soak: master did not start" >&2; cat "$out/master.log" >&2; exit 1; }
rpc=127.0.0.1:${rpc##*:}
metrics=$(sed -n 's/^READY .*metrics=\([^ ]*\).*/\1/p' "$out/master.out")
[ -n "$metrics" ] || { echo "soak: master has no metrics address" >&2; exit 1; }

names=(master)
procs=("$master_pid")
for i in 1 2 3; do
  "$bin/mooncake_client" --master="$rpc" --host=127.0.0.1 --segment_size=64MiB \
    --disk_path="$out/disk$i" --disk_capacity=256MiB \
    --log_level=warn >"$out/daemon$i.out" 2>"$out/daemon$i.log" &
  pids+=($!)
  procs+=($!)
  names+=("daemon$i")
done
for i in 1 2 3; do
  for _ in $(seq 100); do grep -q READY "$out/daemon$i.out" && break; sleep 0.1; done
  grep -q READY "$out/daemon$i.out" || { echo "soak: daemon$i did not start" >&2; exit 1; }
done

sample() { # t
  local line="$1"
  for idx in "${!procs[@]}"; do
    local p=${procs[$idx]}
    if [ ! -d /proc/$p ]; then echo "soak: ${names[$idx]} (pid $p) died" >&2; return 1; fi
    local rss fds
    rss=$(awk '/^VmRSS:/ {print $2}' /proc/$p/status)
    fds=$(ls /proc/$p/fd | wc -l)
    line="$line,$rss,$fds"
  done
  echo "$line" >>"$out/samples.csv"
}
header=t_s
for n in "${names[@]}"; do header="$header,${n}_rss_kb,${n}_fds"; done
echo "$header" >"$out/samples.csv"

echo "== soak: ${dur}s, master $rpc, 3 daemons x 64 MiB DRAM + 256 MiB disk, results in $out"
"$bin/soak_load" --master="$rpc" --seconds="$dur" --threads=4 --keys=4096 --value_kb=128 \
  --zipf=0.9 --report_s=10 >"$out/load.jsonl" 2>"$out/load.log" &
load_pid=$!
start=$(date +%s)
sample 0
while kill -0 "$load_pid" 2>/dev/null; do
  sleep 5
  kill -0 "$load_pid" 2>/dev/null || break
  sample $(( $(date +%s) - start ))
done
load_rc=0
wait "$load_pid" || load_rc=$?
sample $(( $(date +%s) - start ))

final=$(grep '"final":true' "$out/load.jsonl" || true)
echo "   load: $final"
status=0
if [ "$load_rc" -ne 0 ] || [ -z "$final" ]; then
  echo "soak: FAILED: the load reported errors or wrong bytes (rc=$load_rc)" >&2
  head -20 "$out/load.log" >&2
  status=1
fi
# The disk tier ran: offloads and promotions completed (the master's /metrics at the end).
curl -sf "http://$metrics/metrics" >"$out/master_metrics.txt" || {
  echo "soak: cannot read the master's metrics at $metrics" >&2
  status=1
}
tier() { awk -v n="$1" '$1 == n {printf "%d", $2}' "$out/master_metrics.txt" 2>/dev/null; }
offloaded=$(tier master_offload_completed_total)
promoted=$(tier master_promotion_completed_total)
echo "   tier: offloads completed=${offloaded:-0} promotions completed=${promoted:-0}" \
  "disk-only keys=$(tier master_disk_only_key_count)"
if [ "${offloaded:-0}" -eq 0 ] || [ "${promoted:-0}" -eq 0 ]; then
  echo "soak: FAILED: the disk tier did not run (offloads ${offloaded:-0}, promotions ${promoted:-0})" >&2
  status=1
fi
# RSS plateau and flat descriptors, per process (python3 is in install-deps).
python3 - "$out/samples.csv" <<'PY' || status=1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
n = len(rows)
if n < 6:
    print("soak: too few samples (%d) to judge" % n); sys.exit(0)
third = n // 3
bad = False
procs = [k[:-7] for k in rows[0] if k.endswith("_rss_kb")]
for p in procs:
    rss = [int(r[p + "_rss_kb"]) for r in rows]
    fds = [int(r[p + "_fds"]) for r in rows]
    mid, last = max(rss[third:2 * third]), max(rss[2 * third:])
    growth_ok = last <= mid * 1.10 + 16 * 1024
    fd_ok = fds[-1] <= fds[third] + 8
    print("   %-8s rss_kb first=%d mid_peak=%d last_peak=%d end=%d  %s | fds warm=%d end=%d max=%d  %s"
          % (p, rss[0], mid, last, rss[-1], "plateau" if growth_ok else "GROWING",
             fds[third], fds[-1], max(fds), "flat" if fd_ok else "LEAKING"))
    bad = bad or not growth_ok or not fd_ok
sys.exit(1 if bad else 0)
PY
[ $status -eq 0 ] && echo "== soak: passed" || echo "== soak: FAILED" >&2
exit $status
