#!/usr/bin/env bash
# Two builds, one machine, one run: the training step (bench_train_step, gpt-mini B=8 T=256, 1 and
# 2 threads) and ZeRO stages 0 and 3 on 4 MPI ranks (bench_zero, gpt-mini, global batch 8), old
# and new alternated REPS times so that a change in machine load hits both. Prints the median
# step time of each and the ratio new / old with its range; appends the rows to OUT (markdown).
# Made for "ratios within noise" checks of refactors (bench/results/engine_refactor.md).
#
#   bench/compare_speed.sh OLD_BUILD_DIR NEW_BUILD_DIR [REPS=3] [OUT=bench/results/compare_speed.md]
set -euo pipefail
OLD="$1"; NEW="$2"; REPS="${3:-3}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${4:-$ROOT/bench/results/compare_speed.md}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
MPI=(mpirun --oversubscribe --bind-to none -np 4)
[ "$(id -u)" = 0 ] && MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4)
tmp=$(mktemp -d)

run() {  # which case -> one step time (ms) on stdout
  local b="$1" c="$2"
  case "$c" in
    step-1t|step-2t)
      local th="${c#step-}"
      "$b/bench/bench_train_step" --model gpt-mini --batch 8 --seq 256 --steps 4 --warmup 1 --threads "${th%t}" 2>/dev/null \
        | tail -n 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["ms_per_step_median"])' ;;
    zero0-np4|zero3-np4)
      local s="${c#zero}"; s="${s%-np4}"; rm -f "$tmp/z.json"
      (cd "$ROOT" && "${MPI[@]}" "$b/bench/bench_zero" --stage "$s" --steps 3 --warmup 1 --threads 1 \
        --prefetch-bucket 2000000 --max-live 4000000 --json "$tmp/z.json" >/dev/null 2>&1)
      python3 -c 'import json,statistics,sys; print(statistics.median(json.loads(open(sys.argv[1]).readlines()[-1])["step_ms_slowest_rank"]))' "$tmp/z.json" ;;
  esac
}

cases=(step-1t step-2t zero0-np4 zero3-np4)
for c in "${cases[@]}"; do
  for ((i = 0; i < REPS; ++i)); do
    echo "$c $(run "$OLD" "$c") $(run "$NEW" "$c")" >> "$tmp/pairs.txt"
  done
done
python3 - "$tmp/pairs.txt" "$OUT" "$OLD" "$NEW" "$REPS" <<'PY'
import datetime, statistics, subprocess, sys
pairs = {}
for line in open(sys.argv[1]):
    c, o, n = line.split(); pairs.setdefault(c, []).append((float(o), float(n)))
cpu = subprocess.run(['sh', '-c', "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
md = [f"## {datetime.date.today()}: `bench/compare_speed.sh {sys.argv[3]} {sys.argv[4]} {sys.argv[5]}`", "",
      f"Machine: {cpu}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores. "
      "Old and new alternated; step time in ms (median over the pairs); ratio = new / old per pair.", "",
      "| case | old ms | new ms | ratio median | ratio range |", "|---|---|---|---|---|"]
for c, ps in pairs.items():
    r = [n / o for o, n in ps]
    md.append(f"| {c} | {statistics.median(o for o, _ in ps):.1f} | {statistics.median(n for _, n in ps):.1f} | "
              f"{statistics.median(r):.3f} | {min(r):.3f} - {max(r):.3f} |")
text = "\n".join(md) + "\n"
print(text)
open(sys.argv[2], "a").write("\n" + text)
PY
rm -rf "$tmp"
