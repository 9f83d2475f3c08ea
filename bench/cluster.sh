#!/usr/bin/env bash
# bench/cluster.sh — ZeRO's stages on the cluster in a box (scripts/cluster.sh) against the links'
# bandwidth: for each layout (nodes x ranks), link setting and stage, one zt-train run; per run the
# median step time (steps after the first), the share of rank 0's time spent waiting on
# communication (zt-train's summary, every step), the bytes each
# rank moves per step (ring convention) beside the formula (stages 0-2: 2 Psi (N-1)/N, stage 3:
# 3 Psi (N-1)/N elements of 4 bytes, Psi from zt-estimate's padded count), the bytes the ring model
# puts on inter-node links (all ranks, per step, the setup's share included), and the bytes really
# sent on the nodes' links (eth0 counters, all nodes, per step, the launch and setup included) and
# how unevenly the nodes sent them (the largest node's bytes minus the smallest's, over the mean).
# Prints a markdown table and writes JSON lines (bench/cluster_plot.sh draws them).
#
# Usage: bench/cluster.sh [--model gpt-mini] [--steps 6] [--layouts "2x2 4x1"] [--links "none 1gbit 100mbit"]
#                         [--stages "0 1 2 3"] [--batch 4] [--seq 128] [--json FILE]
# Needs root (network namespaces); exits 77 where the box cannot be built.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
MODEL=gpt-mini STEPS=6 LAYOUTS="2x2 4x1" LINKS="none 1gbit 100mbit" STAGES="0 1 2 3" BATCH=4 SEQ=128 JSON=""
while (($#)); do case "$1" in
  --model) MODEL=$2; shift 2;; --steps) STEPS=$2; shift 2;; --layouts) LAYOUTS=$2; shift 2;;
  --links) LINKS=$2; shift 2;; --stages) STAGES=$2; shift 2;; --batch) BATCH=$2; shift 2;;
  --seq) SEQ=$2; shift 2;; --json) JSON=$2; shift 2;;
  *) echo "bench/cluster.sh: unknown flag $1" >&2; exit 2;; esac; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
[ -n "$JSON" ] && : >"$JSON"

echo "| layout | link | stage | ms/step | comm wait (rank 0's share of its step time) | bytes/rank/step | formula | inter-node, ring model (all ranks) | on the wire (all nodes) | spread between nodes |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for layout in $LAYOUTS; do
  nodes=${layout%x*}; ranks=${layout#*x}; N=$((nodes * ranks))
  for link in $LINKS; do
    shaping=(); [ "$link" != none ] && shaping=(--link "$link")
    for st in $STAGES; do
      psi=$("$BUILD/zt-estimate" --model "$MODEL" --stage "$st" --nd "$N" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["psi_padded"])')
      rc=0
      OMP_NUM_THREADS=1 bash "$ROOT/scripts/cluster.sh" box --name zbench --subnet 10.76.0 --nodes "$nodes" \
        --ranks "$ranks" "${shaping[@]}" -- "$BUILD/zt-train" --model "$MODEL" --train "$ROOT/data/corpus/train.txt" \
        -b "$BATCH" -t "$SEQ" --steps "$STEPS" --zero-stage "$st" --dist mpi --threads 1 --seed 1 \
        --log "$tmp/log.jsonl" >"$tmp/out" 2>"$tmp/err" || rc=$?
      [ "$rc" = 77 ] && { cat "$tmp/err" >&2; exit 77; }
      [ "$rc" = 0 ] || { echo "bench/cluster.sh: $layout $link stage $st failed ($rc):" >&2; tail -20 "$tmp/err" >&2; exit 1; }
      python3 - "$tmp/log.jsonl" "$tmp/err" "$layout" "$link" "$st" "$N" "$psi" "$STEPS" "$JSON" <<'PY'
import json, re, statistics, sys
log, err, layout, link, st, N, psi, steps, out = sys.argv[1:10]
N, psi, st, steps = int(N), int(psi), int(st), int(steps)
rows = [json.loads(l) for l in open(log)]
ms = statistics.median(r["step_ms"] for r in rows[1:])
# per step: the difference between the last and the first step's counters (the setup's and the
# first step's collectives left out)
per_step = (rows[-1]["comm_bytes"] - rows[0]["comm_bytes"]) / (len(rows) - 1)
inter_rank0 = (rows[-1]["comm_bytes_inter_node"] - rows[0]["comm_bytes_inter_node"]) / (len(rows) - 1)
text = open(err).read()
wait = re.search(r"comm wait.*\n\s+0\s+([0-9.]+)\s+[0-9.]+\s+[0-9.]+\s+([0-9.]+)", text)
wait_share = float(wait.group(2)) / float(wait.group(1)) if wait else float("nan")  # of rank 0's step time
inter = re.search(r"inter-node \(ring model\)\n((?:\s+\d+ .*\n)+)", text)
def parse(s):
    n, u = s.split(); return float(n) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[u]
# all ranks' inter-node bytes (the summary's column, over every step, setup included) per step
inter_total = sum(parse(" ".join(l.split()[-2:])) for l in inter.group(1).splitlines()) / len(rows) if inter else 0.0
wire = re.search(r"on the wire .*all nodes ([0-9.]+) MiB", text)
wire_step = float(wire.group(1)) * 2**20 / len(rows) if wire else float("nan")
nodes = [float(m) for m in re.findall(r"node \d+ ([0-9.]+) MiB", text)]
spread = (max(nodes) - min(nodes)) / (sum(nodes) / len(nodes)) if nodes and sum(nodes) else float("nan")
formula = (3 if st == 3 else 2) * psi * 4 * (N - 1) / N
mib = lambda b: f"{b / 2**20:.2f} MiB"
print(f"| {layout} | {link} | {st} | {ms:.0f} | {100 * wait_share:.0f}% | {mib(per_step)} | {mib(formula)} | {mib(inter_total)} | {mib(wire_step)} | {100 * spread:.1f}% |")
if out:
    with open(out, "a") as f:
        f.write(json.dumps({"layout": layout, "link": link, "stage": st, "ms_per_step": ms, "comm_wait_share": wait_share,
                            "bytes_per_rank_step": per_step, "formula_bytes": formula, "inter_node_ring_model": inter_total, "inter_node_rank0_per_step": inter_rank0,
                            "wire_bytes_per_step": wire_step, "wire_node_spread": spread}) + "\n")
PY
    done
  done
done
