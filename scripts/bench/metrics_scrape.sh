#!/usr/bin/env bash
# metrics_scrape.sh - what a /metrics scrape costs the master at N objects with LOCAL_DISK
# copies, two builds side by side.
#
#   scripts/bench/metrics_scrape.sh --a DIR_A --b DIR_B [--keys N] [--scrapes K] [--seconds S]
#
# DIR_A and DIR_B hold mooncake_master (e.g. build/bin of two checkouts); the mooncake_bench of
# DIR_B drives both.
# Per build: a fresh master (--enable_offload, one RPC thread, on CPU 0) is prefilled with N keys
# by `mooncake_bench master --prefill --disk_holder`, so every object has a LOCAL_DISK copy;
# then K scrapes of /metrics are timed one after another (median and max, ms), and a Get run of
# S seconds (50 connections, on CPU 1) is measured twice: alone, and under a scrape every
# 100 ms. The table gives each figure per build and the ratio B / A. Defaults are small (N =
# 200000, K = 20, S = 3) for a shared machine; the figure the scrape cost should not follow is N.
set -euo pipefail
cd "$(dirname "$0")/../.."
A="" B="" KEYS=200000 SCRAPES=20 SECS=3
while [ $# -gt 0 ]; do
  case "$1" in
    --a) A=$2; shift 2 ;;
    --b) B=$2; shift 2 ;;
    --keys) KEYS=$2; shift 2 ;;
    --scrapes) SCRAPES=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ -n "$A" ] && [ -n "$B" ] || { echo "--a and --b are required" >&2; exit 2; }
for d in "$A" "$B"; do
  [ -x "$d/mooncake_master" ] && [ -x "$d/mooncake_bench" ] || { echo "no binaries in $d" >&2; exit 1; }
done
BENCH=$B/mooncake_bench # both sides: the bench of B (its --prefill --disk_holder)
SRV_CPU=0 GEN_CPU=1
[ "$(nproc)" -ge 2 ] || GEN_CPU=0

. scripts/bench/lib.sh
TMP=$(mktemp -d /tmp/mc_metrics_scrape.XXXXXX)
LOG=$TMP.log
: > "$LOG"
rm_tmp() { rm -rf "$TMP"; }
mc_install_traps rm_tmp
TMO=$((SECS * 10 + 600))
json() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[2]).readline())[sys.argv[1]])' "$@"; }
stats() { python3 -c 'import sys,statistics as s; v=[float(x)*1e3 for x in sys.stdin.read().split()]; print("%.3f %.3f" % (s.median(v), max(v)))'; }

RES=$TMP/results.txt
: > "$RES"
one_build() { # label dir
  local label=$1 dir=$2 line rpc met i spid
  rm -f "$TMP/ready"
  mkfifo "$TMP/ready"
  exec 3<>"$TMP/ready"
  mc_start taskset -c $SRV_CPU "$dir/mooncake_master" --rpc_port=0 --metrics_port=0 \
    --rpc_address=127.0.0.1 --metrics_host=127.0.0.1 --rpc_thread_num=1 --client_ttl=1h \
    --enable_offload --offloading_queue_limit=$((KEYS + 1000)) --log_level=warn >"$TMP/ready" 2>>"$LOG"
  local mpid=$MC_PID
  read -r -t 20 line <&3 || { echo "$label: mooncake_master did not start" >&2; exit 1; }
  exec 3<&-
  mc_parse_ready "$line" && [ "$MC_READY_KIND" = master ] ||
    { echo "$label: mooncake_master: unexpected first line: $line" >&2; exit 1; }
  rpc=$MC_READY_RPC met=$MC_READY_METRICS
  mc_bounded "$TMO" "$TMP/prefill.json" taskset -c $GEN_CPU "$BENCH" master \
    --master="$rpc" --conns=4 --keys="$KEYS" --prefill --disk_holder --seconds=0.2 --op=get ||
    { echo "$label: prefill failed; see $LOG" >&2; exit 1; }
  for ((i = 0; i < SCRAPES; i++)); do
    curl -s -o /dev/null -w '%{time_total}\n' "http://$met/metrics"
  done | stats > "$TMP/scrape"
  read -r med max < "$TMP/scrape"
  echo "$label scrape_median_ms $med" >>"$RES"
  echo "$label scrape_max_ms $max" >>"$RES"
  mc_bounded "$TMO" "$TMP/get.json" taskset -c $GEN_CPU "$BENCH" master \
    --master="$rpc" --conns=50 --keys="$KEYS" --seconds="$SECS" --op=get ||
    { echo "$label: get failed; see $LOG" >&2; exit 1; }
  echo "$label get_ops_per_s $(json ops_per_s "$TMP/get.json")" >>"$RES"
  ( while :; do curl -s -o /dev/null "http://$met/metrics"; sleep 0.1; done ) &
  spid=$!
  MC_CHILDREN+=("$spid")
  mc_bounded "$TMO" "$TMP/get.json" taskset -c $GEN_CPU "$BENCH" master \
    --master="$rpc" --conns=50 --keys="$KEYS" --seconds="$SECS" --op=get ||
    { echo "$label: get under scrapes failed; see $LOG" >&2; exit 1; }
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  echo "$label get_scraped_ops_per_s $(json ops_per_s "$TMP/get.json")" >>"$RES"
  echo "$label get_scraped_p99_ms $(json p99_ms "$TMP/get.json")" >>"$RES"
  mc_stop "$mpid"
  mc_forget "$mpid"
}

one_build A "$A"
one_build B "$B"
python3 - "$RES" "$KEYS" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    label, what, v = line.split()
    rows.setdefault(what, {})[label] = float(v)
print(f"keys={sys.argv[2]} (every object with a LOCAL_DISK copy)")
print(f"{'figure':<24} {'A':>12} {'B':>12} {'B/A':>8}")
for what, d in rows.items():
    a, b = d.get('A', 0), d.get('B', 0)
    print(f"{what:<24} {a:>12.3f} {b:>12.3f} {b / a if a else float('nan'):>8.2f}")
PY
