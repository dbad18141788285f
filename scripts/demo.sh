#!/usr/bin/env bash
# The main job, as README's quick start runs it: build, then a whole cluster on loopback —
# mooncake_master plus two mooncake_client daemons (64 MiB DRAM segments each) — then, with mooncake_cli, put a file, get it
# back and compare the bytes, show the `segments` and `stat KEY` tables and a few lines of the
# master's /metrics, then replay the first requests of Mooncake's synthetic trace against the
# cluster (`mooncake_bench replay`: every byte checked, the hit ratio beside an exact LRU of the
# same DRAM) and show its table. The master runs with a 500 ms read lease (--default_kv_lease_ttl)
# so that a flat-out replay does not keep more blocks leased than DRAM holds. Then a second
# cluster with offload and promotion on (a daemon with a 16 MiB segment and a --disk_path): 40 MiB
# put, a LOCAL_DISK-only key read twice is copied back into DRAM (stat before and after, the
# master's promotion counters); stop everything with SIGTERM, checking every exit status; and a
# short `mooncake_bench promotion` run: Get latency of 4 MiB hot keys while disk-only and after
# promotion.
# Every port is picked by the kernel (0); processes and temporary files are cleaned up on any
# exit. Exits non-zero when any step fails.
#   BUILD_DIR              build directory (default build/)
#   MC_DEMO_SKIP_BUILD=1   use what is already built
#   TMPDIR                 where the temporary directory goes (default /tmp)
#   MC_TRACE               the trace to replay (default: shared/traces/synthetic_trace.jsonl
#                          beside the checkout; without one the replay step says so and is skipped)
#   MC_DEMO_REPLAY_LIMIT   requests replayed (default 400)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

if [ "${MC_DEMO_SKIP_BUILD:-0}" != 1 ]; then
  echo "== building ($BUILD_DIR)"
  BUILD_DIR="$BUILD_DIR" ./scripts/build.sh
fi
bin=$BUILD_DIR/bin
for p in mooncake_master mooncake_client mooncake_cli mooncake_bench; do
  [ -x "$bin/$p" ] || { echo "!! $bin/$p is not built" >&2; exit 1; }
done

# process handling (start + READY, stop, cleanup on any exit) and the READY parser
. scripts/bench/lib.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mc_demo.XXXXXX")
LOG=$tmp/demo.log
pids=() # running daemons, stopped in reverse order of start (mc_cleanup stops any left)
names=()
rm_tmp() { rm -rf "$tmp"; }
mc_install_traps rm_tmp

fail() { # message [log file]
  echo "!! $1" >&2
  if [ -n "${2:-}" ] && [ -s "$2" ]; then
    echo "!! last lines of $2:" >&2
    tail -n 20 "$2" | sed 's/^/   /' >&2
  fi
  exit 1
}

# Starts a daemon with stdout in $tmp/NAME.out and stderr in $tmp/NAME.log and waits (up to
# 20 s) for its one READY line (mc_start_ready: MC_READY_* hold what it says).
start() { # name cmd...
  local name=$1
  shift
  mc_start_ready "$tmp" "$name" "$@" || fail "$MC_WHY" "$tmp/$name.log"
  pids+=("$MC_PID")
  names+=("$name")
  echo "== $name (pid $MC_PID): $MC_READY"
}

# Stops every daemon with SIGTERM (clients first, the master last); each must exit 0 within
# 10 s.
stop_all() {
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    if mc_stop_checked "${pids[i]}" 10; then
      echo "== ${names[i]} exited with status 0"
    elif [ "$MC_STATUS" = 124 ]; then
      fail "${names[i]} did not stop within 10 s of SIGTERM"
    else
      fail "${names[i]} exited with status $MC_STATUS" "$tmp/${names[i]}.log"
    fi
    unset 'pids[i]'
  done
}

cli() { "$bin/mooncake_cli" --master="$rpc" --timeout=5000 "$@"; }

echo "== starting the master and two client daemons (ports 0: the kernel picks them)"
start master "$bin/mooncake_master" --rpc_port=0 --metrics_port=0 --rpc_address=127.0.0.1 \
  --metrics_host=127.0.0.1 --log_level=warn --default_kv_lease_ttl=500
[ "$MC_READY_KIND" = master ] || fail "unexpected READY line from the master: $MC_READY"
rpc=$MC_READY_RPC metrics=$MC_READY_METRICS

start client-dram "$bin/mooncake_client" --master="$rpc" --host=127.0.0.1 --data_port=0 \
  --segment_size=64MiB --log_level=warn
start client-dram2 "$bin/mooncake_client" --master="$rpc" --host=127.0.0.1 --data_port=0 \
  --segment_size=64MiB --log_level=warn

key=demo/object
head -c $((3 * 1024 * 1024 + 123)) /dev/urandom >"$tmp/in.bin"
echo "== mooncake_cli put $key ($(stat -c %s "$tmp/in.bin") random bytes)"
cli put "$key" "$tmp/in.bin" || fail "put failed"
echo "== mooncake_cli get $key"
cli get "$key" -o "$tmp/out.bin" || fail "get failed"
cmp "$tmp/in.bin" "$tmp/out.bin" || fail "the bytes read back differ from the bytes put"
echo "== the bytes read back are identical"

