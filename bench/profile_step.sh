#!/usr/bin/env bash
# bench/profile_step.sh — where a CPU training step's time goes, from `perf` (Debian's linux-perf):
# perf samples bench_train_step's timed steps (the start-up and the warmup step skipped with perf's
# --delay; the FMA-ceiling probe that follows the steps, zt::detail::fma_chains, left out of the
# shares) and reports the share of each shared object (the GEMM library: oneDNN's JIT
# kernels appear as "[JIT]", OpenBLAS's as libopenblas; the kernel: page faults) and the self
# time of the top functions (each of our kernels is one function: attention, bias + GELU, norms,
# AdamW, copies). Per-GEMM-shape times are bench/gemm_libs.sh's. Prints markdown.
# Usage: bench/profile_step.sh [--model gpt-mini] [--threads 1] [--steps 4] [--gemm-lib LIB]
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
RUN=("$BUILD/bench/bench_train_step" --model "$MODEL" --batch 8 --seq 256 --warmup 1 --threads "$TH" "${LIB[@]}")
# perf --delay: a one-step run's wall time (start-up, one step, the FMA probe) minus half a step:
# past the start-up and the warmup step of the full run, and a little into its timed steps.
t0=$(date +%s%N); "${RUN[@]}" --steps 1 >"$tmp/one.json" 2>/dev/null; t1=$(date +%s%N)
delay=$(python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(max(0, int((int(sys.argv[3]) - int(sys.argv[2])) / 1e6 - 0.5 * r["ms_per_step_median"])))' "$tmp/one.json" "$t0" "$t1")
perf record -q -F 500 -D "$delay" -o "$tmp/perf.data" "${RUN[@]}" --steps "$STEPS" >"$tmp/run.json" 2>/dev/null
perf report -i "$tmp/perf.data" --no-children --sort dso,symbol --stdio 2>/dev/null | grep -E '^ +[0-9]' > "$tmp/sym.txt"
python3 - "$tmp/sym.txt" "$tmp/sym.txt" "$tmp/run.json" "$MODEL" "$TH" "$delay" "$STEPS" <<'PY'
import json, re, sys
run = json.loads(open(sys.argv[3]).read().strip().splitlines()[-1])
model, th, delay, steps = sys.argv[4:8]
rows = []
for l in open(sys.argv[2]):
    m = re.match(r'\s+([\d.]+)%\s+(\S+(?: tid \d+)?)\s+\[.\]\s+(.*\S)', l)
    if m:
        rows.append((float(m.group(1)), m.group(2), re.split(r'\s{2,}', m.group(3))[0]))  # perf pads with empty columns
probe = sum(p for p, _, sym in rows if 'fma_chains' in sym or 'fma_ceiling' in sym)
rows = [(100 * p / (100 - probe), dso, sym) for p, dso, sym in rows if 'fma_chains' not in sym and 'fma_ceiling' not in sym]
print(f"perf, {model}, {th} thread(s), {run['gemm_lib']} GEMMs; {steps} timed steps, median {run['ms_per_step_median']:.0f} ms; "
      f"samples from {delay} ms on (start-up and warmup skipped), the FMA probe after the steps ({probe:.1f}%) left out.\n")
by_dso = {}
for p, dso, _ in rows:
    key = "[JIT] (oneDNN's generated GEMM kernels)" if dso.startswith('[JIT]') else dso
    by_dso[key] = by_dso.get(key, 0.0) + p
print("| object | % of samples |\n|---|---:|")
for k, v in sorted(by_dso.items(), key=lambda kv: -kv[1]):
    if v >= 0.1: print(f"| {k} | {v:.1f} |")
print("\n| % of samples | object | function (self time) |\n|---:|---|---|")
for p, dso, sym in [r for r in rows if not r[1].startswith('[JIT]')][:22]:  # the JIT's addresses have no names
    print(f"| {p:.1f} | {dso} | `{sym[:80]}` |")
PY
