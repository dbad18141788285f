#!/usr/bin/env bash
# LOCAL_DISK store vs fio (DESIGN.md §12), time-based, like for like: random reads of exactly
# 64 KiB and 1 MiB with 32 in flight on both sides (the store's --readers threads with a ring of
# 32 / readers each, fio --readers jobs at iodepth 32 / readers, O_DIRECT + io_uring on both),
# fio at the alignment the store's values lie at (its record unit, which the store reports) on
# the store's own extent files; and writes: the store's batched appends (the offload worker's
# path) vs fio's sequential O_DIRECT write at the store's own write size and writes in flight
# (both taken from the store's run in the same round: it merges records into writes of up to
# 4 MiB and keeps one append call's writes in flight). The earlier reference (fio's one job at
# iodepth 32 with the value size as its block, reads at fio's default bs alignment) is measured
# in the same round and shown beside. Every measurement runs --seconds (at least 5); each round
# runs the store, then fio, so drift of a shared machine hits both; the tables show each
# round's figures and ratio, then the medians. Writes: fio's file stays from round to round
# (fio writes over it), and so does the store's directory (mooncake_bench disk --write --keep:
# a full store appending over its evicted extents), so round 1 starts empty on both sides
# (fresh preallocated blocks) and the later rounds are steady state on both.
# Reads: a single synchronous batch reader drains its ring at the end of every batch, which
# fio's stream never does, so its figure is measured in the same round too and shown beside
# (the "1 reader" columns). fio reads the store's own extent files (the first store run of
# each size writes them), so both sides read the same blocks: on a virtual disk the host's
# cache otherwise serves a file fio has just laid out at several times the device's speed,
# some rounds and not others (seen here: 1.8 to 5.1 GB/s for fio's own file within one run).
#
# usage: scripts/bench/disk_vs_fio.sh [--data 1GiB] [--rounds 3] [--seconds 5] [--dir DIR]
#                                      [--bin PATH] [--ab PATH] [--timeout 900] [--no-write]
#                                      [--no-read] [--sizes "65536 1048576"] [--readers 2]
#                                      [--fio_own_file]
#   --dir      where the files go (default $TMPDIR or /tmp): put it on the SSD under test
#   --bin      mooncake_bench (default $BUILD_DIR/bin/mooncake_bench, BUILD_DIR=build)
#   --ab       a second mooncake_bench (another build, e.g. the main branch's) run in every
#              round too, in alternating order with --bin, each against the same fio figure
#   --fio_own_file  random reads: fio reads a file of its own (laid out by fio, before the store
#              runs) instead of the store's extent files (the default: each round runs the store
#              first, then fio over the files it wrote, so both read the same blocks)
#   --readers  store reader threads for the random reads (1, 2, 4, ... 32; default 2), each
#              with a ring of 32 / readers; with more than 1, a 1-reader run is measured too
#   --timeout  seconds one fio or bench run may take before it is killed (the run then fails)
# Prints the tables on stdout; the JSON lines of both tools are kept in the log it names. Every
# run is bounded by timeout(1); any exit stops what still runs (scripts/bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=1GiB ROUNDS=3 SECS=5 DIR=${TMPDIR:-/tmp} BIN=${BUILD_DIR:-build}/bin/mooncake_bench TMO=900
WRITE=1 READ=1 AB="" SIZES="65536 1048576" READERS=2 FIO_ON=store
while [ $# -gt 0 ]; do
  case "$1" in
    --data) DATA=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --timeout) TMO=$2; shift 2 ;;
    --no-write) WRITE=0; shift ;;
    --no-read) READ=0; shift ;;
    --ab) AB=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --readers) READERS=$2; shift 2 ;;
    --fio_own_file) FIO_ON=own; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
for t in fio timeout python3; do
  command -v "$t" >/dev/null || { echo "$t not found" >&2; exit 1; }
