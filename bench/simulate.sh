#!/usr/bin/env bash
# bench/simulate.sh — the step simulator (zt-estimate --time, train/step_time.h) against real runs
# on the cluster in a box (scripts/cluster.sh). For each layout (nodes x ranks) and link setting:
#   1. zt-profile inside the box, the way the training runs (same ranks, nodes, threads, link):
#      the step's ops timed under this layout's contention, the links' alpha and beta, and how
#      much of a collective compute runs beside (compute_pace) — measured before the runs;
#   2. per variant (ZeRO stages 0-3 at DeepSpeed's defaults; stage 2 with the optimizer offloaded
#      to the host, stage 3 with the optimizer and the parameters offloaded; stage 3 with each of
#      ZeRO++'s parts and all three; one rank runs s0 and the offload variants only) one zt-train
#      run in the box (the median step time, steps after the first)
#      and zt-estimate --time on the same config with that profile (the slower of the two ranks it
#      simulates, rank 0 and the last: the step waits for the slowest);
# and prints a markdown row per run: predicted, measured, predicted / measured, and the
# simulator's breakdown (compute, communication busy, exposed). At the end, the median and the
# largest |error| over the rows. JSON lines with every field go to --json.
#
# Usage: bench/simulate.sh [--model gpt-mini] [--steps 6] [--layouts "1x1 1x2 2x2 4x1"]
#                          [--links "none 1gbit 100mbit"]
#                          [--variants "s0 s1 s2 s3 s2off s3off qwZ hpZ qgZ all"]
#                          [--batch 4] [--seq 128] [--repeats 5] [--json FILE]
# Needs root (network namespaces); exits 77 where the box cannot be built.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
MODEL=gpt-mini STEPS=6 LAYOUTS="1x1 1x2 2x2 4x1" LINKS="none 1gbit 100mbit" VARIANTS="s0 s1 s2 s3 s2off s3off qwZ hpZ qgZ all"
BATCH=4 SEQ=128 REPEATS=5 JSON=""
while (($#)); do case "$1" in
  --model) MODEL=$2; shift 2;; --steps) STEPS=$2; shift 2;; --layouts) LAYOUTS=$2; shift 2;;
  --links) LINKS=$2; shift 2;; --variants) VARIANTS=$2; shift 2;; --batch) BATCH=$2; shift 2;;
  --seq) SEQ=$2; shift 2;; --repeats) REPEATS=$2; shift 2;; --json) JSON=$2; shift 2;;
  *) echo "bench/simulate.sh: unknown flag $1" >&2; exit 2;; esac; done
source "$ROOT/bench/zero_variant.sh"  # defines: zero_variant_config
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
[ -n "$JSON" ] && : >"$JSON"
: >"$tmp/errors"

echo "| layout | link | variant | predicted ms/step | measured ms/step | predicted / measured | compute | comm busy | exposed |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
for layout in $LAYOUTS; do
  nodes=${layout%x*}; ranks=${layout#*x}; N=$((nodes * ranks))
  for link in $LINKS; do
    [ "$nodes" = 1 ] && [ "$link" != none ] && continue  # one node: no network to shape
    shaping=(); [ "$link" != none ] && shaping=(--link "$link")
    box=(bash "$ROOT/scripts/cluster.sh" box --name zsim --subnet 10.75.0 --nodes "$nodes" --ranks "$ranks" "${shaping[@]}")
    rc=0
    OMP_NUM_THREADS=1 "${box[@]}" -- "$BUILD/zt-profile" --model "$MODEL" -b "$BATCH" -t "$SEQ" --threads 1 \
      --stages 0,1,2,3 --zeropp --offload --repeats "$REPEATS" -o "$tmp/profile.json" >"$tmp/out" 2>"$tmp/profile.err" || rc=$?
    [ "$rc" = 77 ] && { cat "$tmp/profile.err" >&2; exit 77; }
    [ "$rc" = 0 ] || { echo "bench/simulate.sh: zt-profile on $layout $link failed ($rc):" >&2; tail -20 "$tmp/profile.err" >&2; exit 1; }
    for v in $VARIANTS; do
      # hpZ needs several ranks per node, qgZ's second hop several nodes
      { [ "$N" = 1 ] && [ "$v" != s0 ] && [ "$v" != s2off ] && [ "$v" != s3off ]; } && continue
      { [ "$v" = hpZ ] && [ "$ranks" = 1 ]; } && continue
      zero_variant_config "$v" "$ranks" "$BATCH" >"$tmp/config.json" || exit 2
      rc=0
      OMP_NUM_THREADS=1 "${box[@]}" -- "$BUILD/zt-train" --model "$MODEL" --train "$ROOT/data/corpus/train.txt" \
        --config "$tmp/config.json" -t "$SEQ" --steps "$STEPS" --dist mpi --threads 1 --seed 1 \
        --log "$tmp/log.jsonl" >"$tmp/out" 2>"$tmp/err" || rc=$?
      [ "$rc" = 0 ] || { echo "bench/simulate.sh: $layout $link $v failed ($rc):" >&2; tail -20 "$tmp/err" >&2; exit 1; }
      "$BUILD/zt-estimate" --model "$MODEL" --config "$tmp/config.json" -t "$SEQ" --nd "$N" --nodes "$nodes" \
        --threads 1 --time "$tmp/profile.json" --json >"$tmp/estimate.json"
      python3 - "$tmp/log.jsonl" "$tmp/estimate.json" "$layout" "$link" "$v" "$JSON" "$tmp/errors" <<'PY'
import json, statistics, sys
log, est, layout, link, v, out, errors = sys.argv[1:8]
rows = [json.loads(l) for l in open(log)]
measured = statistics.median(r["step_ms"] for r in rows[1:])
# the slowest simulated rank (rank 0 or the last): every rank waits for it at the step's collectives
t = max((r["time"] for r in json.load(open(est))), key=lambda t: t["step_s"])
pred = t["step_s"] * 1e3
compute, comm = sum(t["compute_s"].values()) * 1e3, sum(t["comm_s"].values()) * 1e3
exposed = (t["exposed_intra_node_s"] + t["exposed_inter_node_s"]) * 1e3
print(f"| {layout} | {link} | {v} | {pred:.0f} | {measured:.0f} | {pred / measured:.3f} | {compute:.0f} | {comm:.0f} | {exposed:.0f} |")
open(errors, "a").write(f"{pred / measured - 1}\n")
if out:
    with open(out, "a") as f:
        f.write(json.dumps({"layout": layout, "link": link, "variant": v, "predicted_ms": pred, "measured_ms": measured,
                            "ratio": pred / measured, "compute_ms": compute, "comm_busy_ms": comm,
                            "exposed_ms": exposed, "forward_ms": t["forward_s"] * 1e3,
                            "backward_ms": t["backward_s"] * 1e3, "optimizer_ms": t["optimizer_s"] * 1e3}) + "\n")
PY
    done
    grep -E "link:|compute_pace|compute beside|all_gather|first.touch" "$tmp/profile.err" | sed "s/^/    $layout $link profile: /" >&2 || true
  done
done
python3 - "$tmp/errors" <<'PY'
import statistics, sys
e = [abs(float(l)) for l in open(sys.argv[1]) if l.strip()]
if e:
    print(f"\n{len(e)} runs: median |error| {100 * statistics.median(e):.1f}%, largest {100 * max(e):.1f}%, "
          f"within 15%: {sum(x <= 0.15 for x in e)} of {len(e)}")
PY
