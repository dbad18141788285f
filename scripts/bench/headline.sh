#!/usr/bin/env bash
# headline.sh - runs the rows of README's performance table, each side by side with its
# reference as its own script does (alternated rounds where the reference is a separate
# process), and prints the table with the date, the commit and each row's command.
#
#   scripts/bench/headline.sh [--rows LIST] [--bin-dir DIR]
#
# Rows (--rows, comma-separated; default all of them):
#   transfer  4 MiB Get in one process vs a memcpy of 4 MiB, and between processes vs iperf3
#             (scripts/bench/transfer_vs_iperf.sh)
#   upstream  GetReplicaList, BatchGetReplicaList x128 and Put vs upstream's master under its own
#             master_bench (scripts/bench/master_vs_upstream.sh)
#   redis     GetReplicaList vs redis GET, x16 vs GET -P 16 (scripts/bench/master_vs_redis.sh)
#   disk      LOCAL_DISK random reads and offload writes vs fio (scripts/bench/disk_vs_fio.sh)
#   objects   the master's bytes per object with 64-byte keys (mooncake_bench objects; a figure
#             against its goal of 120, not a ratio)
# Short by default; scale with HEADLINE_ROUNDS (default 1), HEADLINE_SECONDS (default 2; the
# disk row runs at least 5), HEADLINE_OBJECTS (default 1000000), HEADLINE_RUNS (transfer runs per
# round, default 100). Each row's full output is kept under HEADLINE_LOG_DIR (default a new
# directory under /tmp, printed at the end). A row whose script fails or whose figure cannot be
# read says so in the table ("not run") and the script exits 1 after printing the table.
# Paste the table into README.md; append the run to docs/performance.md with its load average.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROWS=transfer,upstream,redis,disk,objects
BIN_DIR=${BUILD_DIR:-build}/bin
while [ $# -gt 0 ]; do
  case "$1" in
    --rows) ROWS=$2; shift 2 ;;
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
R=${HEADLINE_ROUNDS:-1} S=${HEADLINE_SECONDS:-2} N=${HEADLINE_OBJECTS:-1000000}
RUNS=${HEADLINE_RUNS:-100}
for v in R S N RUNS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "HEADLINE setting $v must be a positive integer" >&2; exit 2; }
done
for row in ${ROWS//,/ }; do
  case "$row" in transfer|upstream|redis|disk|objects) ;;
    *) echo "unknown row: $row" >&2; exit 2 ;; esac
done
DS=$((S < 5 ? 5 : S))
LOGDIR=${HEADLINE_LOG_DIR:-$(mktemp -d /tmp/mc_headline.XXXXXX)}
mkdir -p "$LOGDIR"
DATE=$(date -u +%Y-%m-%d)
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || COMMIT="$COMMIT+changes"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
OUT=$LOGDIR/table.md
: > "$OUT"
FAILED=0

# The cell COL (1-based) of the last markdown row of FILE whose text matches REGEX (python re);
# prints nothing when there is none.
cell() { # file regex col
  python3 - "$@" <<'PY'
import re, sys
rx, col, hit = re.compile(sys.argv[2]), int(sys.argv[3]), None
for line in open(sys.argv[1], errors="replace"):
    if line.startswith("|") and rx.search(line):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= col:
            hit = cells[col - 1]
print(hit or "")
PY
}

# Runs one row's command (the string shown in the table), its output to LOGDIR/NAME.log.
run_row() { # name command
  echo "headline: $1: $2" >&2
  (eval "$2") >"$LOGDIR/$1.log" 2>&1
}

emit() { # what value command
  local v=$2
  if [ -z "$v" ]; then v="not run (see $(basename "$LOGDIR")/$4.log)"; FAILED=1; fi
  printf '| %s | %s | %s, `%s` | `%s` |\n' "$1" "$v" "$DATE" "$COMMIT" "$3" >>"$OUT"
}

