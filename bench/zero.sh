#!/usr/bin/env bash
# bench/zero.sh — ZeRO stages 0-3 on N = 1, 2, 4, 8 MPI ranks of this machine, gpt-mini, the same
# global batch for every N (8 sequences x T = 256: 8/N per rank): memory per rank by category,
# bytes moved per step, step time, tokens/s, the stage-3 / stage-0 throughput ratio per N, and a
# few stage-3 variants at N = 4 (overlap_comm, prefetch bucket, reuse, threads) to see where the
# time goes. Writes bench/results/zero.md and bench/results/zero.json (one JSON object per run).
# Usage: bench/zero.sh [--steps 5] [--warmup 2] [--ranks "1 2 4 8"] [--no-variants] [--report-only]
#        (--report-only: rewrite zero.md from the existing zero.json, running nothing)
#        (needs bench_zero in ${BUILD_DIR:-build}/bench)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
STEPS=5; WARMUP=2; RANKS="1 2 4 8"; VARIANTS=1; REPORT_ONLY=0
while (($#)); do case "$1" in
  --steps) STEPS=$2; shift 2;; --warmup) WARMUP=$2; shift 2;; --ranks) RANKS=$2; shift 2;;
  --no-variants) VARIANTS=0; shift;; --report-only) REPORT_ONLY=1; shift;; *) echo "unknown flag $1" >&2; exit 2;; esac; done
BIN="$BUILD/bench/bench_zero"
out="$ROOT/bench/results/zero.json"
md_out="$ROOT/bench/results/zero.md"
if (( REPORT_ONLY )); then  # the sweep's settings and duration as the last full run recorded them
  elapsed=$(sed -n 's/.*(sweep took \([0-9]*\) s).*/\1/p' "$md_out" | head -n 1); elapsed=${elapsed:-0}
  read -r STEPS WARMUP < <(python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).readline()); print(r['steps'], r['warmup'])" "$out")
  RANKS=$(python3 -c "import json,sys; print(' '.join(dict.fromkeys(str(json.loads(l)['world_size']) for l in open(sys.argv[1]) if json.loads(l)['label']=='sweep')))" "$out")
else
[ -x "$BIN" ] || BUILD_DIR="$BUILD" bash "$ROOT/scripts/build.sh" -DZT_BUILD_BENCH=ON
[ -x "$BIN" ] || { echo "bench/zero.sh: $BIN was not built" >&2; exit 1; }
CORES=$(nproc)
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"  # idle OpenMP threads must not spin on shared cores
# Common settings of the sweep: stage-3 prefetch of about one transformer block (gpt-mini's blocks
# hold 1.77M parameters; DeepSpeed's default 5e7 would prefetch the whole model) with at most 4M
# parameters gathered (stage3_max_live_parameters; the variants show DeepSpeed's defaults), nothing
# persistent and no reuse across
# forward/backward (the paper's pure ZeRO-3: 3Psi moved per step).
COMMON=(--model gpt-mini --global-batch 8 --seq 256 --steps "$STEPS" --warmup "$WARMUP"
        --data "$ROOT/data/corpus/train.txt" --overlap-comm 1 --prefetch-bucket 2000000
        --max-live 4000000 --persistence 0 --reuse-distance 0)
: > "$out"
run() {  # run N threads label args...
  local n=$1 th=$2 label=$3; shift 3
  echo "== N=$n threads/rank=$th $label $*" >&2
  mpirun -np "$n" --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS="$th" -x OMP_WAIT_POLICY \
    "$BIN" "${COMMON[@]}" --threads "$th" --label "$label" --json "$out" "$@" >&2
}
start=$(date +%s)
for n in $RANKS; do
  th=$(( CORES / n )); (( th >= 1 )) || th=1  # threads per rank = cores / ranks, at least 1
  probe=(); (( n > 1 )) && probe=(--probe)
  for stage in 0 1 2 3; do run "$n" "$th" sweep --stage "$stage" "${probe[@]}"; done
