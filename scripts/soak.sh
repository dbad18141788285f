#!/usr/bin/env bash
# Soak: a small cluster under mixed load for DURATION while the master and holders are killed
# and restarted, checking that nothing leaks or lies.
#   scripts/soak.sh [DURATION_S]        (default 120)
# Environment:
#   MC_SOAK_SEED=N     the seed of the kill schedule and of the load (default: a random one);
#                      printed at the start, so a failing run can be replayed
#   MC_SOAK_KILLS=N    how many kills (default max(2, DURATION/30); 0 = no kills, for debugging)
#   MC_SOAK_TARGETS=T  what is killed: both (default), master or holder (to tell their effects apart)
#   MC_SOAK_GRACE_S=G  seconds after a restarted process is READY during which transport errors
#                      still count as expected (default 5)
#   MC_SOAK_KEEP_DISK=1  keep the daemons' disk directories at the end (default: removed)
#   MC_SOAK_TOKEN=1    run with a random data token and admin token (every process proves the
#                      token; the daemons' client credentials are kept in their disk directories
#                      and must carry them through the kills)
#
# Starts mooncake_master and 3 mooncake_client daemons (64 MiB of DRAM each, and a LOCAL_DISK
# tier of 256 MiB each under $OUT) on loopback; the master offloads on eviction and promotes
# disk-only objects that are read again (--enable_offload --offload_on_evict --promotion_on_hit),
# so the disk tier runs throughout. Then soak_load (tests/soak_load.c): 4 threads of Get 50% /
# Put 25% / Remove 12.5% / Remove-then-Put 12.5% over 4096 keys of 32..128 KiB, Zipf 0.9 --
# about 320 MiB of values for 192 MiB of DRAM, so eviction runs all the time; at the end each
# key is read once more. Each key has one writer thread; values carry key, writer, sequence
# number and a CRC32C. Every Get is verified (wrong bytes) and checked against the acknowledged
# Removes and replacements that happened before it started (resurrections). The master's read
# lease is 1 s (--default_kv_lease_ttl=1000) so Removes of hot keys are not all refused with
# OBJECT_HAS_LEASE.
#
# Kills: at seeded random moments in the middle of the run (never in the first 15% nor the last
# 15 s), the master or one daemon (a holder: its disk directory keeps its client id, and its
# records are re-registered) gets SIGKILL, stays down 0.2..3 s, and is restarted with the same
# flags (the master on the same ports). With both targets the first two kills are one of each.
# Around each kill the load is told (a control file: begin, kill, end) so transport errors
# inside the window, plus the grace, count as fault_errors and not as errors. A run too short
# for its kills (the window must give each 5 s) runs without them, and says so.
#
# The last line is the summary: seed, wrong_bytes, resurrections (both must be 0), errors,
# fault_errors, kills done (master, holder), the resurrections split by the kill that lost
# their acknowledgement, and the DRAM keys across master kills: those with a DRAM copy just
# before a kill, those (not written since) that read back their own bytes after the restart
# (the holders re-registered them) and those that missed; a re-registered key that reads back
# other bytes is wrong_bytes (see tests/soak_load.c).
#
# Every 5 s it samples the RSS and open descriptors of the master and each daemon, per
# incarnation ($OUT/samples.csv). It fails (exit 1) when:
#   - any Get returned wrong bytes, or a value older than an acknowledged Remove or replacement
#     (a resurrection), or any call failed with an unexpected error (outside a fault window);
#   - kills were planned and nothing succeeded after the last one (the cluster never recovered),
#     or a restarted process did not come back;
#   - a process's last incarnation (those the soak killed are not judged), when it ran long
#     enough to judge (>= 6 samples under the load; a restarted one >= 12, 60 s, as it warms
#     up like a new process), still grows in its last third: its RSS peak there exceeds its
#     peak in the middle third by more than 10% + 16 MiB (samples under the load; the load's
#     final sweep, which reads every key once, is not steady state), or its descriptors at its
#     end exceed those after its first third by more than 8;
#   - a process died that the soak did not kill;
#   - no offload or no promotion completed (the master's metrics, summed over its incarnations):
#     the tier never ran.
# Uses $BUILD_DIR (default build, built with -DMC_TEST_HOOKS=ON as scripts/test.sh does);
# results go to $OUT (default $BUILD_DIR/soak). Only loopback is used. Every process it starts
# is stopped at exit, also on failure and Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench/lib.sh # mc_parse_ready: the one shell reader of the READY line
dur=${1:-120}
dir=${BUILD_DIR:-build}
out=${OUT:-$dir/soak}
bin=$dir/bin
seed=${MC_SOAK_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
grace_s=${MC_SOAK_GRACE_S:-5}
case "$dur$seed$grace_s${MC_SOAK_KILLS:-0}" in
*[!0-9]*)
  echo "soak: DURATION, MC_SOAK_SEED, MC_SOAK_GRACE_S and MC_SOAK_KILLS are whole numbers" >&2
  exit 2
  ;;
