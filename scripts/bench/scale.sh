#!/usr/bin/env bash
# scale.sh - the object-count, client-count and disk cases of the scale issue, short by default
# and scaled by environment variables; one JSON line per figure on stdout, the daemons' logs in a
# temp dir (removed at exit).
#
#   scripts/bench/scale.sh [BIN_DIR]        (BIN_DIR: default build/bin)
#
# Cases (SCALE_CASES, default "disk remove_all evict"; the others: "scrape idle restart"):
#   disk        mooncake_bench disk --write of SCALE_DISK_DATA (default 64MiB) at 4 KiB and
#               64 KiB values: record_unit, disk_bytes_per_value, disk_ratio (value bytes on
#               disk per value byte).
#   remove_all  mooncake_bench objects --remove_all_only at SCALE_RA_OBJECTS (default
#               200000,1000000; one process, counts in order): RemoveAll objects/s and CPU ns per
#               object per count (linear: equal figures), rss_before_mb / rss_after_mb and
#               bytes_per_object kept resident afterwards.
#   evict       a mooncake_master (one RPC thread) and mooncake_bench master --op=put into a fake
#               segment of SCALE_EVICT_SEGMENT bytes (default 64 MiB) of SCALE_EVICT_VALUE-byte
#               values (default 4096) for SCALE_EVICT_SECONDS (default 5) with an open-loop probe
#               of SCALE_PROBE_HZ Gets/s (default 200), after a prefill of SCALE_EVICT_KEYS keys
#               (default 100000, a run of its own): put_refused (PutStarts refused for space
#               while eviction cycles run), max_ms, probe_p99_ms, probe_max_ms, and the master's
#               cycles and evicted keys (value: since its start, during_puts: while the Puts ran).
#   scrape      a mooncake_master (--enable_offload, one RPC thread) with SCALE_SCRAPE_KEYS keys
#               (default 200000) that all have a LOCAL_DISK copy (mooncake_bench master
#               --prefill --disk_holder); scrape_ms (median, max of 20 /metrics scrapes), then
#               SCALE_SCRAPE_ROUNDS (default 2) rounds of three Get runs of SCALE_SCRAPE_SECONDS
#               (default 2) each: alone (loop "none"), with a curl of /metrics every 100 ms
#               ("metrics") and, as the control, of /health every 100 ms ("health": the same
#               processes and requests without the scrape's work); get_ops_per_s per run,
#               get_ratio_scraped and get_ratio_health (each over "none") per round.
#   idle        a mooncake_master and SCALE_IDLE_DAEMONS mooncake_client daemons (default 20)
#               with a LOCAL_DISK tier each (--disk_capacity 64MiB, --segment_size 16MiB), idle
#               once all are mounted: the master's CPU % over SCALE_IDLE_SECONDS (default 10),
#               its threads and open fds.
#   restart     a mooncake_master (--enable_offload: a disk copy of every Put) on fixed ports and
#               SCALE_RESTART_DAEMONS mooncake_client daemons (default 2) with a LOCAL_DISK tier;
#               SCALE_RESTART_KEYS values (default 20000) of SCALE_RESTART_VALUE bytes (default
#               512) Put through the Python binding (BIN_DIR/../python); once every disk copy is
#               written the master is SIGKILLed and started again: seconds_to_first and
#               seconds_to_all (from the restart until master_offload_reregistered_total counts
#               one record, then every key), records_per_s (keys / seconds_to_all),
#               records_per_s_from_first (keys / (seconds_to_all - seconds_to_first), capped by
#               the ~0.1 s poll), and
#               reregistered == keys (the counter counts each record once).
# For the report figures: SCALE_RA_OBJECTS=1000000,10000000 SCALE_EVICT_KEYS=10000000
# SCALE_EVICT_SEGMENT=$((39<<30)) SCALE_EVICT_SECONDS=30 (10M x 4 KiB fill 98% of it: the
# prefill runs two cycles of 5% and the Puts start at 88.7%, so 30 s of Puts cross the 90%
# watermark again; 48 GiB would never evict) (about 2 GiB of memory for the master at 10M keys)
# SCALE_SCRAPE_KEYS=10000000 SCALE_IDLE_DAEMONS=200 SCALE_RESTART_KEYS=1000000.
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
DISK_DATA=${SCALE_DISK_DATA:-64MiB}
SC_KEYS=${SCALE_SCRAPE_KEYS:-200000}
SC_ROUNDS=${SCALE_SCRAPE_ROUNDS:-2}
SC_SECS=${SCALE_SCRAPE_SECONDS:-2}
ID_DAEMONS=${SCALE_IDLE_DAEMONS:-20}
ID_SECS=${SCALE_IDLE_SECONDS:-10}
RS_KEYS=${SCALE_RESTART_KEYS:-20000}
RS_DAEMONS=${SCALE_RESTART_DAEMONS:-2}
RS_VALUE=${SCALE_RESTART_VALUE:-512}
case "${1:-}" in -h|--help) sed -n '2,49p' "$0"; exit 0 ;; esac
command -v curl >/dev/null || { echo "curl not found (the scrape case uses it)" >&2; exit 1; }
for b in mooncake_bench mooncake_master mooncake_client; do
  [ -x "$BIN/$b" ] || { echo "no $BIN/$b (build first, or pass BIN_DIR)" >&2; exit 1; }
