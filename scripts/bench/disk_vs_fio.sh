#!/usr/bin/env bash
# LOCAL_DISK store vs fio (DESIGN.md §12), time-based: random reads of exactly 64 KiB and 1 MiB
# (queue depth 32, one job, O_DIRECT + io_uring on both sides, on data sets of the same size in
# the same directory), and writes: the store's batched appends (the offload worker's path) vs
# fio's sequential O_DIRECT write of the same block size. Every measurement runs --seconds (at
# least 5) and each round runs fio then the store, alternating, so drift of a shared machine
# hits both; the tables show each round's figures and ratio, then the medians.
#
# usage: scripts/bench/disk_vs_fio.sh [--data 1GiB] [--rounds 3] [--seconds 5] [--dir DIR]
#                                      [--bin PATH] [--timeout 900] [--no-write]
#   --dir      where the files go (default $TMPDIR or /tmp): put it on the SSD under test
#   --bin      mooncake_bench (default $BUILD_DIR/bin/mooncake_bench, BUILD_DIR=build)
#   --timeout  seconds one fio or bench run may take before it is killed (the run then fails)
# Prints the tables on stdout; the JSON lines of both tools are kept in the log it names. Every
# run is bounded by timeout(1); any exit stops what still runs (scripts/bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=1GiB ROUNDS=3 SECS=5 DIR=${TMPDIR:-/tmp} BIN=${BUILD_DIR:-build}/bin/mooncake_bench TMO=900
WRITE=1
while [ $# -gt 0 ]; do
  case "$1" in
    --data) DATA=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --timeout) TMO=$2; shift 2 ;;
    --no-write) WRITE=0; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
for t in fio timeout python3; do
  command -v "$t" >/dev/null || { echo "$t not found" >&2; exit 1; }
done
[ -x "$BIN" ] || { echo "mooncake_bench not found at $BIN (build first or pass --bin)" >&2; exit 1; }
[ "$SECS" -ge 5 ] 2>/dev/null || { echo "--seconds must be an integer >= 5" >&2; exit 2; }

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
fio_bw() { # read|write
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"][0][sys.argv[2]]["bw_bytes"])' \
    "$ROOT/out.json" "$1"
}
mc_bw() {
  python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["bytes_per_s"])' \
    "$ROOT/out.json"
}
size_name() { awk -v bs="$1" 'BEGIN { printf "%s", (bs >= 1048576 ? bs/1048576 " MiB" : bs/1024 " KiB") }'; }

SUMMARY=()
# One comparison: ROUNDS rounds of fio then the store; a row per round, then the medians.
compare() { # what bs
  local what=$1 bs=$2 r f m FIO=() MC=() RATIOS=()
  for ((r = 1; r <= ROUNDS; r++)); do
    if [ "$what" = randread ]; then
      run_json fio --name=ref --filename="$ROOT/fio.dat" --size="$BYTES" --ioengine=io_uring \
        --direct=1 --rw=randread --bs="$bs" --iodepth=32 --numjobs=1 --randrepeat=0 \
        --time_based --runtime="$SECS" --output-format=json
      f=$(fio_bw read)
      run_json "$BIN" disk --dir "$ROOT/mc" --keep --data "$BYTES" --sizes "$bs" --runs 1 \
        --qd 32 --seconds "$SECS"
    else
      run_json fio --name=ref --filename="$ROOT/fio.dat" --size="$BYTES" --ioengine=io_uring \
        --direct=1 --rw=write --bs="$bs" --iodepth=32 --numjobs=1 \
        --time_based --runtime="$SECS" --output-format=json
      f=$(fio_bw write)
      run_json "$BIN" disk --dir "$ROOT/mc" --write --data "$BYTES" --sizes "$bs" --runs 1 \
        --qd 32 --seconds "$SECS"
    fi
    m=$(mc_bw)
    FIO+=("$f") MC+=("$m")
    RATIOS+=("$(awk -v f="$f" -v m="$m" 'BEGIN { printf "%.3f", m/f }')")
    awk -v w="$what" -v s="$(size_name "$bs")" -v r="$r" -v f="$f" -v m="$m" 'BEGIN {
      printf "| %s | %s | %d | %.0f | %.0f | %.2f |\n", w, s, r, f/1e6, m/1e6, m/f }'
    echo "round $r $what bs=$bs fio=$f store=$m" >> "$LOG"
  done
  local fm mm rm
  fm=$(printf '%s\n' "${FIO[@]}" | mc_median)
  mm=$(printf '%s\n' "${MC[@]}" | mc_median)
  rm=$(printf '%s\n' "${RATIOS[@]}" | mc_median)
  SUMMARY+=("$(awk -v w="$what" -v s="$(size_name "$bs")" -v f="$fm" -v m="$mm" -v r="$rm" \
    -v all="${RATIOS[*]}" 'BEGIN {
      printf "| %s | %s | %.0f | %.0f | %.2f | %s |", w, s, f/1e6, m/1e6, r, all }')")
  rm -f "$ROOT/fio.dat"
}

printf '| case | size | round | fio MB/s | store MB/s | store / fio |\n|---|---|---|---|---|---|\n'
for BS in 65536 1048576; do
  compare randread "$BS"
  rm -rf "$ROOT/mc/v$BS"
done
if [ "$WRITE" = 1 ]; then
  for BS in 65536 1048576; do compare write "$BS"; done
fi
printf '\n| case | size | fio MB/s (median) | store MB/s (median) | median of round ratios | round ratios |\n'
printf '|---|---|---|---|---|---|\n'
printf '%s\n' "${SUMMARY[@]}"
echo "data set ${DATA} per size, ${ROUNDS} rounds of ${SECS} s per side, iodepth 32, 1 job; log: $LOG" >&2
