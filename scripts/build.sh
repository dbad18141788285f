#!/usr/bin/env bash
# Configures and builds into $BUILD_DIR (default build/). Extra arguments go to cmake, e.g.
#   scripts/build.sh -DMC_SANITIZE=address      (ASan+UBSan)
#   BUILD_DIR=build-tsan scripts/build.sh -DMC_SANITIZE=thread
#   scripts/build.sh -DMC_WITH_RDMA=OFF
#   scripts/build.sh -DMC_TEST_HOOKS=ON          (fault-injection hooks and the tests; default OFF)
# Executables land in $BUILD_DIR/bin, libraries in $BUILD_DIR/lib.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
GEN=()
if command -v ninja >/dev/null 2>&1; then GEN=(-G Ninja); fi
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" "${GEN[@]}" "$@"
elif [ $# -gt 0 ]; then
  cmake -S . -B "$BUILD_DIR" "$@"
fi
cmake --build "$BUILD_DIR" -j "${MC_JOBS:-$(nproc)}"
