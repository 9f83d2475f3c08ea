#!/usr/bin/env bash
# bench/zeropp_converge.sh — does ZeRO++ train as well as stage 3? gpt-mini on the bundled corpus,
# the same seed and batches, on the cluster in a box (2 nodes x 2 ranks, unshaped links: both of
# qgZ's hops real), plain stage 3 against stage 3 with qwZ + hpZ + qgZ (int4 gradients); the
# validation loss every --eval-interval steps and at the end, the relative difference of the
# last one (target: within 1%), and both curves (training and validation loss) drawn side by side.
#
# --seed N (default 1) sets the initialization and the data order of both runs: several seeds
# show how far two stage-3-like runs wander apart on their own. --precision bf16 trains in bf16
# (the precision of ZeRO++'s speed claim; default fp32). --baseline deepspeed runs both at
# DeepSpeed's defaults (units stay gathered from forward to backward); 3psi (the default) with
# stage3_max_reuse_distance 0 (every unit gathered again for its backward: hpZ's secondary serves
# it, quantized under qwZ). --qgz-format blocks runs qgZ in our wire format (fixed blocks,
# float32 sums) instead of DeepSpeed's (the default).
#
# Usage: bench/zeropp_converge.sh [--steps 300] [--eval-interval 50] [--model gpt-mini] [--seed 1]
#                                 [--precision fp32|bf16] [--baseline 3psi|deepspeed]
#                                 [--qgz-format deepspeed|blocks] OUT.png
# Needs root (network namespaces) and gnuplot; exits 77 where the box cannot be built.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
STEPS=300 EVAL=50 MODEL=gpt-mini SEED=1 OUT="" PREC=fp32 BASELINE=3psi FMT=deepspeed
while (($#)); do case "$1" in
  --steps) STEPS=$2; shift 2;; --eval-interval) EVAL=$2; shift 2;; --model) MODEL=$2; shift 2;;
  --seed) SEED=$2; shift 2;; --precision) PREC=$2; shift 2;; --baseline) BASELINE=$2; shift 2;;
  --qgz-format) FMT=$2; shift 2;;
  -*) echo "bench/zeropp_converge.sh: unknown flag $1" >&2; exit 2;;
  *) OUT=$1; shift;; esac; done
[ -n "$OUT" ] || { echo "usage: bench/zeropp_converge.sh [--steps N] [--eval-interval N] [--model M] [--seed N] OUT.png" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "bench/zeropp_converge.sh: gnuplot not found (scripts/install-deps.sh installs gnuplot-nox)" >&2; exit 1; }
case "$PREC" in fp32) bf16=false;; bf16) bf16=true;; *) echo "bench/zeropp_converge.sh: --precision $PREC: expected fp32 or bf16" >&2; exit 2;; esac
case "$BASELINE" in 3psi) reuse='"stage3_max_reuse_distance": 0, ';; deepspeed) reuse="";;
  *) echo "bench/zeropp_converge.sh: --baseline $BASELINE: expected 3psi or deepspeed" >&2; exit 2;; esac
case "$FMT" in deepspeed|blocks) ;; *) echo "bench/zeropp_converge.sh: --qgz-format $FMT: expected deepspeed or blocks" >&2; exit 2;; esac
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

for v in stage3 zeropp; do
  zpp=false hpz=1; [ "$v" = zeropp ] && zpp=true hpz=2
  cat >"$tmp/$v.json" <<EOF
{"train_micro_batch_size_per_gpu": 4, "gradient_clipping": 1.0, "bf16": {"enabled": $bf16},
 "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "betas": [0.9, 0.95], "weight_decay": 0.1}},
 "scheduler": {"type": "cosine", "params": {"warmup_num_steps": 20, "cos_min_ratio": 0.1}},
 "zero_optimization": {"stage": 3, ${reuse}"zero_quantized_weights": $zpp,
                       "zero_hpz_partition_size": $hpz, "zero_quantized_gradients": $zpp,
                       "zero_quantized_gradients_format": "$FMT"}}
EOF
  rc=0
  OMP_NUM_THREADS=1 bash "$ROOT/scripts/cluster.sh" box --name zcv --subnet 10.75.0 --nodes 2 --ranks 2 -- \
    "$BUILD/zt-train" --model "$MODEL" --train "$ROOT/data/corpus/train.txt" --val "$ROOT/data/corpus/val.txt" \
    --config "$tmp/$v.json" -t 128 --steps "$STEPS" --eval-interval "$EVAL" --eval-batches 8 --dist mpi --threads 1 \
    --seed "$SEED" --log "$tmp/$v.jsonl" >"$tmp/$v.out" 2>"$tmp/$v.err" || rc=$?
  [ "$rc" = 77 ] && { cat "$tmp/$v.err" >&2; exit 77; }
  [ "$rc" = 0 ] || { echo "bench/zeropp_converge.sh: $v failed ($rc):" >&2; tail -20 "$tmp/$v.err" >&2; exit 1; }
done

python3 - "$tmp" "$STEPS" <<'PY'
import json, statistics, sys
tmp, steps = sys.argv[1], int(sys.argv[2])
runs = {v: [json.loads(l) for l in open(f"{tmp}/{v}.jsonl")] for v in ("stage3", "zeropp")}
for v, rows in runs.items():
    with open(f"{tmp}/{v}.train", "w") as f:
        for r in rows: f.write(f"{r['step']} {r['loss']}\n")
    with open(f"{tmp}/{v}.val", "w") as f:
        for r in rows:
            if "val_loss" in r: f.write(f"{r['step']} {r['val_loss']}\n")
val = {v: [(r["step"], r["val_loss"]) for r in rows if "val_loss" in r] for v, rows in runs.items()}
ms = {v: statistics.median(r["step_ms"] for r in rows[1:]) for v, rows in runs.items()}
print("| step | val loss, stage 3 | val loss, qwZ + hpZ + qgZ | relative difference |")
print("|---:|---:|---:|---:|")
for (s, a), (_, b) in zip(val["stage3"], val["zeropp"]):
    print(f"| {s} | {a:.4f} | {b:.4f} | {(b - a) / a:+.2%} |")
a, b = val["stage3"][-1][1], val["zeropp"][-1][1]
print(f"\nlast validation loss: stage 3 {a:.4f}, ZeRO++ {b:.4f}: {(b - a) / a:+.2%} (target: within 1%); "
      f"median step: {ms['stage3']:.0f} ms and {ms['zeropp']:.0f} ms (unshaped links)")
PY

gnuplot <<EOF
set terminal pngcairo size 1100,440 font ",11"
set output "$OUT"
set multiplot layout 1,2 title "$MODEL $PREC on the cluster in a box (2 nodes x 2 ranks, seed $SEED, baseline $BASELINE): stage 3 and ZeRO++ (qwZ + hpZ + qgZ int4)"
set xlabel "step"; set ylabel "loss"; set grid; set key top right
set title "training loss"
plot "$tmp/stage3.train" w l lw 1.5 t "stage 3", "$tmp/zeropp.train" w l lw 1.5 t "ZeRO++"
set title "validation loss"
plot "$tmp/stage3.val" w lp lw 1.5 pt 7 t "stage 3", "$tmp/zeropp.val" w lp lw 1.5 pt 5 t "ZeRO++"
unset multiplot
EOF
echo "wrote $OUT"
