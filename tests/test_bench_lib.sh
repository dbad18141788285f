#!/usr/bin/env bash
# test_bench_lib.sh - the shell drivers' helpers (scripts/bench/lib.sh): the READY parser holds
# to the same contract as the C one (tests/test_proc_harness.c's cases), /metrics samples are
# found by exact name, mc_start_ready takes a READY line and refuses a silent, dying or chatty
# child (stopping it), mc_stop_checked reports exit statuses, and mc_cleanup leaves nothing
# running. Stand-in children are /bin/sh one-liners; every file lives in a private directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../scripts/bench/lib.sh
. "$here/../scripts/bench/lib.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mc_bench_lib.XXXXXX")
rm_tmp() { rm -rf "$tmp"; }
mc_install_traps rm_tmp
LOG=$tmp/log
fails=0
check() { # description cmd...
  local what=$1
  shift
  if "$@"; then :; else echo "FAIL: $what" >&2; fails=$((fails + 1)); fi
}
not() { ! "$@"; }

# ---- mc_parse_ready ------------------------------------------------------------------------
mc_parse_ready "READY rpc=0.0.0.0:50051 metrics=127.0.0.1:9003"
check "master kind" [ "$MC_READY_KIND" = master ]
check "master rpc" [ "$MC_READY_RPC" = 0.0.0.0:50051 ]
check "master rpc port" [ "$MC_READY_RPC_PORT" = 50051 ]
check "master metrics" [ "$MC_READY_METRICS" = 127.0.0.1:9003 ]
mc_parse_ready "READY rpc=[::1]:1 metrics=[::1]:65535"
check "ipv6 master" [ "$MC_READY_RPC" = "[::1]:1" ] && [ "$MC_READY_METRICS" = "[::1]:65535" ]
mc_parse_ready "READY endpoint=127.0.0.1:40123"
check "daemon kind" [ "$MC_READY_KIND" = daemon ]
check "daemon endpoint" [ "$MC_READY_ENDPOINT" = 127.0.0.1:40123 ]
check "daemon port" [ "$MC_READY_ENDPOINT_PORT" = 40123 ]
for bad in "" "READY" "READY " "ready endpoint=127.0.0.1:1" "READYendpoint=127.0.0.1:1" \
    "READY  endpoint=127.0.0.1:1" "READY endpoint=" "READY endpoint=127.0.0.1" \
    "READY endpoint=127.0.0.1:" "READY endpoint=:80" "READY endpoint=127.0.0.1:0" \
    "READY endpoint=127.0.0.1:65536" "READY endpoint=127.0.0.1:123456" \
    "READY endpoint=127.0.0.1:8x" "READY endpoint=127.0.0.1:-1" \
    "READY endpoint=127.0.0.1:80 extra" "READY rpc=127.0.0.1:80" "READY rpc=127.0.0.1:80 " \
    "READY rpc=127.0.0.1:80 metrics=" "READY rpc=127.0.0.1:80 metrics=127.0.0.1:0" \
    "READY rpc=127.0.0.1 metrics=127.0.0.1:81" \
    "READY rpc=127.0.0.1:80 metrics=127.0.0.1:81 extra" \
    "READY metrics=127.0.0.1:81 rpc=127.0.0.1:80" "READY rpc=127.0.0.1:80  metrics=127.0.0.1:81"; do
  check "refuses '$bad'" not mc_parse_ready "$bad"
  check "nothing set by '$bad'" [ -z "$MC_READY_KIND$MC_READY_RPC$MC_READY_ENDPOINT" ]
done

# ---- mc_metric ------------------------------------------------------------------------------
printf '%s\n' '# HELP a_total things' '# TYPE a_total counter' 'a_total 12' 'a_total_x 99' \
  'b{le="1"} 3' 'b 4.5' >"$tmp/m.txt"
printf 'c 7' >>"$tmp/m.txt" # last line without a newline
check "a_total" [ "$(mc_metric "$tmp/m.txt" a_total)" = 12 ]
check "a_total_x" [ "$(mc_metric "$tmp/m.txt" a_total_x)" = 99 ]
check "unlabelled b" [ "$(mc_metric "$tmp/m.txt" b)" = 4.5 ]
check "last line" [ "$(mc_metric "$tmp/m.txt" c)" = 7 ]
check "a prefix is not the name" not mc_metric "$tmp/m.txt" a
check "a comment is not a sample" not mc_metric "$tmp/m.txt" HELP

# ---- mc_parse_opts / mc_need_bins / mc_workdir --------------------------------------------
printf '%s\n' '#!/bin/sh' '# usage: drv [--rounds N] [--working-set B]' '#   --rounds  rounds' \
  'body' >"$tmp/drv.sh"
