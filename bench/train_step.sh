#!/usr/bin/env bash
# bench/train_step.sh — our CPU training step beside libtorch's, same model, as alternated pairs
# (ours, then the peer, PAIRS times per model and thread count) so that a change in machine load
# hits both: gpt-mini against ../shared/peers/libtorch-gpt, llama-mini and llama-nano against
# bench/peers/libtorch-llama. Writes bench/results/train_step.md (and .json: one line per run).
# Usage: bench/train_step.sh [--pairs 5] [--steps 6] [--warmup 2] [--gemm-lib LIB]
#        (needs the build in ${BUILD_DIR:-build}; LIB defaults to the build's ZT_GEMM)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
GPT_PEER="$ROOT/../shared/peers/libtorch-gpt/run.sh"
LLAMA_PEER="$ROOT/bench/peers/libtorch-llama/run.sh"
PAIRS=5; STEPS=6; WARMUP=2; LIB=()
while (($#)); do case "$1" in
  --pairs) PAIRS=$2; shift 2;; --steps) STEPS=$2; shift 2;; --warmup) WARMUP=$2; shift 2;;
  --gemm-lib) LIB=(--gemm-lib "$2"); shift 2;; *) echo "unknown flag $1" >&2; exit 2;; esac; done
[ -x "$BUILD/bench/bench_train_step" ] || BUILD_DIR="$BUILD" bash "$ROOT/scripts/build.sh" -DZT_BUILD_BENCH=ON
# Each side in its own best thread setting: ours spins (OMP_WAIT_POLICY=ACTIVE: one OpenMP pool for
# the kernels and the GEMMs, threads = cores, so a spinning thread takes nothing from another
# pool; ~10% faster on 2 threads than PASSIVE); libtorch sleeps (its run.sh's PASSIVE: ATen's
# OpenMP pool and OpenBLAS's pthreads would fight, and ACTIVE measured 2.1x slower).
OURS_WAIT="${ZT_OMP_WAIT_POLICY:-ACTIVE}"
out="$ROOT/bench/results/train_step.json"
: > "$out"
ours() {  # model threads seq
  OMP_WAIT_POLICY="$OURS_WAIT" "$BUILD/bench/bench_train_step" --model "$1" --batch 8 --seq "$3" --steps "$STEPS" --warmup "$WARMUP" --threads "$2" \
    "${LIB[@]}" 2>/dev/null | tail -n 1 >> "$out"
}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
peer() {  # script threads args...
  local script=$1 th=$2; shift 2
  OMP_WAIT_POLICY=PASSIVE bash "$script" "$@" --batch 8 --steps "$STEPS" --warmup "$WARMUP" --threads "$th" 2>/dev/null | tail -n 1 >> "$out"
}
for th in 1 2; do
  for ((i = 0; i < PAIRS; ++i)); do
    ours gpt-mini "$th" 256
    peer "$GPT_PEER" "$th" --layers 6 --embd 384 --heads 6 --seq 256 --vocab 256
    ours llama-mini "$th" 256
    peer "$LLAMA_PEER" "$th" --layers 6 --embd 384 --heads 6 --kv-heads 2 --ffn 1024 --seq 256 --vocab 256
    ours llama-nano "$th" 64
    peer "$LLAMA_PEER" "$th" --layers 2 --embd 32 --heads 4 --kv-heads 2 --ffn 96 --seq 64 --vocab 256
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$out" "$ROOT/bench/results/train_step.md" "$PAIRS" "$STEPS" "$WARMUP" "$load_before" "$load_after" "${LIB[*]}" "$OURS_WAIT" <<'PY'
import json, sys, datetime, platform, statistics, subprocess
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
pairs, steps, warmup, lb, la, lib, wait = sys.argv[3:10]
cpu = subprocess.run(['sh', '-c', "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
med = statistics.median
zt = lambda m, th: [r for r in rows if r.get('impl') == 'zerotensor' and r['model'] == m and r['threads'] == th]
def peer(m, th):
    name, layers = ('libtorch', 6) if m == 'gpt-mini' else ('libtorch-llama', 2 if m == 'llama-nano' else 6)
    return [r for r in rows if r.get('peer') == name and r['threads'] == th and r['config']['layers'] == layers]
gl = zt('gpt-mini', 1)[0].get('gemm_lib', '?')
md = ["# Training step on the CPU: ZeroTensor vs libtorch", "",
      f"- date: {datetime.date.today()}, machine: {cpu}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores, {platform.system()} {platform.release()}; load average before {lb}, after {la}",
      f"- command: `bench/train_step.sh --pairs {pairs} --steps {steps} --warmup {warmup}{(' ' + lib) if lib else ''}`; our float32 GEMM: {gl}; libtorch {rows[1].get('torch', '?')} on {rows[1].get('blas', '?')}",
      "- gpt-mini: 6 layers, 384 wide, 6 heads, B=8, T=256, vocab 256 (peer: ../shared/peers/libtorch-gpt); llama-mini: 6 layers,",
      "  384 wide, 6 heads over 2 KV heads, SwiGLU 1024, B=8, T=256; llama-nano: 2 layers, 32 wide, B=8, T=64 (peer for both:",
      "  bench/peers/libtorch-llama, the same parameter count). AdamW. Each run reports the median of its timed steps; ours and",
      "  libtorch's alternate, and ratio = ours / libtorch per pair.",
      f"- threads wait: ours OMP_WAIT_POLICY={wait} (one OpenMP pool), libtorch PASSIVE (its run.sh's setting; ACTIVE made it 2.1x slower)",
      "- MFU = (6N + 6LCT) x B x T / step time / measured FMA ceiling of the same threads (core/fma_ceiling.h)", "",
      "| model | threads | ZeroTensor ms/step | libtorch ms/step | ratio median | ratio range | ZeroTensor MFU | tokens/s ours / libtorch | forward / backward / AdamW ms |",
      "|---|---|---|---|---|---|---|---|---|"]
for m in ('gpt-mini', 'llama-mini', 'llama-nano'):
    for th in (1, 2):
        z, p = zt(m, th), peer(m, th)
        if not z or not p:
            continue
        r = [a['ms_per_step_median'] / b['ms_per_step_median'] for a, b in zip(z, p)]
        md.append(f"| {m} | {th} | {med(a['ms_per_step_median'] for a in z):.1f} | {med(b['ms_per_step_median'] for b in p):.1f} | "
                  f"**{med(r):.3f}** | {min(r):.3f} - {max(r):.3f} | {100 * med(a['mfu'] for a in z):.1f}% | "
                  f"{med(a['tokens_per_s'] for a in z):.0f} / {med(b['tokens_per_s'] for b in p):.0f} | "
                  f"{med(a['ms_forward_median'] for a in z):.1f} / {med(a['ms_backward_median'] for a in z):.1f} / {med(a['ms_optimizer_median'] for a in z):.1f} |")
md += ["", "Targets (gpt-mini): ratio <= 0.60 with 2 threads and <= 0.65 with 1 thread; MFU >= 0.85. Raw JSON lines: train_step.json.", ""]
# The profile (written by hand from perf and the trace, see its own command lines) is kept.
try:
    old = open(sys.argv[2]).read()
    kept = old[old.index("\n## Profile"):] if "\n## Profile" in old else ""
except FileNotFoundError:
    kept = ""
open(sys.argv[2], 'w').write("\n".join(md) + kept)
print("\n".join(md))
PY
