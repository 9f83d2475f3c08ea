#!/usr/bin/env bash
# bench/parallel.sh — tensor parallelism under ZeRO on one machine's ranks (docs/parallel.md): the
# same model and global batch on N ranks as tp 1 x dp N, tp 2 x dp N/2, ... at a ZeRO stage, each
# run's memory per rank by category (measured, and its own dry run's), and the bytes per rank per
# step by collective, each held to its formula:
#   all_reduce    Megatron's: (4 L + 2) all-reduces of B T C elements in the compute dtype on the
#                 tensor group, 2 (tp - 1) / tp of them moved per rank (ring convention), plus the
#                 loss's and the gradient norm's doubles;
#   all_gather    the loss's lse (B T floats, all-gathered over the tensor group) beside ZeRO's
#                 parameter gathers over the replica group;
#   model states  params, grads and optim fall by tp x dp for the blocks' and the vocabulary's
#                 weights, by dp for the rest (the norms, wpe, the row-parallel biases).
# A grid written "2s" is tp 2 with Megatron's sequence parallelism (--megatron-sequence-parallel):
# each all-reduce of B T C becomes a reduce-scatter and an all-gather of the same bytes, each
# sub-layer gathers its input again in the backward (2 L more all-gathers of B T C), and the
# gradients of the whole parameters read on one rank's tokens are all-reduced (GPT-2: 6 vectors
# of C per block, ln_f's 2 and wpe's maxT C); its row checks the total bytes against tp's row.
# Prints a markdown table (the rows bench/results/parallel.md records) and writes JSON lines.
#
# Usage: bench/parallel.sh [--model gpt-mini] [--ranks 4] [--tps "1 2 2s"] [--stage 3] [--batch 8]
#                          [--seq 128] [--steps 3] [--json FILE]
#        --batch is the global batch (split over the data-parallel ranks).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
MODEL=gpt-mini RANKS=4 TPS="1 2 2s" STAGE=3 BATCH=8 SEQ=128 STEPS=3 JSON=""
while (($#)); do case "$1" in
  --model) MODEL=$2; shift 2;; --ranks) RANKS=$2; shift 2;; --tps) TPS=$2; shift 2;;
  --stage) STAGE=$2; shift 2;; --batch) BATCH=$2; shift 2;; --seq) SEQ=$2; shift 2;;
  --steps) STEPS=$2; shift 2;; --json) JSON=$2; shift 2;;
  *) echo "bench/parallel.sh: unknown option $1" >&2; exit 2;; esac; done
[ -x "$BUILD/zt-train" ] || { echo "bench/parallel.sh: no $BUILD/zt-train (BUILD_DIR?)" >&2; exit 2; }
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
MPI=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1)
for grid in $TPS; do
  tp=${grid%s}; dp=$((RANKS / tp)); extra=()
  [ "$grid" != "$tp" ] && extra=(--megatron-sequence-parallel)
  "${MPI[@]}" -np "$RANKS" "$BUILD/zt-train" --model "$MODEL" --train "$ROOT/data/corpus/train.txt" -t "$SEQ" \
    -b $((BATCH / dp)) --steps "$STEPS" --seed 7 --threads 1 --zero-stage "$STAGE" --tensor-parallel-size "$tp" \
    "${extra[@]}" --log "$TMP/tp$grid.jsonl" 2>"$TMP/tp$grid.err" ||
    { echo "bench/parallel.sh: tp $grid failed:" >&2; tail -3 "$TMP/tp$grid.err" >&2; exit 1; }
done
python3 - "$TMP" "$MODEL" "$RANKS" "$TPS" "$STAGE" "$BATCH" "$SEQ" "$STEPS" "${JSON:-}" <<'PY'
import json, re, sys
tmp, model, ranks, tps, stage, batch, seq, steps, out = sys.argv[1:]
ranks, stage, batch, seq, steps = int(ranks), int(stage), int(batch), int(seq), int(steps)
UNIT = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
def b(s):  # "1.50 MiB" -> bytes (format_bytes' two decimals)
    v, u = s.split()
    return float(v) * UNIT[u]
