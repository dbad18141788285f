#!/usr/bin/env bash
# Put/Get transfer vs references (DESIGN.md §12): `mooncake_bench transfer` beside iperf3 on
# loopback (one TCP stream) in the same run, A/B alternating so drift of a shared machine hits
# both. Targets: 4 MiB Get between processes >= 0.8x iperf3; 4 MiB Get in the same process
# >= 0.6x a plain memcpy of 4 MiB over a working set larger than the last-level cache, as a
# served value's source is (the bench measures that reference itself: --working_set); the
# same ratio with one warm key and a warm memcpy is printed beside it.
#
# usage: scripts/bench/transfer_vs_iperf.sh [--rounds 3] [--seconds 5] [--runs 200] [--bin DIR]
#                                             [--sizes LIST] [--timeout 1800]
#                                             [--working-set 1GiB]
#   --rounds   A/B rounds for the 4 MiB ratios (medians are reported)
#   --seconds  iperf3 duration per round
#   --runs     calls per bench series (default: the bench's own, ~512 MiB per series)
#   --sizes    object sizes of the first table (default: the bench's own, 4KiB..16MiB)
#   --bin      directory holding mooncake_bench, mooncake_master, mooncake_client
#              (default $BUILD_DIR/bin, BUILD_DIR=build)
#   --timeout  seconds one bench run may take before it is killed (the run then fails)
#   --working-set  bytes the cold same-process Gets and their memcpy rotate over (default
#              1GiB, past this machine's caches; the bench's segment is then 3x it; 0: skip)
# Prints three markdown tables on stdout (every size, the 4 MiB ratios, and each round's 4 MiB
# between-process Put and Get latency, whose spread across rounds matters); the JSON lines of
# both tools are kept in the log it names. Every child is bounded by timeout(1), and every exit
# path (error, INT, TERM) stops what is still running (scripts/bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=3 SECONDS_=5 RUNS="" SIZES="" BIN=${BUILD_DIR:-build}/bin BENCH_TIMEOUT=1800 WS=1GiB
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --seconds) SECONDS_=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --timeout) BENCH_TIMEOUT=$2; shift 2 ;;
    --working-set) WS=$2; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
for t in iperf3 python3 timeout ss; do
  command -v "$t" >/dev/null || { echo "$t not found" >&2; exit 1; }
done
for p in mooncake_bench mooncake_master mooncake_client; do
  [ -x "$BIN/$p" ] || { echo "$p not found in $BIN (build first or pass --bin)" >&2; exit 1; }
done

. scripts/bench/lib.sh
LOG=$(mktemp /tmp/mc_transfer_vs_iperf.XXXXXX.log)
TMP=$(mktemp -d /tmp/mc_transfer_vs_iperf.XXXXXX)
rm_tmp() { rm -rf "$TMP"; }
mc_install_traps rm_tmp

# iperf3 -J exits 0 even when the client never connected ("Connection refused"): the JSON says
# so in "error", and a run that moved nothing has no received bytes. Prints bytes/s or fails.
iperf_rate() { # json file
  python3 - "$1" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit("iperf3: unreadable JSON (%s)" % e)
if d.get("error"):
    sys.exit("iperf3: " + d["error"])
r = d.get("end", {}).get("sum_received", {})
if not r.get("bytes") or not r.get("bits_per_second"):
    sys.exit("iperf3: no bytes received")
print(r["bits_per_second"] / 8)
EOF
}

# One iperf3 measurement: a one-off server, a single-stream client on loopback once the server
# listens; up to 3 attempts, each with a fresh server. Sets IPERF_RATE (bytes/s); it is called
# without $(...) so that the children it starts stay visible to cleanup.
IPERF_RATE=""
iperf_once() {
  local port attempt srv rate
  for attempt in 1 2 3; do
    port=$(mc_free_port)
    mc_start timeout -k 5 $((SECONDS_ + 30)) iperf3 -s -1 -B 127.0.0.1 -p "$port" >>"$LOG" 2>&1
    srv=$MC_PID
    rate=""
    # Up to 10 s for the server to listen (a connect probe would use up the one-off server).
    if mc_wait_until 10 "$srv" mc_listening "$port" &&
      mc_bounded $((SECONDS_ + 20)) "$TMP/iperf.json" \
        iperf3 -c 127.0.0.1 -p "$port" -t "$SECONDS_" -P 1 -J; then
      cat "$TMP/iperf.json" >>"$LOG"
      rate=$(iperf_rate "$TMP/iperf.json" 2>>"$LOG") || rate=""
    else
      echo "iperf3 attempt $attempt: server not listening or client failed" >>"$LOG"
    fi
    mc_stop "$srv"
    mc_forget "$srv"
    if [ -n "$rate" ]; then
      IPERF_RATE=$rate
      return 0
    fi
  done
  echo "iperf3 failed 3 times; see $LOG" >&2
  return 1
}

