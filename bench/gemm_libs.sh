#!/usr/bin/env bash
# bench/gemm_libs.sh — the float32 GEMM libraries (OpenBLAS, BLIS, oneDNN, Eigen) on the GEMM shapes
# of one training step of gpt-mini and llama-mini (B = 8, T = 256), 1 and 2 threads, against the
# measured FMA ceiling. Writes bench/results/gemm_libs.md (and .json). The build's default
# library (CMake ZT_GEMM, core/kernels/gemm_libs.h) is chosen from this table.
# Then the end-to-end check: alternated training steps (bench_train_step --gemm-lib) of each model
# with OpenBLAS and oneDNN, PAIRS rounds per thread count, the ratio oneDNN / OpenBLAS per round.
# Usage: bench/gemm_libs.sh [--reps 7] [--pairs 3]   (needs the build in ${BUILD_DIR:-build}, bench on)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
REPS=7; PAIRS=3
while (($#)); do case "$1" in --reps) REPS=$2; shift 2;; --pairs) PAIRS=$2; shift 2;; *) echo "unknown flag $1" >&2; exit 2;; esac; done
[ -x "$BUILD/bench/bench_gemm_libs" ] || BUILD_DIR="$BUILD" bash "$ROOT/scripts/build.sh" -DZT_BUILD_BENCH=ON
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
md="$ROOT/bench/results/gemm_libs.md"; json="$ROOT/bench/results/gemm_libs.json"
: > "$json"
{
  echo "# float32 GEMM libraries on the training step's shapes"
  echo
  echo "- date: $(date -u +%F), machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(uname -sr)"
  echo "- command: \`bench/gemm_libs.sh --reps $REPS --pairs $PAIRS\` (bench/gemm_libs.cpp: each shape 2 warmups then the median of $REPS calls;"
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
  echo "## End to end: training steps, OpenBLAS against oneDNN"
  echo
  echo "bench_train_step (B = 8, T = 256, 4 timed steps after 1 warmup, median) with --gemm-lib openblas, then onednn, $PAIRS rounds"
  echo "per model and thread count; ratio = oneDNN ms / OpenBLAS ms per round (below 1: oneDNN faster)."
  echo
  echo "| model | threads | OpenBLAS ms (median) | oneDNN ms (median) | ratio median | ratio range |"
  echo "|---|---|---|---|---|---|"
  for model in gpt-mini llama-mini; do
    for th in 1 2; do
      : > "$md.ab"
      for ((i = 0; i < PAIRS; ++i)); do
        for lib in openblas onednn; do
          "$BUILD/bench/bench_train_step" --model "$model" --batch 8 --seq 256 --steps 4 --warmup 1 --threads "$th" \
            --gemm-lib "$lib" 2>/dev/null | tail -n 1 >> "$md.ab"
        done
      done
      python3 - "$md.ab" "$model" "$th" <<'PY'
import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
o = [x['ms_per_step_median'] for x in r if x['gemm_lib'] == 'openblas']
d = [x['ms_per_step_median'] for x in r if x['gemm_lib'] == 'onednn']
q = [b / a for a, b in zip(o, d)]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {statistics.median(o):.0f} | {statistics.median(d):.0f} | **{statistics.median(q):.3f}** | {min(q):.3f} - {max(q):.3f} |")
PY
    done
  done
  rm -f "$md.ab"
  echo
} > "$md.tmp"
mv "$md.tmp" "$md"
cat "$md"
