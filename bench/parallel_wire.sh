#!/usr/bin/env bash
# bench/parallel_wire.sh — the grid's collectives on the cluster in a box's wire (scripts/cluster.sh):
# zt-train on a tensor- or sequence-parallel grid whose groups cross the nodes' links, the bytes
# every node sent on its link per step (eth0's counters, TCP/IP headers included) beside the bytes
# the ranks counted for the inter-node links (the ring model, all ranks) and the formula:
#   tp 2 on 2 nodes x 1 rank   Megatron's: (4 L + 2) all-reduces of B T C floats a step, each
#                              2 (tp - 1) / tp of it sent per rank, plus the loss's lse all-gather
#                              (B T floats) and two doubles; no ZeRO traffic (one rank per slice)
#   ... --megatron-sequence-parallel  the same bytes as reduce-scatters and all-gathers, plus 2 L
#                              all-gathers of B T C (the backward's inputs) and the whole parameters'
#                              gradient all-reduces (GPT-2: (6 L + 2) C + maxT C)
#   sp 2 on 2 nodes x 1 rank   Ulysses': per block 2 all-to-alls of B T/sp 3C and 3 of B T/sp C, each
#                              (sp - 1) / sp of it sent; plus ZeRO stage 1 over the 2 ranks: 2 Psi
#                              (N - 1) / N floats (Psi: zt-estimate's padded count)
#   tp 2 x dp 2 on 2 nodes x 2 ranks  the tensor groups inside a node: Megatron's bytes stay off the
#                              wire, which carries ZeRO stage 2's 2 Psi_slice (N - 1) / N over each
#                              slice's 2 replicas (Psi_slice: zt-estimate's padded count of rank 0)
# Per step: the difference between a 2-step and a 6-step run, over 4 (the launch, the setup and the
# first step cancel). Prints a markdown table.
#
# Usage: bench/parallel_wire.sh [--model gpt-micro] [--batch 4] [--seq 128]
# Needs root (network namespaces); exits 77 where the box cannot be built.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
MODEL=gpt-micro BATCH=4 SEQ=128
while (($#)); do case "$1" in
  --model) MODEL=$2; shift 2;; --batch) BATCH=$2; shift 2;; --seq) SEQ=$2; shift 2;;
  *) echo "bench/parallel_wire.sh: unknown flag $1" >&2; exit 2;; esac; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# run NAME NODES RANKS STEPS ARGS...: zt-train on the box; its stderr in $tmp/NAME-STEPS.err
run() {
  local name=$1 nodes=$2 ranks=$3 steps=$4; shift 4
  local rc=0
  OMP_NUM_THREADS=1 bash "$ROOT/scripts/cluster.sh" box --name zwire --subnet 10.78.0 --nodes "$nodes" --ranks "$ranks" \
    -- "$BUILD/zt-train" --model "$MODEL" --train "$ROOT/data/corpus/train.txt" -b "$BATCH" -t "$SEQ" \
    --steps "$steps" --dist mpi --threads 1 --seed 1 "$@" >"$tmp/$name-$steps.out" 2>"$tmp/$name-$steps.err" || rc=$?
  [ "$rc" = 77 ] && { cat "$tmp/$name-$steps.err" >&2; exit 77; }
  [ "$rc" = 0 ] || { echo "bench/parallel_wire.sh: $name ($steps steps) failed ($rc):" >&2; tail -20 "$tmp/$name-$steps.err" >&2; exit 1; }
}
psi() {  # zt-estimate's padded parameter count of rank 0 for: WORLD STAGE [grid flags]
  local world=$1 stage=$2; shift 2
  "$BUILD/zt-estimate" --model "$MODEL" --stage "$stage" --world-size "$world" -b "$BATCH" -t "$SEQ" --threads 1 "$@" \
    --json | python3 -c 'import json,sys; print(next(r for r in json.load(sys.stdin) if r["rank"] == 0)["psi_padded"])'
}
CASES=("tp2|2|1|--zero-stage 1 --tensor-parallel-size 2|0"
       "tp2-msp|2|1|--zero-stage 1 --tensor-parallel-size 2 --megatron-sequence-parallel|0"
       "sp2|2|1|--zero-stage 1 --sequence-parallel-size 2|$(psi 2 1 --sequence-parallel-size 2)"
       "tp2xdp2|2|2|--zero-stage 2 --tensor-parallel-size 2|$(psi 4 2 --tensor-parallel-size 2)")
