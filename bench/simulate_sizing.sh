#!/usr/bin/env bash
# bench/simulate_sizing.sh — the step simulator (zt-estimate --time, train/step_time.h) on the
# bundled datasheet profiles (configs/devices/), held against numbers that did not come from it:
#
#   1. our own GPU records (bench/results/gpu.md): the measured step of each model on one H100 or
#      H200 beside the simulated one. The profiles' memory-bound rates were fitted to one Nsight
#      profile of GPT-2 at B 16 (configs/devices/h200-sxm.json's sources); the rows here are other
#      batches, other models, another GPU.
#   2. a cloud vendor's ZeRO sizing table (quoted in docs/step-time.md): per-GPU memory and tokens/s
#      it claims for 7B-175B models on 8-64 A100s / H100s, beside the dry run's memory and the
#      simulated tokens/s, and every claim the device's peak rules out named, with the arithmetic:
#      claimed tokens/s x 6 N (the model's flops per token, no recomputation, no attention) over
#      the peak is the MFU the claim needs; over 100% it is impossible at any efficiency. The
#      simulator's own bound (every flop of the step, recomputation and attention included, at the
#      peak) is the ceiling column.
# (The budget tables on the same profiles: bench/simulate_budget.sh; the ZeRO++ paper's volume:
# bench/zeropp_volume.sh.)
#
# Usage: bench/simulate_sizing.sh [--json FILE]   (prints markdown; under a minute on one core)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${BUILD_DIR:-$ROOT/build}" && pwd)"
JSON=""
while (($#)); do case "$1" in
  --json) JSON=$(realpath -m "$2"); shift 2;;
  *) echo "bench/simulate_sizing.sh: unknown flag $1" >&2; exit 2;; esac; done
cd "$ROOT"  # the rows name configs/ relative to the checkout, as a user types them
EST="$BUILD/zt-estimate"
[ -x "$EST" ] || { echo "bench/simulate_sizing.sh: $EST not built" >&2; exit 1; }
DEV=configs/devices MOD=configs/models
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
: >"$tmp/rows.jsonl"

# One zt-estimate run -> one JSON line: the row's fields and the estimate (rank 0 and the last rank).
# run KIND NAME PROFILE "claims JSON" zt-estimate-args...
run() {
  local kind=$1 name=$2 profile=$3 claims=$4; shift 4
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  "$EST" --json --precision bf16 --compute-dtype bf16 --threads 1 "$@" >"$tmp/est.json" 2>"$tmp/est.err" || rc=$?
  t1=$(date +%s.%N)
  python3 - "$kind" "$name" "$profile" "$claims" "$rc" "$tmp/est.json" "$tmp/est.err" "$t0" "$t1" "$*" \
    >>"$tmp/rows.jsonl" <<'PY'
import json, sys
kind, name, profile, claims, rc, est, err, t0, t1, args = sys.argv[1:]
row = {"kind": kind, "name": name, "profile": profile, "args": args, "seconds": float(t1) - float(t0)}
row.update(json.loads(claims))
if rc != "0":
    row["error"] = open(err).read().strip().splitlines()[-1]
else:
    ranks = json.load(open(est))
    row["psi"] = ranks[0]["psi"]
    row["world"] = ranks[0]["world_size"]
    row["device_peak"] = max(r["device"]["run"]["peak_total"] for r in ranks)
    row["host_peak"] = max(r["host"]["run"]["peak_total"] for r in ranks)
    if "time" in ranks[0]:
        t = max((r["time"] for r in ranks), key=lambda t: t["step_s"])
        row.update({k: t[k] for k in ("step_s", "tokens_per_s", "flops_per_token", "mfu",
                                      "tokens_per_s_per_rank_at_peak", "exposed_intra_node_s",
                                      "exposed_inter_node_s")})
        row["tokens_per_s_per_gpu"] = t["tokens_per_s"] / row["world"]
print(json.dumps(row))
PY
}

