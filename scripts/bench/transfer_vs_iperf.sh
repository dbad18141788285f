#!/usr/bin/env bash
# Put/Get transfer vs references (DESIGN.md §12): `mooncake_bench transfer` beside iperf3 on
# loopback (one TCP stream) in the same run, A/B alternating so drift of a shared machine hits
# both. Targets: 4 MiB Get between processes >= 0.8x iperf3; 4 MiB Get in the same process
# >= 0.6x a plain memcpy of 4 MiB (the bench measures that reference itself).
#
# usage: scripts/bench/transfer_vs_iperf.sh [--rounds 3] [--seconds 5] [--runs 200] [--bin DIR]
#   --rounds   A/B rounds for the 4 MiB ratios (medians are reported)
#   --seconds  iperf3 duration per round
#   --runs     calls per bench series (default: the bench's own, ~512 MiB per series)
#   --bin      directory holding mooncake_bench, mooncake_master, mooncake_client
#              (default $BUILD_DIR/bin, BUILD_DIR=build)
# Prints two markdown tables on stdout (every size, then the 4 MiB ratios); the JSON lines of
# both tools are kept in the log it names.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=3 SECONDS_=5 RUNS="" BIN=${BUILD_DIR:-build}/bin
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --seconds) SECONDS_=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
command -v iperf3 >/dev/null || { echo "iperf3 not found" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 not found" >&2; exit 1; }
for p in mooncake_bench mooncake_master mooncake_client; do
  [ -x "$BIN/$p" ] || { echo "$p not found in $BIN (build first or pass --bin)" >&2; exit 1; }
done

LOG=$(mktemp /tmp/mc_transfer_vs_iperf.XXXXXX.log)
IPERF_PID=""
cleanup() {
  if [ -n "$IPERF_PID" ] && kill -0 "$IPERF_PID" 2>/dev/null; then
    kill "$IPERF_PID" 2>/dev/null || true
    wait "$IPERF_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# One iperf3 run: a one-off server and a single-stream client on loopback; prints bytes/s.
iperf_once() {
  local port
  port=$(free_port)
  iperf3 -s -1 -B 127.0.0.1 -p "$port" >>"$LOG" 2>&1 &
  IPERF_PID=$!
  for _ in $(seq 50); do
    iperf3 -c 127.0.0.1 -p "$port" -t "$SECONDS_" -P 1 -J 2>>"$LOG" >"$LOG.iperf" && break
    sleep 0.1
  done
  wait "$IPERF_PID" 2>/dev/null || true
  IPERF_PID=""
  cat "$LOG.iperf" >>"$LOG"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]/8)' \
    "$LOG.iperf"
  rm -f "$LOG.iperf"
}

bench() { # extra args...
  local runs=()
  [ -n "$RUNS" ] && runs=(--runs "$RUNS")
  "$BIN/mooncake_bench" transfer --bin "$BIN" "${runs[@]}" "$@" 2>>"$LOG" | tee -a "$LOG"
}

# Table 1: every size, both placements, one bench run.
echo "| case | p50 ms | p99 ms | ops/s | MB/s |"
echo "|---|---|---|---|---|"
bench | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print("| %s | %.3f | %.3f | %.0f | %.0f |" % (r["case"], r["p50_ms"], r["p99_ms"],
          r["ops_per_s"], r["bytes_per_s"] / 1e6))'
echo

# Table 2: the 4 MiB ratios, A/B alternating rounds.
IPERF=() GETB=() GETS=() MEMCPY=() PUTB=()
for ((r = 1; r <= ROUNDS; r++)); do
  IPERF+=("$(iperf_once)")
  out=$(bench --sizes 4MiB)
  pick() { python3 -c '
import json, sys
case, field = sys.argv[1], sys.argv[2]
for line in sys.stdin:
    d = json.loads(line)
    if d["case"] == case:
        print(d[field])' "$1" "$2" <<<"$out"; }
  GETB+=("$(pick get/between/4MiB bytes_per_s)")
  PUTB+=("$(pick put/between/4MiB bytes_per_s)")
  GETS+=("$(pick get/same/4MiB bytes_per_s)")
  MEMCPY+=("$(pick get/same/4MiB ref)")
  echo "round $r iperf3=${IPERF[-1]} get_between=${GETB[-1]} get_same=${GETS[-1]} memcpy=${MEMCPY[-1]}" >>"$LOG"
done
im=$(printf '%s\n' "${IPERF[@]}" | median)
gb=$(printf '%s\n' "${GETB[@]}" | median)
pb=$(printf '%s\n' "${PUTB[@]}" | median)
gs=$(printf '%s\n' "${GETS[@]}" | median)
mm=$(printf '%s\n' "${MEMCPY[@]}" | median)
echo "| 4 MiB case | store MB/s | reference | reference MB/s | ratio | target |"
echo "|---|---|---|---|---|---|"
awk -v gb="$gb" -v pb="$pb" -v im="$im" -v gs="$gs" -v mm="$mm" 'BEGIN {
  printf "| Get, between processes | %.0f | iperf3 loopback, 1 stream | %.0f | %.2f | >= 0.8 |\n", gb/1e6, im/1e6, gb/im
  printf "| Put, between processes | %.0f | iperf3 loopback, 1 stream | %.0f | %.2f | - |\n", pb/1e6, im/1e6, pb/im
  printf "| Get, same process | %.0f | memcpy 4 MiB | %.0f | %.2f | >= 0.6 |\n", gs/1e6, mm/1e6, gs/mm }'
echo "medians of ${ROUNDS} rounds (iperf3 ${SECONDS_} s each); log: $LOG" >&2
