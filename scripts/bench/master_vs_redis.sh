#!/usr/bin/env bash
# mooncake_master metadata ops vs redis GET (DESIGN.md §12, issue 6), side by side on one host.
#
# The server under test runs on core 0, the load generator on core 1 (taskset), for both sides:
#   - mooncake_master --rpc_thread_num=1 (one I/O thread), prefilled with KEYS objects
#     "key:%012u" by `mooncake_bench master --prefill`;
#   - redis-server (no persistence, loopback, free port), prefilled through redis-cli --pipe
#     with the same KEYS keys, each value as large as one object's share of our reply
#     (bytes_per_object from the bench), so the reply sizes match; redis-benchmark gets the same
#     -d. Two redis servers are used: one with the GetReplicaList reply size, one with the
#     BatchGetReplicaList per-key reply size.
# Cases (50 connections each):
#   GetReplicaList, 1 call in flight per connection   vs  redis-benchmark -t get
#   BatchGetReplicaList of 16 keys (keys/s)             vs  redis-benchmark -t get -P 16
# Each round runs ours then redis for each case (A/B alternating); the table shows the median of
# ROUNDS rounds and ours/redis.
#
# usage: scripts/bench/master_vs_redis.sh [--keys N] [--seconds S] [--rounds R] [--bin-dir DIR]
#   KEYS=N, SECONDS_PER_RUN=S, ROUNDS=R environment variables do the same (defaults 1000000, 5, 3)
#   --bin-dir  where mooncake_master and mooncake_bench are (default $BUILD_DIR/bin, BUILD_DIR=build)
# Prints a markdown table on stdout; the JSON lines and redis CSV go to the log it names. Every
# client run is bounded by timeout(1); the master and both redis servers are recorded and
# stopped on any exit (scripts/bench/lib.sh), never started inside $(...).
set -euo pipefail
cd "$(dirname "$0")/../.."
KEYS=${KEYS:-1000000} SECS=${SECONDS_PER_RUN:-5} ROUNDS=${ROUNDS:-3}
BIN_DIR=${BUILD_DIR:-build}/bin
while [ $# -gt 0 ]; do
  case "$1" in
    --keys) KEYS=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
for t in redis-server redis-benchmark redis-cli taskset python3 timeout; do
  command -v "$t" >/dev/null || { echo "$t not found" >&2; exit 1; }
done
MASTER=$BIN_DIR/mooncake_master BENCH=$BIN_DIR/mooncake_bench
[ -x "$MASTER" ] && [ -x "$BENCH" ] || { echo "build first (no $MASTER / $BENCH)" >&2; exit 1; }
SRV_CPU=0 GEN_CPU=1
if [ "$(nproc)" -lt 2 ]; then
  echo "warning: fewer than 2 CPUs; server and load generator share one" >&2
  GEN_CPU=0
fi

. scripts/bench/lib.sh
TMP=$(mktemp -d /tmp/mc_master_vs_redis.XXXXXX)
LOG=$TMP.log
: > "$LOG"
rm_tmp() { rm -rf "$TMP"; }
mc_install_traps rm_tmp
TMO=$((SECS * 10 + 300)) # bound of one client run (prefills included)

json() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[2]).readline())[sys.argv[1]])' "$@"; }

# ---- mooncake_master -------------------------------------------------------------------------
mkfifo "$TMP/ready"
exec 3<>"$TMP/ready" # read-write: opening never blocks, and a dead master cannot hang the read
mc_start taskset -c $SRV_CPU "$MASTER" --rpc_port=0 --metrics_port=0 --rpc_address=127.0.0.1 \
  --metrics_host=127.0.0.1 --rpc_thread_num=1 --client_ttl=1h --log_level=warn \
  >"$TMP/ready" 2>>"$LOG"
read -r -t 20 line <&3 || { echo "mooncake_master did not start" >&2; exit 1; }
mc_parse_ready "$line" && [ "$MC_READY_KIND" = master ] ||
  { echo "mooncake_master: unexpected first line: $line" >&2; exit 1; }
RPC=$MC_READY_RPC
echo "master: $line" >> "$LOG"

ours() { # op [extra args]: one bench run, its JSON line in $TMP/ours.json (and the log)
  mc_bounded "$TMO" "$TMP/ours.json" taskset -c $GEN_CPU "$BENCH" master --master="$RPC" \
    --conns=50 --keys="$KEYS" --seconds="$SECS" --op="$@" ||
    { echo "mooncake_bench master --op=$1 failed; see $LOG" >&2; exit 1; }
  cat "$TMP/ours.json" >>"$LOG"
}
echo "prefilling $KEYS keys into mooncake_master" >&2
mc_bounded "$TMO" "$TMP/prefill.json" taskset -c $GEN_CPU "$BENCH" master --master="$RPC" \
  --conns=4 --keys="$KEYS" --prefill --seconds=0.2 --op=get ||
  { echo "mooncake_master prefill failed; see $LOG" >&2; exit 1; }
