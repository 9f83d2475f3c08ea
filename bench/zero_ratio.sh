#!/usr/bin/env bash
# bench/zero_ratio.sh — the ZeRO-3 / stage-0 throughput ratio at N ranks, measured as alternated
# pairs (stage 0 then stage 3, REPS times) so that a change in machine load hits both sides.
# Each round runs stage 0, stage 3 with zero.sh's sweep settings (prefetch about one block: bucket
# 2e6, max live 4e6, no persistence, no reuse) and stage 3 with DeepSpeed's defaults (bucket 5e7,
# max live 1e9, persistence 1e5, reuse 1e9); global batch 8 x 256, 1 thread per rank,
# overlap_comm. Ratio per round = stage-0 ms / stage-3 ms (= stage-3 tokens/s over stage-0's).
# Prints and writes bench/results/zero_ratio.md.
# Usage: bench/zero_ratio.sh [--ranks 4] [--reps 5] [--model gpt-mini] [--steps 4]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
N=4; REPS=5; MODEL=gpt-mini; STEPS=4
while (($#)); do case "$1" in
  --ranks) N=$2; shift 2;; --reps) REPS=$2; shift 2;; --model) MODEL=$2; shift 2;; --steps) STEPS=$2; shift 2;;
  *) echo "unknown flag $1" >&2; exit 2;; esac; done
[ -x "$BUILD/bench/bench_zero" ] || BUILD_DIR="$BUILD" bash "$ROOT/scripts/build.sh" -DZT_BUILD_BENCH=ON
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
MPI=(mpirun --oversubscribe --bind-to none -np "$N")
[ "$(id -u)" = 0 ] && MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$N")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ARGS=(--model "$MODEL" --global-batch 8 --seq 256 --steps "$STEPS" --warmup 2 --threads 1 --overlap-comm 1)
BLOCK=(--prefetch-bucket 2000000 --max-live 4000000 --persistence 0 --reuse-distance 0)
# DeepSpeed's defaults, spelled out: bench_zero's own are persistence 0 and reuse distance 0 (the
# paper's 3Psi), which a run with no flags would get instead
DS=(--prefetch-bucket 50000000 --max-live 1000000000 --persistence 100000 --reuse-distance 1000000000)
step_ms() {  # stage [extra args] -> median slowest-rank step time (ms)
  local stage=$1; shift
  rm -f "$tmp/z.json"
  (cd "$ROOT" && "${MPI[@]}" "$BUILD/bench/bench_zero" --stage "$stage" "${ARGS[@]}" "$@" --json "$tmp/z.json" >/dev/null 2>&1)
  python3 -c 'import json,statistics,sys; print(statistics.median(json.loads(open(sys.argv[1]).readlines()[-1])["step_ms_slowest_rank"]))' "$tmp/z.json"
}
for ((i = 0; i < REPS; ++i)); do echo "$(step_ms 0) $(step_ms 3 "${BLOCK[@]}") $(step_ms 3 "${DS[@]}")" >> "$tmp/pairs.txt"; done
python3 - "$tmp/pairs.txt" "$ROOT/bench/results/zero_ratio.md" "$N" "$REPS" "$MODEL" "$STEPS" "${ARGS[*]}" "${BLOCK[*]}" <<'PY'
import datetime, statistics, subprocess, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
n, reps, model, steps, args, block = sys.argv[3:9]
cpu = subprocess.run(['sh', '-c', "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
cores = subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()
rb = [s0 / s3 for s0, s3, _ in rows]
rd = [s0 / s3 for s0, _, s3 in rows]
md = [f"# ZeRO-3 / stage-0 throughput at {n} ranks ({model})", "",
      f"- date: {datetime.date.today()}, machine: {cpu}, {cores} cores; {n} ranks of 1 thread"
      + (" (oversubscribed: the ranks time-slice the cores)" if int(n) > int(cores) else ""),
      f"- command: `bench/zero_ratio.sh --ranks {n} --reps {reps} --model {model} --steps {steps}`; each run "
      f"`mpirun -np {n} bench_zero --stage S {args} [...]`, step time = the slowest rank's, median of the timed steps",
      f"- per round: stage 0; stage 3 prefetching about one block (`{block}`, zero.sh's sweep); stage 3 with",
      "  DeepSpeed's defaults (bucket 5e7, max live 1e9, persistence 1e5, reuse 1e9: at this model size every unit stays",
      "  gathered after the first use). Ratio = stage-0 ms / stage-3 ms per round.", "",
      "| round | stage 0 ms | stage 3 (one block) ms | ratio | stage 3 (DeepSpeed defaults) ms | ratio |", "|---|---|---|---|---|---|"]
md += [f"| {i + 1} | {a:.1f} | {b:.1f} | {a / b:.3f} | {c:.1f} | {a / c:.3f} |" for i, (a, b, c) in enumerate(rows)]
md += ["", f"**Ratio, stage 3 prefetching one block: median {statistics.median(rb):.3f}, range {min(rb):.3f} - {max(rb):.3f}; "
       f"with DeepSpeed's defaults: median {statistics.median(rd):.3f}, range {min(rd):.3f} - {max(rd):.3f}** (target >= 0.95).", ""]
text = "\n".join(md)
print(text)
open(sys.argv[2], "w").write(text)
PY
