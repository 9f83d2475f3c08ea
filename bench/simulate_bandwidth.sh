#!/usr/bin/env bash
# bench/simulate_bandwidth.sh — the plot a teacher shows: a step's predicted time against the
# network's bandwidth, for ZeRO stages 0-3 and ZeRO++ (qwZ + hpZ + qgZ), the shape of the ZeRO++
# paper's throughput-against-bandwidth figure, with the cluster in a box's measured steps on it.
#
#   1. zt-profile inside the box (LAYOUT), as bench/simulate.sh measures it, twice: its network
#      shaped to each of the two --links rates (the ops, the links, compute's pace);
#   2. the profile with its inter-node link at each bandwidth B of the sweep: a byte's time on the
#      link is a part that scales with the rate and a part that does not (the TCP stack and MPI on
#      the host's cores): 1 / beta = a / B + c, and alpha = a' / B + c' (at least 0), a and c
#      solved from the two measured profiles, idle and loaded apart; the rest is the first
#      profile's (the ops do not depend on the link);
#   3. zt-estimate --time for each variant at each bandwidth (bench/zero_variant.sh's configs, as
#      bench/simulate.sh runs them);
#   4. gnuplot: one line per variant, predicted; the measured steps of the same layout and variants
#      at 1 Gbit/s and 100 Mbit/s from --measured (bench/simulate.sh's JSON) as points.
#
# Usage: bench/simulate_bandwidth.sh [--model gpt-mini] [--layout 2x2] [--links "100mbit 1gbit"] [--batch 4]
#          [--seq 128] [--repeats 5] [--measured bench/results/simulate.json]
#          [--out bench/results/simulate_bandwidth.png] [--json FILE]
# Needs root (network namespaces) for the profile; exits 77 where the box cannot be built.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${BUILD_DIR:-$ROOT/build}" && pwd)"
MODEL=gpt-mini LAYOUT=2x2 LINKS="100mbit 1gbit" BATCH=4 SEQ=128 REPEATS=5
MEASURED="$ROOT/bench/results/simulate.json" OUT="$ROOT/bench/results/simulate_bandwidth.png" JSON=""
while (($#)); do case "$1" in
  --model) MODEL=$2; shift 2;; --layout) LAYOUT=$2; shift 2;; --links) LINKS=$2; shift 2;;
  --batch) BATCH=$2; shift 2;; --seq) SEQ=$2; shift 2;; --repeats) REPEATS=$2; shift 2;;
  --measured) MEASURED=$(realpath -m "$2"); shift 2;; --out) OUT=$(realpath -m "$2"); shift 2;;
  --json) JSON=$(realpath -m "$2"); shift 2;;
  *) echo "bench/simulate_bandwidth.sh: unknown flag $1" >&2; exit 2;; esac; done
command -v gnuplot >/dev/null || { echo "bench/simulate_bandwidth.sh: gnuplot not found (scripts/install-deps.sh installs gnuplot-nox)" >&2; exit 1; }
nodes=${LAYOUT%x*} ranks=${LAYOUT#*x}; N=$((nodes * ranks))
[ "$nodes" -ge 2 ] && [ "$ranks" -ge 2 ] || { echo "bench/simulate_bandwidth.sh: --layout $LAYOUT: ZeRO++ needs 2 nodes or more of 2 ranks or more" >&2; exit 2; }
source "$ROOT/bench/zero_variant.sh"  # defines: zero_variant_config
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# 1. The profiles, measured in the box at each of the two --links.
set -- $LINKS
[ $# = 2 ] || { echo "bench/simulate_bandwidth.sh: --links '$LINKS': expected two link rates (100mbit 1gbit)" >&2; exit 2; }
for link in "$@"; do
  rc=0
  OMP_NUM_THREADS=1 bash "$ROOT/scripts/cluster.sh" box --name zbw --subnet 10.76.0 --nodes "$nodes" --ranks "$ranks" \
    --link "$link" -- "$BUILD/zt-profile" --model "$MODEL" -b "$BATCH" -t "$SEQ" --threads 1 --stages 0,1,2,3 --zeropp \
    --repeats "$REPEATS" -o "$tmp/measured_$link.json" >"$tmp/out" 2>"$tmp/profile.err" || rc=$?
  [ "$rc" = 77 ] && { cat "$tmp/profile.err" >&2; exit 77; }
  [ "$rc" = 0 ] || { echo "bench/simulate_bandwidth.sh: zt-profile at $link failed ($rc):" >&2; tail -20 "$tmp/profile.err" >&2; exit 1; }
  grep -E "link:|compute_pace" "$tmp/profile.err" | sed "s/^/  profile ($LAYOUT at $link): /" >&2 || true
done

# 2. The profile at each bandwidth of the sweep (Mbit/s).
SWEEP="10 20 50 100 200 500 1000 2000 5000 10000"
python3 - "$tmp" "$1" "$2" $SWEEP <<'PY'
import json, sys
out, l1, l2, sweep = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
mbit = lambda l: float(l.rstrip("gbitmk")) * (1000 if l.endswith("gbit") else 1)
p1, p2 = (json.load(open(f"{out}/measured_{l}.json")) for l in (l1, l2))
b1, b2 = mbit(l1), mbit(l2)
def two_point(y1, y2):  # y = a / B + c through (b1, y1), (b2, y2)
    a = (y1 - y2) / (1 / b1 - 1 / b2)
    return a, y1 - a / b1
fits = {}
for key in ("", "loaded"):
    i1, i2 = p1["links"]["inter_node"], p2["links"]["inter_node"]
    if key:
        if key not in i1 or key not in i2: continue
        i1, i2 = i1[key], i2[key]
    fits[key] = (two_point(1 / i1["bytes_per_s"], 1 / i2["bytes_per_s"]), two_point(i1["alpha_s"], i2["alpha_s"]))
for m in sweep:
    B = float(m)
    q = json.loads(json.dumps(p1))
    for key, ((a, c), (aa, ca)) in fits.items():
        link = q["links"]["inter_node"][key] if key else q["links"]["inter_node"]
        link["bytes_per_s"] = 1 / max(a / B + c, 1e-15)
        link["alpha_s"] = max(aa / B + ca, 0.0)
    q["source"] += f"; its inter-node link fitted through {l1} and {l2}, at {m} Mbit/s (bench/simulate_bandwidth.sh)"
    json.dump(q, open(f"{out}/profile_{m}.json", "w"))
PY

# 3. Each variant at each bandwidth.
: >"$tmp/rows.jsonl"
for v in s0 s1 s2 s3 all; do
  zero_variant_config "$v" "$ranks" "$BATCH" >"$tmp/config.json"
  for mbit in $SWEEP; do
    "$BUILD/zt-estimate" --model "$MODEL" --config "$tmp/config.json" -t "$SEQ" --nd "$N" --nodes "$nodes" \
      --threads 1 --time "$tmp/profile_$mbit.json" --json >"$tmp/est.json"
    python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))[0]["time"]; print(json.dumps({"variant": sys.argv[2], "mbit": float(sys.argv[3]), "predicted_ms": t["step_s"]*1e3, "exposed_ms": (t["exposed_intra_node_s"]+t["exposed_inter_node_s"])*1e3}))' \
      "$tmp/est.json" "$v" "$mbit" >>"$tmp/rows.jsonl"
  done
