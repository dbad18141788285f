#!/usr/bin/env bash
# The workload replay (DESIGN.md §12): Mooncake's synthetic trace against a running cluster,
# every byte verified, the store's hit ratio beside exact LRU caches of the same usable capacity
# and an unbounded cache. One run, one table, a fresh cluster per mode:
#   dram        mooncake_master + 2 mooncake_client daemons with --dram of DRAM each
#   disk        the same with a LOCAL_DISK tier of --disk each (--disk_path, --disk_capacity) and
#               the master offloading on eviction (--enable_offload --offload_on_evict);
#               promotion off
#   promotion   the disk mode with --promotion_on_hit
# The master runs with a short --default_kv_lease_ttl (a flat-out replay would otherwise keep
# more blocks leased than DRAM holds). A mode whose flags this build refuses is reported as
# "not run" with the refusal, and the script then exits 3; it is never silently skipped.
#
# usage: scripts/bench/replay.sh [--trace FILE] [--modes dram,disk,promotion] [--limit N]
#                                [--workers N] [--time_scale X] [--lease_ttl MS] [--dram SIZE] [--disk SIZE]
#                                [--block_size SIZE] [--bin DIR] [--timeout S] [--json FILE]
#                                [--promotion_flags 'FLAGS'] [--rounds N] [--token]
#   --trace      default: MC_TRACE, else shared/traces/synthetic_trace.jsonl next to the checkout
#   --modes      which modes, in order (default dram,disk,promotion)
#   --limit      replay only the first N requests (default all)
#   --workers    replay threads, taking requests in trace order (default 1)
#   --time_scale 0 = flat out (default), 1 = the trace's own timing
#   --lease_ttl  the master's --default_kv_lease_ttl in ms (default 500 in the dram mode, 2000
#                in the disk modes: long enough that a big batch Get on a loaded machine, from
#                the SSD in the disk modes, does not outlive its lease)
#   --dram       DRAM segment of each of the 2 daemons (default 64MiB)
#   --disk       LOCAL_DISK capacity of each daemon in the disk modes (default 512MiB)
#   --bin        where the programs are (default $BUILD_DIR/bin, BUILD_DIR=build)
#   --timeout    seconds one replay may take before it is killed (default 1800)
#   --json       also append every JSON line to FILE
#   --promotion_flags  more mooncake_master flags for the promotion mode (e.g.
#                '--promotion_admission_threshold=4'); a mode named promotion:NAME uses the
#                flags of --promotion_flags_NAME instead (several promotion variants in one run)
#   --rounds     run the whole --modes list N times, alternating (default 1)
#   --token      every process proves a random data token (and the master has an admin token):
#                the replay through the authenticated path, client credentials included
# After each promotion mode the master's promotion funnel (master_promotion_*_total) is printed
# on stderr and added to the mode's JSON line as "funnel".
# Prints the table on stdout (the log of the programs is kept, and named, when a replay fails).
# Exit status: 0 every mode ran with 0 wrong bytes; 1 a replay
# failed (wrong bytes, a crash, a time-out); 3 a mode could not run on this build.
set -euo pipefail
cd "$(dirname "$0")/../.."
TRACE=${MC_TRACE:-} MODES=dram,disk,promotion LIMIT=0 WORKERS=1 TTL= SCALE=0 DRAM=64MiB DISK=512MiB
BS=64KiB BIN=${BUILD_DIR:-build}/bin TMO=1800 JSON_OUT="" PFLAGS="" ROUNDS=1 TOKEN=0
declare -A PVARIANT=()
while [ $# -gt 0 ]; do
  case "$1" in
    --trace) TRACE=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --time_scale) SCALE=$2; shift 2 ;;
    --lease_ttl) TTL=$2; shift 2 ;;
    --dram) DRAM=$2; shift 2 ;;
    --disk) DISK=$2; shift 2 ;;
    --block_size) BS=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --timeout) TMO=$2; shift 2 ;;
    --json) JSON_OUT=$2; shift 2 ;;
    --promotion_flags) PFLAGS=$2; shift 2 ;;
    --promotion_flags_*=*) v=${1#--promotion_flags_}; PVARIANT[${v%%=*}]=${v#*=}; shift ;;
    --promotion_flags_*) PVARIANT[${1#--promotion_flags_}]=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --token) TOKEN=1; shift ;;
    -h|--help) sed -n '2,41p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ -z "$TRACE" ]; then
  for t in ../shared/traces/synthetic_trace.jsonl ../../shared/traces/synthetic_trace.jsonl; do
    if [ -f "$t" ]; then TRACE=$t; break; fi
  done
fi
[ -n "$TRACE" ] && [ -f "$TRACE" ] || { echo "no trace found: pass --trace FILE" >&2; exit 2; }
for p in mooncake_master mooncake_client mooncake_bench; do
  [ -x "$BIN/$p" ] || { echo "$BIN/$p is not built (build first or pass --bin)" >&2; exit 1; }
done
command -v python3 >/dev/null || { echo "python3 not found" >&2; exit 1; }

. scripts/bench/lib.sh
ROOT=$(mktemp -d "${TMPDIR:-/tmp}/mc_replay.XXXXXX")
LOG=$ROOT/replay.log
KEEP_LOG=0
rm_root() {
  if [ "$KEEP_LOG" = 1 ]; then cp "$LOG" "$ROOT.log" && echo "log: $ROOT.log" >&2; fi
  rm -rf "$ROOT"
}
mc_install_traps rm_root
: >"$LOG"
RESULTS=$ROOT/results.jsonl
: >"$RESULTS"
tok_m=() tok_c=()
if [ "$TOKEN" = 1 ]; then
  (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$ROOT/token" &&
    od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$ROOT/admin_token")
  tok_m=(--auth_token_file="$ROOT/token" --admin_token_file="$ROOT/admin_token")
  tok_c=(--auth_token_file="$ROOT/token")
fi

# Starts a daemon (stdout in $ROOT/NAME.out, stderr in $ROOT/NAME.log) and waits up to 20 s for
# its READY line (lib.sh's mc_start_ready). Returns 1 (and sets WHY) when it exits or stays silent.
start_ready() { # name cmd...
  local name=$1
  shift
  mc_start_ready "$ROOT" "$name" "$@" || { WHY=$MC_WHY; return 1; }
}

stop_cluster() {
  local p
  for p in "${MC_CHILDREN[@]}"; do mc_stop "$p"; done
  MC_CHILDREN=()
}

not_run() { # mode reason
  echo "{\"bench\":\"replay\",\"mode\":\"$1\",\"not_run\":$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$2")}" >>"$RESULTS"
  echo "mode $1: NOT RUN: $2" >&2
}