echo "== mooncake_cli segments"
cli segments | sed 's/^/   /'
echo "== mooncake_cli stat $key"
cli stat "$key" | sed 's/^/   /'
echo "== the master's /metrics (a few lines; http://$metrics/metrics)"
cli --metrics="$metrics" metrics >"$tmp/metrics.txt" || fail "metrics scrape failed"
grep -E '^master_(key_count|segment_count|active_clients|total_capacity_bytes|allocated_bytes|put_start_requests_total|get_replica_list_requests_total)[ {]' \
  "$tmp/metrics.txt" | sed 's/^/   /'
echo "   ... $(grep -vc '^#' "$tmp/metrics.txt") series in all"

trace=${MC_TRACE:-}
if [ -z "$trace" ]; then
  for t in ../shared/traces/synthetic_trace.jsonl ../../shared/traces/synthetic_trace.jsonl; do
    if [ -f "$t" ]; then trace=$t; break; fi
  done
fi
if [ -n "$trace" ] && [ -f "$trace" ]; then
  limit=${MC_DEMO_REPLAY_LIMIT:-400}
  echo "== mooncake_bench replay: the first $limit requests of $trace (64 KiB blocks)"
  "$bin/mooncake_bench" replay --trace="$trace" --master="$rpc" --dram_bytes=64MiB,64MiB \
    --limit="$limit" --progress=off >"$tmp/replay.json" 2>"$tmp/replay.log" ||
    fail "the replay failed" "$tmp/replay.log"
  sed -n '/^replay of /,$p' "$tmp/replay.log" | sed 's/^/   /'
  echo "   JSON: $(cut -c1-150 "$tmp/replay.json")..."
else
  echo "== skipping the trace replay: no synthetic_trace.jsonl found (set MC_TRACE=FILE)"
fi

echo "== promotion on hit: a second cluster with a LOCAL_DISK tier"
start master-tier "$bin/mooncake_master" --rpc_port=0 --metrics_port=0 --rpc_address=127.0.0.1 \
  --metrics_host=127.0.0.1 --log_level=warn --enable_offload --offload_on_evict \
  --promotion_on_hit --default_kv_lease_ttl=100
rpc2=$MC_READY_RPC metrics2=$MC_READY_METRICS
start client-disk "$bin/mooncake_client" --master="$rpc2" --host=127.0.0.1 --data_port=0 \
  --segment_size=16MiB --disk_path="$tmp/disk" --disk_capacity=1GiB --log_level=warn
cli2() { "$bin/mooncake_cli" --master="$rpc2" --timeout=5000 "$@"; }
head -c $((1024 * 1024)) /dev/urandom >"$tmp/one.bin"
echo "== mooncake_cli put tier/0 .. tier/39 (1 MiB each into a 16 MiB DRAM segment: eviction offloads)"
for i in $(seq 0 39); do cli2 put "tier/$i" "$tmp/one.bin" >/dev/null || fail "put tier/$i failed"; done
hot=""
for _ in $(seq 100); do
  for i in $(seq 0 39); do
    if ! cli2 stat "tier/$i" --json | grep -q '"type":"MEMORY"'; then hot="tier/$i"; break 2; fi
  done
  sleep 0.1
done
[ -n "$hot" ] || fail "no key became LOCAL_DISK-only"
echo "== $hot lives on the disk only:"
cli2 stat "$hot" | sed 's/^/   /'
get_check() {
  cli2 get "$hot" -o "$tmp/hot.bin" || fail "get $hot failed"
  cmp -s "$tmp/one.bin" "$tmp/hot.bin" || fail "$hot: the bytes read back differ"
}
echo "== two Gets (the second reaches --promotion_admission_threshold=2)"
get_check
get_check
echo "   (bytes equal both times)"
for _ in $(seq 100); do
  cli2 stat "$hot" --json | grep -q '"type":"MEMORY"' && break
  sleep 0.02
done
cli2 stat "$hot" --json | grep -q '"type":"MEMORY"' || fail "$hot was not promoted within 2 s"
echo "== the holder copied it back into DRAM:"
cli2 stat "$hot" | sed 's/^/   /'
get_check
echo "== read again, from DRAM now: bytes equal"
cli2 --metrics="$metrics2" metrics >"$tmp/metrics2.txt" || fail "metrics scrape failed"
grep -E '^master_promotion_(admitted_total|completed_total|in_flight|lag_seconds_sum|lag_seconds_count) ' \
  "$tmp/metrics2.txt" | sed 's/^/   /'

echo "== stopping everything (SIGTERM)"
stop_all
if [ -x "$bin/mooncake_bench" ]; then
  echo "== what it buys: mooncake_bench promotion (4 MiB, 4 hot keys, the bench process is the holder)"
  "$bin/mooncake_bench" promotion --sizes 4MiB --keys 4 --runs 5 --segment_size 32MiB \
    --reader holder --zipf_objects 0 --dir "$tmp" 2>/dev/null |
    sed -n 's/.*"case":"\([^"]*\)".*"p50_ms":\([0-9.e+-]*\).*"p99_ms":\([0-9.e+-]*\).*/   \1: p50 \2 ms, p99 \3 ms/p' ||
    fail "mooncake_bench promotion failed"
fi
echo "== demo passed"