# ---- 1. our GPU records: one GPU, no ZeRO partitioning (stage 0), bf16, T 1024 ----
# rec NAME PROFILE MEASURED_MS MODEL BATCH
rec() { run record "$1" "$2" "{\"measured_ms\": $3}" --model "$4" --stage 0 -b "$5" -t 1024 --time "$DEV/$2.json"; }
rec "GPT-2 124M, B 64 (H100, 2026-11-27 later, call 3)" h100-sxm 132.7 gpt2-124m 64
rec "GPT-2 124M, B 64 (H200, 2026-11-27 night, call 1)" h200-sxm 119.4 gpt2-124m 64
rec "llama-100m, B 64 (H200, 2026-11-27 night, call 1)" h200-sxm 75.8 llama-100m 64
rec "Llama 3.2 1B, B 32 (H200, 2026-11-27 night, call 1)" h200-sxm 448.6 llama3.2-1b 32

# ---- 2. the vendor's sizing table: bf16 AdamW, T 4096, overlap_comm, activation checkpointing ----
# Micro-batch 1 a GPU (the table does not say; 4096 tokens a micro-step). Stage 3 runs twice: at
# DeepSpeed's defaults (stage3_max_live_parameters 1e9, prefetch bucket 5e7), and with one whole
# block prefetched (max live 4e9, prefetch bucket 2e9): our gather units are whole transformer
# blocks (a 70B block is 0.86e9 parameters), where DeepSpeed's are single parameters, which its
# defaults do let it prefetch.
cat >"$tmp/offload.json" <<'CFG'
{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true}}}
CFG
cat >"$tmp/nvme.json" <<CFG
{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "$tmp"},
                       "offload_param": {"device": "nvme", "nvme_path": "$tmp", "buffer_size": 300000000}}}
CFG
# vendor NAME MODEL PROFILE NODES GPUS STAGE CLAIMED_GB CLAIMED_TOKENS [extra args]
vendor() {
  local name=$1 model=$2 profile=$3 nodes=$4 gpus=$5 stage=$6 gb=$7 tok=$8; shift 8
  local claims="{\"claimed_gb\": $gb, \"claimed_tokens_per_s\": $tok}"
  local common=(--model "$MOD/$model.json" --stage "$stage" --nodes "$nodes" --gpus-per-node "$gpus" -b 1 -t 4096
                --activation-checkpointing --overlap-comm "$@")
  run vendor "$name" "$profile" "$claims" "${common[@]}" --time "$DEV/$profile.json"
  [ "$stage" = 3 ] && run vendor-prefetch "$name" "$profile" "$claims" "${common[@]}" --time "$DEV/$profile.json" \
    --max-live-parameters 4000000000 --prefetch-bucket-size 2000000000
  return 0
}
vendor "7B, 8 x A100 80GB, stage 2" llama2-7b a100-sxm-80gb 1 8 2 32 8500
vendor "13B, 8 x A100 80GB, stage 2" llama2-13b a100-sxm-80gb 1 8 2 58 5200
vendor "13B, 32 x A100 80GB, stage 2" llama2-13b a100-sxm-80gb 4 8 2 36 5000
vendor "30B, 8 x A100 80GB, stage 3" llama-30b a100-sxm-80gb 1 8 3 64 2800
vendor "70B, 8 x H100 80GB, stage 3" llama2-70b h100-sxm 1 8 3 74 2200
vendor "70B, 8 x H100 80GB, stage 3, CPU offload" llama2-70b h100-sxm 1 8 3 58 950 --config "$tmp/offload.json"
vendor "70B, 32 x H100 80GB, stage 3" llama2-70b h100-sxm 4 8 3 48 2400
vendor "175B, 64 x H100 80GB, stage 3" gpt3-175b h100-sxm 8 8 3 70 1400
# NVMe (buffer_size raised to hold a unit's shard: 2.3e8 elements of a 175B block's on 8 ranks; the
# profile's NVMe rates are the drive class's, not measured)
run vendor "175B, 8 x H100 80GB, stage 3, NVMe" h100-sxm '{"claimed_gb": 75, "claimed_tokens_per_s": 180}' \
  --model "$MOD/gpt3-175b.json" --stage 3 --nodes 1 --gpus-per-node 8 -b 1 -t 4096 --activation-checkpointing \
  --overlap-comm --config "$tmp/nvme.json" --time "$DEV/h100-sxm.json"