FAILED=0 MISSING=0
IFS=, read -r -a ONE_ROUND <<<"$MODES"
MODE_LIST=()
for _ in $(seq "$ROUNDS"); do MODE_LIST+=("${ONE_ROUND[@]}"); done
for mode in "${MODE_LIST[@]}"; do
  mflags=() dflags=() rflags=() extra=()
  case "$mode" in
    dram) ;;
    disk) mflags=(--enable_offload --offload_on_evict) ;;
    promotion) mflags=(--enable_offload --offload_on_evict --promotion_on_hit)
      read -r -a extra <<<"$PFLAGS" ;;
    promotion:*) mflags=(--enable_offload --offload_on_evict --promotion_on_hit)
      [ -n "${PVARIANT[${mode#promotion:}]+x}" ] ||
        { echo "mode $mode: no --promotion_flags_${mode#promotion:}" >&2; exit 2; }
      read -r -a extra <<<"${PVARIANT[${mode#promotion:}]}" ;;
    *) echo "unknown mode '$mode' (dram, disk, promotion, promotion:NAME)" >&2; exit 2 ;;
  esac
  mflags+=("${extra[@]}")
  ttl=${TTL:-$([ "$mode" = dram ] && echo 500 || echo 2000)}
  echo "== mode $mode: starting mooncake_master ${mflags[*]} --default_kv_lease_ttl=$ttl" >&2
  if ! start_ready master "$BIN/mooncake_master" --rpc_port=0 --metrics_port=0 \
      --rpc_address=127.0.0.1 --metrics_host=127.0.0.1 --log_level=warn \
      --default_kv_lease_ttl="$ttl" "${mflags[@]}" "${tok_m[@]}"; then
    not_run "$mode" "$WHY"; MISSING=1; stop_cluster; continue
  fi
  rpc=$MC_READY_RPC murl=$MC_READY_METRICS
  ok=1
  for d in 1 2; do
    dflags=()
    if [ "$mode" != dram ]; then
      mkdir -p "$ROOT/$mode-disk$d"
      dflags=(--disk_path="$ROOT/$mode-disk$d" --disk_capacity="$DISK")
    fi
    echo "== mode $mode: starting mooncake_client $d (--segment_size=$DRAM ${dflags[*]:+with LOCAL_DISK $DISK})" >&2
    if ! start_ready "client$d" "$BIN/mooncake_client" --master="$rpc" --host=127.0.0.1 \
        --data_port=0 --segment_size="$DRAM" --log_level=warn "${dflags[@]}" "${tok_c[@]}"; then
      not_run "$mode" "$WHY"; MISSING=1; ok=0; break
    fi
  done
  if [ "$ok" = 1 ]; then
    rflags=(--dram_bytes="$DRAM,$DRAM")
    [ "$mode" = dram ] || rflags+=(--disk_bytes="$DISK,$DISK")
    [ "$LIMIT" = 0 ] || rflags+=(--limit="$LIMIT")
    echo "== mode $mode: mooncake_bench replay --trace=$TRACE ${rflags[*]} --workers=$WORKERS" >&2
    rc=0
    mc_bounded "$TMO" "$ROOT/out.json" "$BIN/mooncake_bench" replay --trace="$TRACE" \
      --master="$rpc" --block_size="$BS" --workers="$WORKERS" --time_scale="$SCALE" --label="$mode" \
      --progress=off "${rflags[@]}" "${tok_c[@]}" || rc=$?
    if [ -s "$ROOT/out.json" ]; then
      line=$(tail -n 1 "$ROOT/out.json")
      if [ "$mode" != dram ] && [ "$mode" != disk ]; then
        # the master's promotion funnel, scraped once the replay is done
        funnel=$(python3 - "$murl" <<'PY' || echo '{}'
import json, sys, urllib.request
text = urllib.request.urlopen(f"http://{sys.argv[1]}/metrics", timeout=10).read().decode()
out = {}
for l in text.splitlines():
    if l.startswith("master_promotion_") and "_total" in l and not l.startswith("#"):
        name, val = l.rsplit(" ", 1)
        out[name[len("master_promotion_"):].replace("_total", "")] = float(val)
print(json.dumps(out))
PY
)
        echo "mode $mode: promotion funnel $funnel" >&2
        line=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r["funnel"]=json.loads(sys.argv[2]); print(json.dumps(r))' "$line" "$funnel")
      fi
      echo "$line" >>"$RESULTS"
      [ -z "$JSON_OUT" ] || echo "$line" >>"$JSON_OUT"
    fi
    if [ "$rc" != 0 ]; then
      echo "mode $mode: the replay FAILED (exit $rc); see the log below" >&2
      tail -n 20 "$LOG" >&2
      FAILED=1
      [ -s "$ROOT/out.json" ] || not_run "$mode" "the replay exited $rc without a result"
    fi
  fi
  stop_cluster
