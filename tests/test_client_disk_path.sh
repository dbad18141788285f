#!/bin/sh
# mooncake_client's --disk_path flag: a disk tier with no capacity is bad usage (exit 2, with a
# message naming the flag, before any master is contacted); with a capacity the daemon goes on
# to reach the master (nothing listens at the address given here: exit 1, not 2) and has made
# the directory and its client id file.
# Usage: test_client_disk_path.sh BIN_DIR
bin=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/mc_disk_path.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
out=$("$bin/mooncake_client" --master=127.0.0.1:1 --master_wait=0 --disk_path="$dir/d" \
  --disk_capacity=0 --segment_size=1MiB 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 2 ] || { echo "FAIL: exit status $rc, want 2"; exit 1; }
echo "$out" | grep -q 'disk_capacity' || { echo "FAIL: no message"; exit 1; }
"$bin/mooncake_client" --master=127.0.0.1:1 --master_wait=0 --disk_path="$dir/d" \
  --disk_capacity=64MiB --segment_size=1MiB >/dev/null 2>&1
rc=$?
[ "$rc" -eq 1 ] || { echo "FAIL: with --disk_path exit status $rc, want 1"; exit 1; }
[ -s "$dir/d/client_id" ] || { echo "FAIL: no client id kept in --disk_path"; exit 1; }
echo PASS
