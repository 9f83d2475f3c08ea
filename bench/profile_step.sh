#!/usr/bin/env bash
# bench/profile_step.sh — where a CPU training step's time goes, by op and by GEMM, from `perf`
# (Debian's linux-perf): perf samples bench_train_step's timed steps (the start-up — model
# init, the FMA-ceiling probe — skipped with perf's --delay) with DWARF call graphs, and the
# report gives each op's inclusive share (its CpuBackend entry with the GEMMs inside it) and the
# self time of the GEMM library's kernels and packing routines.
# Usage: bench/profile_step.sh [--model gpt-mini] [--threads 1] [--steps 4] [--gemm-lib LIB]
#        Prints a markdown table (paste into bench/results/train_step.md's profile section).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
MODEL=gpt-mini; TH=1; STEPS=4; LIB=()
while (($#)); do case "$1" in
  --model) MODEL=$2; shift 2;; --threads) TH=$2; shift 2;; --steps) STEPS=$2; shift 2;;
  --gemm-lib) LIB=(--gemm-lib "$2"); shift 2;; *) echo "unknown flag $1" >&2; exit 2;; esac; done
command -v perf >/dev/null || { echo "bench/profile_step.sh: perf not found (apt-get install linux-perf)" >&2; exit 1; }
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
BIN=("$BUILD/bench/bench_train_step" --model "$MODEL" --batch 8 --seq 256 --steps "$STEPS" --warmup 1 --threads "$TH" "${LIB[@]}")
# perf --delay skips the start-up: timed as a one-step run's wall time minus its step.
ONE=("$BUILD/bench/bench_train_step" --model "$MODEL" --batch 8 --seq 256 --steps 1 --warmup 0 --threads "$TH" "${LIB[@]}")
t0=$(date +%s%N); "${ONE[@]}" >"$tmp/one.json" 2>/dev/null; t1=$(date +%s%N)
delay=$(python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(max(0, int((int(sys.argv[3]) - int(sys.argv[2])) / 1e6 - r["ms_per_step_median"]) + int(1.5 * r["ms_per_step_median"])))' "$tmp/one.json" "$t0" "$t1")  # start-up, then the warmup step
perf record -q -F 250 --call-graph dwarf,16384 -D "$delay" -o "$tmp/perf.data" "${BIN[@]}" >"$tmp/run.json" 2>/dev/null
perf report -i "$tmp/perf.data" --children --sort symbol --stdio 2>/dev/null | grep -E '^ +[0-9]' > "$tmp/children.txt"
perf report -i "$tmp/perf.data" --no-children --sort dso,symbol --stdio 2>/dev/null | grep -E '^ +[0-9]' > "$tmp/self.txt"
python3 - "$tmp/children.txt" "$tmp/self.txt" "$tmp/run.json" "$MODEL" "$TH" "$delay" <<'PY'
import json, re, sys
children = {}
for l in open(sys.argv[1]):
    m = re.match(r'\s+([\d.]+)%\s+([\d.]+)%\s+\[\.\]\s+(.*)', l) or re.match(r'\s+([\d.]+)%\s+([\d.]+)%\s+\[k\]\s+(.*)', l)
    if m: children.setdefault(m.group(3).strip(), float(m.group(1)))
selfp = []
for l in open(sys.argv[2]):
    m = re.match(r'\s+([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)', l)
    if m: selfp.append((float(m.group(1)), m.group(2), m.group(4).strip()))
run = json.loads(open(sys.argv[3]).read().strip().splitlines()[-1])
model, th, delay = sys.argv[4:7]
def inc(prefix):
    return max([v for k, v in children.items() if k.startswith(prefix)] or [0.0])
total = inc('main') or 100.0
ops = [('forward: linear (GEMM + bias)', 'zt::CpuBackend::linear('), ('backward: linear (dx, dw GEMMs + bias grad)', 'zt::CpuBackend::linear_backward'),
       ('forward: attention (tile GEMMs + softmax)', 'zt::CpuBackend::attention('), ('backward: attention', 'zt::CpuBackend::attention_backward'),
       ('bias + GELU fwd', 'zt::CpuBackend::bias_gelu('), ('bias + GELU bwd', 'zt::CpuBackend::bias_gelu_backward'),
       ('SwiGLU fwd', 'zt::CpuBackend::swiglu('), ('SwiGLU bwd', 'zt::CpuBackend::swiglu_backward'),
       ('residual + norm fwd', 'zt::CpuBackend::residual_'), ('LayerNorm fwd', 'zt::CpuBackend::layernorm('),
       ('LayerNorm bwd', 'zt::CpuBackend::layernorm_backward'), ('RMSNorm fwd', 'zt::CpuBackend::rmsnorm('),
       ('RMSNorm bwd', 'zt::CpuBackend::rmsnorm_backward'), ('RoPE', 'zt::CpuBackend::rope('),
       ('copies (packed q|k|v, contiguous())', 'zt::CpuBackend::copy('), ('elementwise (residual add, grads)', 'zt::CpuBackend::binary'),
       ('gradient accumulation', 'zt::CpuBackend::accumulate'), ('cross-entropy fwd + bwd', 'zt::CpuBackend::cross_entropy'),
       ('embedding fwd + bwd', 'zt::CpuBackend::embedding'), ('AdamW', 'zt::CpuBackend::adamw_step'), ('all GEMMs (zt::gemm)', 'zt::gemm<float>')]
print(f"perf, {model}, {th} thread(s), {run['gemm_lib']} GEMMs, step {run['ms_per_step_median']:.0f} ms (median of this run), "
      f"sampling the timed steps only (perf --delay {delay} ms): share of the step's samples, inclusive of what each op calls.\n")
print("| op (CpuBackend entry) | % of step |\n|---|---:|")
for name, sym in ops:
    v = sum(val for k, val in children.items() if k.startswith(sym)) if sym.endswith('_') else inc(sym)
    if v > 0: print(f"| {name} | {100 * v / total:.1f} |")
print("\nSelf time, the top entries (library kernels by name):\n")
print("| % of samples | object | symbol |\n|---:|---|---|")
for p, dso, sym in selfp[:14]:
    print(f"| {p:.1f} | {dso} | `{sym[:70]}` |")
PY
