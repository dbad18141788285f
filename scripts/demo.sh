#!/usr/bin/env bash
# The main job, as README's quick start runs it: build, start mooncake_master on free ports,
# show where it listens, scrape its /metrics once, stop it. Cleans up on any exit.
#   BUILD_DIR   build directory (default build/)
#   MC_DEMO_SKIP_BUILD=1   use what is already built
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

if [ "${MC_DEMO_SKIP_BUILD:-0}" != 1 ]; then
  echo "== building ($BUILD_DIR)"
  BUILD_DIR="$BUILD_DIR" ./scripts/build.sh
fi

master="$BUILD_DIR/bin/mooncake_master"
if [ ! -x "$master" ]; then
  echo "== $master is not built yet (the master is still being written); nothing to run."
  exit 0
fi

tmp=$(mktemp -d /tmp/mc_demo.XXXXXX)
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "== starting $master --rpc_port=0 --metrics_port=0"
mkfifo "$tmp/out"
"$master" --rpc_port=0 --metrics_port=0 >"$tmp/out" 2>"$tmp/master.log" &
pid=$!
exec 3<"$tmp/out"

# The master prints one line on stdout once it serves: READY rpc=ADDR:PORT metrics=ADDR:PORT
line=""
if ! read -r -t 20 line <&3; then
  echo "!! the master did not report READY within 20 s; its log:" >&2
  cat "$tmp/master.log" >&2
  exit 1
fi
case "$line" in
  READY\ *) ;;
  *) echo "!! unexpected first line from the master: $line" >&2; exit 1 ;;
esac
rpc=$(sed -n 's/.*rpc=\([^ ]*\).*/\1/p' <<<"$line")
metrics=$(sed -n 's/.*metrics=\([^ ]*\).*/\1/p' <<<"$line")
echo "== master (pid $pid) listens: RPC on $rpc, HTTP /metrics and /health on $metrics"

port=${metrics##*:}
host=${metrics%:*}
case "$host" in 0.0.0.0|"") host=127.0.0.1 ;; esac
url="http://$host:$port/metrics"
echo "== scraping $url"
if command -v curl >/dev/null 2>&1; then
  body=$(curl -fsS --max-time 5 "$url")
else
  exec 4<>"/dev/tcp/$host/$port"
  printf 'GET /metrics HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$host" >&4
  body=$(timeout 5 cat <&4 | tr -d '\r' | sed '1,/^$/d')
  exec 4<&-
fi
if [ -n "$body" ]; then
  sed 's/^/   /' <<<"$body"
  echo "== $(grep -vc '^#' <<<"$body") series"
else
  echo "   (an empty exposition: the master registers no series yet)"
fi

echo "== stopping the master (SIGTERM)"
kill -TERM "$pid"
status=0
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
  echo "!! the master did not stop within 10 s" >&2
  exit 1
fi
wait "$pid" || status=$?
pid=""
echo "== master exited with status $status"
exit "$status"
