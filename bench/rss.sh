#!/usr/bin/env bash
# bench/rss.sh — what the operating system sees: peak RSS per rank of one training step of
# gpt2-124m on 4 MPI ranks (B = 1, T = 64) at ZeRO stages 1, 2 and 3, measured by
# `/usr/bin/time -f %M` around each rank's zt-train. The target: stage 3 at <= 8.5 bytes
# of RSS per parameter on every rank, and the RSS falling from stage 1 to 2 to 3 as the model
# states do. Writes bench/results/rss.md (and rss.json).
# Usage: bench/rss.sh [--ranks 4] [--model gpt2-124m] [--stages "1 2 3"]   (build in ${BUILD_DIR:-build})
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
RANKS=4; MODEL=gpt2-124m; STAGES="1 2 3"
while (($#)); do case "$1" in --ranks) RANKS=$2; shift 2;; --model) MODEL=$2; shift 2;; --stages) STAGES=$2; shift 2;;
  *) echo "bench/rss.sh: unknown flag $1" >&2; exit 2;; esac; done
[ -x "$BUILD/zt-train" ] || BUILD_DIR="$BUILD" bash "$ROOT/scripts/build.sh"
[ -x /usr/bin/time ] || { echo "bench/rss.sh: needs /usr/bin/time (Debian package 'time')" >&2; exit 2; }
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
out="$ROOT/bench/results/rss.json"; : > "$out"
threads=$(( $(nproc) / RANKS )); ((threads >= 1)) || threads=1
for stage in $STAGES; do
  # one /usr/bin/time per rank, each writing its own file (Open MPI's rank in the environment)
  mpirun -np "$RANKS" --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS="$threads" \
    bash -c '/usr/bin/time -f %M -o "$0/rss.$OMPI_COMM_WORLD_RANK" "$@"' "$work" \
    "$BUILD/zt-train" --model "$MODEL" --train "$ROOT/data/corpus/train.txt" -b 1 -t 64 --steps 1 \
    --zero-stage "$stage" --log "$work/log.$stage.jsonl" > "$work/out.$stage" 2>&1 || { cat "$work/out.$stage" >&2; exit 1; }
  psi=$(sed -n "s/^zt-train: [^,]*, \([0-9]*\) parameters.*/\1/p" "$work/out.$stage" | head -1)
  python3 - "$stage" "$RANKS" "${psi:-0}" "$work" "$out" <<'PY'
import json, sys, glob
stage, ranks, psi, work, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
kib = [int(open(f"{work}/rss.{r}").read().split()[-1]) for r in range(ranks)]
step = [json.loads(l) for l in open(f"{work}/log.{stage}.jsonl") if l.strip()][-1]
open(out, 'a').write(json.dumps({"stage": stage, "ranks": ranks, "psi": psi, "rss_kib": kib, "memory": step.get("memory")}) + "\n")
PY
done
python3 - "$out" "$ROOT/bench/results/rss.md" "$MODEL" "$RANKS" <<'PY'
import json, sys, datetime, platform, subprocess
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cpu = subprocess.run(['sh', '-c', "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout.strip()
mib = lambda b: b / 2**20
md = [f"# Peak RSS per rank: {sys.argv[3]} on {sys.argv[4]} ranks, one step (what the OS sees)", "",
      f"- date: {datetime.date.today()}, machine: {cpu}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores, {platform.system()} {platform.release()}",
      f"- command: `bench/rss.sh --ranks {sys.argv[4]} --model {sys.argv[3]}`: each rank `/usr/bin/time -f %M zt-train --model {sys.argv[3]} -b 1 -t 64 --steps 1 --zero-stage S` under mpirun, fp32, AdamW",
      "- bytes/param = peak RSS / Psi. Target (stage 3): <= 8.5 on every rank. Allocators' peak: the device allocator's peak total over the step (zt-train's --log); the rest of RSS is the process's fixed base (code, MPI, OpenBLAS, thread stacks) and the allocator's own slack", "",
      "| stage | Psi | peak RSS per rank (MiB) | bytes/param (worst rank) | model states per rank at rest (MiB) | allocators' step peak, rank 0 (MiB) |",
      "|---|---|---|---|---|---|"]
for r in rows:
    psi = r["psi"]; kib = r["rss_kib"]; worst = max(kib) * 1024
    mem = r.get("memory") or {}
    cur = mem.get("current", {}); peak = mem.get("peak", {})
    states = sum(cur.get(k, 0) for k in ("params", "grads", "optim"))
    ptot = mem.get("peak_total", 0)
    md.append(f"| {r['stage']} | {psi:,} | {' / '.join(f'{k/1024:.0f}' for k in kib)} | {worst/psi:.2f} | {mib(states):.0f} | {mib(ptot):.0f} |")
s3 = [r for r in rows if r["stage"] == 3]
if s3:
    w = max(s3[0]["rss_kib"]) * 1024 / s3[0]["psi"]
    md += ["", f"Target (stage 3 <= 8.5 bytes of RSS per parameter on every rank): **{'met' if w <= 8.5 else 'NOT met'}** ({w:.2f})."]
open(sys.argv[2], 'w').write("\n".join(md) + "\n")
print("\n".join(md))
PY
