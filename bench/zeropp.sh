#!/usr/bin/env bash
# bench/zeropp.sh — ZeRO++ on the cluster in a box (scripts/cluster.sh): stage 3, then stage 3 with
# each of ZeRO++'s parts (qwZ: quantized weight all-gather; hpZ: the backward's all-gather inside
# the node; qgZ: the gradient reduce-scatter as a quantized hierarchical all-to-all), then all
# three, for each layout and link setting. Per run: the median step time (steps after the first),
# the bytes this rank moved per step (rank 0, every group, ring convention; all-to-all blocks per
# link), the inter-node bytes of the ring model (all ranks, per step, from zt-train's summary: the
# setup's share included), the bytes really sent on the nodes' links (eth0 counters, all nodes,
# per step, launch and setup included), and each of those against stage 3's (the paper's claim:
# 4x fewer inter-node bytes, 2.16x-2.4x the throughput on slow links). Prints a markdown table and
# writes JSON lines.
#
# Each run's settings go in a generated DeepSpeed-style config (stage 3, the variant's ZeRO++ keys,
# bf16 with --precision bf16: the paper's baseline moves 2-byte weights and gradients). Two
# baselines, each labelled in the table (--baselines, both by default, in this order):
#   deepspeed  DeepSpeed's defaults (stage3_max_reuse_distance and stage3_max_live_parameters 1e9):
#              a small model's units stay gathered from their forward to their backward, so stage 3
#              moves about 2 Psi a step and hpZ has little to serve: the baseline a DeepSpeed user
#              of a model this size compares with;
#   3psi       stage3_max_reuse_distance 0: each unit is freed after its forward and gathered again
#              for its backward, as in a model too large to stay gathered (the ZeRO++ paper's
#              regime, its 18B+ models): stage 3 moves 3 Psi.
#
# qgZ's wire format: DeepSpeed's by default (variants qgZ, all); qgZ-blocks and all-blocks run
# ours (zero_quantized_gradients_format "blocks": fixed blocks, float32 sums) on the same box.
#
# Usage: bench/zeropp.sh [--model gpt-mini] [--steps 6] [--layouts "2x2"] [--links "1gbit 100mbit"]
#                        [--variants "stage3 qwZ hpZ qgZ all"] [--precision fp32|bf16] [--batch 4]
#                        [--seq 128] [--baselines "deepspeed 3psi"] [--json FILE]
#        (variants also qgZ-blocks, all-blocks)
# Needs root (network namespaces); exits 77 where the box cannot be built.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
MODEL=gpt-mini STEPS=6 LAYOUTS="2x2" LINKS="1gbit 100mbit" VARIANTS="stage3 qwZ hpZ qgZ all" PREC=fp32 BATCH=4 SEQ=128 JSON=""
BASELINES="deepspeed 3psi"
while (($#)); do case "$1" in
  --model) MODEL=$2; shift 2;; --steps) STEPS=$2; shift 2;; --layouts) LAYOUTS=$2; shift 2;;
  --links) LINKS=$2; shift 2;; --variants) VARIANTS=$2; shift 2;; --batch) BATCH=$2; shift 2;;
  --seq) SEQ=$2; shift 2;; --json) JSON=$2; shift 2;; --precision) PREC=$2; shift 2;;
  --baselines) BASELINES=$2; shift 2;;
  *) echo "bench/zeropp.sh: unknown flag $1" >&2; exit 2;; esac; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
[ -n "$JSON" ] && : >"$JSON"