ROUNDS=3 WS=1GiB
mc_parse_opts 3 rounds=ROUNDS working-set=WS -- --working-set 2GiB --rounds 7
check "option set" [ "$ROUNDS" = 7 ]
check "dashed option set" [ "$WS" = 2GiB ]
mc_parse_opts 3 rounds=ROUNDS -- --rounds ""
check "an empty value is a value" [ -z "$ROUNDS" ]
opts() { (mc_parse_opts 3 rounds=ROUNDS working-set=WS -- "$@") >"$tmp/opts.out" 2>&1; }
( opts --bogus 1 ) && st=0 || st=$?
check "unknown option: exit 2" [ "$st" = 2 ]
check "unknown option: said" grep -q "unknown argument: --bogus" "$tmp/opts.out"
( opts --rounds ) && st=0 || st=$?
check "missing value: exit 2" [ "$st" = 2 ]
check "missing value: said" grep -q -- "--rounds needs a value" "$tmp/opts.out"
bash -c '. "$1"; mc_parse_opts 3 rounds=R -- --help' "$tmp/drv.sh" \
  "$here/../scripts/bench/lib.sh" >"$tmp/help.out" 2>&1 && st=0 || st=$?
check "help: exit 0" [ "$st" = 0 ]
check "help: the usage lines" [ "$(cat "$tmp/help.out")" = "$(sed -n 2,3p "$tmp/drv.sh")" ]
mkdir "$tmp/bin"
printf '#!/bin/sh\n' >"$tmp/bin/tool_a"
printf '#!/bin/sh\n' >"$tmp/bin/tool_b"
chmod +x "$tmp/bin/tool_a"
check "bins there" mc_need_bins "$tmp/bin" tool_a
( mc_need_bins "$tmp/bin" tool_a tool_b ) 2>"$tmp/need.out" && st=0 || st=$?
check "not executable: exit 1" [ "$st" = 1 ]
check "not executable: named" grep -q "tool_b not found in $tmp/bin" "$tmp/need.out"
( mc_need_bins "$tmp/bin" nothing_here ) 2>/dev/null && st=0 || st=$?
check "missing: exit 1" [ "$st" = 1 ]
: >"$tmp/wd.out"
(TMPDIR=$tmp; mc_workdir wd; [ -d "$TMP" ] && [ -f "$LOG" ] && echo "$TMP $LOG" >"$tmp/wd.out") || :
check "workdir made" [ -s "$tmp/wd.out" ]
read -r wd_tmp wd_log <"$tmp/wd.out" || :
check "workdir under TMPDIR" [ "${wd_tmp#"$tmp"/mc_wd.}" != "$wd_tmp" ]
check "workdir removed at exit" [ ! -e "$wd_tmp" ]
check "its log kept" [ -f "$wd_log" ]
rm -f "$wd_log"

# ---- mc_start_ready / mc_stop_checked / mc_cleanup ------------------------------------------
mc_start_ready "$tmp" good sh -c 'echo starting >&2; echo "READY endpoint=127.0.0.1:4242"; exec sleep 30'
check "started" [ "$MC_READY_ENDPOINT" = 127.0.0.1:4242 ] && [ "$MC_READY" = "READY endpoint=127.0.0.1:4242" ]
good=$MC_PID
check "good is recorded" [ "${MC_CHILDREN[*]}" = "$good" ]
check "good is running" kill -0 "$good"
check "stderr went to the log" grep -q starting "$tmp/good.log"
check "TERM: killed by the signal" not mc_stop_checked "$good" 5
check "status 128+15" [ "$MC_STATUS" = 143 ]
check "good forgotten" [ "${#MC_CHILDREN[@]}" = 0 ]

mc_start_ready "$tmp" polite sh -c 'trap "exit 0" TERM; echo "READY rpc=127.0.0.1:1 metrics=127.0.0.1:2"; while :; do sleep 0.1; done'
check "master form" [ "$MC_READY_KIND" = master ] && [ "$MC_READY_METRICS" = 127.0.0.1:2 ]
check "exit 0 on TERM" mc_stop_checked "$MC_PID" 5
check "status 0" [ "$MC_STATUS" = 0 ]

MC_READY_SECS=1
check "silent child refused" not mc_start_ready "$tmp" silent sleep 30
check "silent: why" grep -q "no READY line within 1 s" <<<"$MC_WHY"
check "silent: stopped" [ "${#MC_CHILDREN[@]}" = 0 ] && not kill -0 "$MC_PID" 2>/dev/null
check "dying child refused" not mc_start_ready "$tmp" dying sh -c 'echo "bad flag" >&2; exit 2'
check "dying: why" grep -q "dying exited before READY: bad flag" <<<"$MC_WHY"
check "chatty child refused" not mc_start_ready "$tmp" chatty sh -c 'echo hello; exec sleep 30'
check "chatty: why" grep -q "printed 'hello' instead of a READY line" <<<"$MC_WHY"
check "chatty: stopped" not kill -0 "$MC_PID" 2>/dev/null
unset MC_READY_SECS

mc_start_ready "$tmp" left sh -c 'echo "READY endpoint=127.0.0.1:1"; exec sleep 30'
left=$MC_PID
mc_cleanup
check "mc_cleanup stops what is left" not kill -0 "$left" 2>/dev/null

if [ "$fails" != 0 ]; then
  echo "test_bench_lib: $fails check(s) failed" >&2
  exit 1
fi
echo "test_bench_lib: all checks passed"