done
if (( VARIANTS )); then  # where stage 3's time goes at N = 4 (stage 0 repeated as the reference)
  run 4 1 "stage0-again" --stage 0
  run 4 1 "overlap_comm=0" --stage 3 --overlap-comm 0
  run 4 1 "prefetch=0" --stage 3 --prefetch-bucket 0
  run 4 1 "max_live=1e9 (default)" --stage 3 --max-live 1000000000
  run 4 1 "DeepSpeed defaults (prefetch 5e7, max_live 1e9, reuse 1e9, persistence 1e5)" --stage 3 \
    --prefetch-bucket 50000000 --max-live 1000000000 --reuse-distance 1000000000 --persistence 100000
  run 4 2 "threads=2/rank (stage 0)" --stage 0
  run 4 2 "threads=2/rank" --stage 3
  for stage in 0 1 2 3; do run 4 1 "bf16" --stage "$stage" --precision bf16; done
fi
elapsed=$(( $(date +%s) - start ))
fi

python3 - "$out" "$md_out" "$STEPS" "$WARMUP" "$RANKS" "$elapsed" <<'PY'
import json, sys, datetime, platform, subprocess
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps, warmup, ranks, elapsed = sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
sh = lambda c: subprocess.run(['sh', '-c', c], capture_output=True, text=True).stdout.strip()
cpu, cores = sh("lscpu | sed -n 's/^Model name: *//p'"), int(sh('nproc'))
mpi = sh("mpirun --version 2>&1 | head -n 1")
MiB = lambda b: f"{b / 2**20:.1f}"
sweep = [r for r in rows if r['label'] == 'sweep']
var = [r for r in rows if r['label'] not in ('sweep', 'bf16')]
mixed = [r for r in rows if r['label'] == 'bf16']
P = sweep[0]['psi_padded'] if sweep else 0
md = ["# ZeRO stages 0-3 on N ranks of one machine: memory, communication, speed", "",
      f"- date: {datetime.date.today()}, machine: {cpu}, {cores} cores, {platform.system()} {platform.release()}, {mpi}",
      f"- command: `bench/zero.sh --steps {steps} --warmup {warmup} --ranks \"{ranks}\"` (sweep took {elapsed} s); each run: "
      "`mpirun -np N --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=T bench_zero --stage S "
      "--global-batch 8 --seq 256 --prefetch-bucket 2000000 --max-live 4000000 --persistence 0 --reuse-distance 0 --overlap-comm 1`",
      f"- model gpt-mini (6 layers, 384 wide, vocab 256): Psi = {sweep[0]['psi'] if sweep else 0:,} parameters, "
      f"{P:,} with each unit padded to a multiple of N x 16 (the same for every N here); fp32, AdamW, clipping 1.0; "
      "data data/corpus/train.txt (bytes); global batch 8 x 256 tokens for every N (8/N sequences per rank).",
      f"- **Only {cores} cores**: N = 1 runs {cores} threads, N = 2 one thread per rank; **N = 4 and N = 8 are "
      f"oversubscribed** ({cores} cores shared by N ranks of 1 thread each plus each rank's MPI thread), so their "
      "times measure time-slicing, not scaling. The machine is shared with other jobs: expect ~10% noise on times.",
      f"- {warmup} warmup steps (the first records the stage-3 order), then {steps} timed steps; step time = the slowest "
      "rank's wall time of `Trainer::step()` after a barrier, median over the timed steps. Peaks are per step "
      "(Trainer::step resets them), max over the timed steps, rank 0 (every rank measured the same: zero.json).", ""]

