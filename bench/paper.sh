#!/usr/bin/env bash
# bench/paper.sh — the ZeRO paper reproduction in one command. Writes bench/results/zero_paper.md,
# bench/results/zero_paper.json (the tables, every run's raw record, the checks) and
# bench/results/zero_paper_*.png:
#   a) Tables 1 and 2 of Rajbhandari et al. 2019 (arXiv:1910.02054) from our estimator beside the
#      printed values (bench_paper; zero/paper_tables.h);
#   b) the measured counterpart on this machine: bench_zero (stages 0-3 x N ranks: model states per
#      rank and bytes moved per step against the formulas; 2 warmup + 1 timed step each) and
#      bench_capacity (the largest model per stage at N = --cap-ranks, and per offload tier at
#      N = 1, under one device cap);
#   c) gnuplot plots of both.
# Usage: bench/paper.sh [--quick] [--models "gpt-mini gpt2-nano"] [--ranks "1 2 4 8"] [--cap-mib 32]
#                       [--cap-ranks 4] [--cap-steps 3] [--no-capacity] [--report-only]
#   --quick        gpt2-nano only, a 16 MiB cap, stage tiers at N = 2 (a few minutes)
#   --report-only  rewrite the md and the plots from the existing zero_paper.json, running nothing
#   (builds bench_zero, bench_capacity and bench_paper into ${BUILD_DIR:-build} when missing)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
MODELS="gpt-mini gpt2-nano"; RANKS="1 2 4 8"; CAP=32; CAP_RANKS=4; CAP_STEPS=3; CAPACITY=1; REPORT_ONLY=0; QUICK=0
ARGS="$*"
while (($#)); do case "$1" in
  --quick) QUICK=1; MODELS="gpt2-nano"; CAP=16; CAP_RANKS=2; shift;;
  --models) MODELS=$2; shift 2;; --ranks) RANKS=$2; shift 2;; --cap-mib) CAP=$2; shift 2;;
  --cap-ranks) CAP_RANKS=$2; shift 2;; --cap-steps) CAP_STEPS=$2; shift 2;; --no-capacity) CAPACITY=0; shift;;
  --report-only) REPORT_ONLY=1; shift;; *) echo "bench/paper.sh: unknown flag $1" >&2; exit 2;; esac; done
RES="$ROOT/bench/results"
OUT_JSON="$RES/zero_paper.json"
MD="$RES/zero_paper.md"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
command -v gnuplot >/dev/null || { echo "bench/paper.sh: gnuplot not found (scripts/install-deps.sh installs gnuplot-nox)" >&2; exit 1; }