done

. scripts/bench/lib.sh
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mc_scale.XXXXXX")
LOG=$TMP/bounded.log
rm_tmp() { rm -rf "$TMP"; }
mc_install_traps rm_tmp
echo "logs: $TMP (removed at exit)" >&2

# One JSON line: case, then name value pairs (values printed as given: numbers or JSON).
emit() { # case name value [name value]...
  local c=$1 out
  shift
  out="{\"bench\":\"scale\",\"case\":\"$c\""
  while [ $# -ge 2 ]; do out+=",\"$1\":$2"; shift 2; done
  echo "$out}"
}

start_master() { # name [flags]...: sets rpc, met, mpid
  local name=$1
  shift
  mc_start_ready "$TMP" "$name" "$BIN/mooncake_master" --rpc_port=0 --metrics_port=0 \
    --rpc_address=127.0.0.1 --metrics_host=127.0.0.1 --client_ttl=1h --log_level=warn "$@" ||
    { echo "$name: $MC_WHY" >&2; exit 1; }
  rpc=$MC_READY_RPC met=$MC_READY_METRICS mpid=$MC_PID
}

# ms of one /metrics scrape (curl: the scrape loop must not cost the machine more than the
# scrape itself, as a python start every 100 ms would)
scrape_ms() { # addr
  curl -sf -o /dev/null -w '%{time_total}\n' "http://$1/metrics" |
    awk '{printf "%.3f\n", $1 * 1000}'
}

json_field() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[2]).readline())[sys.argv[1]])' "$@"; }

# Stops every child started so far: TERM to all at once, then each one waited for.
stop_all() {
  local p
  for p in "${MC_CHILDREN[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${MC_CHILDREN[@]}"; do mc_stop "$p"; done
  MC_CHILDREN=()
}

# clock ticks of CPU (user + system) the process has used
proc_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