for row in ${ROWS//,/ }; do
  case "$row" in
  transfer)
    c="scripts/bench/transfer_vs_iperf.sh --rounds $R --seconds $S --runs $RUNS --sizes 4MiB"
    run_row transfer "$c"
    f=$LOGDIR/transfer.log
    emit "4 MiB Get in the same process, MB/s vs a memcpy of 4 MiB, both over 1 GiB of sources (past the caches; checksums on)" \
      "$(cell "$f" '^\| Get, same process, cold sources' 5)" "$c" transfer
    emit "the same with one warm key vs a warm memcpy" \
      "$(cell "$f" '^\| Get, same process, one warm key \|' 5)" "(same run)" transfer
    emit "4 MiB Get between processes, MB/s vs iperf3 (loopback, one stream; checksums on)" \
      "$(cell "$f" '^\| Get, between processes \|' 5)" "(same run)" transfer
    ;;
  upstream)
    c="scripts/bench/master_vs_upstream.sh --bin-dir $BIN_DIR --rounds $R --seconds $S"
    run_row upstream "$c"
    f=$LOGDIR/upstream.log
    emit "GetReplicaList objects/s vs upstream's master under its master_bench (16 callers; master on CPU 0, bench on CPU 1)" \
      "$(cell "$f" '^\| GetReplicaList, objects/s \|' 4)" "$c" upstream
    emit "BatchGetReplicaList x128 keys/s vs upstream" \
      "$(cell "$f" '^\| BatchGetReplicaList x128, keys/s \|' 4)" "(same run)" upstream
    emit "Put (PutStart + PutEnd) objects/s vs upstream" \
      "$(cell "$f" '^\| Put \(PutStart \+ PutEnd\)' 4)" "(same run)" upstream
    ;;
  redis)
    c="KEYS=200000 SECONDS_PER_RUN=$S ROUNDS=$R scripts/bench/master_vs_redis.sh --bin-dir $BIN_DIR"
    run_row redis "$c"
    f=$LOGDIR/redis.log
    emit "GetReplicaList objects/s vs redis GET/s (50 connections, server on one core)" \
      "$(cell "$f" '^\| GetReplicaList vs GET' 4)" "$c" redis
    emit "BatchGetReplicaList x16 keys/s vs redis GET -P 16" \
      "$(cell "$f" '^\| BatchGetReplicaList x16' 4)" "(same run)" redis
    ;;
  disk)
    c="scripts/bench/disk_vs_fio.sh --rounds $R --seconds $DS"
    run_row disk "$c"
    f=$LOGDIR/disk.log
    # the last row of a case is its line in the medians table (column 5: median of the rounds)
    emit "LOCAL_DISK random reads (32 in flight), MB/s vs fio, 64 KiB / 1 MiB" \
      "$(cell "$f" '^\| randread \| 64 KiB \|' 5) / $(cell "$f" '^\| randread \| 1 MiB \|' 5)" \
      "$c" disk
    emit "LOCAL_DISK offload writes, MB/s vs fio's sequential write, 64 KiB / 1 MiB" \
      "$(cell "$f" '^\| write \| 64 KiB \|' 5) / $(cell "$f" '^\| write \| 1 MiB \|' 5)" \
      "(same run)" disk
    ;;
  objects)
    c="$BIN_DIR/mooncake_bench objects --objects $N --key-len 64"
    run_row objects "$c"
    v=$(python3 - "$LOGDIR/objects.log" <<'PY'
import json, sys
for line in open(sys.argv[1], errors="replace"):
    if line.startswith("{"):
        d = json.loads(line)
        if d.get("case", "").startswith("put") and "bytes_per_object" in d:
            print("%.1f" % d["bytes_per_object"])
            break
PY
)
    emit "master bytes per object beyond the key, $N objects, 64-byte keys (a figure; goal <= 120)" \
      "$v" "$c" objects
    ;;
  esac
done
# a disk cell with a side missing: not a figure
sed -i -E 's/\| ([0-9.]*) \/ ([0-9.]*) \|/| \1 \/ \2 |/; s/\|  \/ ([0-9.]*) \|/| not run \/ \1 |/; s/\| ([0-9.]*) \/  \|/| \1 \/ not run |/' "$OUT"
grep -q 'not run' "$OUT" && FAILED=1

echo "| what | ratio | measured | command |"
echo "|---|---|---|---|"
cat "$OUT"
echo
echo "load average at the start: $LOAD0; at the end: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs;" \
  "each row's output: $LOGDIR"
exit $FAILED
