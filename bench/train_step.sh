#!/usr/bin/env bash
# bench/train_step.sh — our gpt-mini training step beside libtorch's (../shared/peers/libtorch-gpt),
# same shape, same run, on 1 and 2 threads. Writes bench/results/train_step.md (and .json).
# Usage: bench/train_step.sh [--steps 10] [--warmup 2]   (needs the build in ${BUILD_DIR:-build})
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
PEER="$ROOT/../shared/peers/libtorch-gpt/run.sh"
STEPS=10; WARMUP=2
while (($#)); do case "$1" in --steps) STEPS=$2; shift 2;; --warmup) WARMUP=$2; shift 2;; *) echo "unknown flag $1" >&2; exit 2;; esac; done
[ -x "$BUILD/bench/bench_train_step" ] || BUILD_DIR="$BUILD" bash "$ROOT/scripts/build.sh" -DZT_BUILD_BENCH=ON
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"  # as the peer's run.sh does, for both sides
out="$ROOT/bench/results/train_step.json"
: > "$out"
for th in 1 2; do
  # Interleave ours and the peer's so a change in machine load hits both.
  "$BUILD/bench/bench_train_step" --model gpt-mini --batch 8 --seq 256 --steps "$STEPS" --warmup "$WARMUP" --threads "$th" 2>/dev/null | tail -n 1 >> "$out"
  bash "$PEER" --layers 6 --embd 384 --heads 6 --seq 256 --batch 8 --vocab 256 --steps "$STEPS" --warmup "$WARMUP" --threads "$th" 2>/dev/null | tail -n 1 >> "$out"
done
python3 - "$out" "$ROOT/bench/results/train_step.md" "$STEPS" "$WARMUP" <<'PY'
import json, sys, datetime, platform, subprocess
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cpu = subprocess.run(['sh', '-c', "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
md = [f"# gpt-mini training step: ZeroTensor vs libtorch (CPU)", "",
      f"- date: {datetime.date.today()}, machine: {cpu}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores, {platform.system()} {platform.release()}",
      f"- command: `bench/train_step.sh --steps {sys.argv[3]} --warmup {sys.argv[4]}` (gpt-mini: 6 layers, 384 wide, 6 heads, B=8, T=256, vocab 256; AdamW; median of timed steps)",
      "- MFU = (6N + 6LCT) x B x T / step time / measured FMA ceiling of the same threads (core/fma_ceiling.h)", "",
      "| threads | ZeroTensor ms/step | libtorch ms/step | ratio (ours / libtorch) | ZeroTensor tokens/s | libtorch tokens/s | ZeroTensor MFU | FMA ceiling GFLOP/s |",
      "|---|---|---|---|---|---|---|---|"]
for th in (1, 2):
    z = next(r for r in rows if r.get('impl') == 'zerotensor' and r['threads'] == th)
    p = next(r for r in rows if r.get('peer') == 'libtorch' and r['threads'] == th)
    md.append(f"| {th} | {z['ms_per_step_median']:.1f} | {p['ms_per_step_median']:.1f} | {z['ms_per_step_median']/p['ms_per_step_median']:.3f} | "
              f"{z['tokens_per_s']:.0f} | {p['tokens_per_s']:.0f} | {100*z['mfu']:.1f}% | {z['fma_ceiling_gflops']:.1f} |")
md += ["", "ZeroTensor's step by phase (median ms): " + ", ".join(
    f"{r['threads']} thread(s): forward {r['ms_forward_median']:.0f}, backward {r['ms_backward_median']:.0f}, AdamW {r['ms_optimizer_median']:.0f}"
    for r in rows if r.get('impl') == 'zerotensor')]
md += ["", "Target (issue 2): ratio at most 1.0 on 1 and 2 threads. Raw JSON lines: train_step.json.", ""]
open(sys.argv[2], 'w').write("\n".join(md))
print("\n".join(md))
PY