if [ ! -x "$BUILD/bench/bench_zero" ] || [ ! -x "$BUILD/bench/bench_capacity" ] || [ ! -x "$BUILD/bench/bench_paper" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DZT_BUILD_BENCH=ON >/dev/null
  cmake --build "$BUILD" -j"$(nproc)" --target bench_zero bench_capacity bench_paper
fi
for b in bench_zero bench_capacity bench_paper; do
  [ -x "$BUILD/bench/$b" ] || { echo "bench/paper.sh: $BUILD/bench/$b was not built" >&2; exit 1; }
done

if (( REPORT_ONLY )); then
  [ -f "$OUT_JSON" ] || { echo "bench/paper.sh: --report-only needs $OUT_JSON" >&2; exit 1; }
  cp "$OUT_JSON" "$TMP/prev.json"
  "$BUILD/bench/bench_paper" --from "$TMP/prev.json" --out-json "$OUT_JSON" --md "$MD" --plot-dir "$TMP/plot" >/dev/null
else
  export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"  # idle OpenMP threads must not spin on shared cores
  CORES=$(nproc)
  DATA="$ROOT/data/corpus/train.txt"
  start=$(date +%s)
  # b1) model states and bytes moved: every model x N x stage; T = 64, the same global batch of 8
  # sequences for every N; the stage-3 knobs of bench/zero.sh (pure ZeRO-3: no persistence, no reuse).
  for m in $MODELS; do
    for n in $RANKS; do
      th=$(( CORES / n )); (( th >= 1 )) || th=1
      for stage in 0 1 2 3; do
        echo "== $m N=$n stage $stage" >&2
        mpirun -np "$n" --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS="$th" -x OMP_WAIT_POLICY \
          "$BUILD/bench/bench_zero" --model "$m" --data "$DATA" --global-batch 8 --seq 64 --warmup 2 --steps 1 \
          --stage "$stage" --threads "$th" --overlap-comm 1 --prefetch-bucket 2000000 --max-live 4000000 \
          --persistence 0 --reuse-distance 0 --label paper --json "$TMP/zero.jsonl" >&2
      done
    done
  done
  : > "$TMP/capacity.jsonl"
  if (( CAPACITY )); then
    NVME_DIR="$BUILD/paper_capacity_nvme"  # the swap files: a disk-backed filesystem (O_DIRECT; not tmpfs)
    SHAPE=(--n-embd 128 --n-head 4 --seq-len 64 --batch 4 --vocab 256 --cap-mib "$CAP" --steps "$CAP_STEPS"
           --cap-from setup --data "$DATA" --nvme-dir "$NVME_DIR" --json "$TMP/capacity.jsonl")
    # b2) the ZeRO stages on CAP_RANKS ranks (1 thread each), then the offload tiers on one rank.
    "$BUILD/bench/bench_capacity" "${SHAPE[@]}" --ranks "$CAP_RANKS" --threads 1 --tiers stage0,stage1,stage2,stage3
    "$BUILD/bench/bench_capacity" "${SHAPE[@]}" --ranks 1 --threads "$CORES" --tiers stage0,stage3+cpu,stage3+nvme
    rmdir "$NVME_DIR" 2>/dev/null || true
  fi
  elapsed=$(( $(date +%s) - start ))
  cpu=$(lscpu | sed -n 's/^Model name: *//p'); ram=$(free -g | awk '/^Mem:/ {print $2}')
  machine="$cpu, $CORES cores, $ram GiB RAM, $(uname -sr), $(mpirun --version 2>&1 | head -n 1)"
  "$BUILD/bench/bench_paper" --zero-jsonl "$TMP/zero.jsonl" --capacity-jsonl "$TMP/capacity.jsonl" \
    --out-json "$OUT_JSON" --md "$MD" --plot-dir "$TMP/plot" \
    --meta "date=$(date +%F)" --meta "machine=$machine" \
    --meta "command=\`bench/paper.sh${ARGS:+ $ARGS}\` (models: $MODELS; N = $RANKS; cap $CAP MiB, stage tiers at N = $CAP_RANKS, $CAP_STEPS steps per capacity trial)" \
    --meta "elapsed_s=$elapsed s for all runs on this machine (OMP_WAIT_POLICY=PASSIVE)" >/dev/null
fi

# c) plots
P="$TMP/plot"
while read -r m psi; do
  gnuplot <<EOF
set terminal pngcairo size 1150,640 font ",11"
set output "$RES/zero_paper_memory_$m.png"
set title "Model states per rank at rest, $m (Psi = $psi, fp32): measured (points) on the formula (lines)\nlines: the formula on the unpadded Psi; a point sits above its line by its padding share (zero_paper.md)" noenhanced
set xlabel "N (MPI ranks)"; set ylabel "MiB per rank (params + grads + optim)"
set logscale x 2; set xrange [0.85:9.5]; set xtics ("1" 1, "2" 2, "4" 4, "8" 8)
set yrange [0:*]; set grid; set key outside right top vertical box
plot "$P/memf_$m.dat" u 1:2 w l lw 2 lc rgb "#1f77b4" t "stage 0: 16Psi", \
     "" u 1:3 w l lw 2 lc rgb "#ff7f0e" t "stage 1: 8Psi + 8Psi/N", \
     "" u 1:4 w l lw 2 lc rgb "#2ca02c" t "stage 2: 4Psi + 12Psi/N", \
     "" u 1:5 w l lw 2 lc rgb "#d62728" t "stage 3: 16Psi/N", \
     "$P/mem_$m.dat" u 1:2 w p pt 7 ps 1.8 lc rgb "#1f77b4" t "stage 0 measured", \
     "" u 1:3 w p pt 5 ps 1.4 lc rgb "#ff7f0e" t "stage 1 measured", \
     "" u 1:4 w p pt 9 ps 1.8 lc rgb "#2ca02c" t "stage 2 measured", \
     "" u 1:5 w p pt 11 ps 1.8 lc rgb "#d62728" t "stage 3 measured"
EOF
done < "$P/models.txt"

plots=""; i=0
pts=(7 5 9 11); cols=("#1f77b4" "#ff7f0e" "#2ca02c" "#d62728")
while read -r m psi; do
  for s in 0 1 2 3; do
    off=$(awk -v s=$s -v i=$i 'BEGIN {printf "%.3f", 1 + 0.025 * (s - 1.5) + 0.012 * i}')  # spread the points apart
    plots+=", \"$P/comm_$m.dat\" u (\$1*$off):$((s + 2)) w p pt $(( pts[s] + i )) ps 1.5 lc rgb \"${cols[s]}\" t \"$m stage $s\""
  done
  i=$((i + 1))
done < "$P/models.txt"
gnuplot <<EOF
set terminal pngcairo size 960,640 font ",11"
set output "$RES/zero_paper_comm.png"
set title "Bytes moved per step per rank (ring convention), in units of Psi fp32 elements (4 Psi bytes)"
set xlabel "N (MPI ranks)"; set ylabel "bytes moved / (4 Psi)"
set logscale x 2; set xrange [0.85:9.5]; set xtics ("1" 1, "2" 2, "4" 4, "8" 8)
set yrange [-0.1:3.2]; set grid; set key top left box opaque
set label 1 "stage-3 points sit above 3Psi by one more gather of GPT-2's tied embedding unit\n(wte + wpe: 29% of gpt2-nano, 1.8% of gpt-mini; zero_paper.md's bytes table: residual 0)" at graph 0.98, graph 0.06 right font ",10" noenhanced
plot 2*(x-1)/x w l lw 2 lc rgb "#555555" t "stages 0-2: 2Psi (N-1)/N", \
     3*(x-1)/x w l lw 2 dt 2 lc rgb "#000000" t "stage 3: 3Psi (N-1)/N"$plots
EOF

if [ -s "$P/capacity.dat" ] && [ "$(grep -vc '^#' "$P/capacity.dat")" -gt 0 ]; then
  gnuplot <<EOF
set terminal pngcairo size 960,640 font ",11"
set output "$RES/zero_paper_capacity.png"
set title "Largest GPT-2-family model that trains under one device cap ($CAP MiB), per ZeRO stage and offload tier"
set ylabel "parameters (millions, log scale)"; set logscale y; set yrange [0.5:*]
set style fill solid 0.7 border -1; set boxwidth 0.6; set grid y; set key top left box opaque
set xtics rotate by -25 scale 0; set xrange [-0.6:*]
plot "$P/capacity.dat" u 1:3:xtic(2) w boxes lc rgb "#4c72b0" t "measured: largest Psi that trains", \
     "" u 1:(\$4 > 0 ? \$4 : 1/0) w p pt 7 ps 1.6 lc rgb "#dd8452" t "stage 0's Psi x 16 / (model-state bytes per parameter on the device)", \
     "" u 1:3:(sprintf("%.2fM", \$3)) w labels offset 0,0.8 notitle
EOF
fi
echo "bench/paper.sh: wrote $MD, $OUT_JSON and $(ls "$RES"/zero_paper_*.png | wc -l) plots" >&2
