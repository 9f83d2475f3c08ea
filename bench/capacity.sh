#!/usr/bin/env bash
# bench/capacity.sh — ZeRO-Offload's capacity headline on this machine: under one fixed device cap
# (--memory-limit-mib's mechanism: the CPU allocator capped into a small "device", the host tier
# uncapped), the largest gpt-family model (fixed width, growing depth) that trains for 5 steps at
# stage 0, stage 3, stage 3 + cpu offload and stage 3 + nvme offload, with its step time and memory
# by tier. Target (issue 5): the best offload tier at least 10x the stage-0 size.
# Every trial is its own process (bench_capacity re-executes itself), so an out-of-memory is a
# clean "does not fit". Writes bench/results/capacity.md and bench/results/capacity.json (one JSON
# object per trial and per search).
# Usage: bench/capacity.sh [--cap-mib 32] [--steps 5] [--no-n2] [--report-only]
#        (--report-only: rewrite capacity.md from the existing capacity.json, running nothing)
#        (builds bench_capacity into ${BUILD_DIR:-build} when it is missing)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
CAP=32; STEPS=5; N2=1; REPORT_ONLY=0
while (($#)); do case "$1" in
  --cap-mib) CAP=$2; shift 2;; --steps) STEPS=$2; shift 2;; --no-n2) N2=0; shift;;
  --report-only) REPORT_ONLY=1; shift;; *) echo "unknown flag $1" >&2; exit 2;; esac; done
BIN="$BUILD/bench/bench_capacity"
out="$ROOT/bench/results/capacity.json"
md_out="$ROOT/bench/results/capacity.md"
NVME_DIR="$BUILD/capacity_nvme"  # the swap files: a disk-backed filesystem (O_DIRECT; not tmpfs)
# The family: gpt2, n_embd 128, 4 heads, T = 64, B = 4 sequences, byte vocabulary 256.
SHAPE=(--n-embd 128 --n-head 4 --seq-len 64 --batch 4 --vocab 256)
if (( REPORT_ONLY )); then
  elapsed=$(sed -n 's/.*(the search took \([0-9]*\) s).*/\1/p' "$md_out" | head -n 1); elapsed=${elapsed:-0}
