#!/usr/bin/env bash
# bench/simulate_papers.sh — the ZeRO papers' throughput at their own scale (hundreds of V100s),
# predicted by the step simulator (zt-estimate --time, train/step_time.h) on the V100 DGX-2
# datasheet profile (configs/devices/v100-dgx2.json), beside the numbers the papers published.
#
# Every row states where its shape comes from. Where a paper's own table was not available to us,
# the shape or the batch is an assumption, named in the row. The rows:
#   calibration  Megatron-LM (arXiv 1909.08053, abstract and Table 1): GPT-2 1.2B (40 layers,
#                hidden 1536, 16 heads, vocabulary 51,200, T 1024) on one V100 at 39 TFLOP/s, 30%
#                of peak — the single-GPU pace of the software the ZeRO papers built on. Its batch
#                (8) is our assumption.
#   offload-1    ZeRO-Offload (ATC'21, abstract): 10B on one V100 at about 40 TFLOP/s. Shape, batch
#                and config from DeepSpeed's own script for that run (DeepSpeedExamples
#                Megatron-LM/scripts/ds_zero-offload_10B_pretrain_gpt2_model_parallel.sh and
#                ds_zero-offload_10B_config.json: 50 layers, hidden 4096, 32 heads, micro-batch 10,
#                T 1024, fp16, activation checkpointing to the CPU, stage 2 with cpu_offload).
#   offload-N    the same run on 16 and 128 V100s (the paper: "near linear speedup on up to 128
#                GPUs"): per-GPU throughput against one GPU's.
#   zero-13b     ZeRO (SC'20, abstract and section 10): 13B without model parallelism at about 40
#                TFLOP/s per GPU. Assumed: hidden 4096 and 32 heads as the team's 10B script, 64
#                layers (13.1B), T 1024, stage 2 (the paper's ZeRO-100B is P_os+g), 128 GPUs, and
#                the largest micro-batch whose dry run fits 32 GB (zt-estimate --fit batch).
#   zero-100b    ZeRO (SC'20, abstract and section 10): over 100B parameters on 400 V100s (25 DGX-2
#                nodes) at 15 PFLOP/s, 37.5 TFLOP/s a GPU, with Megatron's tensor parallelism inside
#                each node. Assumed: 125 layers, hidden 8192 (the paper's 100B shape as we recall
#                it; not checked against the paper here), 64 heads, T 1024, tensor parallelism 16
#                (one DGX-2), stage 2 (P_os+g), the vocabulary padded to 50432 (a multiple of 128
#                x 16, as Megatron pads it) and the largest micro-batch whose dry run fits 32 GB.
#   infinity-1t  ZeRO-Infinity / ZeRO-3 Offload (DeepSpeed's blog of 2021-03-08): 1T parameters on
#                512 V100s at 25 PFLOP/s, 49 TFLOP/s a GPU. Shape from the team's 1T model of
#                2022 (128 layers, hidden 25,600, 160 heads; DeepSpeed's Azure blog of 2022-07-26);
#                assumed: T 1024, micro-batch 8, parameters, optimizer and activation checkpoints
#                offloaded to the CPU.
#   zeropp       ZeRO++ (arXiv 2306.10209, abstract; DeepSpeed's blog): up to 2.16x ZeRO-3's
#                throughput on 384 V100s with a 100 Gb/s link between nodes, at 1k and 2k tokens a
#                GPU. Shape from DeepSpeed's ZeRO++ tutorial (18B: 40 layers, hidden 6144, 32 heads,
#                T 512); micro-batches 2 and 4 make 1k and 2k tokens.
#
# Throughput is counted as the papers count it: Megatron-LM's formula (DeepSpeed's Azure blog
# quotes it for its own TFLOP/s), with activation checkpointing's recomputation,
#   F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h))   flops a GPU does in a step of micro-batch B,
# over the predicted step time. Two profiles a row:
#   datasheet  configs/devices/v100-dgx2.json as bundled (today's kernels' fractions of the peak);
#   2019 pace  the same with every on-device compute class's rate scaled by one factor, the one
#              that puts the calibration row on Megatron-LM's published 39 TFLOP/s (the links,
#              PCIe and the host's rates are not scaled).
# A node with one GPU (offload-1, calibration) gives that rank the whole host: the profile's host is
# shared (host_shared), so zt-estimate splits it among the ranks on a node (docs/step-time.md).
# fp16 runs as bf16: the same bytes a value; the V100 profile's peak is its fp16 tensor-core peak.
#
# Usage: bench/simulate_papers.sh [--json FILE]   (prints markdown; about a minute on one core)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${BUILD_DIR:-$ROOT/build}" && pwd)"
JSON=""
while (($#)); do case "$1" in
  --json) JSON=$(realpath -m "$2"); shift 2;;
  *) echo "bench/simulate_papers.sh: unknown flag $1" >&2; exit 2;; esac; done