shape = {"gpt-mini": (6, 384, 256), "gpt-micro": (4, 256, 128), "gpt2-nano": (2, 32, 64), "gpt2-124m": (12, 768, 1024)}
L, C, maxT = shape[model]  # layers, width, wpe's rows (GPT-2 family only)
rows = []
for grid in tps.split():
    tp, msp = int(grid.rstrip("s")), grid.endswith("s")
    dp = ranks // tp
    err = open(f"{tmp}/tp{grid}.err").read().splitlines()
    losses = [json.loads(l)["loss"] for l in open(f"{tmp}/tp{grid}.jsonl")]
    header = next(l for l in err if l.strip().startswith("rank") and "params" in l).split()[1:]
    i0 = next(i for i, l in enumerate(err) if re.match(r"\s+0\s", l) and i + 1 < len(err) and err[i + 1].strip().startswith("dry run"))
    measured = dict(zip(header, [p for _, p in re.findall(r"(\S+ \S+) / (\S+ \S+)", err[i0])]))
    dry = dict(zip(header, re.findall(r"peak (\S+ \S+)", err[i0 + 1])))
    comm_head = next(i for i, l in enumerate(err) if l.startswith("bytes moved per rank"))
    cols = err[comm_head + 1].split()[1:]
    cells = re.findall(r"(\S+ \S+) \((\d+)\)", err[comm_head + 2])
    comm = {c: b(v) / steps for c, (v, _) in zip(cols, cells)}
    n = (batch // dp) * seq * C  # B T C per rank
    megatron = (4 * L + 2) * 2 * (tp - 1) / tp * n * 4 if tp > 1 else 0
    # sequence parallelism adds the backward's 2 L input all-gathers and the whole parameters'
    # gradient all-reduces (GPT-2: 6 C per block, 2 C, maxT C)
    partial_grads = 2 * (tp - 1) / tp * ((6 * L + 2) * C + maxT * C) * 4 if msp else 0
    partial_grads += 2 * L * (tp - 1) / tp * n * 4 if msp else 0
    total = sum(v for k, v in comm.items() if k != "total")
    rows.append(dict(tp=tp, dp=dp, megatron_sp=msp, grid=grid, measured=measured, dry=dry, exact=measured == dry,
                     total=total, partial_grads=partial_grads,
                     all_reduce=comm["all_reduce"], megatron=megatron, all_gather=comm["all_gather"],
                     reduce_scatter=comm["reduce_scatter"], first_loss=losses[0], last_loss=losses[-1]))
print(f"{model}, {ranks} ranks, ZeRO stage {stage}, global batch {batch} x {seq}, {steps} steps (rank 0; per step: bytes / {steps})\n")
print("| grid | params peak | grads peak | optim peak | activations peak | total peak | = dry run | all_reduce / step | Megatron's (4L+2) B T C | all_gather / step | reduce_scatter / step | all / step (sequence parallel: vs tp's row + its additions) | loss step 1 → last |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
same_tp = {r["tp"]: r for r in rows if not r["megatron_sp"]}
for r in rows:
    m = r["measured"]
    name = f"tp {r['tp']} x dp {r['dp']}" + (", sequence parallel" if r["megatron_sp"] else "")
    ratio = f" ({r['all_reduce'] / r['megatron']:.4f}x)" if r["megatron"] and not r["megatron_sp"] else ""
    vs = ""
    if r["megatron_sp"] and r["tp"] in same_tp:
        vs = f" ({r['total'] / (same_tp[r['tp']]['total'] + r['partial_grads']):.4f}x)"
    print(f"| {name} | {m['params']} | {m['grads']} | {m['optim']} | {m['activations']} | {m['total']} | "
          f"{'yes' if r['exact'] else 'NO'} | {r['all_reduce'] / 2**20:.3f} MiB{ratio} | {r['megatron'] / 2**20:.3f} MiB | "
          f"{r['all_gather'] / 2**20:.3f} MiB | {r['reduce_scatter'] / 2**20:.3f} MiB | {r['total'] / 2**20:.3f} MiB{vs} | "
          f"{r['first_loss']:.4f} → {r['last_loss']:.4f} |")
if out:
    with open(out, "a") as f:
        for r in rows: f.write(json.dumps(dict(model=model, ranks=ranks, stage=stage, batch=batch, seq=seq, **r)) + "\n")
PY
