#!/usr/bin/env bash
# master_vs_upstream.sh - our mooncake_master under `mooncake_bench master` beside upstream
# Mooncake Store's mooncake_master under its own master_bench, in one invocation.
#
#   scripts/bench/master_vs_upstream.sh [--rounds R] [--seconds S] [--callers N]
#       [--keys-per-caller K] [--batch B] [--ops get,batch_get,put] [--bin-dir DIR]
#       [--upstream DIR]
#   ROUNDS, SECONDS_PER_RUN, CALLERS, KEYS_PER_CALLER environment variables do the same
#   (defaults 3, 5, 16, 12500).
#
# Per round and per side, in alternating order (ours first in odd rounds, upstream first in
# even ones), a fresh master with one RPC thread runs on CPU 0 and each op runs for S seconds
# (whole seconds: master_bench's --duration) from the side's bench on CPU 1:
#   get        GetReplicaList, one key per call        ours --op=get, upstream --operation=Get
#   batch_get  BatchGetReplicaList of B keys (keys/s)  --op=batch_get, --operation=BatchGet
#   put        PutStart + PutEnd of a new key          --op=put, --operation=Put
# N callers on each side: ours N connections with one call in flight each, upstream N threads
# (--num_clients=N --num_threads=1) with one synchronous call each. Keys: upstream's callers
# each put K keys before they start (its --num_keys); ours prefills N x K keys once per master.
# master_bench resets its threads' CPU affinity when they start, so its threads are moved back
# onto CPU 1 when its load begins (the "Clients started" line); the affinity each side's threads
# actually had is printed per round.
#
# CPU: per run, over the steady window (ours from 0.5 s after the bench starts, upstream from
# its "Clients started" line, S - 0.5 s long), the bench process's CPU as a fraction of its core
# (load), the master's (server), and how busy the bench's core was with everything on it
# (core1; other users' processes included). A run whose bench core was busy >= 95% could not
# have sent more: its figure is a lower bound for that master, and the table says so. The table
# also divides each run's rate by its master's CPU (operations per master CPU-second), a
# figure a shared machine moves less than ops/s.
#
# --bin-dir: our mooncake_master and mooncake_bench (default $BUILD_DIR/bin, BUILD_DIR=build).
# --upstream: upstream's build kept for comparison, with bin/ and lib/ (default
#   $MC_UPSTREAM_DIR, else ../shared/upstream from the repository root); its runtime libraries must be installed
#   (its `run` script does that once). Exits 77 when its binaries are absent or cannot start.
# Output: per-run lines "run ROUND SIDE OP OPS_PER_S load=.. server=.. core1=.. affinity=.."
# on stdout, then a markdown table of medians, ratios (ours / upstream) and spreads.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-3} SECS=${SECONDS_PER_RUN:-5} CALLERS=${CALLERS:-16}
KPC=${KEYS_PER_CALLER:-12500} BATCH=128 OPS=get,batch_get,put
BIN_DIR=${BUILD_DIR:-build}/bin UP=${MC_UPSTREAM_DIR:-../shared/upstream}
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    --callers) CALLERS=$2; shift 2 ;;
    --keys-per-caller) KPC=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --ops) OPS=$2; shift 2 ;;
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    --upstream) UP=$2; shift 2 ;;
    -h|--help) sed -n '2,38p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
for v in ROUNDS SECS CALLERS KPC BATCH; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "${v,,} must be a positive integer: ${!v}" >&2; exit 2; }
done
for op in ${OPS//,/ }; do
  case "$op" in get|batch_get|put) ;; *) echo "unknown op: $op" >&2; exit 2 ;; esac
done
for t in taskset python3 timeout ss; do
  command -v "$t" >/dev/null || { echo "$t not found" >&2; exit 1; }
done
MASTER=$BIN_DIR/mooncake_master BENCH=$BIN_DIR/mooncake_bench
[ -x "$MASTER" ] && [ -x "$BENCH" ] || { echo "build first (no $MASTER / $BENCH)" >&2; exit 1; }
UP_MASTER=$UP/bin/mooncake_master UP_BENCH=$UP/bin/master_bench
if [ ! -x "$UP_MASTER" ] || [ ! -x "$UP_BENCH" ]; then
  echo "SKIP: upstream binaries not found under $UP (bin/mooncake_master, bin/master_bench)" >&2
  exit 77
fi
export LD_LIBRARY_PATH="$UP/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# upstream's run wrapper installs its Debian runtime libraries on first use: let it, once
if ldd "$UP_MASTER" "$UP_BENCH" 2>/dev/null | grep -q 'not found' && [ -x "$UP/run" ]; then
  echo "installing upstream's runtime libraries ($UP/run)" >&2
  "$UP/run" master_bench --help >/dev/null 2>&1 || true