EST="$BUILD/zt-estimate"
[ -x "$EST" ] || { echo "bench/simulate_papers.sh: $EST not built" >&2; exit 1; }
source "$ROOT/bench/zero_variant.sh"  # defines: zero_variant_config
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
: >"$tmp/rows.jsonl"

# gpt NAME LAYERS HIDDEN HEADS VOCAB T [PADDED_VOCAB]: a Megatron GPT-2 shape (4h MLP, tied
# embeddings); the shape Megatron's formula needs in SHAPE[NAME].
declare -A SHAPE
gpt() {
  SHAPE[$1]="{\"l\": $2, \"h\": $3, \"V\": $5, \"s\": $6}"
  cat >"$tmp/$1.json" <<CFG
{"family": "gpt2", "n_layer": $2, "n_embd": $3, "n_head": $4, "n_kv_head": $4, "ffn_hidden": $(($3 * 4)),
 "vocab_size": $5, "padded_vocab_size": ${7:-$5}, "max_seq_len": $6, "norm_eps": 1e-05, "tie_embeddings": true}
CFG
}
gpt megatron-1.2b 40 1536 16 51200 1024
gpt offload-10b 50 4096 32 50257 1024
gpt zero-13b 64 4096 32 50257 1024
gpt zero-100b 125 8192 64 50257 1024 50432
gpt infinity-1t 128 25600 160 50257 1024
gpt zeropp-18b 40 6144 32 50257 512
cat >"$tmp/s2off.json" <<'CFG'
{"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": true},
                       "reduce_bucket_size": 50000000, "contiguous_gradients": true, "overlap_comm": true}}
CFG
zero_variant_config s3off 16 8 >"$tmp/s3off.json"
zero_variant_config s3 16 1 >"$tmp/s3.json"
zero_variant_config all 16 1 >"$tmp/zpp.json"

# The profiles: datasheet; the inter-node link at 100 Gb/s (ZeRO++'s low-bandwidth cluster: one
# 100 Gb/s InfiniBand link a node, at the datasheet profile's 0.9 of it).
python3 - "$ROOT/configs/devices/v100-dgx2.json" "$tmp" <<'PY'
import json, sys
src, out = sys.argv[1:]
p = json.load(open(src))
json.dump(p, open(f"{out}/datasheet.json", "w"))
slow = json.loads(json.dumps(p))
slow["links"]["inter_node"]["bytes_per_s"] = 100e9 / 8 * 0.9
slow["name"] += ", 100 Gb/s between nodes"
json.dump(slow, open(f"{out}/datasheet_100g.json", "w"))
PY

# run ROW PROFILE MODEL "paper JSON" zt-estimate-args... -> one JSON line (the slowest rank's time).
run() {
  local row=$1 profile=$2 model=$3 paper=$4; shift 4
  local rc=0 t0 t1
  t0=$(date +%s.%N)
  "$EST" --json --precision bf16 --compute-dtype bf16 --threads 1 --model "$tmp/$model.json" "$@" \
    --time "$tmp/$profile.json" \
    >"$tmp/est.json" 2>"$tmp/est.err" || rc=$?
  t1=$(date +%s.%N)
  python3 - "$row" "$profile" "{\"shape\": ${SHAPE[$model]}, ${paper#\{}" "$rc" "$tmp/est.json" "$tmp/est.err" "$t0" "$t1" "$*" \
    >>"$tmp/rows.jsonl" <<'PY'
import json, sys
row, profile, paper, rc, est, err, t0, t1, args = sys.argv[1:]
out = {"row": row, "profile": profile, "args": args, "seconds": float(t1) - float(t0)}
out.update(json.loads(paper))
if rc != "0":
    sys.exit(f"bench/simulate_papers.sh: {row} on {profile} failed: {open(err).read().strip()}")
ranks = json.load(open(est))
t = max((r["time"] for r in ranks), key=lambda t: t["step_s"])
out.update({"world": ranks[0]["world_size"], "psi": ranks[0]["psi"],
            "device_peak": max(r["device"]["run"]["peak_total"] for r in ranks),
            "host_peak": max(r["host"]["run"]["peak_total"] for r in ranks)})
out.update({k: t[k] for k in ("step_s", "forward_s", "backward_s", "optimizer_s", "compute_s", "flops_per_s",
                              "exposed_intra_node_s", "exposed_inter_node_s")})
print(json.dumps(out))
PY
}

