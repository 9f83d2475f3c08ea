#!/usr/bin/env bash
# bench/ulysses_seq.sh — Ulysses' claim on this machine's ranks: the longest sequence a rank trains
# under a per-rank memory cap, with the sequence split over all N ranks (sequence_parallel_size N)
# against none (N data-parallel ranks, sequence_parallel_size 1). For each, zt-estimate --fit seq
# finds it on dry runs (train/fit.h), then zt-train checks it for real under --memory-limit-mib:
# the length found trains 3 steps, the next length the planner tried fails with the device's
# out-of-memory error. The model: a small Llama with a long context (RoPE: no position table to
# grow), written to a temporary config file. Prints a markdown table.
#
# Usage: bench/ulysses_seq.sh [--ranks 4] [--cap-mib 64] [--stage 3]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
RANKS=4 CAP=64 STAGE=3
while (($#)); do case "$1" in
  --ranks) RANKS=$2; shift 2;; --cap-mib) CAP=$2; shift 2;; --stage) STAGE=$2; shift 2;;
  *) echo "bench/ulysses_seq.sh: unknown option $1" >&2; exit 2;; esac; done
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
MODEL="$TMP/llama-long.json"
echo '{"family": "llama", "n_layer": 4, "n_embd": 256, "n_head": 8, "n_kv_head": 4, "vocab_size": 256,
  "max_seq_len": 65536}' >"$MODEL"
MPI=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1)
echo "| sequence_parallel_size | longest sequence (zt-estimate --fit seq) | zt-train at it | next length tried | zt-train at it |"
echo "|---|---|---|---|---|"
for sp in 1 "$RANKS"; do
  "$BUILD/zt-estimate" --model "$MODEL" --world-size "$RANKS" --sequence-parallel-size "$sp" --stage "$STAGE" -b 1 \
    --threads 1 --fit seq --device-mib "$CAP" --fit-limit 65536 >"$TMP/fit$sp.txt"
  best=$(sed -n 's/^fits: *seq_len \([0-9]*\).*/\1/p' "$TMP/fit$sp.txt")
  next=$(sed -n 's/^does not fit: *seq_len \([0-9]*\):.*/\1/p' "$TMP/fit$sp.txt")
  run() {
    if "${MPI[@]}" -np "$RANKS" "$BUILD/zt-train" --model "$MODEL" --train "$ROOT/data/corpus/train.txt" -t "$1" -b 1 \
      --steps 3 --threads 1 --zero-stage "$STAGE" --sequence-parallel-size "$sp" --memory-limit-mib "$CAP" \
      >"$TMP/run.log" 2>&1; then
      echo "trains (loss $(grep -o 'loss [0-9.]*' "$TMP/run.log" | tail -1 | cut -d' ' -f2))"
    else
      grep -q "out of memory" "$TMP/run.log" && echo "out of memory ($(grep -m1 -o "category '[a-z]*'" "$TMP/run.log"))" ||
        { echo "failed otherwise:" >&2; tail -3 "$TMP/run.log" >&2; exit 1; }
    fi
  }
  echo "| $sp | $best | $(run "$best") | $next | $(run "$next") |"
done
