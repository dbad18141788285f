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
#   evict     BatchEvict, one cycle vs upstream's batch_evict_bench at targets 0.5 / 0.1 / 0.01
#             (HEADLINE_OBJECTS objects, the library's own cycle with no probe thread beside it, as
#             upstream's bench runs; the two alternated, HEADLINE_ROUNDS rounds, medians)
#   steady    BatchEvict steady cycles at the 1% target: the forced full path's median / the
#             selective path's (mooncake_bench evict --targets 0.01,0.5 --runs 3), one ratio per
#             round (HEADLINE_ROUNDS rounds), their median
#   promotion CPU per promotion of a 64 KiB value, master + holder, from /proc (mooncake_bench
#             promotion, the cpu/remote case; a figure against its goal of 100 us; median of
#             HEADLINE_ROUNDS runs)
#   replay    the replay's Get p50 with promotion on / off (scripts/bench/replay.sh --modes
#             disk,promotion,disk, alternated HEADLINE_ROUNDS times; medians of each mode)
# Short by default; scale with HEADLINE_ROUNDS (default 1), HEADLINE_SECONDS (default 2; the
# disk row runs at least 5), HEADLINE_OBJECTS (default 1000000), HEADLINE_RUNS (transfer runs per
# round, default 100). Each row's full output is kept under HEADLINE_LOG_DIR (default a new
# directory under /tmp, printed at the end). A row whose script fails or whose figure cannot be
# read says so in the table ("not run") and the script exits 1 after printing the table.
# Paste the table into README.md; append the run to docs/performance.md with its load average.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROWS=transfer,upstream,redis,disk,objects,evict,steady,promotion,replay
UP=${MC_UPSTREAM_DIR:-../shared/upstream}
BIN_DIR=${BUILD_DIR:-build}/bin
while [ $# -gt 0 ]; do
  case "$1" in
    --rows) ROWS=$2; shift 2 ;;
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
R=${HEADLINE_ROUNDS:-1} S=${HEADLINE_SECONDS:-2} N=${HEADLINE_OBJECTS:-1000000}
RUNS=${HEADLINE_RUNS:-100}
for v in R S N RUNS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "HEADLINE setting $v must be a positive integer" >&2; exit 2; }
done
for row in ${ROWS//,/ }; do
  case "$row" in transfer|upstream|redis|disk|objects|evict|steady|promotion|replay) ;;
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

