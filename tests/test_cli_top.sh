#!/usr/bin/env bash
# test_cli_top.sh BIN_DIR - `mooncake_cli top` in a real terminal: tmux (a private server on its
# own socket) runs it in a 120x30 pane against a real master and client daemon; the test reads
# the screen with capture-pane until the header and the daemon's segment row appear, puts keys
# and waits for the live key count to follow, types `q` and checks that top exits (and leaves
# the pane). Every wait has a deadline; every process and file is removed on exit.
set -eu
bin=$1
# process start, READY parsing and cleanup: the shell drivers' helpers
. "$(dirname "$0")/../scripts/bench/lib.sh"
command -v tmux >/dev/null || { echo "test_cli_top: tmux not found (scripts/install-deps.sh)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/mc-top-XXXXXX)
sock="$tmp/tmux.sock"
cleanup() {
  tmux -S "$sock" kill-server 2>/dev/null || true
  rm -rf "$tmp"
}
mc_install_traps cleanup
fail() {
  echo "test_cli_top: $*" >&2
  echo "--- screen:" >&2
  tmux -S "$sock" capture-pane -p -t top >&2 2>/dev/null || true
  exit 1
}
# until SECONDS CMD...: polls CMD every 0.1 s
until_ok() {
  n=$(($1 * 10)); shift
  while [ $n -gt 0 ]; do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
    n=$((n - 1))
  done
  return 1
}
screen_has() { tmux -S "$sock" capture-pane -p -t top | grep -q -- "$1"; }
MC_READY_SECS=10
mc_start_ready "$tmp" master "$bin/mooncake_master" --rpc_address=127.0.0.1 --rpc_port=0 \
  --metrics_host=127.0.0.1 --metrics_port=0 --log_level=warn || fail "$MC_WHY"
addr=$MC_READY_RPC
mc_start_ready "$tmp" client "$bin/mooncake_client" --master="$addr" --segment_size=32MiB \
  --log_level=warn || fail "$MC_WHY"
ep=$MC_READY_ENDPOINT

tmux -S "$sock" -f /dev/null new-session -d -s top -x 120 -y 30 \
  "'$bin/mooncake_cli' --master=$addr top; echo TOP-EXITED=\$?; sleep 30"
until_ok 10 screen_has "mooncake top  master $addr" || fail "no header"
until_ok 10 screen_has "$ep .*OK" || fail "no segment row for $ep"
screen_has "promotion  admitted 0  in flight 0  done 0" || fail "no promotion funnel line"
until_ok 10 screen_has "^keys 0 " || fail "no key count"
for k in 1 2 3; do
  "$bin/mooncake_cli" --master="$addr" put "top-$k" --value "v$k" || fail "put"
done
until_ok 10 screen_has "^keys 3 " || fail "key count did not follow the puts"
# one line per frame, on one screen: the header appears exactly once
[ "$(tmux -S "$sock" capture-pane -p -t top | grep -c '^mooncake top ')" = 1 ] ||
  fail "more than one frame on the screen"
tmux -S "$sock" send-keys -t top q
until_ok 10 screen_has "TOP-EXITED=0" || fail "q did not quit top"
echo "test_cli_top: ok"
