#!/bin/sh
# mooncake_client refuses --disk_path (the LOCAL_DISK tier is not wired into the client yet):
# exit 2, as for any bad flag, with a message naming the flag, and before it contacts a master
# (the master address given here has nothing listening).
# Usage: test_client_disk_path.sh BIN_DIR
bin=$1
out=$("$bin/mooncake_client" --master=127.0.0.1:1 --master_wait=0 --disk_path=/nonexistent \
  --segment_size=1MiB 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 2 ] || { echo "FAIL: exit status $rc, want 2"; exit 1; }
echo "$out" | grep -q 'disk_path is not supported yet' || { echo "FAIL: no message"; exit 1; }
# Without it the same command line is not refused as bad usage (it fails to reach the master: 1).
"$bin/mooncake_client" --master=127.0.0.1:1 --master_wait=0 --segment_size=1MiB >/dev/null 2>&1
rc=$?
[ "$rc" -eq 1 ] || { echo "FAIL: without --disk_path exit status $rc, want 1"; exit 1; }
echo PASS
