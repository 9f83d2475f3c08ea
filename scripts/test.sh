#!/usr/bin/env bash
# Command 2 of the README: install what is missing, build, and run the whole test suite. Each part
# is a timed stage (scripts/stages.sh); the times of every stage are printed at the end.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/stages.sh"
export BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
stage install bash "$ROOT/scripts/install-deps.sh"
# ZT_TEST_GLOB is reset so a build dir configured for one part still builds every test.
stage build bash "$ROOT/scripts/build.sh" -DZT_TEST_GLOB='test_*.cpp'
stage tests bash -c 'cd "$BUILD_DIR" && ctest --output-on-failure -j"$(nproc)" --timeout 600'
# The CPU test suite again under ASan + UBSan (scripts/sanitize.sh says what runs), in the
# sanitizer build the fuzz targets share; that build is also the one configured with every
# optional package hidden (scripts/sanitizer-build.sh). ZT_SANITIZE=0 skips it.
if [ "${ZT_SANITIZE:-1}" != 0 ]; then
  stage sanitizer bash "$ROOT/scripts/sanitize.sh"
fi
# The readers under libFuzzer + ASan + UBSan, a short run per target (bench/results/fuzz.md holds
# the long runs). ZT_FUZZ_SECONDS=0 skips it.
if [ "${ZT_FUZZ_SECONDS:-15}" != 0 ]; then
  stage fuzz bash "$ROOT/scripts/fuzz.sh" "${ZT_FUZZ_SECONDS:-15}"
fi
