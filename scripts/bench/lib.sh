# Shared helpers of the shell drivers: scripts/bench/*.sh, scripts/demo.sh (sourced, never run
# on its own). The one shell reader of the daemons' READY line (mc_parse_ready, the contract of
# src/tools/ready_line.h) and of /metrics samples (mc_metric) lives here.
#
# Every child a driver starts is recorded in MC_CHILDREN and stopped by mc_cleanup on any exit
# (normal end, error under set -e, INT, TERM): TERM first, KILL after 5 s. Commands that must end
# by themselves run under timeout(1) through mc_bounded, which also puts them in a process group
# of their own, so a stuck tool, and whatever it started, is killed as a whole. Call the helpers
# directly, never inside $(...): a command substitution is a subshell, and the children it
# started would be invisible to mc_cleanup.
#
# The sourcing script sets LOG (where children's stderr goes) before calling mc_bounded, and
# installs the traps with mc_install_traps [extra cleanup function].

MC_CHILDREN=()
MC_EXTRA_CLEANUP=""

# Stops one child: its process group when it leads one (the timeout(1) wrappers), else the pid.
mc_stop() { # pid
  local pid=$1
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

mc_forget() { # pid: no longer ours to stop
  local p keep=()
  for p in "${MC_CHILDREN[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  MC_CHILDREN=("${keep[@]}")
}

mc_cleanup() {
  local p
  for p in "${MC_CHILDREN[@]}"; do mc_stop "$p"; done
  MC_CHILDREN=()
  if [ -n "$MC_EXTRA_CLEANUP" ]; then "$MC_EXTRA_CLEANUP"; fi
}

mc_install_traps() { # [extra cleanup function, run after the children are stopped]
  MC_EXTRA_CLEANUP=${1:-}
  trap mc_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# ---- a driver's start: options, the build it measures, its scratch -----------------------------

# Parses a driver's "--NAME VALUE" options: each SPEC is NAME=VAR, and --NAME VALUE sets $VAR
# (e.g. rounds=ROUNDS, working-set=WS). -h or --help prints the usage at the top of the driver
# (lines 2 to LAST of $0) and exits 0; an unknown option, or one without its value, exits 2.
mc_parse_opts() { # last-usage-line spec... -- args...
  local _mc_last=$1 _mc_spec _mc_var
  local -a _mc_specs=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do _mc_specs+=("$1"); shift; done
  [ $# -eq 0 ] || shift
  while [ $# -gt 0 ]; do
    case "$1" in -h | --help) sed -n "2,${_mc_last}p" "$0"; exit 0 ;; esac
    _mc_var=""
    for _mc_spec in "${_mc_specs[@]}"; do
      if [ "$1" = "--${_mc_spec%%=*}" ]; then _mc_var=${_mc_spec#*=}; break; fi
    done
    [ -n "$_mc_var" ] || { echo "unknown argument: $1" >&2; exit 2; }
    [ $# -ge 2 ] || { echo "$1 needs a value" >&2; exit 2; }
    printf -v "$_mc_var" '%s' "$2"
    shift 2
  done
}

# Exits 1, naming the first one missing, unless every PROG is an executable in DIR: the build a
# driver measures must be there.
mc_need_bins() { # dir prog...
  local dir=$1 p
  shift
  for p in "$@"; do
    [ -x "$dir/$p" ] || { echo "$p not found in $dir (build first or pass --bin)" >&2; exit 1; }
  done
}

# A driver's scratch: TMP, a private directory removed at exit, and LOG, where the children's
# stderr goes (kept: the driver names it in its report). Installs the traps (mc_install_traps).
mc_workdir() { # name
  LOG=$(mktemp "${TMPDIR:-/tmp}/mc_$1.XXXXXX.log")
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/mc_$1.XXXXXX")
  mc_install_traps mc_rm_workdir
}
mc_rm_workdir() { rm -rf "$TMP"; }

# Runs cmd under timeout(1) in the background and waits for it; a trapped signal interrupts the
# wait and mc_cleanup stops it. stdout goes to the file OUT, stderr to $LOG. Returns cmd's status
# (124 when it ran past SECONDS).
mc_bounded() { # seconds out cmd...
  local secs=$1 out=$2 pid rc=0
  shift 2
  timeout -k 5 "$secs" "$@" >"$out" 2>>"$LOG" &
  pid=$!
  MC_CHILDREN+=("$pid")
  wait "$pid" || rc=$?
  mc_forget "$pid"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "timed out after ${secs}s: $*" >>"$LOG"
  fi
  return "$rc"
}

# Starts a long-lived server in the background (stdout and stderr as the caller redirects the
# call) and records it; sets MC_PID. The server is stopped by mc_stop or at exit.
mc_start() { # cmd...
  "$@" &
  MC_PID=$!
  MC_CHILDREN+=("$MC_PID")
}

# Polls until cmd succeeds: up to SECONDS, failing early when the process PID has exited.
mc_wait_until() { # seconds pid cmd...
  local secs=$1 pid=$2 i
  shift 2
  for ((i = 0; i < secs * 10; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

mc_listening() { # port: true when a socket listens on it
  ss -Hltn "sport = :$1" 2>/dev/null | grep -q .
}

mc_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# ---- READY lines, daemons, /metrics -----------------------------------------------------------

# Parses a READY line: "READY rpc=HOST:PORT metrics=HOST:PORT" (mooncake_master) or
# "READY endpoint=HOST:PORT" (mooncake_client), exactly, ports 1..65535. Sets MC_READY_KIND
# (master or daemon) and MC_READY_RPC, MC_READY_RPC_PORT, MC_READY_METRICS (master) or
# MC_READY_ENDPOINT, MC_READY_ENDPOINT_PORT (daemon). Returns 1 when the line is neither form.
mc_parse_ready() { # line
  local a='([^ ]+):([0-9]{1,5})' m
  MC_READY_KIND="" MC_READY_RPC="" MC_READY_RPC_PORT="" MC_READY_METRICS=""
  MC_READY_ENDPOINT="" MC_READY_ENDPOINT_PORT=""
  if [[ $1 =~ ^READY\ endpoint=$a$ ]]; then
    m=("${BASH_REMATCH[@]}")
    mc_port_ok "${m[2]}" || return 1
    MC_READY_KIND=daemon MC_READY_ENDPOINT=${m[1]}:${m[2]} MC_READY_ENDPOINT_PORT=${m[2]}
  elif [[ $1 =~ ^READY\ rpc=$a\ metrics=$a$ ]]; then
    m=("${BASH_REMATCH[@]}")
    mc_port_ok "${m[2]}" && mc_port_ok "${m[4]}" || return 1
    MC_READY_KIND=master MC_READY_RPC=${m[1]}:${m[2]} MC_READY_RPC_PORT=${m[2]}
    MC_READY_METRICS=${m[3]}:${m[4]}
  else
    return 1
  fi
}

mc_port_ok() { [[ $1 =~ ^[0-9]+$ ]] && [ "$((10#$1))" -ge 1 ] && [ "$((10#$1))" -le 65535 ]; }

# Starts a daemon with stdout in DIR/NAME.out and stderr in DIR/NAME.log, records it (stopped by
# mc_stop or at exit), and waits up to MC_READY_SECS (default 20) for its first stdout line,
# which must be a READY line (mc_parse_ready's variables are set from it). Sets MC_PID and
# MC_READY (the line). Returns 1 with MC_WHY set when it exits first, stays silent, or prints
# something else; the process is then stopped.
mc_start_ready() { # dir name cmd...
  local dir=$1 name=$2 i
  shift 2
  mc_start "$@" >"$dir/$name.out" 2>"$dir/$name.log"
  MC_READY="" MC_WHY=""
  for ((i = 0; i < ${MC_READY_SECS:-20} * 10; i++)); do
    if [ -s "$dir/$name.out" ] && IFS= read -r MC_READY <"$dir/$name.out" &&
        [ -n "$MC_READY" ]; then
      mc_parse_ready "$MC_READY" && return 0
      MC_WHY="$name printed '$MC_READY' instead of a READY line"
      break
    fi
    if ! kill -0 "$MC_PID" 2>/dev/null; then
      MC_WHY="$name exited before READY: $(tail -n 1 "$dir/$name.log")"
      break
    fi
    sleep 0.1
  done
  [ -n "$MC_WHY" ] || MC_WHY="$name printed no READY line within ${MC_READY_SECS:-20} s"
  mc_stop "$MC_PID"
  mc_forget "$MC_PID"
  return 1
}

# Stops one child with SIGTERM and waits up to SECONDS for it; sets MC_STATUS to its exit status
# (124 when it had to be killed). Returns 0 when that status is 0.
mc_stop_checked() { # pid seconds
  local pid=$1 secs=$2 i st=0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < secs * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    st=124
  else
    wait "$pid" || st=$?
  fi
  mc_forget "$pid"
  MC_STATUS=$st
  [ "$st" = 0 ]
}

# GET http://ADDR/metrics into OUT within SECONDS (default 10). Returns 1 on any failure.
mc_scrape() { # addr out [seconds]
  python3 - "$1" "${3:-10}" >"$2" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(f"http://{sys.argv[1]}/metrics", timeout=float(sys.argv[2])) as r:
    sys.stdout.write(r.read().decode())
PY
}

# Prints the value of the first unlabelled sample NAME of the Prometheus text in FILE; returns
# 1 (printing nothing) when there is none.
mc_metric() { # file name
  awk -v n="$2" '$1 == n && NF == 2 { print $2; f = 1; exit } END { exit !f }' "$1"
}

mc_median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
