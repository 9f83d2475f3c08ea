#!/usr/bin/env bash
# bench/zero_ratio.sh — the ZeRO-3 / stage-0 throughput ratio at N ranks, measured as alternated
# pairs (stage 0 then stage 3, REPS times) so that a change in machine load hits both sides.
# Each run: bench_zero with zero.sh's sweep settings (global batch 8 x 256, 1 thread per rank,
# stage-3 prefetch 2e6 / max live 4e6, overlap_comm); ratio per pair = stage-0 ms / stage-3 ms
# (= stage-3 tokens/s over stage-0 tokens/s). Prints and writes bench/results/zero_ratio.md.
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
ARGS=(--model "$MODEL" --global-batch 8 --seq 256 --steps "$STEPS" --warmup 2 --threads 1
      --prefetch-bucket 2000000 --max-live 4000000 --overlap-comm 1)
step_ms() {  # stage -> median slowest-rank step time (ms)
  rm -f "$tmp/z.json"
  (cd "$ROOT" && "${MPI[@]}" "$BUILD/bench/bench_zero" --stage "$1" "${ARGS[@]}" --json "$tmp/z.json" >/dev/null 2>&1)
  python3 -c 'import json,statistics,sys; print(statistics.median(json.loads(open(sys.argv[1]).readlines()[-1])["step_ms_slowest_rank"]))' "$tmp/z.json"
}
for ((i = 0; i < REPS; ++i)); do echo "$(step_ms 0) $(step_ms 3)" >> "$tmp/pairs.txt"; done
python3 - "$tmp/pairs.txt" "$ROOT/bench/results/zero_ratio.md" "$N" "$REPS" "$MODEL" "$STEPS" "${ARGS[*]}" <<'PY'
import datetime, statistics, subprocess, sys
pairs = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
n, reps, model, steps, args = sys.argv[3:8]
cpu = subprocess.run(['sh', '-c', "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
cores = subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()
r = [s0 / s3 for s0, s3 in pairs]
md = [f"# ZeRO-3 / stage-0 throughput at {n} ranks ({model})", "",
      f"- date: {datetime.date.today()}, machine: {cpu}, {cores} cores; {n} ranks of 1 thread"
      + (" (oversubscribed: the ranks time-slice the cores)" if int(n) > int(cores) else ""),
      f"- command: `bench/zero_ratio.sh --ranks {n} --reps {reps} --model {model} --steps {steps}`; each run "
      f"`mpirun -np {n} bench_zero --stage S {args}`, step time = the slowest rank's, median of the timed steps",
      "- stage 0 and stage 3 alternated; ratio = stage-0 ms / stage-3 ms per pair (stage-3 tokens/s over stage-0's)", "",
      "| pair | stage 0 ms | stage 3 ms | ratio |", "|---|---|---|---|"]
md += [f"| {i + 1} | {a:.1f} | {b:.1f} | {a / b:.3f} |" for i, (a, b) in enumerate(pairs)]
md += ["", f"**Ratio: median {statistics.median(r):.3f}, range {min(r):.3f} - {max(r):.3f}** (target >= 0.97).", ""]
text = "\n".join(md)
print(text)
open(sys.argv[2], "w").write(text)
PY
