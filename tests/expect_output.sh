#!/bin/sh
# Runs a command and checks both its exit status and its output (stdout and stderr together),
# since CTest's PASS_REGULAR_EXPRESSION alone ignores the status (a crash after the line passes).
#   expect_output.sh RC PATTERN... -- COMMAND [ARGS...]
# Passes when COMMAND exits with RC and every PATTERN (grep -E) matches some line of its output.
set -u
want=$1
shift
n=0
while [ "$1" != "--" ]; do
  n=$((n + 1))
  eval "pat_$n=\$1"
  shift
done
shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -ne "$want" ]; then
  echo "expect_output: exit status $rc, expected $want" >&2
  exit 1
fi
i=1
while [ "$i" -le "$n" ]; do
  eval "pat=\$pat_$i"
  if ! grep -Eq -- "$pat" "$out"; then
    echo "expect_output: no line matches: $pat" >&2
    exit 1
  fi
  i=$((i + 1))
done
echo "expect_output: exit status $rc and $n pattern(s) matched"
