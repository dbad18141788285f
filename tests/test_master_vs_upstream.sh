#!/usr/bin/env bash
# Smoke run of scripts/bench/master_vs_upstream.sh: one very short round of each op on both
# sides (2 callers, tiny key sets). Checks that it exits 0 and prints one well-formed run line
# per side and op and one table row per op with numbers in every figure column; the figures
# themselves are not judged (timings are never asserted in tests). Exits 77 (skipped) when the
# script does, i.e. when upstream's binaries are absent.
#   test_master_vs_upstream.sh BIN_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$here/../scripts/bench/master_vs_upstream.sh" --bin-dir "$1" --rounds 1 --seconds 1 \
  --callers 2 --keys-per-caller 20 --batch 8 --ops get,batch_get,put >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" = 77 ] && exit 77
[ "$rc" = 0 ] || { echo "FAIL: exit status $rc" >&2; exit 1; }
num='[0-9]+(\.[0-9]+)?'
fail=0
for side in ours upstream; do
  for op in get batch_get put; do
    n=$(grep -Ec "^run 1 $side +$op +$num /s  load=$num server=$num core[0-9]+=$num affinity=bench:[0-9,+-]+,master:[0-9,+-]+$" "$out")
    [ "$n" = 1 ] || { echo "FAIL: $n run lines for $side $op, expected 1" >&2; fail=1; }
  done
done
for row in 'GetReplicaList, objects/s' 'BatchGetReplicaList x8, keys/s' 'Put \(PutStart \+ PutEnd\), objects/s'; do
  grep -Eq "^\| $row \| $num \| $num \| $num \| $num-$num \| $num \| $num \| ($num|-) \| $num / $num \| $num / $num \| [^|]+ \|$" "$out" ||
    { echo "FAIL: no well-formed table row for: $row" >&2; fail=1; }
done
grep -Eq '^# .* commit [0-9a-f?]+ load average' "$out" || { echo "FAIL: no header line" >&2; fail=1; }
exit $fail
