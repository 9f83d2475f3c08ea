#!/usr/bin/env bash
# bench/zeropp_volume.sh — the ZeRO++ paper's communication volume (section 3: a GPU's 3M a step at
# stage 3, 0.75M with qwZ, hpZ and qgZ; M the fp16 model's bytes) from the dry run's counters
# (zt-estimate --json: each rank's bytes by collective and by link, CommCounters' ring
# convention). Llama 2 70B on 4 nodes x 8, bf16, T 4096 (the paper's argument does not depend on
# the model): stage 3, stage 3 with qwZ alone (its all-gather's bytes: forward and backward both
# quantized, the forward's half), and stage 3 with all three. Prints markdown.
#
# Usage: bench/zeropp_volume.sh   (seconds)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${BUILD_DIR:-$ROOT/build}" && pwd)"
[ $# = 0 ] || { echo "usage: bench/zeropp_volume.sh" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for v in s3 qwz zpp; do
  z='"stage": 3'
  [ "$v" = qwz ] && z='"stage": 3, "zero_quantized_weights": true'
  [ "$v" = zpp ] && z='"stage": 3, "zero_quantized_weights": true, "zero_hpz_partition_size": 8, "zero_quantized_gradients": true'
  echo "{\"zero_optimization\": {$z}}" >"$tmp/$v.json"
  "$BUILD/zt-estimate" --model "$ROOT/configs/models/llama2-70b.json" --config "$tmp/$v.json" --nodes 4 \
    --gpus-per-node 8 -b 1 -t 4096 --activation-checkpointing --precision bf16 --compute-dtype bf16 --threads 1 \
    --json >"$tmp/vol-$v.json"
done
python3 - "$tmp/vol-s3.json" "$tmp/vol-qwz.json" "$tmp/vol-zpp.json" <<'PY'
import json, sys
s3, qwz, zpp = (json.load(open(f))[-1] for f in sys.argv[1:4])  # the last rank: its ring successor is on the next node
M = 2 * s3["psi"]  # the bf16 model's bytes
c3, cq, cz = s3["comm_per_step"], qwz["comm_per_step"], zpp["comm_per_step"]
base = (c3["all_gather"] + c3["reduce_scatter"]) / M
crossing = (cq["all_gather"] / 2 + cz["all_to_all"]) / M  # qwZ's forward all-gather + qgZ's two hops
print("### The ZeRO++ paper's communication volume (Llama 2 70B, 4 nodes x 8, bf16)\n")
print("| | ZeRO++ paper | ours (dry run, a GPU's bytes a step) |\n|---|---:|---:|")
print(f"| stage 3: all-gather x 2 + reduce-scatter | 3M | {base:.3f}M |")
print(f"| ZeRO++: qwZ's all-gather + qgZ's all-to-all (hpZ's gather stays in the node) | 0.75M | {crossing:.3f}M |")
print(f"| reduction | 4x | {base / crossing:.2f}x |")
print(f"| the bytes on the inter-node link itself (the last rank) | | {c3['inter_node'] / M:.3f}M -> "
      f"{cz['inter_node'] / M:.3f}M ({c3['inter_node'] / cz['inter_node']:.2f}x) |")
PY
