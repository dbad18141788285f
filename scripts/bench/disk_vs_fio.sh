#!/usr/bin/env bash
# LOCAL_DISK store vs fio (DESIGN.md §12): random reads of exactly 64 KiB and 1 MiB, queue depth
# 32, one job, O_DIRECT + io_uring on both sides, on data sets of the same size in the same
# directory. Each round runs fio then `mooncake_bench disk` (A/B alternating, so drift of a
# shared machine hits both); the table shows medians over the rounds and store/fio.
#
# usage: scripts/bench/disk_vs_fio.sh [--data 1GiB] [--rounds 3] [--dir DIR] [--bin PATH]
#                                      [--timeout 900]
#   --dir      where the files go (default $TMPDIR or /tmp): put it on the SSD under test
#   --bin      mooncake_bench (default $BUILD_DIR/bin/mooncake_bench, BUILD_DIR=build)
#   --timeout  seconds one fio or bench run may take before it is killed (the run then fails)
# Prints the table on stdout; the JSON lines of both tools are kept in the log it names. Every
# run is bounded by timeout(1); any exit stops what still runs (scripts/bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=1GiB ROUNDS=3 DIR=${TMPDIR:-/tmp} BIN=${BUILD_DIR:-build}/bin/mooncake_bench TMO=900
while [ $# -gt 0 ]; do
  case "$1" in
    --data) DATA=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --timeout) TMO=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
for t in fio timeout python3; do
  command -v "$t" >/dev/null || { echo "$t not found" >&2; exit 1; }
done
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

BYTES=$(to_bytes "$DATA")
. scripts/bench/lib.sh
ROOT=$(mktemp -d "$DIR/mc_disk_vs_fio.XXXXXX")
LOG=$ROOT.log
rm_root() { rm -rf "$ROOT"; }
mc_install_traps rm_root
: > "$LOG"

# One bounded run: its JSON into $ROOT/out.json and the log; exits the script on failure.
run_json() { # cmd...
  if ! mc_bounded "$TMO" "$ROOT/out.json" "$@"; then
    echo "$1 failed or ran past ${TMO}s; see $LOG" >&2
    exit 1
  fi
  cat "$ROOT/out.json" >>"$LOG"
}

printf '| value size | fio MB/s | store MB/s | store / fio |\n|---|---|---|---|\n'
for BS in 65536 1048576; do
  FIO=() MC=()
  for ((r = 1; r <= ROUNDS; r++)); do
    run_json fio --name=ref --filename="$ROOT/fio.dat" --size="$BYTES" --io_size="$BYTES" \
      --ioengine=io_uring --direct=1 --rw=randread --bs="$BS" --iodepth=32 --numjobs=1 \
      --randrepeat=0 --output-format=json
    f=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"][0]["read"]["bw_bytes"])' \
      "$ROOT/out.json")
    run_json "$BIN" disk --dir "$ROOT/mc" --keep --data "$BYTES" --sizes "$BS" --runs 1 --qd 32
    m=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["bytes_per_s"])' \
      "$ROOT/out.json")
    FIO+=("$f") MC+=("$m")
    echo "round $r bs=$BS fio=$f store=$m" >> "$LOG"
  done
  fm=$(printf '%s\n' "${FIO[@]}" | mc_median)
  mm=$(printf '%s\n' "${MC[@]}" | mc_median)
  awk -v bs="$BS" -v f="$fm" -v m="$mm" 'BEGIN {
    printf "| %s | %.0f | %.0f | %.2f |\n", (bs >= 1048576 ? bs/1048576 " MiB" : bs/1024 " KiB"),
      f/1e6, m/1e6, m/f }'
  rm -rf "$ROOT/mc/v$BS" "$ROOT/fio.dat"
done
echo "data set ${DATA} per size, ${ROUNDS} rounds, iodepth 32, 1 job; log: $LOG" >&2
