#!/usr/bin/env bash
# bench/simulate_tiers.sh — the step simulator on the offload tiers of this machine: the capacity
# ladder's model (bench/capacity.sh: GPT-2 width 128, 4 heads, T 64, B 4, byte vocabulary,
# activation checkpointing, stage 3 with its knobs) at stage 3 with everything offloaded to the
# host (cpu) and to the swap files (nvme), on 1 rank (every core) and on 2 (one thread each):
#   1. zt-profile, launched as the trials are: the step's ops (with --offload: the host tier's
#      AdamW apart), the link between the ranks, and the NVMe tier (--nvme-path: the swap files'
#      reads and writes, every rank at once);
#   2. per tier and size, one bench_capacity trial (uncapped) that measures the steps and, with
#      --profile, simulates the same trial's dry run on that profile;
# and prints predicted beside measured (the median step after the first), with the simulated NVMe
# queue's busy and exposed time.
#
# Usage: bench/simulate_tiers.sh [--layers "8 64"] [--steps 4] [--repeats 5] [--nvme-dir DIR] [--json FILE]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${BUILD_DIR:-$ROOT/build}" && pwd)"
LAYERS="8 64" STEPS=4 REPEATS=5 NVME="$BUILD/simulate_tiers_nvme" JSON=""
while (($#)); do case "$1" in
  --layers) LAYERS=$2; shift 2;; --steps) STEPS=$2; shift 2;; --repeats) REPEATS=$2; shift 2;;
  --nvme-dir) NVME=$(realpath -m "$2"); shift 2;; --json) JSON=$(realpath -m "$2"); shift 2;;
  *) echo "bench/simulate_tiers.sh: unknown flag $1" >&2; exit 2;; esac; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp" "$NVME"' EXIT
mkdir -p "$NVME"
MPI=(mpirun --oversubscribe --bind-to none -np 2)
[ "$(id -u)" = 0 ] && MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2)
cores=$(nproc)
# bench_capacity's default family member (FamilyShape), as a model file for zt-profile
cat >"$tmp/model.json" <<'EOF'
{"family": "gpt2", "n_layer": 8, "n_embd": 128, "n_head": 4, "vocab_size": 256, "max_seq_len": 64}
EOF
: >"$tmp/rows.jsonl"
echo "| ranks | tier | layers | predicted ms/step | measured ms/step | predicted / measured | nvme busy ms | nvme exposed ms |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|"
for N in 1 2; do
  if [ "$N" = 1 ]; then threads=$cores launch=(); else threads=1 launch=("${MPI[@]}" -x OMP_NUM_THREADS=1); fi
  OMP_NUM_THREADS=$threads "${launch[@]}" "$BUILD/zt-profile" --model "$tmp/model.json" -b 4 -t 64 --threads "$threads" \
    --stages 3 --offload --activation-checkpointing --cpu-checkpointing --nvme-path "$NVME" --repeats "$REPEATS" -o "$tmp/profile$N.json" \
    >/dev/null 2>"$tmp/profile.err" || { echo "bench/simulate_tiers.sh: zt-profile on $N rank(s) failed:" >&2; tail -20 "$tmp/profile.err" >&2; exit 1; }
  grep -E "nvme|link:|compute_pace" "$tmp/profile.err" | sed "s/^/  profile ($N rank(s)): /" >&2 || true
  for tier in stage3+cpu stage3+nvme; do
    for L in $LAYERS; do
      rm -f "$tmp/r.json"
      OMP_NUM_THREADS=$threads "${launch[@]}" "$BUILD/bench/bench_capacity" --trial --tier "$tier" --layers "$L" \
        --cap-bytes 0 --host-cap-bytes 0 --steps "$STEPS" --threads "$threads" --nvme-dir "$NVME" \
        --data "$ROOT/data/corpus/train.txt" --result "$tmp/r.json" --profile "$tmp/profile$N.json" >/dev/null 2>"$tmp/trial.err" ||
        { echo "bench/simulate_tiers.sh: trial $tier L $L on $N rank(s) failed:" >&2; tail -20 "$tmp/trial.err" >&2; exit 1; }
      python3 - "$tmp/r.json" "$N" "$tier" "$L" >>"$tmp/rows.jsonl" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(json.dumps({"ranks": int(sys.argv[2]), "tier": sys.argv[3], "layers": int(sys.argv[4]),
                  "predicted_ms": r["predicted_step_ms"], "measured_ms": r["step_ms_median"],
                  "nvme_busy_ms": r["predicted_nvme_ms"], "nvme_exposed_ms": r["predicted_exposed_nvme_ms"],
                  "untimed_ms": r["predicted_untimed_ms"],
                  "measured_phase_ms": r["phase_ms_median"], "predicted_phase_ms": r["predicted_phase_ms"]}))
PY
      python3 - "$tmp/rows.jsonl" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print(f"| {r['ranks']} | {r['tier']} | {r['layers']} | {r['predicted_ms']:.0f} | {r['measured_ms']:.0f} | "
      f"{r['predicted_ms'] / r['measured_ms']:.3f} | {r['nvme_busy_ms']:.0f} | {r['nvme_exposed_ms']:.0f} |")
PY
    done
  done
done
[ -n "$JSON" ] && cp "$tmp/rows.jsonl" "$JSON"
python3 - "$tmp/rows.jsonl" <<'PY'
import json, statistics, sys
e = [abs(r["predicted_ms"] / r["measured_ms"] - 1) for r in map(json.loads, open(sys.argv[1]))]
print(f"\n{len(e)} runs: median |error| {100 * statistics.median(e):.1f}%, largest {100 * max(e):.1f}%, "
      f"within 15%: {sum(x <= 0.15 for x in e)} of {len(e)}")
PY