# All rows on one profile (datasheet or 2019 pace).
rows() {
  local sfx=$1
  run calibration "datasheet$sfx" megatron-1.2b '{"paper_tflops": 39, "B": 8}' \
    --stage 0 -b 8 -t 1024 --activation-checkpointing
  run offload-1 "datasheet$sfx" offload-10b '{"paper_tflops": 40, "B": 10}' \
    --stage 2 --config "$tmp/s2off.json" -b 10 -t 1024 --activation-checkpointing --cpu-checkpointing
  for nodes in 1 8; do
    run offload-$((nodes * 16)) "datasheet$sfx" offload-10b '{"B": 10}' \
      --stage 2 --config "$tmp/s2off.json" -b 10 -t 1024 \
      --activation-checkpointing --cpu-checkpointing --nodes "$nodes" --gpus-per-node 16
  done
  run zero-13b "datasheet$sfx" zero-13b "{\"paper_tflops\": 40, \"B\": $B13}" \
    --stage 2 -b "$B13" -t 1024 --activation-checkpointing --overlap-comm --nodes 8 --gpus-per-node 16
  run zero-100b "datasheet$sfx" zero-100b "{\"paper_tflops\": 37.5, \"B\": $B100, \"tp\": 16}" \
    --stage 2 -b "$B100" -t 1024 --activation-checkpointing --overlap-comm --nodes 25 --gpus-per-node 16 \
    --tensor-parallel-size 16
  run infinity-1t "datasheet$sfx" infinity-1t '{"paper_tflops": 49, "B": 8}' \
    --stage 3 --config "$tmp/s3off.json" -b 8 -t 1024 --activation-checkpointing --cpu-checkpointing \
    --overlap-comm --nodes 32 --gpus-per-node 16
  for b in 2 4; do
    for v in s3 zpp; do
      run "zeropp-$v-$((b * 512))" "datasheet_100g$sfx" zeropp-18b "{\"B\": $b}" \
        --stage 3 --config "$tmp/$v.json" -b "$b" -t 512 \
        --activation-checkpointing --overlap-comm --nodes 24 --gpus-per-node 16
    done
  done
}

# The 13B row's micro-batch: the largest whose dry run fits the V100's 32 GB.
B13=$("$EST" --model "$tmp/zero-13b.json" --precision bf16 --compute-dtype bf16 --threads 1 --stage 2 -t 1024 \
  --activation-checkpointing --overlap-comm --nodes 8 --gpus-per-node 16 --fit batch --device-mib 32768 \
  | sed -n 's/^fits: *batch \([0-9]*\).*/\1/p')
[ -n "$B13" ] || { echo "bench/simulate_papers.sh: --fit batch found no batch for the 13B row" >&2; exit 1; }
# The 100B row's micro-batch (per data-parallel rank: its 16 tensor ranks share it), the same way.
B100=$("$EST" --model "$tmp/zero-100b.json" --precision bf16 --compute-dtype bf16 --threads 1 --stage 2 -t 1024 \
  --activation-checkpointing --overlap-comm --nodes 25 --gpus-per-node 16 --tensor-parallel-size 16 --fit batch \
  --device-mib 32768 | sed -n 's/^fits: *batch \([0-9]*\).*/\1/p')
[ -n "$B100" ] || { echo "bench/simulate_papers.sh: --fit batch found no batch for the 100B row" >&2; exit 1; }

rows ""
# The 2019 pace: the factor that puts the calibration row on 39 TFLOP/s, applied to every profile.
python3 - "$tmp" "$ROOT/bench" <<'PY'
import json, sys
out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from simulate_papers_table import pace
k = pace(json.loads(open(f"{out}/rows.jsonl").readline()))
for name in ("datasheet", "datasheet_100g"):
    p = json.load(open(f"{out}/{name}.json"))
    for cls, c in p["classes"].items():
        if cls != "transfer":  # PCIe is not the software's
            c["flops_per_s" if "flops_per_s" in c else "bytes_per_s"] *= k
    p["name"] += f", at the 2019 software's pace (x{k:.3f})"
    json.dump(p, open(f"{out}/{name}_2019.json", "w"))
PY
rows _2019

[ -n "$JSON" ] && cp "$tmp/rows.jsonl" "$JSON"
python3 "$ROOT/bench/simulate_papers_table.py" "$tmp/rows.jsonl"
