#!/usr/bin/env bash
# scale.sh - the object-count and disk cases of the scale issue, short by default and scaled by
# environment variables; one JSON line per figure on stdout, the daemons' logs in a temp dir.
#
#   scripts/bench/scale.sh [BIN_DIR]        (BIN_DIR: default build/bin)
#
# Cases (SCALE_CASES, default "disk remove_all evict"):
#   disk        mooncake_bench disk --write at 4 KiB and 64 KiB values: record_unit,
#               disk_bytes_per_value, disk_ratio (value bytes on disk per value byte).
#   remove_all  mooncake_bench objects --remove_all_only at SCALE_RA_OBJECTS (default
#               200000,1000000): RemoveAll objects/s per count (linear: equal figures) and
#               bytes_per_object kept resident afterwards.
#   evict       a mooncake_master (one RPC thread) and mooncake_bench master --op=put into a fake
#               segment of SCALE_EVICT_SEGMENT bytes (default 64 MiB) of SCALE_EVICT_VALUE-byte
#               values (default 4096) for SCALE_EVICT_SECONDS (default 5) with an open-loop probe
#               of SCALE_PROBE_HZ Gets/s (default 200), after a prefill of SCALE_EVICT_KEYS keys
#               (default 100000): put_refused (PutStarts refused for space while eviction
#               cycles run), max_ms, probe_p99_ms, probe_max_ms, and the master's cycle count.
# For the 10M figures: SCALE_RA_OBJECTS=10000000 SCALE_EVICT_KEYS=10000000
# SCALE_EVICT_SEGMENT=$((48<<30)) (about 10 GiB of memory for the master at 10M keys).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-build/bin}
CASES=${SCALE_CASES:-disk remove_all evict}
RA=${SCALE_RA_OBJECTS:-200000,1000000}
EV_SEG=${SCALE_EVICT_SEGMENT:-$((64 << 20))}
EV_VAL=${SCALE_EVICT_VALUE:-4096}
EV_SECS=${SCALE_EVICT_SECONDS:-5}
EV_KEYS=${SCALE_EVICT_KEYS:-100000}
PROBE_HZ=${SCALE_PROBE_HZ:-200}
case "${1:-}" in -h|--help) sed -n '2,24p' "$0"; exit 0 ;; esac
for b in mooncake_bench mooncake_master; do
  [ -x "$BIN/$b" ] || { echo "no $BIN/$b (build first, or pass BIN_DIR)" >&2; exit 1; }
done

. scripts/bench/lib.sh
TMP=$(mktemp -d /tmp/mc_scale.XXXXXX)
rm_tmp() { rm -rf "$TMP"; }
mc_install_traps rm_tmp
echo "logs: $TMP (removed at exit)" >&2

for c in $CASES; do
  case $c in
    disk)
      for sz in 4KiB 64KiB; do
        "$BIN/mooncake_bench" disk --write --data 64MiB --sizes "$sz" --runs 1 --dir "$TMP/disk" \
          2>>"$TMP/disk.log" | grep '^{'
      done ;;
    remove_all)
      "$BIN/mooncake_bench" objects --objects "$RA" --remove_all_only 2>>"$TMP/objects.log" |
        grep '^{' ;;
    evict)
      mc_start_ready "$TMP" master "$BIN/mooncake_master" --rpc_port=0 --metrics_port=0 \
        --rpc_address=127.0.0.1 --metrics_host=127.0.0.1 --rpc_thread_num=1 --client_ttl=1h \
        --log_level=warn || { echo "evict: $MC_WHY" >&2; exit 1; }
      rpc=$MC_READY_RPC met=$MC_READY_METRICS
      "$BIN/mooncake_bench" master --master="$rpc" --bench_id=scale-evict \
        --segment_bytes="$EV_SEG" --value_size="$EV_VAL" --keys="$EV_KEYS" --prefill \
        --conns=8 --op=put --seconds="$EV_SECS" --probe_hz="$PROBE_HZ" 2>>"$TMP/evict.log" |
        grep '^{'
      mc_scrape "$met" "$TMP/metrics.txt" 10 || true
      for name in master_successful_evictions_total master_evicted_key_count; do
        v=$(mc_metric "$TMP/metrics.txt" "$name" || true)
        echo "{\"bench\":\"scale\",\"case\":\"evict\",\"metric\":\"$name\",\"value\":${v:-null}}"
      done
      mc_stop "$MC_PID" ;;
    *) echo "unknown case: $c" >&2; exit 2 ;;
  esac
done
