# Shared helpers of the scripts/bench/*.sh drivers (sourced, never run on its own).
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

mc_median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
