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
# Prints a markdown table on stdout; the JSON lines and redis CSV go to the log it names.
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
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
for t in redis-server redis-benchmark redis-cli taskset python3; do
  command -v "$t" >/dev/null || { echo "$t not found" >&2; exit 1; }
done
MASTER=$BIN_DIR/mooncake_master BENCH=$BIN_DIR/mooncake_bench
[ -x "$MASTER" ] && [ -x "$BENCH" ] || { echo "build first (no $MASTER / $BENCH)" >&2; exit 1; }
SRV_CPU=0 GEN_CPU=1
if [ "$(nproc)" -lt 2 ]; then
  echo "warning: fewer than 2 CPUs; server and load generator share one" >&2
  GEN_CPU=0
fi

TMP=$(mktemp -d /tmp/mc_master_vs_redis.XXXXXX)
LOG=$TMP.log
: > "$LOG"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do
    kill -TERM "$p" 2>/dev/null || true
  done
  for p in "${PIDS[@]}"; do
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
json() { python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())[sys.argv[1]])' "$1"; }

# ---- mooncake_master -------------------------------------------------------------------------
mkfifo "$TMP/ready"
taskset -c $SRV_CPU "$MASTER" --rpc_port=0 --metrics_port=0 --rpc_address=127.0.0.1 \
  --metrics_host=127.0.0.1 --rpc_thread_num=1 --client_ttl=1h --log_level=warn \
  >"$TMP/ready" 2>>"$LOG" &
PIDS+=($!)
exec 3<"$TMP/ready"
read -r -t 20 line <&3 || { echo "mooncake_master did not start" >&2; exit 1; }
RPC=$(sed -n 's/.*rpc=\([^ ]*\).*/\1/p' <<<"$line")
echo "master: $line" >> "$LOG"

ours() { # op [extra args] -> JSON line
  taskset -c $GEN_CPU "$BENCH" master --master="$RPC" --conns=50 --keys="$KEYS" \
    --seconds="$SECS" --op="$@" 2>>"$LOG" | tee -a "$LOG"
}
echo "prefilling $KEYS keys into mooncake_master" >&2
taskset -c $GEN_CPU "$BENCH" master --master="$RPC" --conns=4 --keys="$KEYS" --prefill \
  --seconds=0.2 --op=get 2>>"$LOG" >> "$LOG"
D_GET=$(ours get --seconds=0.2 | json bytes_per_object)
D_BATCH=$(ours batch_get --batch=16 --seconds=0.2 | json bytes_per_object)
D_GET=${D_GET%.*} D_BATCH=${D_BATCH%.*}

# ---- redis ------------------------------------------------------------------------------------
start_redis() { # value_size -> port; prefills KEYS keys of that size
  local port d=$1
  port=$(free_port)
  taskset -c $SRV_CPU redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
    --protected-mode no --logfile "" >/dev/null 2>>"$LOG" &
  PIDS+=($!)
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  python3 - "$KEYS" "$d" <<'EOF' | redis-cli -p "$port" --pipe >> "$LOG" 2>&1
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
  local got
  got=$(redis-cli -p "$port" dbsize)
  [ "$got" = "$KEYS" ] || { echo "redis prefill: $got keys, wanted $KEYS" >&2; exit 1; }
  echo "$port"
}
echo "prefilling two redis servers ($D_GET B and $D_BATCH B values)" >&2
R_GET=$(start_redis "$D_GET")
R_BATCH=$(start_redis "$D_BATCH")

theirs() { # port value_size pipeline requests -> requests/s
  taskset -c $GEN_CPU redis-benchmark -h 127.0.0.1 -p "$1" -c 50 -n "$4" -r "$KEYS" -d "$2" \
    -P "$3" -t get --csv 2>>"$LOG" | tee -a "$LOG" |
    python3 -c 'import csv,sys
for row in csv.reader(sys.stdin):
    if row and row[0] == "GET": print(row[1])'
}

G_OURS=() G_REDIS=() B_OURS=() B_REDIS=()
for ((r = 1; r <= ROUNDS; r++)); do
  echo "round $r/$ROUNDS" >&2
  g=$(ours get | json ops_per_s)
  n=$(python3 -c "print(max(100000, int($g * $SECS)))")
  G_OURS+=("$g") G_REDIS+=("$(theirs "$R_GET" "$D_GET" 1 "$n")")
  b=$(ours batch_get --batch=16 | json ops_per_s)
  n=$(python3 -c "print(max(200000, int($b * $SECS)))")
  B_OURS+=("$b") B_REDIS+=("$(theirs "$R_BATCH" "$D_BATCH" 16 "$n")")
  echo "round $r: get ours=$g redis=${G_REDIS[-1]}; batch ours=$b redis=${B_REDIS[-1]}" >> "$LOG"
done

row() { # label ours[] redis[]
  local o t
  o=$(printf '%s\n' "${@:2:ROUNDS}" | median)
  t=$(printf '%s\n' "${@:2+ROUNDS:ROUNDS}" | median)
  awk -v l="$1" -v o="$o" -v t="$t" 'BEGIN { printf "| %s | %.0f | %.0f | %.2f |\n", l, o, t, o/t }'
}
printf '| case (50 connections, server on 1 core) | mooncake_master objects/s | redis GETs/s | ratio |\n'
printf '|---|---|---|---|\n'
row "GetReplicaList vs GET (reply ${D_GET} B)" "${G_OURS[@]}" "${G_REDIS[@]}"
row "BatchGetReplicaList x16 vs GET -P 16 (${D_BATCH} B/key)" "${B_OURS[@]}" "${B_REDIS[@]}"
echo "keys=$KEYS seconds=$SECS rounds=$ROUNDS (medians); log: $LOG" >&2