for c in $CASES; do
  case $c in
    disk)
      for sz in 4KiB 64KiB; do
        "$BIN/mooncake_bench" disk --write --data "$DISK_DATA" --sizes "$sz" --runs 1 --dir "$TMP/disk" \
          2>>"$TMP/disk.log" | grep '^{'
      done ;;
    remove_all)
      "$BIN/mooncake_bench" objects --objects "$RA" --remove_all_only 2>>"$TMP/objects.log" |
        grep '^{' ;;
    evict)
      start_master master --rpc_thread_num=1
      # the prefill first (a short Get run), then the Puts with the probe: the cycles counted
      # are the ones that ran while the Puts and the probe did
      mc_bounded $((EV_KEYS / 2000 + 600)) "$TMP/evict_prefill.json" "$BIN/mooncake_bench" master \
        --master="$rpc" --bench_id=scale-evict --segment_bytes="$EV_SEG" --value_size="$EV_VAL" \
        --keys="$EV_KEYS" --prefill --conns=8 --op=get --seconds=0.2 ||
        echo "evict: the prefill did not create every key (Puts refused before eviction ran)" >&2
      names="master_successful_evictions_total master_evicted_key_count"
      mc_scrape "$met" "$TMP/metrics0.txt" 10
      "$BIN/mooncake_bench" master --master="$rpc" --bench_id=scale-evict \
        --segment_bytes="$EV_SEG" --value_size="$EV_VAL" --keys="$EV_KEYS" \
        --conns=8 --op=put --seconds="$EV_SECS" --probe_hz="$PROBE_HZ" 2>>"$TMP/evict.log" |
        grep '^{'
      mc_scrape "$met" "$TMP/metrics.txt" 10 || true
      for name in $names; do
        v0=$(mc_metric "$TMP/metrics0.txt" "$name" || echo 0)
        v=$(mc_metric "$TMP/metrics.txt" "$name" || true)
        echo "{\"bench\":\"scale\",\"case\":\"evict\",\"metric\":\"$name\",\"value\":${v:-null},\"during_puts\":$(python3 -c "print(int(float('${v:-0}') - float('$v0')))")}"
      done
      mc_stop "$mpid"; mc_forget "$mpid" ;;
    scrape)
      declare -A ops
      start_master scrape --rpc_thread_num=1 --enable_offload \
        --offloading_queue_limit=$((SC_KEYS + 1000))
      mc_bounded $((SC_KEYS / 1000 + 600)) "$TMP/prefill.json" "$BIN/mooncake_bench" master \
        --master="$rpc" --bench_id=scale-scrape --conns=4 --keys="$SC_KEYS" --prefill \
        --disk_holder --seconds=0.2 --op=get ||
        { echo "scrape: prefill failed; see $LOG" >&2; exit 1; }
      for _ in $(seq 20); do scrape_ms "$met"; done | sort -g >"$TMP/scrapes"
      emit scrape keys "$SC_KEYS" scrape_median_ms "$(mc_median <"$TMP/scrapes")" \
        scrape_max_ms "$(tail -n 1 "$TMP/scrapes")"
      for ((r = 1; r <= SC_ROUNDS; r++)); do
        for loop in none metrics health; do
          spid=""
          if [ "$loop" != none ]; then
            ( while :; do curl -sf -o /dev/null "http://$met/$loop" || true; sleep 0.1; done ) &
            spid=$!
            MC_CHILDREN+=("$spid")
          fi
          mc_bounded $((SC_SECS * 10 + 120)) "$TMP/get.json" "$BIN/mooncake_bench" master \
            --master="$rpc" --bench_id=scale-scrape --conns=16 --keys="$SC_KEYS" \
            --seconds="$SC_SECS" --op=get || { echo "scrape: get failed; see $LOG" >&2; exit 1; }
          if [ -n "$spid" ]; then mc_stop "$spid"; mc_forget "$spid"; fi
          ops[$loop]=$(json_field ops_per_s "$TMP/get.json")
          emit scrape keys "$SC_KEYS" round "$r" loop "\"$loop\"" \
            get_ops_per_s "${ops[$loop]}" get_p99_ms "$(json_field p99_ms "$TMP/get.json")"
        done
        emit scrape keys "$SC_KEYS" round "$r" \
          get_ratio_scraped "$(python3 -c "print(round(${ops[metrics]} / ${ops[none]}, 3))")" \
          get_ratio_health "$(python3 -c "print(round(${ops[health]} / ${ops[none]}, 3))")"
      done
      mc_stop "$mpid"; mc_forget "$mpid" ;;
    idle)
      start_master idle --enable_offload
      for ((d = 0; d < ID_DAEMONS; d++)); do
        MC_READY_SECS=60 mc_start_ready "$TMP" "client$d" "$BIN/mooncake_client" \
          --master="$rpc" --host=127.0.0.1 --data_port=0 --segment_size=16MiB \
          --disk_path="$TMP/disk$d" --disk_capacity=64MiB --log_level=warn ||
          { echo "idle: $MC_WHY" >&2; exit 1; }
      done
      for _ in $(seq 600); do
        mc_scrape "$met" "$TMP/metrics.txt" 10 || true
        n=$(mc_metric "$TMP/metrics.txt" master_segment_count || echo 0)
        [ "${n%.*}" -ge "$ID_DAEMONS" ] && break
        sleep 0.1
      done
      [ "${n%.*}" -ge "$ID_DAEMONS" ] || { echo "idle: $n of $ID_DAEMONS segments mounted" >&2; exit 1; }
      sleep 1 # the mounts' and first heartbeats' work is done
      hz=$(getconf CLK_TCK)
      t0=$(proc_ticks "$mpid") s0=$(date +%s.%N)
      sleep "$ID_SECS"
      t1=$(proc_ticks "$mpid") s1=$(date +%s.%N)
      emit idle daemons "$ID_DAEMONS" seconds "$ID_SECS" \
        cpu_percent "$(python3 -c "print(round(100 * ($t1 - $t0) / $hz / ($s1 - $s0), 2))")" \
        threads "$(awk '/^Threads:/ {print $2}' "/proc/$mpid/status")" \
        fds "$(find "/proc/$mpid/fd" -mindepth 1 -maxdepth 1 | wc -l)"
      stop_all ;;
    restart)
      port=$(mc_free_port) mport=$(mc_free_port)
      mflags=(--rpc_port="$port" --metrics_port="$mport" --rpc_address=127.0.0.1
        --metrics_host=127.0.0.1 --client_ttl=1h --log_level=warn --enable_offload
        --offloading_queue_limit=$((RS_KEYS + 1000)))
      mc_start_ready "$TMP" rmaster "$BIN/mooncake_master" "${mflags[@]}" ||
        { echo "restart: $MC_WHY" >&2; exit 1; }
      rpc=$MC_READY_RPC met=$MC_READY_METRICS mpid=$MC_PID
      per=$((RS_KEYS / RS_DAEMONS + 1))
      for ((d = 0; d < RS_DAEMONS; d++)); do
        mc_start_ready "$TMP" "rclient$d" "$BIN/mooncake_client" --master="$rpc" \
          --host=127.0.0.1 --data_port=0 --segment_size=$((per * (RS_VALUE + 64) * 2 + (64 << 20))) \
          --disk_path="$TMP/rdisk$d" --disk_capacity=$((per * (RS_VALUE + 1024) * 2 + (256 << 20))) \
          --log_level=warn || { echo "restart: $MC_WHY" >&2; exit 1; }
      done
      cat >"$TMP/writer.py" <<'PY'
