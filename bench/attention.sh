#!/usr/bin/env bash
# bench/attention.sh — the P-saving vs the tiled (FlashAttention-2) CPU attention, forward +
# backward time and peak bytes (bench/attention.cpp), written to bench/results/attention.md with
# the command, the machine and the date. Builds bench_attention only (in ${BUILD_DIR:-build}).
# Usage: bench/attention.sh [bench_attention flags]   (default: T 256,1024,4096, B 8,8,2, threads 1,2)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DZT_BUILD_BENCH=ON >/dev/null
cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" --target bench_attention >/dev/null
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
table="$(mktemp)"
start=$(date +%s)
"$BUILD/bench/bench_attention" --reps "${REPS:-5}" --out "$table" "$@" >&2
elapsed=$(( $(date +%s) - start ))
out="$ROOT/bench/results/attention.md"
{
  echo "# Causal attention on the CPU: P-saving vs tiled (FlashAttention-2), forward + backward"
  echo
  echo "- date: $(date -u +%F), machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(uname -sr);" \
       "shared with other jobs, so the numbers are indicative (see the load averages under the table)"
  echo "- command: \`bench/attention.sh $*\` (took ${elapsed} s): \`bench_attention --reps ${REPS:-5} $*\`" \
       "(Release, -march=native, OMP_WAIT_POLICY=PASSIVE)"
  echo
  cat "$table"
} > "$out"
rm -f "$table"
cat "$out"