done
[ -x "$BIN" ] || { echo "mooncake_bench not found at $BIN (build first or pass --bin)" >&2; exit 1; }
[ -z "$AB" ] || [ -x "$AB" ] || { echo "--ab: mooncake_bench not found at $AB" >&2; exit 1; }
[ "$SECS" -ge 5 ] 2>/dev/null || { echo "--seconds must be an integer >= 5" >&2; exit 2; }
case "$READERS" in 1|2|4|8|16|32) ;; *) echo "--readers must divide 32 (1, 2, 4, 8, 16, 32)" >&2; exit 2 ;; esac

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
mc_bw() { # [field]: value bytes/s by default
  python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline()).get(sys.argv[2], 0))' \
    "$ROOT/out.json" "${1:-bytes_per_s}"
}
size_name() { awk -v bs="$1" 'BEGIN { printf "%s", (bs >= 1048576 ? bs/1048576 " MiB" : bs/1024 " KiB") }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a/b }'; }
med() { printf '%s\n' "$@" | mc_median; }

# One store run: its value bytes/s into MC_OUT (and record bytes/s into MC_DISK for writes).
store_run() { # bin what bs dir [readers]
  local bin=$1 what=$2 bs=$3 dir=$4 readers=${5:-$READERS} rd=()
  [ "$readers" = 1 ] || rd=(--readers "$readers") # a build from before --readers reads as 1
  if [ "$what" = randread ]; then
    run_json "$bin" disk --dir "$dir" --keep --data "$BYTES" --sizes "$bs" --runs 1 \
      --qd 32 "${rd[@]}" --seconds "$SECS"
    MC_DISK=0
  else
    run_json "$bin" disk --dir "$dir" --write --keep --data "$BYTES" --sizes "$bs" --runs 1 \
      --qd 32 --seconds "$SECS"
    MC_DISK=$(mc_bw disk_bytes_per_s)
  fi
  MC_OUT=$(mc_bw)
}

