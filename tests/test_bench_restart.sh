#!/bin/sh
# mooncake_bench restart on a small set: its JSON line is well formed, every object came back
# with its own bytes after each master SIGKILL and restart (back == objects, wrong == 0), and
# the times are in order (first Get <= all known <= all read back).
#   test_bench_restart.sh MOONCAKE_BENCH
set -u
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$1" restart --objects 500 --runs 2 --pause_ms 200 --wait 30 >"$out"
rc=$?
cat "$out"
[ "$rc" -eq 0 ] || { echo "mooncake_bench restart exited $rc" >&2; exit 1; }
python3 - "$out" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
assert len(lines) == 1, "want one JSON line, got %d" % len(lines)
r = json.loads(lines[0])
assert r["bench"] == "restart" and r["runs"] == 2, r
assert r["objects"] == 500 and r["back"] == r["objects"], r
assert r["wrong"] == 0, r
assert 0 < r["seconds_to_first_get"] <= r["seconds_to_all"] <= r["seconds_to_all_read"], r
PY
