#!/usr/bin/env bash
# sanitizer-build.sh [TARGET...]: configure and build ZeroTensor's sanitizer build, the
# one build both scripts/fuzz.sh (the libFuzzer targets) and scripts/sanitize.sh (the CPU test
# suite under ASan + UBSan) use: ${FUZZ_BUILD_DIR:-build-fuzz}, clang, RelWithDebInfo, CPU only,
# every object compiled with -fsanitize=fuzzer-no-link,address,undefined (CMake option ZT_FUZZ;
# fuzzer-no-link only adds libFuzzer's coverage counters, which a test program never reads).
# No TARGET: everything (the tests, the tools, the benchmarks, the fuzz targets).
#
# It is also the build with every optional package hidden: no CUDA (so no cuDNN, no NCCL) and no
# libtorch (CMAKE_DISABLE_FIND_PACKAGE_Torch), whatever this machine has installed. It configures
# and builds every target a machine with only scripts/install-deps.sh's packages builds, benchmarks
# included, so code that compiles only beside an optional package fails here, in CI. A new optional
# package is hidden here too (docs/testing.md, "A fresh machine").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
command -v clang++ >/dev/null || { echo "error: clang++ is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZT_FUZZ=ON \
  -DZT_CUDA=OFF -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON \
  -DZT_BUILD_TESTS=ON -DZT_BUILD_BENCH=ON -DZT_NATIVE=OFF -DZT_TEST_GLOB='test_*.cpp' >/dev/null
if (($#)); then
  cmake --build "$BUILD" -j"$(nproc)" --target "$@"
else
  cmake --build "$BUILD" -j"$(nproc)"
fi
