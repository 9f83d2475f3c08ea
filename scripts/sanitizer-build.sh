#!/usr/bin/env bash
# sanitizer-build.sh [TARGET...]: configure and build ZeroTensor's sanitizer build (issue 17), the
# one build both scripts/fuzz.sh (the libFuzzer targets) and scripts/sanitize.sh (the CPU test
# suite under ASan + UBSan) use: ${FUZZ_BUILD_DIR:-build-fuzz}, clang, RelWithDebInfo, CPU only,
# every object compiled with -fsanitize=fuzzer-no-link,address,undefined (CMake option ZT_FUZZ;
# fuzzer-no-link only adds libFuzzer's coverage counters, which a test program never reads).
# No TARGET: everything (the tests, the tools, the fuzz targets; no benchmarks).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
command -v clang++ >/dev/null || { echo "error: clang++ is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZT_FUZZ=ON \
  -DZT_CUDA=OFF -DZT_BUILD_TESTS=ON -DZT_BUILD_BENCH=OFF -DZT_NATIVE=OFF -DZT_TEST_GLOB='test_*.cpp' >/dev/null
if (($#)); then
  cmake --build "$BUILD" -j"$(nproc)" --target "$@"
else
  cmake --build "$BUILD" -j"$(nproc)"
fi