fi
if ldd "$UP_MASTER" "$UP_BENCH" 2>/dev/null | grep -q 'not found'; then
  echo "SKIP: upstream's runtime libraries are missing (run $UP/run once to install them)" >&2
  exit 77
fi
SRV_CPU=0 GEN_CPU=1
if [ "$(nproc)" -lt 2 ]; then
  echo "warning: fewer than 2 CPUs; master and bench share one" >&2
  GEN_CPU=0
fi
CW="python3 scripts/bench/cpu_window.py"
WINDOW=$(python3 -c "print(max(0.5, $SECS - 0.5))")

. scripts/bench/lib.sh
TMP=$(mktemp -d /tmp/mc_master_vs_upstream.XXXXXX)
LOG=$TMP.log
: > "$LOG"
rm_tmp() { rm -rf "$TMP"; }
mc_install_traps rm_tmp
TMO=$((SECS * 10 + 180)) # bound of one bench run, set-up and prefill included
RES=$TMP/results.txt
: > "$RES"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC') commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs; master on CPU $SRV_CPU," \
  "bench on CPU $GEN_CPU; $CALLERS callers, $KPC keys per caller, batch $BATCH, ${SECS}s runs"

# Prints the JSON line of FILE's keys (dotted for nested ones) space-separated, "?" for a missing
# one, spaces inside a value turned into "+" (one python start per run: python is slow to start
# on a loaded machine).
fields() { # file key...
  python3 - "$@" <<'PY'
import json, sys
d = json.loads(open(sys.argv[1]).readline())
out = []
for k in sys.argv[2:]:
    v = d
    for part in k.split("."):
        v = v.get(part) if isinstance(v, dict) else None
    out.append("?" if v is None or v == "" else str(v).replace(" ", "+"))
print(" ".join(out))
PY
}

# One run's figures: appends to $RES and prints the run line.
record() { # round side op cw_json ops
  local round=$1 side=$2 op=$3 ops=$5 load server busy aff saff
  read -r load server busy aff saff < <(fields "$4" load_cpu server_cpu "core_busy.$GEN_CPU" \
    load_affinity server_affinity)
  echo "$round $side $op $ops ${load/\?/nan} ${server/\?/nan} ${busy/\?/nan}" >>"$RES"
  printf 'run %s %-8s %-9s %12.0f /s  load=%s server=%s core%s=%s affinity=bench:%s,master:%s\n' \
    "$round" "$side" "$op" "$ops" "$load" "$server" "$GEN_CPU" "$busy" "$aff" "$saff"
}

ours() { # round
  local round=$1 line rpc op extra ops mpid
  rm -f "$TMP/ready"
  mkfifo "$TMP/ready"
  exec 3<>"$TMP/ready"
  mc_start taskset -c $SRV_CPU "$MASTER" --rpc_port=0 --metrics_port=0 --rpc_address=127.0.0.1 \
    --metrics_host=127.0.0.1 --rpc_thread_num=1 --client_ttl=1h --log_level=warn \
    >"$TMP/ready" 2>>"$LOG"
  mpid=$MC_PID
  read -r -t 20 line <&3 || { echo "ours: mooncake_master did not start; see $LOG" >&2; exit 1; }
  exec 3<&-
  mc_parse_ready "$line" && [ "$MC_READY_KIND" = master ] ||
    { echo "ours: mooncake_master: unexpected first line: $line" >&2; exit 1; }
  rpc=$MC_READY_RPC
  mc_bounded "$TMO" "$TMP/prefill.json" taskset -c $GEN_CPU "$BENCH" master --master="$rpc" \
    --conns=4 --keys=$((CALLERS * KPC)) --prefill --seconds=0.2 --op=get ||
    { echo "ours: prefill failed; see $LOG" >&2; exit 1; }
  for op in ${OPS//,/ }; do
    extra=""
    [ "$op" = batch_get ] && extra="--batch=$BATCH"
    $CW --out "$TMP/op.json" --err "$TMP/op.err" --window "$WINDOW" --delay 0.5 \
      --watch "$mpid" --cores "$SRV_CPU,$GEN_CPU" --timeout "$TMO" -- \
      taskset -c $GEN_CPU "$BENCH" master --master="$rpc" --conns="$CALLERS" --threads=1 \
      --depth=1 --keys=$((CALLERS * KPC)) --seconds="$SECS" --op="$op" $extra >"$TMP/cw.json" ||
      { cat "$TMP/op.err" >>"$LOG"; echo "ours: --op=$op failed; see $LOG" >&2; exit 1; }
    cat "$TMP/op.json" "$TMP/op.err" >>"$LOG"
    read -r ops < <(fields "$TMP/op.json" ops_per_s)
    [ "$ops" != "?" ] || { echo "ours: the bench printed no rate; see $LOG" >&2; exit 1; }
    record "$round" ours "$op" "$TMP/cw.json" "$ops"
  done
  mc_stop "$mpid"
  mc_forget "$mpid"
}

upstream() { # round
  local round=$1 port mport op uop ops mpid
  port=$(mc_free_port) mport=$(mc_free_port)
  mc_start taskset -c $SRV_CPU "$UP_MASTER" --rpc_port="$port" --rpc_address=127.0.0.1 \
    --metrics_port="$mport" --metrics_host=127.0.0.1 --rpc_thread_num=1 \
    >>"$LOG" 2>&1
  mpid=$MC_PID
  mc_wait_until 30 "$mpid" mc_listening "$port" ||
    { echo "upstream: mooncake_master did not start listening on $port; see $LOG" >&2; exit 1; }
  for op in ${OPS//,/ }; do
    case "$op" in get) uop=Get ;; batch_get) uop=BatchGet ;; put) uop=Put ;; esac
    $CW --out "$TMP/op.txt" --err "$TMP/op.err" --window "$WINDOW" --marker 'Clients started' \
      --pin "$GEN_CPU" --watch "$mpid" --cores "$SRV_CPU,$GEN_CPU" --timeout "$TMO" -- \
      taskset -c $GEN_CPU "$UP_BENCH" --master_server="127.0.0.1:$port" --operation="$uop" \
      --num_clients="$CALLERS" --num_threads=1 --num_keys="$KPC" --batch_size="$BATCH" \
      --duration="$SECS" >"$TMP/cw.json" ||
      { cat "$TMP/op.err" >>"$LOG"; echo "upstream: $uop failed; see $LOG" >&2; exit 1; }
    cat "$TMP/op.txt" >>"$LOG"
    ops=$(sed -n 's/^Operations per second: \([0-9.]*\)$/\1/p' "$TMP/op.txt")
    [ -n "$ops" ] || { echo "upstream: master_bench printed no rate; see $LOG" >&2; exit 1; }
    record "$round" upstream "$op" "$TMP/cw.json" "$ops"
  done
  mc_stop "$mpid"
  mc_forget "$mpid"
}