else
if [ ! -x "$BIN" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DZT_BUILD_BENCH=ON >/dev/null
  cmake --build "$BUILD" -j"$(nproc)" --target bench_capacity
fi
[ -x "$BIN" ] || { echo "bench/capacity.sh: $BIN was not built" >&2; exit 1; }
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"  # idle OpenMP threads must not spin on shared cores
CORES=$(nproc)
: > "$out"
start=$(date +%s)
# One rank (ZeRO-Offload's single-device setting), all cores: the four tiers, the cap applied after
# the engine's setup (as zt-train --memory-limit-mib does) and from the process start (the build capped too).
"$BIN" "${SHAPE[@]}" --cap-mib "$CAP" --steps "$STEPS" --threads "$CORES" --data "$ROOT/data/corpus/train.txt" \
  --nvme-dir "$NVME_DIR" --json "$out" --tiers stage0,stage3,stage3+cpu,stage3+nvme --cap-from setup,start
if (( N2 )); then  # ZeRO-3 alone needs ranks to shard over: stage 3 on N = 2 ranks (1 thread each)
  s0=$(python3 -c "import json,sys; print(max([json.loads(l)['layers'] for l in open(sys.argv[1]) if json.loads(l)['kind']=='best' and json.loads(l)['tier']=='stage0'] or [1]))" "$out")
  "$BIN" "${SHAPE[@]}" --cap-mib "$CAP" --steps "$STEPS" --ranks 2 --threads 1 --start-layers "$s0" \
    --data "$ROOT/data/corpus/train.txt" --nvme-dir "$NVME_DIR" --json "$out" --tiers stage3 --cap-from setup,start
fi
elapsed=$(( $(date +%s) - start ))
rmdir "$NVME_DIR" 2>/dev/null || true
fi

python3 - "$out" "$md_out" "$CAP" "$STEPS" "$elapsed" <<'PY'
import json, re, sys, datetime, platform, subprocess
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cap_mib, steps, elapsed = float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
sh = lambda c: subprocess.run(['sh', '-c', c], capture_output=True, text=True).stdout.strip()
cpu, cores = sh("lscpu | sed -n 's/^Model name: *//p'"), sh('nproc')
ram = sh("free -g | awk '/^Mem:/ {print $2}'")
fs = sh("df -T / | awk 'NR==2 {print $2}'")
MiB = lambda b: f"{b / 2**20:.1f}"
cats = ['params', 'grads', 'optim', 'activations', 'comm', 'workspace']
best = [r for r in rows if r['kind'] == 'best']
trials = [r for r in rows if r['kind'] == 'trial']
T0 = next((r for r in trials if r.get('fits')), {})
B, T = 4, 64

def label(r):
    return r['tier'] + (f" (N = {r['world_size']})" if r['world_size'] > 1 else "")

def limit(r):  # what the smallest failing model ran into
    f = r.get('first_failure')
    if not f: return f"none up to {r['max_layers']} layers"
    e = f.get('error', f.get('outcome', '?'))
    m = re.search(r"allocating ([\d.]+ \w+) for category '(\w+)'", e)
    held = dict((k, float(v) * {'B': 2**-20, 'KiB': 2**-10, 'MiB': 1, 'GiB': 1024}[u])
                for k, v, u in re.findall(r"(\w+) ([\d.]+) (B|KiB|MiB|GiB) \(peak", e))
    top = max(held.items(), key=lambda kv: kv[1]) if held else ('?', 0)
    where = {'build': 'building the whole model', 'setup': 'the engine setup', 'train': 'training'}.get(f.get('phase'), f.get('phase', '?'))
    if 'at rest after setup' in e:
        return f"L = {r['first_failure_layers']}: model states at rest after setup over the cap (largest: {top[0]} {top[1]:.1f} MiB)"
    if m:
        return (f"L = {r['first_failure_layers']}, {where}: {m.group(1)} of {m.group(2)} over the cap; "
                f"held: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(held.items(), key=lambda kv: -kv[1]) if v >= 0.05) + " MiB")
    return f"L = {r['first_failure_layers']}: {f.get('outcome')}: {e[:120]}"

def table(mode):
    bs = [r for r in best if r['cap_from'] == mode]
    s0 = next((r for r in bs if r['tier'] == 'stage0' and r['world_size'] == 1 and r.get('fit')), None)
    s0_psi = s0['fit']['psi'] if s0 else 0
    s0_L = s0['layers'] if s0 else 0
    md = ["| tier | largest model: layers, Psi | ratio to stage 0 (Psi) | ms/step (tokens/s) | "
          f"ms/step at stage 0's size (L = {s0_L}) | device peak (MiB) | device peak by category (MiB): "
          + " / ".join(cats) + " | host (MiB) | nvme (MiB) | setup peak incl. the whole-model build (MiB) |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for r in bs:
        f = r.get('fit')
        if not f:
            md.append(f"| {label(r)} | none fits | - | - | - | - | - | - | - | - |"); continue
        d, h, n = f['train']['device'], f['train']['host'], f['train']['nvme']
        same = next((t for t in trials if t['tier'] == r['tier'] and t.get('world_size', 1) == r['world_size']
                     and t['cap_from'] == mode and t['layers'] == s0_L and t.get('fits')), None)
        toks = B * T * r['world_size'] / (f['step_ms_median'] / 1000)
        same_ms = f"{same['step_ms_median']:.0f}" if same else '-'
        md.append(f"| {label(r)} | {r['layers']}, {f['psi']:,} | {f['psi'] / s0_psi:.1f}x | "
                  f"{f['step_ms_median']:.0f} ({toks:.0f}) | {same_ms} | "
                  f"{MiB(d['peak_total'])} | " + " / ".join(MiB(d['peak'][c]) for c in cats) + " | "
                  f"{MiB(h['peak_total'])} | {MiB(n['current_total'])} | {MiB(f['setup_peak_total'])} |")
    md += ["", "What stopped the next size (the first failing n_layer; the out-of-memory message: the allocation "
           "that passed the cap, and what each category held then):", ""]
    md += [f"- {label(r)}: {limit(r)}" for r in bs]
    return md, bs, s0_psi

md = ["# Capacity: the largest model each ZeRO tier trains under one device cap (ZeRO-Offload's headline)", "",
      f"- date: {datetime.date.today()}, machine: {cpu}, {cores} cores, {ram} GiB RAM, {platform.system()} {platform.release()}; "
      f"nvme tier: swap files on the build directory's disk ({fs}, O_DIRECT), not an NVMe device",
      f"- command: `bench/capacity.sh --cap-mib {cap_mib:g} --steps {steps}` (the search took {elapsed} s); each trial: "
      f"`bench_capacity --trial --tier TIER --layers L --cap-bytes {int(cap_mib * 2**20)} --cap-from MODE` in its own process",
      f"- **device cap: {cap_mib:g} MiB** on the cpu allocator (the mechanism of `zt-train --memory-limit-mib`): a CPU machine "
      "made into a small device; the offload tier (host_allocator) is uncapped, as host RAM beside a GPU would be.",
      "- model family: gpt2, n_embd 128, 4 heads, MLP 4C, context = T = 64, vocabulary 256 (the byte-level corpus "
      f"data/corpus/train.txt), n_layer searched (doubling, then bisection); one block = 198,272 parameters. "
      f"Batch B = {B} sequences of T = {T} per rank, fp32, AdamW (lr 1e-3), clipping 1.0, **activation checkpointing on in "
      f"every tier** (each block's forward recomputed in its backward). A model fits when {steps} steps complete under the cap.",
      "- stage 3 knobs (all stage-3 tiers): overlap_comm, stage3_prefetch_bucket_size = 1 block, "
      "stage3_max_live_parameters = 2 blocks, stage3_max_reuse_distance = 0, persistence threshold 1e5 (the embedding "
      "and the final norm stay gathered); offload: DeepSpeed's defaults (buffer_count 5, sub_group_size 1e9: one "
      "sub-group per unit), one swap file for both nvme tiers.",
      "- ms/step: median of steps 2-5 (step 1 records the stage-3 order), one rank with all cores unless N says otherwise "
      "(N = 2: 1 thread per rank, global batch 2B). The machine is shared: expect ~10-20% noise. Device peak: over the "
      "training steps (Engine::memory_report().measured); host: the host tier's peak; nvme: the swap file's reserved bytes.",
      "- two ways to apply the cap:",
      "  - **setup** (the headline; what `zt-train --memory-limit-mib` does): the cap starts once the engine has set up; "
      "what the engine holds at rest must fit it, every training byte is capped. This is the capacity of the engine with "
      "the model arriving already sharded, as DeepSpeed's `zero.Init` builds it. The whole-model build before it is not "
      "capped (its peak: the last column).",
      "  - **start**: the cap is set before the model is built. Every rank builds and initializes the whole model (full "
      "fp32 parameters and gradients: 8Psi) before the engine shards it (README, Known limits: no `zero.Init`), so this "
      "bounds stage 3 by the build, not by training: what a real device of this size would allow today.", ""]

for mode, title in (('setup', 'Cap from the end of the engine\'s setup (zt-train --memory-limit-mib; zero.Init-like): the capacity of training'),
                    ('start', 'Cap from the process start: the whole-model build counts (no zero.Init)')):
    t, bs, s0_psi = table(mode)
    if not bs: continue
    md += [f"## {title}", ""] + t + [""]
    offl = [r for r in bs if r['tier'].startswith('stage3+') and r.get('fit')]
    if offl and s0_psi:
        top = max(offl, key=lambda r: r['fit']['psi'])
        ratio = top['fit']['psi'] / s0_psi
        verdict = "**met**" if ratio >= 10 else "**NOT met**"
        md += [f"Target (best offload tier >= 10x the stage-0 size): {verdict} — {top['tier']}: "
               f"{top['fit']['psi']:,} parameters = {ratio:.1f}x stage 0's {s0_psi:,}.", ""]

md += ["## Reading the numbers", "",
       "- Stage 0 and stage 3 on one rank are bound by the model states (16 bytes per parameter: fp32 params, grads, "
       "Adam m and v); stage 3 on one rank shards over nobody, and also holds one or two units' full gradient during the "
       "backward, so it fits slightly less than stage 0. On N = 2 ranks stage 3 holds 16Psi/2 per rank.",
       "- Stage 3 + offload keeps no optimizer state and no parameters or gradients at rest on the device: what grows "
       "with depth there is the activations — with checkpointing one (B, T, C) float32 boundary per block "
       f"({B}x{T}x128x4 bytes = 128 KiB per layer) — and the cap is reached by them. The rest of the peak is constant in "
       "depth: one block's recomputed internals and the logits (activations); the gathered units (params: with "
       "stage3_max_live_parameters = 2 blocks the peak measured 4 block-sized buffers with cpu offload and 3 with nvme, "
       "the embedding aside — an offloaded shard is copied to the device through a shard-sized staging buffer before "
       "its all-gather, and at N = 1 a shard is the whole unit); and the full gradient of the unit in its backward "
       "plus the one still being reduced (grads: 2 blocks).",
       "- Larger offload capacity from here would come from moving the checkpointed activations off the device too "
       "(DeepSpeed's `activation_checkpointing.cpu_checkpointing`, zt-train --cpu-checkpointing; not yet measured in this "
       "table) — the next limit would then be "
       "one block's working set.",
       "- With the cap from the start, stage 3 + offload is bounded by the whole-model build (8Psi of fp32 parameters "
       "and gradients on the device before the engine shards them): `zero.Init` (building each unit sharded / on the host "
       "tier) is what it needs to reach the 'setup' capacity on a real device of this size.", "",
       "Raw JSON (one object per trial, and one per search with the largest fit and the first failure): capacity.json.", ""]
open(sys.argv[2], 'w').write("\n".join(md))
print("\n".join(md))
PY
