#!/usr/bin/env bash
# Fuzzes the wire-facing parsers with libFuzzer (clang, ASan+UBSan): builds the targets in
# $FUZZ_BUILD_DIR (default build-fuzz) and runs each for SECONDS (default 300).
#   scripts/fuzz.sh [SECONDS] [TARGET...]     targets: master peer disk gate peer_disk client
#                                             rdma_conn (default: all)
# Targets (tests/fuzz/): master = one client connection's bytes to mooncake_master (framing and
# every method's decoder and handler on a manual-ticks master); peer = one peer connection's
# bytes to a client's peer server holding a segment; disk = one extent file given to the
# LOCAL_DISK store's start-up scan (record headers, lengths, CRCs, tombstones, torn tails).
# Each run starts from the checked-in seeds (tests/fuzz/corpus/<target>) and the regression
# inputs (tests/fuzz/regressions/<target>); what it discovers goes to a scratch corpus, so the
# tree is left as it was. A crash, sanitizer report, leak, timeout (10 s) or RSS above 2 GiB
# fails the script and leaves the input in $FUZZ_BUILD_DIR/artifacts/<target>/: fix the bug,
# then add the input to tests/fuzz/regressions/<target>/ so every test build replays it
# (fuzz_<target>_replay in CTest).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(master peer disk gate peer_disk client rdma_conn)
dir=${FUZZ_BUILD_DIR:-build-fuzz}
GEN=()
if command -v ninja >/dev/null 2>&1; then GEN=(-G Ninja); fi
if [ ! -f "$dir/CMakeCache.txt" ]; then
  # RDMA off: the fuzz targets do not need it, and it keeps the clang build short.
  CC=clang CXX=clang++ cmake -S . -B "$dir" "${GEN[@]}" -DMC_SANITIZE=fuzzer -DMC_TEST_HOOKS=ON \
    -DMC_WITH_RDMA=OFF >/dev/null
fi
build_targets=()
for t in "${targets[@]}"; do build_targets+=("fuzz_$t"); done
cmake --build "$dir" -j "${MC_JOBS:-$(nproc)}" --target "${build_targets[@]}"

status=0
for t in "${targets[@]}"; do
  scratch=$(mktemp -d)
  art="$dir/artifacts/$t"
  mkdir -p "$art"
  seeds=(tests/fuzz/corpus/"$t")
  [ -d tests/fuzz/regressions/"$t" ] && seeds+=(tests/fuzz/regressions/"$t")
  echo "== fuzz $t: ${secs}s"
  if ! ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
      "$dir/bin/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$art/" "$scratch" "${seeds[@]}" \
      >"$dir/fuzz_$t.log" 2>&1; then
    status=1
    echo "== fuzz $t: FAILED (input in $art, log $dir/fuzz_$t.log)" >&2
    grep -E "ERROR|SUMMARY|Test unit written" "$dir/fuzz_$t.log" | head -20 >&2 || true
  else
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|cov: .* DONE|DONE" \
      "$dir/fuzz_$t.log" | tail -3
  fi
  rm -rf "$scratch"
done
exit $status
