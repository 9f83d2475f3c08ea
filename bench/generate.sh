#!/usr/bin/env bash
# bench/generate.sh — generating 512 tokens with the KV cache against full recomputation per token
# (bench/generate.cpp), written to bench/results/generate.md with the command, the machine and the
# date. Builds bench_generate only (in ${BUILD_DIR:-build}).
# Usage: bench/generate.sh [bench_generate flags]   (default: gpt-mini@1024, gpt-mini, llama-mini@1024)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DZT_BUILD_BENCH=ON >/dev/null
cmake --build "$BUILD" -j"${JOBS:-$(nproc)}" --target bench_generate >/dev/null
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
table="$(mktemp)"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s)
"$BUILD/bench/bench_generate" --out "$table" "$@" >&2
elapsed=$(( $(date +%s) - start ))
out="$ROOT/bench/results/generate.md"
{
  echo "# Generation on the CPU: KV cache vs full recomputation per token"
  echo
  echo "- date: $(date -u +%F), machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(uname -sr);" \
       "shared with other jobs, so the numbers are indicative (load averages below)"
  echo "- command: \`bench/generate.sh $*\` (took ${elapsed} s): \`bench_generate $*\`" \
       "(Release, -march=native, OMP_WAIT_POLICY=PASSIVE); greedy, float32, random weights (init_model, seed 1),"
  echo "  a prompt of 16 byte ids; one untimed 8-token warmup per mode"
  echo "- speedup: the no-cache run's total time / the cache's; tokens/s = generated / total (prefill included);"
  echo "  decode tokens/s = the tokens after the first / the time after the prefill"
  echo "- same tokens: generated tokens the two runs share before they first differ"
  echo
  cat "$table"
  echo
  echo "Load average (1/5/15 min) before: ${load_before}, after: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out"
rm -f "$table"
cat "$out"