[ -n "$JSON" ] && cp "$tmp/rows.jsonl" "$JSON"
python3 - "$tmp/rows.jsonl" "$DEV" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
peaks = {}
for name in ("a100-sxm-80gb", "h100-sxm", "h200-sxm", "v100-dgx2"):
    peaks[name] = json.load(open(f"{sys.argv[2]}/{name}.json"))["peak_flops_per_s"]
GiB = 2.0**30
capacity = {}  # the device's memory as a program sees it, from each profile (device_memory_bytes)
for name in peaks:
    capacity[name] = json.load(open(f"{sys.argv[2]}/{name}.json"))["device_memory_bytes"] / GiB

print("### Our GPU records against the datasheet profiles\n")
print("| run | profile | measured ms | predicted ms | predicted / measured | predicted MFU |")
print("|---|---|---:|---:|---:|---:|")
errs = []
for r in rows:
    if r["kind"] != "record": continue
    p = r["step_s"] * 1e3
    errs.append(abs(p / r["measured_ms"] - 1))
    print(f"| {r['name']} | {r['profile']} | {r['measured_ms']:.1f} | {p:.1f} | {p / r['measured_ms']:.3f} | {100 * r['mfu']:.1f}% |")
errs.sort()
print(f"\n{len(errs)} rows, largest |error| {100 * errs[-1]:.1f}%, median {100 * errs[len(errs) // 2]:.1f}%.\n")

print("### The vendor's sizing table\n")
print("| row | claimed GB / GPU | dry run GiB / GPU (device peak) | fits? | claimed tokens/s / GPU | MFU the claim needs (6 N) | "
      "simulated tokens/s / GPU | with one block prefetched | ceiling (the step's flops at peak) | verdict |")
print("|---|---:|---:|---|---:|---:|---:|---:|---:|---|")
pre = {r["name"]: r for r in rows if r["kind"] == "vendor-prefetch"}
for r in rows:
    if r["kind"] != "vendor": continue
    if "error" in r:
        print(f"| {r['name']} | ~{r['claimed_gb']} | {r['error']} |||||||")
        continue
    peak = peaks[r["profile"]]
    need = r["claimed_tokens_per_s"] * 6 * r["psi"] / peak
    dev = r["device_peak"] / GiB
    fits = dev <= capacity[r["profile"]]
    sim = f"{r['tokens_per_s_per_gpu']:,.0f}" if "step_s" in r else "not simulated"
    p = pre.get(r["name"])
    simp = f"{p['tokens_per_s_per_gpu']:,.0f}" if p and "step_s" in p else ""
    ceil = f"{r['tokens_per_s_per_rank_at_peak']:,.0f}" if "step_s" in r else ""
    verdict = []
    if need > 1:
        verdict.append(f"**impossible**: {r['claimed_tokens_per_s']:,} x 6 x {r['psi'] / 1e9:.2f}e9 = "
                       f"{r['claimed_tokens_per_s'] * 6 * r['psi'] / 1e12:.0f} TFLOP/s > the {peak / 1e12:.0f} peak")
    elif "step_s" in r and r["claimed_tokens_per_s"] > r["tokens_per_s_per_rank_at_peak"]:
        verdict.append(f"**impossible with checkpointing**: the step's {r['flops_per_token'] / 1e9:.0f} GFLOP a token "
                       f"(recomputation and attention included) cap it at {r['tokens_per_s_per_rank_at_peak']:,.0f}")
    if not fits:
        verdict.append(f"**does not fit**: {dev:.0f} GiB > {capacity[r['profile']]:.1f} GiB")
    if not verdict:
        best = max(r.get("tokens_per_s_per_gpu", 0), p.get("tokens_per_s_per_gpu", 0) if p else 0)
        verdict.append(f"possible; claim / simulated {r['claimed_tokens_per_s'] / best:.2f}" if best else "possible")
    print(f"| {r['name']} | ~{r['claimed_gb']} | {dev:.1f} | {'yes' if fits else 'no'} | {r['claimed_tokens_per_s']:,} | "
          f"{100 * need:.0f}% | {sim} | {simp} | {ceil} | {'; '.join(verdict)} |")
slow = max(rows, key=lambda r: r["seconds"])
print(f"\nThe slowest row took {slow['seconds']:.2f} s (the dry runs of two ranks and the simulated step): {slow['name']}.")
PY