SUMMARY=()
# Each sets F_OUT to fio's bytes/s (not called in $(...): see lib.sh).
# fio like for like with the store's run just measured (MC_UNIT, MC_WBS, MC_WQD from its JSON):
# reads with --readers jobs x (32 / readers) in flight at the store's value alignment, writes
# at the store's own write size and writes in flight per append call.
fio_like() { # what bs
  local what=$1 bs=$2
  if [ "$what" = randread ] && [ "$FIO_ON" = own ]; then
    run_json fio --name=ref --filename="$ROOT/fio.dat" --size="$BYTES" --ioengine=io_uring \
      --direct=1 --rw=randread --bs="$bs" --iodepth=$((32 / READERS)) --numjobs="$READERS" \
      --group_reporting --randrepeat=0 --time_based --runtime="$SECS" --output-format=json
    F_OUT=$(fio_bw read)
  elif [ "$what" = randread ]; then
    run_json fio --name=ref --filename="$FILES" --readonly --ioengine=io_uring \
      --direct=1 --rw=randread --bs="$bs" --blockalign="$MC_UNIT" --iodepth=$((32 / READERS)) \
      --numjobs="$READERS" --group_reporting --randrepeat=0 --file_service_type=random \
      --time_based --runtime="$SECS" --output-format=json
    F_OUT=$(fio_bw read)
  else
    run_json fio --name=ref --filename="$ROOT/fio.dat" --size="$BYTES" --ioengine=io_uring \
      --direct=1 --rw=write --bs="$MC_WBS" --iodepth="$MC_WQD" --numjobs=1 \
      --time_based --runtime="$SECS" --output-format=json
    F_OUT=$(fio_bw write)
  fi
}
# The earlier reference, beside: fio's one job at queue depth 32 and the value size as its
# block (reads bs-aligned, as fio places them by default).
fio_old() { # what bs
  local what=$1 bs=$2
  if [ "$what" = randread ] && [ "$FIO_ON" = own ]; then
    run_json fio --name=ref --filename="$ROOT/fio.dat" --size="$BYTES" --ioengine=io_uring \
      --direct=1 --rw=randread --bs="$bs" --iodepth=32 --numjobs=1 --randrepeat=0 \
      --time_based --runtime="$SECS" --output-format=json
    F_OUT=$(fio_bw read)
  elif [ "$what" = randread ]; then
    run_json fio --name=ref --filename="$FILES" --readonly --ioengine=io_uring \
      --direct=1 --rw=randread --bs="$bs" --iodepth=32 --numjobs=1 --randrepeat=0 \
      --file_service_type=random --time_based --runtime="$SECS" --output-format=json
    F_OUT=$(fio_bw read)
  else
    run_json fio --name=ref --filename="$ROOT/fio.dat" --size="$BYTES" --ioengine=io_uring \
      --direct=1 --rw=write --bs="$bs" --iodepth=32 --numjobs=1 \
      --time_based --runtime="$SECS" --output-format=json
    F_OUT=$(fio_bw write)
  fi
}
# What the store's run did, for fio_like: its values' alignment (reads; 4096 from a build that
# does not say), its write size rounded down to 4 KiB and its writes per append call rounded to the nearest (writes;
# the value size and 32 from a build that does not say).
store_shape() { # what bs
  if [ "$1" = randread ]; then
    MC_UNIT=$(mc_bw record_unit)
    [ "$MC_UNIT" != 0 ] || MC_UNIT=4096
  else
    MC_WBS=$(mc_bw write_io_bytes | awk -v bs="$2" '{ b = int($1 / 4096) * 4096; print (b > 0 ? b : bs) }')
    MC_WQD=$(mc_bw write_ios_per_call | awk '{ q = int($1 + 0.5); print (q < 1 ? 32 : (q > 32 ? 32 : q)) }')
  fi
}
# One comparison: ROUNDS rounds of the store (then the --ab store, the two in turn first), then
# fio like for like, then fio as before; a row per round, then the medians.
compare() { # what bs
  local what=$1 bs=$2 r f g m a d o=0 FIO=() MC=() AR=() RATIOS=() ABR=() DR=() ONE=() F4=()
  local shape
  for ((r = 1; r <= ROUNDS; r++)); do
    if [ -n "$AB" ] && [ $((r % 2)) = 0 ]; then
      store_run "$AB" "$what" "$bs" "$ROOT/ab"; a=$MC_OUT
      store_run "$BIN" "$what" "$bs" "$ROOT/mc"; m=$MC_OUT d=$MC_DISK
      store_shape "$what" "$bs"
    else
      store_run "$BIN" "$what" "$bs" "$ROOT/mc"; m=$MC_OUT d=$MC_DISK
      store_shape "$what" "$bs"
      if [ -n "$AB" ]; then store_run "$AB" "$what" "$bs" "$ROOT/ab"; a=$MC_OUT; fi
    fi
    if [ "$what" = randread ] && [ "$READERS" != 1 ]; then
      store_run "$BIN" "$what" "$bs" "$ROOT/mc" 1; o=$MC_OUT
    fi
    if [ "$what" = randread ] && [ "$FIO_ON" != own ]; then
      # fio reads the store's own extent files: the same blocks of the same device, so
      # whatever caches or places blocks below the guest treats both sides alike (all but the
      # newest: it is the one the last records went to, mostly never written, and unwritten
      # preallocated blocks read back as zeros without touching the device)
      FILES=$(find "$ROOT/mc/v$bs" -maxdepth 1 -name '*.ext' | sort | head -n -1 | paste -sd: -)
      [ -n "$FILES" ] || { echo "no store extent files under $ROOT/mc/v$bs" >&2; exit 1; }
    fi
    fio_like "$what" "$bs"; f=$F_OUT
    fio_old "$what" "$bs"; g=$F_OUT
    F4+=("$(ratio "$m" "$g")")
    if [ "$what" = randread ]; then
      shape="fio ${READERS} jobs x qd $((32 / READERS)), blockalign ${MC_UNIT}"
    else
      shape="fio bs ${MC_WBS} x qd ${MC_WQD}"
    fi
    [ "$what" != randread ] || [ "$READERS" = 1 ] || ONE+=("$(ratio "$o" "$f")")
    FIO+=("$f") MC+=("$m") RATIOS+=("$(ratio "$m" "$f")")
    [ "$what" = randread ] || DR+=("$(ratio "$d" "$f")")
    local row
    row=$(awk -v w="$what" -v s="$(size_name "$bs")" -v r="$r" -v f="$f" -v m="$m" 'BEGIN {
      printf "| %s | %s | %d | %.0f | %.0f | %.2f |", w, s, r, f/1e6, m/1e6, m/f }')
    if [ ${#ONE[@]} -gt 0 ]; then
      row+=$(awk -v f="$f" -v o="$o" 'BEGIN { printf " %.0f | %.2f |", o/1e6, o/f }')
    else
      row+=" - | - |"
    fi
    row+=$(awk -v g="$g" -v m="$m" 'BEGIN { printf " %.0f | %.2f |", g/1e6, m/g }')
    row+=" $shape |"
    if [ -n "$AB" ]; then
      AR+=("$a") ABR+=("$(ratio "$a" "$f")")
      row+=$(awk -v f="$f" -v a="$a" -v m="$m" 'BEGIN { printf " %.0f | %.2f | %.2f |", a/1e6, a/f, m/a }')
    fi
    echo "$row"
    echo "round $r $what bs=$bs fio=$f fio_old=$g store=$m readers=$READERS one_reader=$o record_bytes=$d ab=${a:-} $shape load=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$LOG"
  done
  local line
  line=$(awk -v w="$what" -v s="$(size_name "$bs")" -v f="$(med "${FIO[@]}")" \
    -v m="$(med "${MC[@]}")" -v r="$(med "${RATIOS[@]}")" -v all="${RATIOS[*]}" 'BEGIN {
      printf "| %s | %s | %.0f | %.0f | %.2f | %s |", w, s, f/1e6, m/1e6, r, all }')
  if [ ${#ONE[@]} -gt 0 ]; then line+=" $(med "${ONE[@]}") (${ONE[*]}) |"; else line+=" - |"; fi
  line+=" $(med "${F4[@]}") (${F4[*]}) |"
  if [ "$what" = randread ]; then line+=" - |"; else line+=" $(med "${DR[@]}") (${DR[*]}) |"; fi
  if [ -n "$AB" ]; then
    line+=$(awk -v a="$(med "${AR[@]}")" -v r="$(med "${ABR[@]}")" -v all="${ABR[*]}" 'BEGIN {
      printf " %.0f | %.2f | %s |", a/1e6, r, all }')
  fi
  SUMMARY+=("$line")
  rm -f "$ROOT/fio.dat"
  rm -rf "$ROOT/mc/w$bs" "$ROOT/ab/w$bs" "$ROOT/mc/v$bs" "$ROOT/ab/v$bs"
}

if [ -n "$AB" ]; then
  printf '| case | size | round | fio MB/s | store MB/s | store / fio | 1 reader MB/s | 1 reader / fio | fio 1 job x 32, value-size blocks MB/s | store / that | fio like for like |  --ab MB/s | --ab / fio | store / --ab |\n'
  printf '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n'
else
  printf '| case | size | round | fio MB/s | store MB/s | store / fio | 1 reader MB/s | 1 reader / fio | fio 1 job x 32, value-size blocks MB/s | store / that | fio like for like |\n|---|---|---|---|---|---|---|---|---|---|---|\n'
fi
if [ "$READ" = 1 ]; then
  for BS in $SIZES; do compare randread "$BS"; done
fi
if [ "$WRITE" = 1 ]; then
  for BS in $SIZES; do compare write "$BS"; done
fi
printf '\n| case | size | fio MB/s (median) | store MB/s (median) | median of round ratios | round ratios | 1 reader / fio: median (rounds) | store / fio 1 job x 32 at the value size: median (rounds) | record bytes / fio (writes) |'
if [ -n "$AB" ]; then
  printf ' --ab MB/s (median) | --ab: median of round ratios | --ab round ratios |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n'
else
  printf '\n|---|---|---|---|---|---|---|---|---|\n'
fi
printf '%s\n' "${SUMMARY[@]}"
echo "data set ${DATA} per size, ${ROUNDS} rounds of ${SECS} s per side; reads: 32 in flight (store ${READERS} readers x qd $((32 / READERS)), fio ${READERS} jobs x iodepth $((32 / READERS)) at the store's value alignment); writes: fio at the store's write size and writes in flight per append; log: $LOG" >&2