esac
kills_planned=${MC_SOAK_KILLS:-$((dur / 30 > 2 ? dur / 30 : 2))}
if [ ! -x "$bin/soak_load" ] || [ ! -x "$bin/mooncake_master" ] || [ ! -x "$bin/mooncake_client" ]; then
  BUILD_DIR=$dir ./scripts/build.sh -DMC_TEST_HOOKS=ON >/dev/null
fi
rm -rf "$out"
mkdir -p "$out"
ctl=$out/control
tok_master=() tok_client=()
if [ "${MC_SOAK_TOKEN:-0}" = 1 ]; then
  (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$out/token" &&
    od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$out/admin_token")
  tok_master=(--auth_token_file="$out/token" --admin_token_file="$out/admin_token")
  tok_client=(--auth_token_file="$out/token")
fi

# The processes: index 0 the master, 1..3 the daemons; their current pid and incarnation.
names=(master daemon1 daemon2 daemon3)
procs=(0 0 0 0)
incs=(0 0 0 0)
load_pid=0
cleanup() {
  local p live=()
  trap - INT TERM
  for p in "$load_pid" "${procs[@]}"; do
    [ "$p" -gt 0 ] && kill -TERM "$p" 2>/dev/null && live+=("$p")
  done
  for p in "${live[@]}"; do
    for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -f "$ctl"
  [ "${MC_SOAK_KEEP_DISK:-0}" = 1 ] || rm -rf "$out"/disk[0-9]*
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# alive PID: running (a zombie, one that died and was not waited for yet, is not).
alive() {
  [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

rpc_port=0
metrics_port=0
start_master() {
  incs[0]=$((incs[0] + 1))
  local o=$out/master.${incs[0]}.out
  echo "--- incarnation ${incs[0]}" >>"$out/master.log"
  "$bin/mooncake_master" --rpc_address=127.0.0.1 --rpc_port="$rpc_port" \
    --metrics_host=127.0.0.1 --metrics_port="$metrics_port" --log_level=warn \
    --default_kv_lease_ttl=1000 --enable_offload --offload_on_evict --promotion_on_hit \
    "${tok_master[@]}" >"$o" 2>>"$out/master.log" &
  procs[0]=$!
  for _ in $(seq 100); do
    grep -qs READY "$o" && return 0
    alive "${procs[0]}" || break
    sleep 0.1
  done
  wait "${procs[0]}" 2>/dev/null || true
  procs[0]=0
  return 1
}
start_daemon() { # i
  local i=$1
  incs[i]=$((incs[i] + 1))
  local o=$out/daemon$i.${incs[i]}.out
  echo "--- incarnation ${incs[i]}" >>"$out/daemon$i.log"
  "$bin/mooncake_client" --master="$rpc" --host=127.0.0.1 --segment_size=64MiB \
    --disk_path="$out/disk$i" --disk_capacity=256MiB "${tok_client[@]}" \
    --log_level=warn >"$o" 2>>"$out/daemon$i.log" &
  procs[i]=$!
  for _ in $(seq 200); do
    grep -qs READY "$o" && return 0
    alive "${procs[i]}" || break
    sleep 0.1
  done
  kill -KILL "${procs[i]}" 2>/dev/null || true
  wait "${procs[i]}" 2>/dev/null || true
  procs[i]=0
  return 1
}

# master: ephemeral ports the first time, READY line on stdout; the same ports after a restart
start_master || { echo "soak: master did not start" >&2; cat "$out/master.log" >&2; exit 1; }
IFS= read -r line <"$out/master.1.out" || true
mc_parse_ready "$line" && [ "$MC_READY_KIND" = master ] ||
  { echo "soak: unexpected first line from the master: $line" >&2; exit 1; }
rpc_port=$MC_READY_RPC_PORT
rpc=127.0.0.1:$rpc_port
metrics=$MC_READY_METRICS
metrics_port=${metrics##*:}
for i in 1 2 3; do
  start_daemon "$i" || { echo "soak: daemon$i did not start" >&2; tail "$out/daemon$i.log" >&2; exit 1; }
done

# The kill schedule, from the seed: "TIME_S TARGET DOWN_S" per line.
targets=${MC_SOAK_TARGETS:-both}
case $targets in
both | master | holder) ;;
*) echo "soak: MC_SOAK_TARGETS is both, master or holder" >&2; exit 2 ;;
esac
python3 - "$seed" "$dur" "$kills_planned" "$targets" >"$out/schedule.txt" <<'PY'
import random, sys
seed, dur, n, targets = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
r = random.Random(seed)
lo, hi = max(5.0, dur * 0.15), dur - 15.0
if n <= 0 or hi - lo < 5.0 * n:
    sys.exit(0)
slot = (hi - lo) / n
first = ["master", "daemon%d" % r.randint(1, 3)]
r.shuffle(first)
for i in range(n):
    what = first[i] if i < 2 else r.choice(["master", "daemon%d" % r.randint(1, 3)])
    if targets == "master":
        what = "master"
    elif targets == "holder" and what == "master":
        what = "daemon%d" % r.randint(1, 3)
    print("%.1f %s %.1f" % (lo + slot * i + r.uniform(0, slot * 0.6), what, r.uniform(0.2, 3.0)))
PY
[ "$kills_planned" -eq 0 ] || [ -s "$out/schedule.txt" ] ||
  echo "soak: ${dur}s is too short for $kills_planned kills: running without them" >&2
kills_planned=$(wc -l <"$out/schedule.txt")
: >"$ctl"

# The master's tier counters, summed over its incarnations (scraped before each kill and at
# the end).
offloaded=0
promoted=0
tier() { awk -v n="$1" '$1 == n {printf "%d", $2}' "$out/master_metrics.txt" 2>/dev/null; }
scrape_master() {
  curl -sf -m 5 "http://$metrics/metrics" >"$out/master_metrics.txt" || return 1
  local o p
  o=$(tier master_offload_completed_total)
  p=$(tier master_promotion_completed_total)
  offloaded=$((offloaded + ${o:-0}))
  promoted=$((promoted + ${p:-0}))
}

kills_done=0
kills_master=0
kills_holder=0
restart_failed=""
# kill_restart TARGET DOWN_S: SIGKILL, down for DOWN_S, restart, tell the load around it.
kill_restart() {
  local what=$1 down=$2 idx
  case $what in
  master) idx=0 ;;
  daemon*) idx=${what#daemon} ;;
  esac
  [ "$idx" = 0 ] && { scrape_master || true; }
  echo "begin $what" >>"$ctl"
  sleep 0.1 # the load polls the control file every 20 ms
  echo "   t=$(elapsed)s kill -9 $what (pid ${procs[idx]}), down ${down}s"
  kill -KILL "${procs[idx]}" 2>/dev/null || true
  echo "kill $what" >>"$ctl"
  wait "${procs[idx]}" 2>/dev/null || true
  procs[idx]=0
  sleep "$down"
  local ok=1 deadline=$((SECONDS + 20))
  if [ "$idx" = 0 ]; then
    # the same port: retry while the old socket lingers
    until start_master; do
      [ $SECONDS -lt $deadline ] || { ok=0; break; }
      sleep 0.5
    done
  else
    start_daemon "$idx" || ok=0
  fi
  echo "end $what" >>"$ctl"
  if [ $ok = 1 ]; then
    kills_done=$((kills_done + 1))
    if [ "$idx" = 0 ]; then kills_master=$((kills_master + 1)); else kills_holder=$((kills_holder + 1)); fi
    echo "   t=$(elapsed)s $what restarted (pid ${procs[idx]}, incarnation ${incs[idx]})"
  else
    restart_failed="$restart_failed $what"
    echo "soak: $what did not restart" >&2
  fi
}

died=""
phase=load
sample() { # t
  local line="$1,$phase" idx p rss fds
  for idx in "${!procs[@]}"; do
    p=${procs[$idx]}
    if [ "$p" = 0 ] || ! alive "$p"; then
      line="$line,,,${incs[idx]}"
      continue
    fi
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
    fds=$(ls "/proc/$p/fd" 2>/dev/null | wc -l)
    line="$line,$rss,$fds,${incs[idx]}"
  done
  echo "$line" >>"$out/samples.csv"
}
# check_alive: a process the soak did not kill has died.
check_alive() {
  local idx
  for idx in "${!procs[@]}"; do
    if [ "${procs[idx]}" != 0 ] && ! alive "${procs[idx]}"; then
      echo "soak: ${names[idx]} (pid ${procs[idx]}, incarnation ${incs[idx]}) died" >&2
      died="$died ${names[idx]}"
      wait "${procs[idx]}" 2>/dev/null || true
      procs[idx]=0
    fi
  done
}
header=t_s,phase
for n in "${names[@]}"; do header="$header,${n}_rss_kb,${n}_fds,${n}_inc"; done
echo "$header" >"$out/samples.csv"

echo "== soak: ${dur}s, seed $seed (replay: MC_SOAK_SEED=$seed scripts/soak.sh $dur)," \
  "$kills_planned kills planned, master $rpc, 3 daemons x 64 MiB DRAM + 256 MiB disk, results in $out"
sed 's/^/   planned: t=/' "$out/schedule.txt"
t0=$EPOCHREALTIME
elapsed() { awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}'; }
"$bin/soak_load" --master="$rpc" --seconds="$dur" --threads=4 --keys=4096 --value_kb=128 \
  --zipf=0.9 --report_s=10 --seed="$seed" --control="$ctl" --grace_ms=$((grace_s * 1000)) \
  "${tok_client[@]}" >"$out/load.jsonl" 2>"$out/load.log" &
load_pid=$!
sample 0
next_sample=5
mapfile -t plan <"$out/schedule.txt"
next_kill=0
while alive "$load_pid"; do
  sleep 0.2
  check_alive
  [ -z "$died" ] || break
  now=$(elapsed)
  if [ "$next_kill" -lt "${#plan[@]}" ]; then
    read -r at what down <<<"${plan[next_kill]}"
    if awk -v a="$now" -v b="$at" 'BEGIN {exit !(a >= b)}'; then
      kill_restart "$what" "$down"
      next_kill=$((next_kill + 1))
      [ -z "$restart_failed" ] || break
    fi
  fi
  if [ "${now%.*}" -ge "$next_sample" ]; then
    sample "${now%.*}"
    next_sample=$((next_sample + 5))
  fi
done
status=0
load_rc=0
if [ -n "$died$restart_failed" ]; then
  kill -TERM "$load_pid" 2>/dev/null || true
  status=1
fi
wait "$load_pid" || load_rc=$?
load_pid=0
check_alive
phase=end
sample "$(elapsed)"

final=$(grep '"final":true' "$out/load.jsonl" || true)
echo "   load: $final"
field() { echo "$final" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
wrong=$(field wrong_bytes)
resurrections=$(field resurrections)
errors=$(field errors)
if [ "$load_rc" -ne 0 ] || [ -z "$final" ]; then
  echo "soak: FAILED: the load reported errors, wrong bytes or resurrections (rc=$load_rc)" >&2
  grep -E 'ERROR|WRONG|RESURRECTION' "$out/load.log" | head -20 >&2 || true
  status=1
fi
if [ "$kills_done" -gt 0 ] && [ "$(field ok_after_faults)" = 0 ]; then
  echo "soak: FAILED: nothing succeeded after the last restart (grace ${grace_s}s)" >&2
  status=1
fi
if [ -n "$died" ]; then
  echo "soak: FAILED: a process died that the soak did not kill:$died" >&2
fi
if [ -n "$restart_failed" ]; then
  echo "soak: FAILED: a killed process did not restart:$restart_failed" >&2
fi
# The disk tier ran: offloads and promotions completed (the master's /metrics, per incarnation).
if [ "${procs[0]}" != 0 ] && scrape_master; then :; else
  echo "soak: cannot read the master's metrics at $metrics" >&2
  status=1
fi
echo "   tier: offloads completed=$offloaded promotions completed=$promoted" \
  "disk-only keys=$(tier master_disk_only_key_count) (counters summed over ${incs[0]} master incarnations)"
if [ "$offloaded" -eq 0 ] || [ "$promoted" -eq 0 ]; then
  echo "soak: FAILED: the disk tier did not run (offloads $offloaded, promotions $promoted)" >&2
  status=1
fi
# RSS plateau and flat descriptors, per process incarnation (python3 is in install-deps).
python3 - "$out/samples.csv" <<'PY' || status=1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
procs = [k[:-7] for k in rows[0] if k.endswith("_rss_kb")] if rows else []
bad = False
for p in procs:
    incs = {}
    for r in rows:
        if r[p + "_rss_kb"]:
            incs.setdefault(r[p + "_inc"], []).append(
                (int(r[p + "_rss_kb"]), int(r[p + "_fds"]), r["phase"]))
    last_inc = max(incs, key=int) if incs else None
    for inc, s in sorted(incs.items(), key=lambda kv: int(kv[0])):
        name = "%s#%s" % (p, inc)
        if inc != last_inc:
            # killed by the soak, maybe still warming up: its growth is not judged
            print("   %-10s killed by the soak after %d samples: growth not judged" % (name, len(s)))
            continue
        # RSS under the load only (the final sweep after it reads every key once); descriptors
        # up to the very end
        rss = [x[0] for x in s if x[2] == "load"]
        fds = [x[1] for x in s]
        n = len(rss)
        # a restarted process warms up like a new one, but the cluster's load meets it at once
        need = 6 if inc == "1" else 12
        if n < need:
            print("   %-10s %d samples: too few to judge its growth" % (name, n))
            continue
        third = n // 3
        mid, last = max(rss[third:2 * third]), max(rss[2 * third:])
        growth_ok = last <= mid * 1.10 + 16 * 1024
        fd_ok = fds[-1] <= fds[third] + 8
        print("   %-10s rss_kb first=%d mid_peak=%d last_peak=%d end=%d  %s | fds warm=%d end=%d max=%d  %s"
              % (name, rss[0], mid, last, rss[-1], "plateau" if growth_ok else "GROWING",
                 fds[third], fds[-1], max(fds), "flat" if fd_ok else "LEAKING"))
        bad = bad or not growth_ok or not fd_ok
sys.exit(1 if bad else 0)
PY
echo "== soak summary: seed=$seed wrong_bytes=${wrong:-?} resurrections=${resurrections:-?}" \
  "errors=${errors:-?} fault_errors=$(field fault_errors) kills=$kills_done/$kills_planned" \
  "(master $kills_master, holder $kills_holder) ok_after_faults=$(field ok_after_faults)" \
  "| resurrections: removed=$(field resurrected_removed) older=$(field resurrected_older)" \
  "keys=$(field resurrected_keys) in_final_sweep=$(field resurrected_in_sweep)" \
  "acked_before_master_kill=$(field res_acked_before_master_kill)" \
  "acked_before_holder_kill=$(field res_acked_before_holder_kill)" \
  "acked_after_master_restart=$(field res_acked_after_master_restart)" \
  "acked_after_holder_restart=$(field res_acked_after_holder_restart)" \
  "no_kill=$(field res_no_kill) ack_to_kill_max_ms=$(field res_ack_to_kill_max_ms)" \
  "| dram_before_master_kill=$(field dram_before_master_kill)" \
  "dram_back_after_master_kill=$(field dram_back_after_master_kill)" \
  "dram_missed_after_master_kill=$(field dram_missed_after_master_kill)"
[ $status -eq 0 ] && echo "== soak: passed" || echo "== soak: FAILED (replay: MC_SOAK_SEED=$seed scripts/soak.sh $dur)" >&2
exit $status