for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2)); then ours "$r"; upstream "$r"; else upstream "$r"; ours "$r"; fi
done
rm -f "$LOG" # kept only when a step failed (the messages above name it)

python3 - "$RES" "$OPS" "$BATCH" <<'EOF'
import math, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
names = {"get": "GetReplicaList, objects/s", "put": "Put (PutStart + PutEnd), objects/s",
         "batch_get": "BatchGetReplicaList x%s, keys/s" % sys.argv[3]}
def col(side, op, i):
    return [float(r[i]) for r in rows if r[1] == side and r[2] == op]
def med(v):
    v = [x for x in v if not math.isnan(x)]
    return statistics.median(v) if v else float("nan")
def spread(v):
    return "%.0f-%.0f" % (min(v), max(v))
print()
def eff(side, op):
    return [o / c for o, c in zip(col(side, op, 3), col(side, op, 5))
            if not math.isnan(c) and c > 0]
print("| op | ours (median) | upstream (median) | ours / upstream | ratio range | ours runs |"
      " upstream runs | per master CPU-second: ours / upstream | bench CPU ours / upstream |"
      " bench core busy ours / upstream | note |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for op in sys.argv[2].split(","):
    a, b = col("ours", op, 3), col("upstream", op, 3)
    ma, mb = med(a), med(b)
    la, lb = med(col("ours", op, 4)), med(col("upstream", op, 4))
    ba, bb = med(col("ours", op, 6)), med(col("upstream", op, 6))
    ratios = sorted(x / y for x, y in zip(a, b) if y > 0)
    notes = []
    if not math.isnan(ba) and ba >= 0.95:
        notes.append("ours: bench core saturated, a lower bound")
    if not math.isnan(bb) and bb >= 0.95:
        notes.append("upstream: bench core saturated, a lower bound")
    ea, eb = med(eff("ours", op)), med(eff("upstream", op))
    print("| %s | %.0f | %.0f | %.2f | %s | %s | %s | %s | %.2f / %.2f | %.2f / %.2f | %s |" % (
        names[op], ma, mb, ma / mb if mb else float("nan"),
        "%.2f-%.2f" % (ratios[0], ratios[-1]) if ratios else "-",
        " ".join("%.0f" % x for x in a), " ".join("%.0f" % x for x in b),
        "%.2f" % (ea / eb) if eb and not math.isnan(ea) and not math.isnan(eb) else "-",
        la, lb, ba, bb, "; ".join(notes) or "-"))
print()
print("ratio range: per-round ours / upstream, lowest and highest. per master CPU-second: each"
      " run's ops/s divided by its master's CPU over the window (a core's share), medians, ours /"
      " upstream: the cost per operation, less moved by other load than ops/s. bench CPU: the"
      " bench process's CPU over the steady window as a fraction of its core; bench core busy:"
      " everything on that core (other users' processes included).")
EOF