for c in "${CASES[@]}"; do
  IFS='|' read -r name nodes ranks flags _ <<<"$c"
  for steps in 2 6; do run "$name" "$nodes" "$ranks" "$steps" $flags; done
done
python3 - "$tmp" "$MODEL" "$BATCH" "$SEQ" "${CASES[@]}" <<'PY'
import re, sys
tmp, model, B, T = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
shape = {"gpt-micro": (4, 256, 4, 128), "gpt-mini": (6, 384, 6, 256), "gpt2-nano": (2, 32, 4, 64)}
L, C, H, maxT = shape[model]
UNIT = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
def wire(name, steps):  # all nodes' eth0 bytes of one run
    return float(re.search(r"all nodes ([0-9.]+) MiB", open(f"{tmp}/{name}-{steps}.err").read()).group(1)) * 2**20
def ring_model(name, steps):  # every rank's inter-node bytes (ring model), zt-train's summary
    text = open(f"{tmp}/{name}-{steps}.err").read()
    rows = re.search(r"inter-node \(ring model\)\n((?:\s+\d+ .*\n)+)", text).group(1).splitlines()
    return sum(float(l.split()[-2]) * UNIT[l.split()[-1]] for l in rows)
print(f"{model}, global batch {B} x {T}, float32; per step, all nodes (the difference of a 2- and a 6-step run, over 4)\n")
print("| grid | layout | on the wire | counted, inter-node (ring model) | formula | wire / formula |")
print("|---|---|---:|---:|---:|---:|")
mib = lambda b: f"{b / 2**20:.3f} MiB"
for c in sys.argv[5:]:
    name, nodes, ranks, flags, psi = c.split("|")
    nodes, ranks, psi = int(nodes), int(ranks), int(psi)
    N = nodes * ranks
    w = (wire(name, 6) - wire(name, 2)) / 4
    counted = (ring_model(name, 6) - ring_model(name, 2)) / 4
    n = B * T * C  # one data-parallel rank's B T C (every grid here has one data index per node pair)
    if name in ("tp2", "tp2-msp"):  # 2 ranks, one per node: every tensor-group byte crosses the wire
        per_rank = (4 * L + 2) * n * 4 * 2 * (1 / 2) + (2 * B * T) * 4 * (1 / 2) + 2 * 8 * 2 * (1 / 2)
        if name == "tp2-msp":
            per_rank += 2 * L * n * 4 * (1 / 2) + ((6 * L + 2) * C + maxT * C) * 4 * 2 * (1 / 2)
        formula, what = 2 * per_rank, "Megatron's"
    elif name == "sp2":  # Ulysses over 2 nodes, and ZeRO stage 1 over the same 2 ranks
        Tl = T // 2
        ulysses = L * (2 * B * Tl * 3 * C + 3 * B * Tl * C) * 4 * (1 / 2)
        formula, what = 2 * (ulysses + 2 * psi * 4 * (1 / 2)), "Ulysses' + ZeRO-1's"
    else:  # the tensor groups inside a node: only ZeRO stage 2 over each slice's 2 replicas crosses
        formula, what = N * 2 * psi * 4 * (1 / 2), "ZeRO-2's over the replicas"
    print(f"| {name} ({flags}) | {nodes} x {ranks} | {mib(w)} | {mib(counted)} | {mib(formula)} ({what}) | {w / formula:.3f} |")
PY