md += ["## Memory per rank (MiB): peak by category, and the model states at rest against the formula", "",
       "Formula (zero/engine.h, fp32, Psi = padded): stage 0 16Psi, 1 8Psi + 8Psi/N, 2 4Psi + 12Psi/N, 3 16Psi/N. "
       "'at rest' = params + grads + optim current after a step.", "",
       "| N | stage | B/rank | params | grads | optim | activations | comm | workspace | peak total | at rest | formula | equal |",
       "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for r in sweep:
    k = r['ranks'][0]; p = k['peak_bytes']
    md.append(f"| {r['world_size']} | {r['stage']} | {r['batch_per_rank']} | {MiB(p['params'])} | {MiB(p['grads'])} | "
              f"{MiB(p['optim'])} | {MiB(p['activations'])} | {MiB(p['comm'])} | {MiB(p['workspace'])} | "
              f"{MiB(k['peak_total_bytes'])} | {MiB(k['model_state_rest_bytes'])} | {MiB(r['model_state_formula_bytes'])} | "
              f"{'yes' if k['model_state_rest_bytes'] == r['model_state_formula_bytes'] else 'NO'} |")

md += ["", "## Bytes moved per step per rank (ring convention, dist/process_group.h)", "",
       "Formula: 2Psi(N-1)/N x 4 bytes (stages 0-2), 3Psi(N-1)/N x 4 bytes (stage 3). The measured total also holds "
       "the all-reduced doubles (loss; grad norm in stages 1-3: 8 bytes each x 2(N-1)/N).", "",
       "| N | stage | all_reduce | reduce_scatter | all_gather | total | formula | total - formula | calls (ar/rs/ag) |",
       "|---|---|---|---|---|---|---|---|---|"]
for r in sweep:
    k = r['ranks'][0]; b = k['bytes_per_step']; c = k['calls_per_step']
    md.append(f"| {r['world_size']} | {r['stage']} | {b['all_reduce']:,} | {b['reduce_scatter']:,} | {b['all_gather']:,} | "
              f"{k['bytes_per_step_total']:,} | {r['comm_formula_bytes']:,} | {k['bytes_per_step_total'] - r['comm_formula_bytes']:,} | "
              f"{c['all_reduce']}/{c['reduce_scatter']}/{c['all_gather']} |")

md += ["", "## Speed", "",
       "'wait' = median ms per step the training thread spent blocked in Work::wait() (communication not hidden by "
       "compute), rank 0. 'bare' = one all-gather + one reduce-scatter + one all-reduce of Psi elements timed alone "
       "(--probe, median of 3). ratio = stage-3 tokens/s / stage-0 tokens/s at the same N.", "",
       "| N | threads/rank | stage | median ms/step | tokens/s (global) | wait ms (rank 0) | bare ag / rs / ar ms | stage / stage 0 |",
       "|---|---|---|---|---|---|---|---|"]
base = {r['world_size']: r['tokens_per_s'] for r in sweep if r['stage'] == 0}
for r in sweep:
    pr = r.get('probe_ms'); bare = f"{pr['all_gather']:.0f} / {pr['reduce_scatter']:.0f} / {pr['all_reduce']:.0f}" if pr else "-"
    md.append(f"| {r['world_size']} | {r['threads_per_rank']} | {r['stage']} | {r['step_ms_median']:.0f} | {r['tokens_per_s']:.0f} | "
              f"{r['ranks'][0]['wait_ms_median_total']:.0f} | {bare} | {r['tokens_per_s'] / base[r['world_size']]:.3f} |")
md += ["", "Stage-3 / stage-0 throughput (target: >= 0.85 at N = 4): " + ", ".join(
    f"N = {r['world_size']}: {r['tokens_per_s'] / base[r['world_size']]:.3f}" for r in sweep if r['stage'] == 3)]

if var:
    ref = [r for r in sweep if r['world_size'] == 4 and r['stage'] == 0]
    md += ["", "## Stage-3 variants at N = 4 (where the time goes)", "",
           "Same run as the sweep with one setting changed; ratio against the mean of the two stage-0 runs at N = 4 "
           "with the same threads per rank.", "",
           "| variant | stage | threads/rank | median ms/step | tokens/s | wait ms (rank 0): all_gather / reduce_scatter / all_reduce | "
           "peak params MiB | all_gather bytes | ratio vs stage 0 |", "|---|---|---|---|---|---|---|---|---|"]
    def stage0_tps(th):
        xs = [r['tokens_per_s'] for r in ref + var if r['stage'] == 0 and r['threads_per_rank'] == th and r['world_size'] == 4]
        return sum(xs) / len(xs) if xs else float('nan')
    for r in [x for x in sweep if x['world_size'] == 4 and x['stage'] == 3] + var:
        k = r['ranks'][0]; w = k['wait_ms_median']
        name = 'sweep (overlap 1, prefetch 2e6, max_live 4e6)' if r['label'] == 'sweep' else r['label']
        md.append(f"| {name} | {r['stage']} | {r['threads_per_rank']} | {r['step_ms_median']:.0f} | {r['tokens_per_s']:.0f} | "
                  f"{w['all_gather']:.0f} / {w['reduce_scatter']:.0f} / {w['all_reduce']:.0f} | {MiB(k['peak_bytes']['params'])} | "
                  f"{k['bytes_per_step']['all_gather']:,} | {r['tokens_per_s'] / stage0_tps(r['threads_per_rank']):.3f} |")
if mixed:
    fp32_4 = {r['stage']: r for r in sweep if r['world_size'] == 4}
    md += ["", "## Mixed precision (bf16) at N = 4", "",
           "Same runs as the sweep at N = 4 with `--precision bf16`: 2-byte parameters and gradients, the fp32 master in "
           "optim. Formula (the paper's, K = 12): stage 0 16Psi, 1 4Psi + 12Psi/N, 2 2Psi + 14Psi/N, 3 16Psi/N; bytes moved "
           "2Psi / 3Psi x (N-1)/N x 2 bytes. The CPU computes in fp32, so each unit in use also holds fp32 copies "
           "(workspace).", "",
           "| stage | params | grads | optim | workspace | at rest | formula | equal | bytes moved | formula | median ms/step | "
           "bf16 / fp32 throughput |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(mixed, key=lambda r: r['stage']):
        k = r['ranks'][0]; p = k['peak_bytes']; f = fp32_4.get(r['stage'])
        ratio = f"{r['tokens_per_s'] / f['tokens_per_s']:.3f}" if f else "-"
        md.append(f"| {r['stage']} | {MiB(p['params'])} | {MiB(p['grads'])} | {MiB(p['optim'])} | {MiB(p['workspace'])} | "
                  f"{MiB(k['model_state_rest_bytes'])} | {MiB(r['model_state_formula_bytes'])} | "
                  f"{'yes' if k['model_state_rest_bytes'] == r['model_state_formula_bytes'] else 'NO'} | "
                  f"{k['bytes_per_step_total']:,} | {r['comm_formula_bytes']:,} | {r['step_ms_median']:.0f} | {ratio} |")

md += ["", "## Notes", "",
       "- Stage 3 moves 3Psi plus one more all-gather of the embedding unit (wte + wpe, 196,608 parameters: "
       "786,432 x (N-1)/N bytes, the 'total - formula' column less the scalars): GPT-2's head reads the tied wte, so the "
       "embedding unit is gathered for the embedding's forward, for the head's forward, and once for the whole backward "
       "(its LeafGroup span runs from the head's backward to the embedding's).",
       "- Stage-3 prefetch window (zero/engine.cpp Engine::prefetch_after): the units after the one being acquired are "
       "gathered while the units ahead (gathered already or not) fit stage3_prefetch_bucket_size, and never past "
       "stage3_max_live_parameters gathered elements. An earlier version did not count units already gathered against "
       "the bucket, so at the default max_live the whole model ended up gathered; fixed on 2026-11-21, and every row "
       "here was measured after the fix.",
       "- N = 4 and 8 run 1 thread per rank on 2 cores: the ranks time-slice, so tokens/s stays flat instead of scaling; "
       "the stage ratios compare the stages under the same oversubscription.", ""]
md += ["Raw JSON (one object per run, every rank's numbers under \"ranks\"): zero.json.", ""]
open(sys.argv[2], 'w').write("\n".join(md))
print("\n".join(md))
PY