done
[ -n "$JSON" ] && cp "$tmp/rows.jsonl" "$JSON"

# 4. The plot, and the table it is drawn from (the measured points: the same layout and variants at
# 1 Gbit/s and 100 Mbit/s in --measured).
python3 - "$tmp/rows.jsonl" "$MEASURED" "$LAYOUT" "$tmp" <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1])]
measured = [json.loads(l) for l in open(sys.argv[2]) if l.strip()] if sys.argv[2] and __import__("os").path.exists(sys.argv[2]) else []
layout, out = sys.argv[3], sys.argv[4]
names = {"s0": "stage 0", "s1": "stage 1", "s2": "stage 2", "s3": "stage 3", "all": "stage 3 + ZeRO++"}
pred = collections.defaultdict(dict)
for r in rows:
    pred[r["variant"]][r["mbit"]] = r["predicted_ms"]
    with open(f"{out}/pred_{r['variant']}.dat", "a") as f: f.write(f"{r['mbit']} {r['predicted_ms'] / 1000}\n")
mbit = {"1gbit": 1000.0, "100mbit": 100.0}
meas = collections.defaultdict(dict)
for r in measured:
    if r["layout"] == layout and r["variant"] in names and r["link"] in mbit:
        meas[r["variant"]][mbit[r["link"]]] = r["measured_ms"]
        with open(f"{out}/meas_{r['variant']}.dat", "a") as f: f.write(f"{mbit[r['link']]} {r['measured_ms'] / 1000}\n")
sweep = sorted({r["mbit"] for r in rows})
print("| Mbit/s | " + " | ".join(names[v] for v in names) + " |")
print("|---:|" + "---:|" * len(names))
for b in sweep:
    cells = []
    for v in names:
        c = f"{pred[v][b]:.0f}"
        if b in meas[v]: c += f" (measured {meas[v][b]:.0f})"
        cells.append(c)
    print(f"| {b:g} | " + " | ".join(cells) + " |")
PY
{
  echo "set terminal pngcairo size 900,560 font \",11\""
  echo "set output '$OUT'"
  echo "set title 'gpt-mini, $LAYOUT (nodes x ranks), predicted step time against the network (lines) and measured in the box (points)'"
  echo "set logscale x; set logscale y; set xlabel 'inter-node link, Mbit/s'; set ylabel 'seconds per step'"
  echo "set key top right; set grid"
  plot="plot "
  i=1
  for v in s0 s1 s2 s3 all; do
    case "$v" in all) label="stage 3 + ZeRO++";; *) label="stage ${v#s}";; esac
    plot+="'$tmp/pred_$v.dat' with lines lw 2 lc $i title '$label', "
    [ -s "$tmp/meas_$v.dat" ] && plot+="'$tmp/meas_$v.dat' with points pt 7 ps 1.3 lc $i notitle, "
    i=$((i + 1))
  done
  echo "${plot%, }"
} >"$tmp/plot.gp"
gnuplot "$tmp/plot.gp"
echo "wrote $OUT" >&2