bench() { # out-file extra-args...: one mooncake_bench transfer run, its JSON lines into out-file
  local out=$1 runs=() sizes=()
  shift
  [ -n "$RUNS" ] && runs=(--runs "$RUNS")
  [ -n "$SIZES" ] && sizes=(--sizes "$SIZES")
  if ! mc_bounded "$BENCH_TIMEOUT" "$out" "$BIN/mooncake_bench" transfer --bin "$BIN" \
    "${runs[@]}" "${sizes[@]}" "$@"; then
    echo "mooncake_bench transfer failed or ran past ${BENCH_TIMEOUT}s; see $LOG" >&2
    return 1
  fi
  cat "$out" >>"$LOG"
}

# Table 1: every size, both placements, one bench run.
bench "$TMP/all.json"
echo "| case | p50 ms | p99 ms | ops/s | MB/s |"
echo "|---|---|---|---|---|"
python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print("| %s | %.3f | %.3f | %.0f | %.0f |" % (r["case"], r["p50_ms"], r["p99_ms"],
          r["ops_per_s"], r["bytes_per_s"] / 1e6))' "$TMP/all.json"
echo

# Table 2: the 4 MiB ratios, A/B alternating rounds.
pick() { # case field [file] -> value from the round's bench output
  python3 -c '
import json, sys
case, field = sys.argv[1], sys.argv[2]
for line in open(sys.argv[3]):
    d = json.loads(line)
    if d["case"] == case:
        print(d[field])' "$1" "$2" "${3:-$TMP/round.json}"
}
IPERF=() GETB=() GETS=() MEMCPY=() PUTB=() ROWS=() GETC=() MEMC=()
for ((r = 1; r <= ROUNDS; r++)); do
  iperf_once
  IPERF+=("$IPERF_RATE")
  SIZES="" bench "$TMP/round.json" --sizes 4MiB
  GETB+=("$(pick get/between/4MiB bytes_per_s)")
  PUTB+=("$(pick put/between/4MiB bytes_per_s)")
  GETS+=("$(pick get/same/4MiB bytes_per_s)")
  MEMCPY+=("$(pick get/same/4MiB ref)")
  if [ "$WS" != 0 ]; then
    ws_bytes=$(numfmt --from=iec "${WS%iB}")
    SIZES="" bench "$TMP/cold.json" --sizes 4MiB --mode same --working_set "$WS" \
      --segment_size $((ws_bytes * 3))
    GETC+=("$(pick get/same/4MiB/cold bytes_per_s "$TMP/cold.json")")
    MEMC+=("$(pick get/same/4MiB/cold ref "$TMP/cold.json")")
  fi
  ROWS+=("| $r | $(pick put/between/4MiB p50_ms) | $(pick put/between/4MiB p99_ms) | $(pick get/between/4MiB p50_ms) | $(pick get/between/4MiB p99_ms) |")
  echo "round $r iperf3=${IPERF[-1]} get_between=${GETB[-1]} get_same=${GETS[-1]} memcpy=${MEMCPY[-1]}" >>"$LOG"
done
im=$(printf '%s\n' "${IPERF[@]}" | mc_median)
gb=$(printf '%s\n' "${GETB[@]}" | mc_median)
pb=$(printf '%s\n' "${PUTB[@]}" | mc_median)
gs=$(printf '%s\n' "${GETS[@]}" | mc_median)
mm=$(printf '%s\n' "${MEMCPY[@]}" | mc_median)
gc=0 mc=0
if [ "$WS" != 0 ]; then
  gc=$(printf '%s\n' "${GETC[@]}" | mc_median)
  mc=$(printf '%s\n' "${MEMC[@]}" | mc_median)
fi
echo "| 4 MiB case | store MB/s | reference | reference MB/s | ratio | target |"
echo "|---|---|---|---|---|---|"
awk -v gb="$gb" -v pb="$pb" -v im="$im" -v gs="$gs" -v mm="$mm" -v gc="$gc" -v mc="$mc" -v ws="$WS" 'BEGIN {
  printf "| Get, between processes | %.0f | iperf3 loopback, 1 stream | %.0f | %.2f | >= 0.8 |\n", gb/1e6, im/1e6, gb/im
  printf "| Put, between processes | %.0f | iperf3 loopback, 1 stream | %.0f | %.2f | - |\n", pb/1e6, im/1e6, pb/im
  if (mc > 0)
    printf "| Get, same process, cold sources (%s of keys in rotation) | %.0f | memcpy 4 MiB over %s | %.0f | %.2f | >= 0.6 |\n", ws, gc/1e6, ws, mc/1e6, gc/mc
  printf "| Get, same process, one warm key | %.0f | memcpy 4 MiB, warm | %.0f | %.2f | - |\n", gs/1e6, mm/1e6, gs/mm }'
echo
echo "| round | 4 MiB Put between, p50 ms | p99 ms | 4 MiB Get between, p50 ms | p99 ms |"
echo "|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
echo "medians of ${ROUNDS} rounds (iperf3 ${SECONDS_} s each); log: $LOG" >&2