done

python3 - "$RESULTS" "$TRACE" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"replay of {sys.argv[2]}")
print("| mode | requests | hit ratio | LRU DRAM | LRU DRAM+disk | unbounded | store / LRU | "
      "MEMORY hits | LOCAL_DISK hits | Get p50 / p99 ms | Get p50 ms (batches): all MEMORY / "
      "all LOCAL_DISK / mixed | Put p50 / p99 ms | refused Puts | errors | wrong bytes |")
print("|" + "---|" * 15)
for r in rows:
    mode = r.get("mode") or r["case"].rsplit("/", 1)[-1]
    if "not_run" in r:
        print(f"| {mode} | not run: {r['not_run']} |" + " |" * 13)
        continue
    tot = f"{r['lru_total_ratio']:.4f}" if r["lru_total_blocks"] != r["lru_dram_blocks"] else "-"
    errs = str(r["errors"]) + (f" ({r['error_names']})" if r["error_names"] else "")
    print(f"| {mode} | {r['requests']} | {r['hit_ratio']:.4f} | {r['lru_dram_ratio']:.4f} | {tot} | "
          f"{r['unbounded_ratio']:.4f} | {r['ratio']:.3f} | {r['mem_hits']} | {r['disk_hits']} | "
          f"{r['get_p50_ms']:.3f} / {r['get_p99_ms']:.3f} | "
          + " / ".join(f"{r.get('get_' + t + '_p50_ms', 0):.3f} ({r.get('get_' + t + '_n', 0):.0f})"
                       for t in ("mem", "disk", "mixed")) + f" | {r['put_p50_ms']:.3f} / "
          f"{r['put_p99_ms']:.3f} | {r['refused_puts']} | {errs} | {r['wrong_bytes']} |")
EOF
if [ "$FAILED" = 1 ]; then KEEP_LOG=1; exit 1; fi
if [ "$MISSING" = 1 ]; then exit 3; fi
exit 0
