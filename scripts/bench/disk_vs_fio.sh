#!/usr/bin/env bash
# LOCAL_DISK store vs fio (DESIGN.md §12): random reads of exactly 64 KiB and 1 MiB, queue depth
# 32, one job, O_DIRECT + io_uring on both sides, on data sets of the same size in the same
# directory. Each round runs fio then `mooncake_bench disk` (A/B alternating, so drift of a
# shared machine hits both); the table shows medians over the rounds and store/fio.
#
# usage: scripts/bench/disk_vs_fio.sh [--data 1GiB] [--rounds 3] [--dir DIR] [--bin PATH]
#   --dir  where the files go (default $TMPDIR or /tmp): put it on the SSD under test
#   --bin  mooncake_bench (default $BUILD_DIR/bin/mooncake_bench, BUILD_DIR=build)
# Prints the table on stdout; the JSON lines of both tools are kept in the log it names.
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=1GiB ROUNDS=3 DIR=${TMPDIR:-/tmp} BIN=${BUILD_DIR:-build}/bin/mooncake_bench
while [ $# -gt 0 ]; do
  case "$1" in
    --data) DATA=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
command -v fio >/dev/null || { echo "fio not found" >&2; exit 1; }
[ -x "$BIN" ] || { echo "mooncake_bench not found at $BIN (build first or pass --bin)" >&2; exit 1; }

to_bytes() { # 1GiB, 512MiB, 64KiB, 1G, 123
  local v=${1%iB}; v=${v%B}
  case "$v" in
    *[kK]) echo $(( ${v%?} * 1024 )) ;;
    *[mM]) echo $(( ${v%?} * 1024 * 1024 )) ;;
    *[gG]) echo $(( ${v%?} * 1024 * 1024 * 1024 )) ;;
    *) echo "$v" ;;
  esac
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

BYTES=$(to_bytes "$DATA")
ROOT=$(mktemp -d "$DIR/mc_disk_vs_fio.XXXXXX")
LOG=$ROOT.log
trap 'rm -rf "$ROOT"' EXIT
: > "$LOG"

printf '| value size | fio MB/s | store MB/s | store / fio |\n|---|---|---|---|\n'
for BS in 65536 1048576; do
  FIO=() MC=()
  for ((r = 1; r <= ROUNDS; r++)); do
    f=$(fio --name=ref --filename="$ROOT/fio.dat" --size="$BYTES" --io_size="$BYTES" \
          --ioengine=io_uring --direct=1 --rw=randread --bs="$BS" --iodepth=32 --numjobs=1 \
          --randrepeat=0 --output-format=json 2>>"$LOG" |
        tee -a "$LOG" | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"])')
    m=$("$BIN" disk --dir "$ROOT/mc" --keep --data "$BYTES" --sizes "$BS" --runs 1 --qd 32 \
          2>>"$LOG" | tee -a "$LOG" |
        python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["bytes_per_s"])')
    FIO+=("$f") MC+=("$m")
    echo "round $r bs=$BS fio=$f store=$m" >> "$LOG"
  done
  fm=$(printf '%s\n' "${FIO[@]}" | median)
  mm=$(printf '%s\n' "${MC[@]}" | median)
  awk -v bs="$BS" -v f="$fm" -v m="$mm" 'BEGIN {
    printf "| %s | %.0f | %.0f | %.2f |\n", (bs >= 1048576 ? bs/1048576 " MiB" : bs/1024 " KiB"),
      f/1e6, m/1e6, m/f }'
  rm -rf "$ROOT/mc/v$BS" "$ROOT/fio.dat"
done
echo "data set ${DATA} per size, ${ROUNDS} rounds, iodepth 32, 1 job; log: $LOG" >&2