import sys
from mooncake_c import MooncakeDistributedStore
master, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = MooncakeDistributedStore()
rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master)
assert rc == 0, "setup: %d" % rc
for i in range(0, n, 1000):
    keys = ["rs-%09d" % j for j in range(i, min(n, i + 1000))]
    rc = s.put_batch(keys, [k.encode().ljust(size, b"v") for k in keys])
    assert rc == 0, "put_batch at %d: %d" % (i, rc)
s.close()
PY
      mc_bounded $((RS_KEYS / 500 + 300)) "$TMP/writer.out" env PYTHONPATH="$BIN/../python" \
        python3 "$TMP/writer.py" "$rpc" "$RS_KEYS" "$RS_VALUE" ||
        { echo "restart: writer failed; see $LOG" >&2; exit 1; }
      # every disk copy written before the kill
      for _ in $(seq $((RS_KEYS / 100 + 600))); do
        mc_scrape "$met" "$TMP/metrics.txt" 10 || true
        done_n=$(mc_metric "$TMP/metrics.txt" master_offload_completed_total || echo 0)
        [ "${done_n%.*}" -ge "$RS_KEYS" ] && break
        sleep 0.2
      done
      [ "${done_n%.*}" -ge "$RS_KEYS" ] ||
        { echo "restart: $done_n of $RS_KEYS disk copies written" >&2; exit 1; }
      kill -KILL "$mpid"; wait "$mpid" 2>/dev/null || true; mc_forget "$mpid"
      s0=$(date +%s.%N) first="" all="" got=0
      mc_start_ready "$TMP" rmaster2 "$BIN/mooncake_master" "${mflags[@]}" ||
        { echo "restart: $MC_WHY" >&2; exit 1; }
      mpid=$MC_PID
      for _ in $(seq $((RS_KEYS / 100 + 1200))); do
        mc_scrape "$met" "$TMP/metrics.txt" 10 || true
        got=$(mc_metric "$TMP/metrics.txt" master_offload_reregistered_total || echo 0)
        now=$(date +%s.%N)
        [ -z "$first" ] && [ "${got%.*}" -gt 0 ] && first=$now
        if [ "${got%.*}" -ge "$RS_KEYS" ]; then all=$now; break; fi
        sleep 0.05
      done
      [ -n "$all" ] || { echo "restart: $got of $RS_KEYS records re-registered" >&2; exit 1; }
      sleep 1 # a second listing round must not count the records again
      mc_scrape "$met" "$TMP/metrics.txt" 10
      got=$(mc_metric "$TMP/metrics.txt" master_offload_reregistered_total)
      emit restart keys "$RS_KEYS" daemons "$RS_DAEMONS" \
        seconds_to_first "$(python3 -c "print(round($first - $s0, 3))")" \
        seconds_to_all "$(python3 -c "print(round($all - $s0, 3))")" \
        records_per_s "$(python3 -c "print(round($RS_KEYS / ($all - $s0)))")" \
        records_per_s_from_first "$(python3 -c "print(round($RS_KEYS / max($all - $first, 0.05)))")" \
        reregistered "$got" equal "$([ "${got%.*}" = "$RS_KEYS" ] && echo true || echo false)"
      stop_all ;;
    *) echo "unknown case: $c" >&2; exit 2 ;;
  esac
done