case "$PREC" in fp32) bf16=false;; bf16) bf16=true;; *) echo "bench/zeropp.sh: --precision $PREC: expected fp32 or bf16" >&2; exit 2;; esac
for b in $BASELINES; do case "$b" in deepspeed|3psi) ;; *) echo "bench/zeropp.sh: --baselines: unknown '$b' (deepspeed, 3psi)" >&2; exit 2;; esac; done
echo "| baseline | layout | link | variant | ms/step | speed-up | bytes/rank/step | inter-node, ring model (all ranks) | vs stage 3 | on the wire (all nodes) | vs stage 3 | last loss |"
echo "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for baseline in $BASELINES; do
reuse=""; [ "$baseline" = 3psi ] && reuse='"stage3_max_reuse_distance": 0, '
for layout in $LAYOUTS; do
  nodes=${layout%x*}; ranks=${layout#*x}
  for link in $LINKS; do
    shaping=(); [ "$link" != none ] && shaping=(--link "$link")
    rm -f "$tmp/base.json"
    for v in $VARIANTS; do
      qw=false hpz=1 qg=false fmt=deepspeed
      case "$v" in
        stage3) ;;
        qwZ) qw=true;;
        hpZ) hpz=$ranks;;
        qgZ) qg=true;;
        qgZ-blocks) qg=true fmt=blocks;;
        all) qw=true hpz=$ranks qg=true;;
        all-blocks) qw=true hpz=$ranks qg=true fmt=blocks;;
        *) echo "bench/zeropp.sh: unknown variant $v (stage3, qwZ, hpZ, qgZ, qgZ-blocks, all, all-blocks)" >&2; exit 2;;
      esac
      cat >"$tmp/config.json" <<EOF
{"train_micro_batch_size_per_gpu": $BATCH, "gradient_clipping": 1.0, "bf16": {"enabled": $bf16},
 "zero_optimization": {"stage": 3, ${reuse}
                       "zero_quantized_weights": $qw, "zero_hpz_partition_size": $hpz,
                       "zero_quantized_gradients": $qg, "zero_quantized_gradients_format": "$fmt"}}
EOF
      rc=0
      OMP_NUM_THREADS=1 bash "$ROOT/scripts/cluster.sh" box --name zpp --subnet 10.77.0 --nodes "$nodes" \
        --ranks "$ranks" "${shaping[@]}" -- "$BUILD/zt-train" --model "$MODEL" --train "$ROOT/data/corpus/train.txt" \
        --config "$tmp/config.json" -t "$SEQ" --steps "$STEPS" --dist mpi --threads 1 --seed 1 \
        --log "$tmp/log.jsonl" >"$tmp/out" 2>"$tmp/err" || rc=$?
      [ "$rc" = 77 ] && { cat "$tmp/err" >&2; exit 77; }
      [ "$rc" = 0 ] || { echo "bench/zeropp.sh: $layout $link $v failed ($rc):" >&2; tail -20 "$tmp/err" >&2; exit 1; }
      python3 - "$tmp/log.jsonl" "$tmp/err" "$layout" "$link" "$v" "$JSON" "$tmp/base.json" "$baseline" <<'PY'
import json, os, re, statistics, sys
log, err, layout, link, v, out, base_file, baseline = sys.argv[1:9]
rows = [json.loads(l) for l in open(log)]
ms = statistics.median(r["step_ms"] for r in rows[1:])
per_step = (rows[-1]["comm_bytes"] - rows[0]["comm_bytes"]) / (len(rows) - 1)
text = open(err).read()
inter = re.search(r"inter-node \(ring model\)\n((?:\s+\d+ .*\n)+)", text)
def parse(s):
    n, u = s.split(); return float(n) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[u]
inter_total = sum(parse(" ".join(l.split()[-2:])) for l in inter.group(1).splitlines()) / len(rows) if inter else float("nan")
wire = re.search(r"on the wire .*all nodes ([0-9.]+) MiB", text)
wire_step = float(wire.group(1)) * 2**20 / len(rows) if wire else float("nan")
# the first variant of a layout and link (stage3 by default) is the baseline of the ratios
if v == "stage3" or not os.path.exists(base_file):
    json.dump({"ms": ms, "inter": inter_total, "wire": wire_step}, open(base_file, "w"))
b = json.load(open(base_file))
mib = lambda x: f"{x / 2**20:.2f} MiB"
ratio = lambda a, b: f"{b / a:.2f}x fewer" if a > 0 else "-"
label = {"deepspeed": "DeepSpeed's defaults", "3psi": "3 Psi (reuse distance 0)"}[baseline]
print(f"| {label} | {layout} | {link} | {v} | {ms:.0f} | {b['ms'] / ms:.2f}x | {mib(per_step)} | {mib(inter_total)} | "
      f"{ratio(inter_total, b['inter'])} | {mib(wire_step)} | {ratio(wire_step, b['wire'])} | {rows[-1]['loss']:.4f} |")
if out:
    with open(out, "a") as f:
        f.write(json.dumps({"baseline": baseline, "layout": layout, "link": link, "variant": v, "ms_per_step": ms, "bytes_per_rank_step": per_step,
                            "inter_node_ring_model": inter_total, "wire_bytes_per_step": wire_step,
                            "speedup_vs_stage3": b["ms"] / ms, "last_loss": rows[-1]["loss"]}) + "\n")
PY
    done
  done
done
done