# One row: runs COMMAND once (output in LOGDIR/NAME.log, in $f for the extractors), then emits
# each (WHAT, EXTRACTOR) pair, EXTRACTOR a shell snippet printing the cell's value; the first
# line shows the command, the others "(same run)".
row() { # name command what1 extractor1 [what2 extractor2 ...]
  local name=$1 cmd=$2 shown=$2
  shift 2
  run_row "$name" "$cmd"
  f=$LOGDIR/$name.log
  while [ $# -ge 2 ]; do
    emit "$1" "$(eval "$2")" "$shown" "$name"
    shown="(same run)"
    shift 2
  done
}

# A figure from the JSON lines of FILE: python expression EXPR over `rows` (the parsed lines),
# printed as is; nothing when it fails.
json_fig() { # file expr
  python3 - "$@" <<'PY' 2>/dev/null
import json, statistics, sys
rows = []
for line in open(sys.argv[1], errors="replace"):
    line = line.strip()
    if line.startswith("{"):
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
med = statistics.median
def mode(r):  # a replay line's mode (its case's last part when it has no mode field)
    return r.get("mode") or r.get("case", "").rsplit("/", 1)[-1]
try:
    v = eval(sys.argv[2])
    print(v if v not in (None, "") else "")
except Exception:
    pass
PY
}

# The evict row: ours and upstream's one cycle per target, alternated for R rounds; prints one
# line per run ("ours T ms" / "upstream T ms") for json_fig-free parsing below.
evict_rounds() {
  local t i lb
  for i in $(seq "$R"); do
    for t in 0.5 0.1 0.01; do
      lb=$(python3 -c "print($t / 2)")
      "$BIN_DIR/mooncake_bench" evict --objects "$N" --targets "$t" --runs 1 --modes selective --no-probe |
        python3 -c 'import json,sys
for l in sys.stdin:
    if l.startswith("{"):
        d = json.loads(l)
        if d.get("mode") == "selective" and "target" in d:
            print("ours", d["target"], d["ms"])'
      "$UP/run" batch_evict_bench --num_objects="$N" --evict_ratio_target="$t" \
        --evict_ratio_lowerbound="$lb" 2>/dev/null |
        awk -F, -v t="$t" '$1 ~ /^[0-9]+$/ && NF >= 2 { print "upstream", t, $2 / 1000 }'
    done
  done
}

evict_ratios() { # log: "a / b / c", upstream median ms / ours median ms per target
  python3 - "$1" <<'PY'
import statistics, sys
d = {}
for line in open(sys.argv[1], errors="replace"):
    p = line.split()
    if len(p) == 3 and p[0] in ("ours", "upstream"):
        d.setdefault((p[0], float(p[1])), []).append(float(p[2]))
out = []
for t in (0.5, 0.1, 0.01):
    o, u = d.get(("ours", t)), d.get(("upstream", t))
    out.append("%.1f" % (statistics.median(u) / statistics.median(o)) if o and u and statistics.median(o) > 0 else "")
print(" / ".join(out) if all(out) else "")
PY
}

for row in ${ROWS//,/ }; do
  case "$row" in
  transfer)
    row transfer "scripts/bench/transfer_vs_iperf.sh --rounds $R --seconds $S --runs $RUNS --sizes 4MiB" \
      "4 MiB Get in the same process, MB/s vs a memcpy of 4 MiB, both over 1 GiB of sources (past the caches; checksums on)" \
      'cell "$f" "^\| Get, same process, cold sources" 5' \
      "the same with one warm key vs a warm memcpy" \
      'cell "$f" "^\| Get, same process, one warm key \|" 5' \
      "4 MiB Get between processes, MB/s vs iperf3 (loopback, one stream; checksums on)" \
      'cell "$f" "^\| Get, between processes \|" 5'
    ;;
  upstream)
    row upstream "scripts/bench/master_vs_upstream.sh --bin-dir $BIN_DIR --rounds $R --seconds $S" \
      "GetReplicaList objects/s vs upstream's master under its master_bench (16 callers; master on CPU 0, bench on CPU 1)" \
      'cell "$f" "^\| GetReplicaList, objects/s \|" 4' \
      "BatchGetReplicaList x128 keys/s vs upstream" \
      'cell "$f" "^\| BatchGetReplicaList x128, keys/s \|" 4' \
      "Put (PutStart + PutEnd) objects/s vs upstream" \
      'cell "$f" "^\| Put \(PutStart \+ PutEnd\)" 4'
    ;;
  redis)
    row redis "KEYS=200000 SECONDS_PER_RUN=$S ROUNDS=$R scripts/bench/master_vs_redis.sh --bin-dir $BIN_DIR" \
      "GetReplicaList objects/s vs redis GET/s (50 connections, server on one core)" \
      'cell "$f" "^\| GetReplicaList vs GET" 4' \
      "BatchGetReplicaList x16 keys/s vs redis GET -P 16" \
      'cell "$f" "^\| BatchGetReplicaList x16" 4'
    ;;
  disk)
    # the last row of a case is its line in the medians table (column 5: median of the rounds)
    row disk "scripts/bench/disk_vs_fio.sh --rounds $R --seconds $DS" \
      "LOCAL_DISK random reads, MB/s vs fio with the same jobs x depth (2 x 16) on the store's extent files, 64 KiB / 1 MiB" \
      'echo "$(cell "$f" "^\| randread \| 64 KiB \|" 5) / $(cell "$f" "^\| randread \| 1 MiB \|" 5)"' \
      "LOCAL_DISK offload writes, MB/s vs fio's sequential write at the store's write size and depth, 64 KiB / 1 MiB values" \
      'echo "$(cell "$f" "^\| write \| 64 KiB \|" 5) / $(cell "$f" "^\| write \| 1 MiB \|" 5)"'
    ;;
  objects)
    row objects "$BIN_DIR/mooncake_bench objects --objects $N --key-len 64" \
      "master bytes per object beyond the key, $N objects, 64-byte keys (a figure; goal <= 120)" \
      'json_fig "$f" "\"%.1f\" % [r[\"bytes_per_object\"] for r in rows if r.get(\"case\", \"\").startswith(\"put\") and \"bytes_per_object\" in r][0]"'
    ;;
  evict)
    row evict "evict_rounds # mooncake_bench evict --objects $N --targets T --runs 1 --modes selective --no-probe beside $UP/run batch_evict_bench --num_objects=$N --evict_ratio_target=T --evict_ratio_lowerbound=T/2, T = 0.5, 0.1, 0.01, $R rounds" \
      "BatchEvict, $N objects, one cycle vs upstream's batch_evict_bench, targets 0.5 / 0.1 / 0.01 (goal >= 20 each)" \
      'evict_ratios "$f"'
    ;;
  steady)
    row steady "for i in \$(seq $R); do $BIN_DIR/mooncake_bench evict --objects $N --targets 0.01,0.5 --runs 3; done" \
      "BatchEvict $N objects, 1% target, steady cycles: forced full / selective, median of the rounds' ratios (goal >= 3)" \
      'json_fig "$f" "\"%.2f\" % med([fu[\"ms\"] / se[\"ms\"] for se, fu in zip([r for r in rows if r.get(\"mode\") == \"selective\" and r.get(\"target\") == 0.01], [r for r in rows if r.get(\"mode\") == \"full\" and r.get(\"target\") == 0.01])])"'
    ;;
  promotion)
    row promotion "for i in \$(seq $R); do $BIN_DIR/mooncake_bench promotion --sizes 64KiB --keys 600 --reader remote --zipf_objects 0 --runs 1 --segment_size 64MiB; done" \
      "CPU per promotion of a 64 KiB value, master + holder, us (a figure; goal <= 100)" \
      'json_fig "$f" "\"%.0f\" % med([r[\"cpu_us_per_promotion\"] for r in rows if r.get(\"case\", \"\").startswith(\"cpu/\")])"'
    ;;
  replay)
    row replay "scripts/bench/replay.sh --bin $BIN_DIR --modes disk,promotion,disk --rounds $R --json $LOGDIR/replay.json" \
      "replay Get p50, promotion on / off (medians of alternated modes; goal <= 1.0)" \
      'json_fig "$LOGDIR/replay.json" "\"%.2f\" % (med([r[\"get_p50_ms\"] for r in rows if mode(r).startswith(\"promotion\") and \"get_p50_ms\" in r]) / med([r[\"get_p50_ms\"] for r in rows if mode(r) == \"disk\" and \"get_p50_ms\" in r]))"'
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
