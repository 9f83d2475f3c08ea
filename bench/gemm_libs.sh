#!/usr/bin/env bash
# bench/gemm_libs.sh — the float32 GEMM libraries (OpenBLAS, BLIS, oneDNN, Eigen) on the GEMM shapes
# of one training step of gpt-mini and llama-mini (B = 8, T = 256), 1 and 2 threads, against the
# measured FMA ceiling. Writes bench/results/gemm_libs.md (and .json). The build's default
# library (CMake ZT_GEMM, core/kernels/gemm_libs.h) is chosen from this table.
# Usage: bench/gemm_libs.sh [--reps 7]   (needs the build in ${BUILD_DIR:-build}, bench on)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
REPS=7
while (($#)); do case "$1" in --reps) REPS=$2; shift 2;; *) echo "unknown flag $1" >&2; exit 2;; esac; done
[ -x "$BUILD/bench/bench_gemm_libs" ] || BUILD_DIR="$BUILD" bash "$ROOT/scripts/build.sh" -DZT_BUILD_BENCH=ON
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
md="$ROOT/bench/results/gemm_libs.md"; json="$ROOT/bench/results/gemm_libs.json"
: > "$json"
{
  echo "# float32 GEMM libraries on the training step's shapes"
  echo
  echo "- date: $(date -u +%F), machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(uname -sr)"
  echo "- command: \`bench/gemm_libs.sh --reps $REPS\` (bench/gemm_libs.cpp: each shape 2 warmups then the median of $REPS calls;"
  echo "  first number = through zt::gemm as training runs it (its own row split over single-threaded library calls, except for"
  echo "  oneDNN, which threads each call itself: core/kernels/gemm_libs.h's gemm_lib_splits); in parentheses = one call threaded"
  echo "  by the library; attention tiles single-threaded as attention runs them; per-step time = sum of count x zt::gemm time)"
  echo "- libraries: OpenBLAS $(dpkg-query -W -f='${Version}' libopenblas0-openmp 2>/dev/null), BLIS $(dpkg-query -W -f='${Version}' libblis4-openmp 2>/dev/null), oneDNN $(dpkg-query -W -f='${Version}' libdnnl2 2>/dev/null), Eigen $(dpkg-query -W -f='${Version}' libeigen3-dev 2>/dev/null)"
  echo
  for model in gpt-mini llama-mini; do
    echo "## $model"
    echo
    "$BUILD/bench/bench_gemm_libs" --model "$model" --batch 8 --seq 256 --threads 1,2 --reps "$REPS" --json "$json" 2>/dev/null
  done
} > "$md.tmp"
mv "$md.tmp" "$md"
cat "$md"
