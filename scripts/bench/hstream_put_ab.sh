#!/usr/bin/env bash
# hstream_put_ab.sh - the cost of the DRAM holder stream on a between-process 4 MiB Put: the
# same build's mooncake_master with --holder_stream=true and =false, in alternating order per
# round (on then off in odd rounds, off then on in even ones), each with one mooncake_client
# daemon holding the segment and `mooncake_bench transfer --mode between` putting into it from
# another process (loopback TCP, checksums on, the library's default).
#
# usage: scripts/bench/hstream_put_ab.sh [--rounds 5] [--runs 200] [--size 4MiB] [--bin DIR]
#   --rounds  on/off rounds (the medians are reported)
#   --runs    Puts (and Gets) per series
#   --size    value size
#   --bin     directory holding mooncake_bench, mooncake_master, mooncake_client
#             (default $BUILD_DIR/bin, BUILD_DIR=build)
# Prints a markdown table (median Put and Get MB/s with the stream on and off, the ratio on /
# off, every round's figures) and the load average before and after; the bench's JSON lines
# are kept in the log it names. Every exit path stops what is still running (lib.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/lib.sh
ROUNDS=5 RUNS=200 SIZE=4MiB BIN=${BUILD_DIR:-build}/bin
mc_parse_opts 16 rounds=ROUNDS runs=RUNS size=SIZE bin=BIN -- "$@"
mc_need_bins "$BIN" mooncake_bench mooncake_master mooncake_client
mc_workdir hstream_put_ab
RES=$TMP/results.txt
: >"$RES"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

one() { # on|off
  local st=$1 mpid dpid
  mc_start_ready "$TMP" master "$BIN/mooncake_master" --rpc_port=0 --metrics_port=0 \
    --rpc_address=127.0.0.1 --metrics_host=127.0.0.1 --log_level=warn \
    --holder_stream="$([ "$st" = on ] && echo true || echo false)" ||
    { echo "mooncake_master: $MC_WHY" >&2; exit 1; }
  mpid=$MC_PID
  local rpc=$MC_READY_RPC
  mc_start_ready "$TMP" daemon "$BIN/mooncake_client" --master="$rpc" --host=127.0.0.1 \
    --data_port=0 --segment_size=1073741824 --log_level=warn ||
    { echo "mooncake_client: $MC_WHY" >&2; exit 1; }
  dpid=$MC_PID
  mc_bounded 600 "$TMP/run.json" "$BIN/mooncake_bench" transfer --master="$rpc" \
    --mode=between --sizes="$SIZE" --runs="$RUNS" ||
    { echo "$st: mooncake_bench transfer failed; see $LOG" >&2; exit 1; }
  grep '^{' "$TMP/run.json" | tee -a "$LOG" | python3 -c '
import json, sys
for l in sys.stdin:
    d = json.loads(l)
    print(sys.argv[1], d["op"], d["bytes_per_s"] / 1e6)' "$st" >>"$RES"
  mc_stop "$dpid"
  mc_forget "$dpid"
  mc_stop "$mpid"
  mc_forget "$mpid"
}

for ((r = 1; r <= ROUNDS; r++)); do
  echo "round $r/$ROUNDS" >&2
  if ((r % 2)); then one on; one off; else one off; one on; fi
done
python3 - "$RES" "$SIZE" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
print("| %s between processes | stream on MB/s (median) | stream off MB/s (median) | on / off | on, per round | off, per round |" % sys.argv[2])
print("|---|---|---|---|---|---|")
for op in ("put", "get"):
    on = [float(v) for s, o, v in rows if s == "on" and o == op]
    off = [float(v) for s, o, v in rows if s == "off" and o == op]
    if not on or not off:
        continue
    mon, moff = statistics.median(on), statistics.median(off)
    print("| %s | %.0f | %.0f | %.2f | %s | %s |" % (op, mon, moff, mon / moff,
          " ".join("%.0f" % x for x in on), " ".join("%.0f" % x for x in off)))
PY
echo "load average before: $LOAD_BEFORE; after: $(cut -d' ' -f1-3 /proc/loadavg); log: $LOG"