cat "$TMP/prefill.json" >>"$LOG"
ours get --seconds=0.2
D_GET=$(json bytes_per_object "$TMP/ours.json")
ours batch_get --batch=16 --seconds=0.2
D_BATCH=$(json bytes_per_object "$TMP/ours.json")
D_GET=${D_GET%.*} D_BATCH=${D_BATCH%.*}

# ---- redis ------------------------------------------------------------------------------------
# The redis prefill: KEYS SET commands in the redis protocol on stdout.
cat >"$TMP/gen.py" <<'EOF'
import sys
n, d = int(sys.argv[1]), int(sys.argv[2])
v = b"x" * d
out = sys.stdout.buffer
chunk = []
for i in range(n):
    k = b"key:%012d" % i
    chunk.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, d, v))
    if len(chunk) == 10000:
        out.write(b"".join(chunk)); chunk = []
out.write(b"".join(chunk))
EOF
redis_up() { timeout 2 redis-cli -p "$1" ping | grep -q PONG; }
# Starts a redis-server (recorded for cleanup: this runs in the script's own shell, never in a
# $(...) subshell), prefills KEYS keys of value_size bytes; sets R_PORT.
start_redis() { # value_size
  local port d=$1 got
  port=$(mc_free_port)
  mc_start taskset -c $SRV_CPU redis-server --port "$port" --bind 127.0.0.1 --save "" \
    --appendonly no --protected-mode no --logfile "" >/dev/null 2>>"$LOG"
  mc_wait_until 20 "$MC_PID" redis_up "$port" ||
    { echo "redis-server on port $port did not start" >&2; exit 1; }
  mc_bounded "$TMO" "$TMP/pipe.out" bash -c 'python3 "$1" "$2" "$3" | redis-cli -p "$4" --pipe' \
    _ "$TMP/gen.py" "$KEYS" "$d" "$port" || { echo "redis prefill failed; see $LOG" >&2; exit 1; }
  cat "$TMP/pipe.out" >>"$LOG"
  got=$(timeout 20 redis-cli -p "$port" dbsize)
  [ "$got" = "$KEYS" ] || { echo "redis prefill: $got keys, wanted $KEYS" >&2; exit 1; }
  R_PORT=$port
}
echo "prefilling two redis servers ($D_GET B and $D_BATCH B values)" >&2
start_redis "$D_GET"
R_GET=$R_PORT
start_redis "$D_BATCH"
R_BATCH=$R_PORT

theirs() { # port value_size pipeline requests: sets REDIS_RATE (requests/s)
  mc_bounded "$TMO" "$TMP/redis.csv" taskset -c $GEN_CPU redis-benchmark -h 127.0.0.1 -p "$1" \
    -c 50 -n "$4" -r "$KEYS" -d "$2" -P "$3" -t get --csv ||
    { echo "redis-benchmark failed; see $LOG" >&2; exit 1; }
  cat "$TMP/redis.csv" >>"$LOG"
  REDIS_RATE=$(python3 -c 'import csv,sys
for row in csv.reader(open(sys.argv[1])):
    if row and row[0] == "GET": print(row[1])' "$TMP/redis.csv")
  [ -n "$REDIS_RATE" ] || { echo "redis-benchmark: no GET result; see $LOG" >&2; exit 1; }
}

G_OURS=() G_REDIS=() B_OURS=() B_REDIS=()
for ((r = 1; r <= ROUNDS; r++)); do
  echo "round $r/$ROUNDS" >&2
  ours get
  g=$(json ops_per_s "$TMP/ours.json")
  n=$(python3 -c "print(max(100000, int($g * $SECS)))")
  theirs "$R_GET" "$D_GET" 1 "$n"
  G_OURS+=("$g") G_REDIS+=("$REDIS_RATE")
  ours batch_get --batch=16
  b=$(json ops_per_s "$TMP/ours.json")
  n=$(python3 -c "print(max(200000, int($b * $SECS)))")
  theirs "$R_BATCH" "$D_BATCH" 16 "$n"
  B_OURS+=("$b") B_REDIS+=("$REDIS_RATE")
  echo "round $r: get ours=$g redis=${G_REDIS[-1]}; batch ours=$b redis=${B_REDIS[-1]}" >> "$LOG"
done

row() { # label ours[] redis[]
  local o t
  o=$(printf '%s\n' "${@:2:ROUNDS}" | mc_median)
  t=$(printf '%s\n' "${@:2+ROUNDS:ROUNDS}" | mc_median)
  awk -v l="$1" -v o="$o" -v t="$t" 'BEGIN { printf "| %s | %.0f | %.0f | %.2f |\n", l, o, t, o/t }'
}
printf '| case (50 connections, server on 1 core) | mooncake_master objects/s | redis GETs/s | ratio |\n'
printf '|---|---|---|---|\n'
row "GetReplicaList vs GET (reply ${D_GET} B)" "${G_OURS[@]}" "${G_REDIS[@]}"
row "BatchGetReplicaList x16 vs GET -P 16 (${D_BATCH} B/key)" "${B_OURS[@]}" "${B_REDIS[@]}"
echo "keys=$KEYS seconds=$SECS rounds=$ROUNDS (medians); log: $LOG" >&2
