#!/usr/bin/env bash
# master_ab.sh - two builds of mooncake_master side by side under `mooncake_bench master`.
#
#   scripts/bench/master_ab.sh --a DIR_A --b DIR_B [--keys N] [--seconds S] [--rounds R]
#                              [--ops get,exist,batch_get,put] [--batch K]
#
# DIR_A and DIR_B hold mooncake_master and mooncake_bench (e.g. build/bin of two checkouts).
# Per round and per build, in alternating order (A then B in odd rounds, B then A in even ones):
# a fresh master (one RPC thread, on CPU 0) is prefilled with N keys, then every op runs for S
# seconds from the bench on CPU 1 (50 connections; batch_get in calls of K keys, 16 unless
# --batch). The tables give the median objects/s (keys/s for batch_get) per build and the ratio
# B / A, then the same per second of the master's CPU (user + system from /proc over the bench
# run: the figure that the master's own code moves when the machine is shared).
# MC_AB_FLAGS_A / MC_AB_FLAGS_B: extra mooncake_master flags for that side (e.g. the same build
# with --enable_offload --promotion_on_hit on one side).
set -euo pipefail
cd "$(dirname "$0")/../.."
A="" B="" KEYS=200000 SECS=3 ROUNDS=3 OPS=get,exist,batch_get,put BATCH=16
while [ $# -gt 0 ]; do
  case "$1" in
    --a) A=$2; shift 2 ;;
    --b) B=$2; shift 2 ;;
    --keys) KEYS=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --ops) OPS=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ -n "$A" ] && [ -n "$B" ] || { echo "--a and --b are required" >&2; exit 2; }
for d in "$A" "$B"; do
  [ -x "$d/mooncake_master" ] && [ -x "$d/mooncake_bench" ] || { echo "no binaries in $d" >&2; exit 1; }
done
SRV_CPU=0 GEN_CPU=1
[ "$(nproc)" -ge 2 ] || GEN_CPU=0

. scripts/bench/lib.sh
TMP=$(mktemp -d /tmp/mc_master_ab.XXXXXX)
LOG=$TMP.log
: > "$LOG"
rm_tmp() { rm -rf "$TMP"; }
mc_install_traps rm_tmp
TMO=$((SECS * 10 + 300))
json() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[2]).readline())[sys.argv[1]])' "$@"; }
HZ=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # the master's user + system

RES=$TMP/results.txt
: > "$RES"
one_build() { # label dir
  local label=$1 dir=$2 line rpc op extra flags
  if [ "$label" = A ]; then flags=${MC_AB_FLAGS_A:-}; else flags=${MC_AB_FLAGS_B:-}; fi
  rm -f "$TMP/ready"
  mkfifo "$TMP/ready"
  exec 3<>"$TMP/ready"
  mc_start taskset -c $SRV_CPU "$dir/mooncake_master" --rpc_port=0 --metrics_port=0 \
    --rpc_address=127.0.0.1 --metrics_host=127.0.0.1 --rpc_thread_num=1 --client_ttl=1h \
    --log_level=warn $flags >"$TMP/ready" 2>>"$LOG"
  local mpid=$MC_PID
  read -r -t 20 line <&3 || { echo "$label: mooncake_master did not start" >&2; exit 1; }
  exec 3<&-
  mc_parse_ready "$line" && [ "$MC_READY_KIND" = master ] ||
    { echo "$label: mooncake_master: unexpected first line: $line" >&2; exit 1; }
  rpc=$MC_READY_RPC
  mc_bounded "$TMO" "$TMP/prefill.json" taskset -c $GEN_CPU "$dir/mooncake_bench" master \
    --master="$rpc" --conns=4 --keys="$KEYS" --prefill --seconds=0.2 --op=get ||
    { echo "$label: prefill failed; see $LOG" >&2; exit 1; }
  for op in ${OPS//,/ }; do
    extra=""
    [ "$op" = batch_get ] && extra="--batch=$BATCH"
    t0=$(cpu_ticks "$mpid")
    mc_bounded "$TMO" "$TMP/op.json" taskset -c $GEN_CPU "$dir/mooncake_bench" master \
      --master="$rpc" --conns=50 --keys="$KEYS" --seconds="$SECS" --op="$op" $extra ||
      { echo "$label: --op=$op failed; see $LOG" >&2; exit 1; }
    t1=$(cpu_ticks "$mpid")
    cat "$TMP/op.json" >>"$LOG"
    echo "$label $op $(json ops_per_s "$TMP/op.json") $(((t1 - t0) * 1000 / HZ))" >>"$RES"
  done
  mc_stop "$mpid"
  mc_forget "$mpid"
}

for ((r = 1; r <= ROUNDS; r++)); do
  echo "round $r/$ROUNDS" >&2
  if ((r % 2)); then one_build A "$A"; one_build B "$B"; else one_build B "$B"; one_build A "$A"; fi
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$RES" "$OPS" "$SECS" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
secs = float(sys.argv[3])
def table(title, val):
    print("| op | A %s (median) | B %s (median) | B / A | rounds A | rounds B |" % (title, title))
    print("|---|---|---|---|---|---|")
    for op in sys.argv[2].split(","):
        a = [val(r) for r in rows if r[0] == "A" and r[1] == op]
        b = [val(r) for r in rows if r[0] == "B" and r[1] == op]
        ma, mb = statistics.median(a), statistics.median(b)
        print("| %s | %.0f | %.0f | %.2f | %s | %s |" % (op, ma, mb, mb / ma,
              " ".join("%.0f" % x for x in a), " ".join("%.0f" % x for x in b)))
table("objects/s", lambda r: float(r[2]))
print()
# objects the run served over the master's CPU-seconds in it (connection set-up included)
table("objects per master CPU-s", lambda r: float(r[2]) * secs / max(float(r[3]) / 1000, 1e-3))
EOF
