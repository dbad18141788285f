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
# ROUNDS rounds and ours/redis, and per side the CPU its load generator used (a fraction of its
# core, from /usr/bin/time) and the CPU its server used over the run (/proc): a client near 1.0
# could not have sent more, so that side's figure is a lower bound.
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
for t in redis-server redis-benchmark redis-cli taskset python3 timeout /usr/bin/time; do
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
RPC=$MC_READY_RPC M_PID=$MC_PID
echo "master: $line" >> "$LOG"

# CPU of one client run: CLIENT_CPU (its user + system time over its wall time, from
# /usr/bin/time's file $TMP/time) and SERVER_CPU (the server's over the same wall time).
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
cpu_begin() { T0=$(ticks "$1"); }
cpu_end() { # server_pid
  read -r u s e <"$TMP/time"
  CLIENT_CPU=$(awk -v u="$u" -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", (e > 0 ? (u + s) / e : 0) }')
  SERVER_CPU=$(awk -v a="$T0" -v b="$(ticks "$1")" -v hz="$HZ" -v e="$e" \
    'BEGIN { printf "%.2f", (e > 0 ? (b - a) / hz / e : 0) }')
}
TIMED=(/usr/bin/time -o "$TMP/time" -f '%U %S %e')

ours() { # op [extra args]: one bench run, its JSON line in $TMP/ours.json (and the log)
  cpu_begin "$M_PID"
  mc_bounded "$TMO" "$TMP/ours.json" "${TIMED[@]}" taskset -c $GEN_CPU "$BENCH" master \
    --master="$RPC" --conns=50 --keys="$KEYS" --seconds="$SECS" --op="$@" ||
    { echo "mooncake_bench master --op=$1 failed; see $LOG" >&2; exit 1; }
  cpu_end "$M_PID"
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
  R_PORT=$port R_PID=$MC_PID
}
echo "prefilling two redis servers ($D_GET B and $D_BATCH B values)" >&2
start_redis "$D_GET"
R_GET=$R_PORT R_GET_PID=$R_PID
start_redis "$D_BATCH"
R_BATCH=$R_PORT R_BATCH_PID=$R_PID

theirs() { # port value_size pipeline requests server_pid: sets REDIS_RATE (requests/s)
  cpu_begin "$5"
  mc_bounded "$TMO" "$TMP/redis.csv" "${TIMED[@]}" taskset -c $GEN_CPU redis-benchmark \
    -h 127.0.0.1 -p "$1" -c 50 -n "$4" -r "$KEYS" -d "$2" -P "$3" -t get --csv ||
    { echo "redis-benchmark failed; see $LOG" >&2; exit 1; }
  cpu_end "$5"
  cat "$TMP/redis.csv" >>"$LOG"
  REDIS_RATE=$(python3 -c 'import csv,sys
for row in csv.reader(open(sys.argv[1])):
    if row and row[0] == "GET": print(row[1])' "$TMP/redis.csv")
  [ -n "$REDIS_RATE" ] || { echo "redis-benchmark: no GET result; see $LOG" >&2; exit 1; }
}

G_OURS=() G_REDIS=() B_OURS=() B_REDIS=()
GC=() GS=() BC=() BS=() # CPU per run: "ours redis" pairs, client and server
for ((r = 1; r <= ROUNDS; r++)); do
  echo "round $r/$ROUNDS" >&2
  ours get
  g=$(json ops_per_s "$TMP/ours.json") oc=$CLIENT_CPU os=$SERVER_CPU
  n=$(python3 -c "print(max(100000, int($g * $SECS)))")
  theirs "$R_GET" "$D_GET" 1 "$n" "$R_GET_PID"
  G_OURS+=("$g") G_REDIS+=("$REDIS_RATE") GC+=("$oc/$CLIENT_CPU") GS+=("$os/$SERVER_CPU")
  ours batch_get --batch=16
  b=$(json ops_per_s "$TMP/ours.json") oc=$CLIENT_CPU os=$SERVER_CPU
  n=$(python3 -c "print(max(200000, int($b * $SECS)))")
  theirs "$R_BATCH" "$D_BATCH" 16 "$n" "$R_BATCH_PID"
  B_OURS+=("$b") B_REDIS+=("$REDIS_RATE") BC+=("$oc/$CLIENT_CPU") BS+=("$os/$SERVER_CPU")
  echo "round $r: get ours=$g redis=${G_REDIS[-1]} client cpu ${GC[-1]} server cpu ${GS[-1]};" \
    "batch ours=$b redis=${B_REDIS[-1]} client cpu ${BC[-1]} server cpu ${BS[-1]}" | tee -a "$LOG" >&2
done

row() { # label "client cpu per round" "server cpu per round" ours[] redis[]
  local o t
  o=$(printf '%s\n' "${@:4:ROUNDS}" | mc_median)
  t=$(printf '%s\n' "${@:4+ROUNDS:ROUNDS}" | mc_median)
  awk -v l="$1" -v o="$o" -v t="$t" -v c="$2" -v s="$3" \
    'BEGIN { printf "| %s | %.0f | %.0f | %.2f | %s | %s |\n", l, o, t, o/t, c, s }'
}
printf '| case (50 connections, server on 1 core) | mooncake_master objects/s | redis GETs/s | ratio |'
printf ' client CPU ours/redis, per round | server CPU ours/redis, per round |\n'
printf '|---|---|---|---|---|---|\n'
row "GetReplicaList vs GET (reply ${D_GET} B)" "${GC[*]}" "${GS[*]}" "${G_OURS[@]}" "${G_REDIS[@]}"
row "BatchGetReplicaList x16 vs GET -P 16 (${D_BATCH} B/key)" "${BC[*]}" "${BS[*]}" \
  "${B_OURS[@]}" "${B_REDIS[@]}"
echo "keys=$KEYS seconds=$SECS rounds=$ROUNDS (medians); log: $LOG" >&2
