#!/usr/bin/env bash
# bench/mpi_yield.sh — what a rank's waiting costs the kernels beside it: the same training runs on
# the cluster in a box (scripts/cluster.sh), with OpenMPI spinning while a collective waits for the
# other ranks (mpi_yield_when_idle 0, OpenMPI's default where it counts no more ranks than slots)
# and yielding the core (1, the MPI backend's default: dist/mpi_process_group.cpp). Each rank runs
# its collectives on a communication thread beside its compute threads, so a spinning wait takes
# a core's share from the kernels. Per layout and variant (bench/zero_variant.sh): the median step
# time of each setting (steps after the first) and their ratio. Prints a markdown table.
#
# Usage: bench/mpi_yield.sh [--model gpt-mini] [--steps 7] [--layouts "1x2 2x2"]
#                           [--variants "s0 s3 qwZ qgZ"] [--batch 4] [--seq 128]
# Needs root (network namespaces); exits 77 where the box cannot be built.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
MODEL=gpt-mini STEPS=7 LAYOUTS="1x2 2x2" VARIANTS="s0 s3 qwZ qgZ" BATCH=4 SEQ=128
while (($#)); do case "$1" in
  --model) MODEL=$2; shift 2;; --steps) STEPS=$2; shift 2;; --layouts) LAYOUTS=$2; shift 2;;
  --variants) VARIANTS=$2; shift 2;; --batch) BATCH=$2; shift 2;; --seq) SEQ=$2; shift 2;;
  *) echo "bench/mpi_yield.sh: unknown flag $1" >&2; exit 2;; esac; done
source "$ROOT/bench/zero_variant.sh"  # defines: zero_variant_config
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# median step ms of one run: layout, variant, yield setting
run() {
  local nodes=${1%x*} ranks=${1#*x} rc=0
  zero_variant_config "$2" "$ranks" "$BATCH" >"$tmp/config.json" || exit 2
  # mpirun hands its own OMPI_MCA_* variables to every rank; the backend keeps a value it finds set
  OMPI_MCA_mpi_yield_when_idle=$3 OMP_NUM_THREADS=1 bash "$ROOT/scripts/cluster.sh" box --name zyield --subnet 10.74.0 \
    --nodes "$nodes" --ranks "$ranks" -- "$BUILD/zt-train" --model "$MODEL" --train "$ROOT/data/corpus/train.txt" \
    --config "$tmp/config.json" -t "$SEQ" --steps "$STEPS" --dist mpi --threads 1 --seed 1 \
    --log "$tmp/log.jsonl" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" = 77 ] && { cat "$tmp/err" >&2; exit 77; }
  [ "$rc" = 0 ] || { echo "bench/mpi_yield.sh: $1 $2 yield $3 failed ($rc):" >&2; tail -20 "$tmp/err" >&2; exit 1; }
  python3 -c 'import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
print("%.0f" % statistics.median(r["step_ms"] for r in rows))' "$tmp/log.jsonl"
}

echo "| layout | variant | spinning ms/step | yielding ms/step | yielding / spinning |"
echo "|---|---|---:|---:|---:|"
for layout in $LAYOUTS; do
  for v in $VARIANTS; do
    spin=$(run "$layout" "$v" 0)
    yield=$(run "$layout" "$v" 1)
    echo "| $layout | $v | $spin | $yield | $(python3 -c "print(f'{$yield / $spin:.3f}')") |"
  done
done
