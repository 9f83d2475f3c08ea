#!/usr/bin/env bash
# bench/cluster_plot.sh JSON PNG — step time against link bandwidth, one line per ZeRO stage and
# one panel per layout, from the JSON lines bench/cluster.sh writes (--json). The unshaped veth
# link has no rate; it is drawn at the right edge, labelled "unshaped".
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: bench/cluster_plot.sh RESULTS.json OUT.png" >&2; exit 2; }
JSON=$1 PNG=$2
[ -s "$JSON" ] || { echo "bench/cluster_plot.sh: $JSON is missing or empty (bench/cluster.sh --json writes it)" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "bench/cluster_plot.sh: gnuplot not found (scripts/install-deps.sh installs gnuplot-nox)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# one data file per (layout, stage): x = link in Gbit/s (unshaped: 100), y = s per step
python3 - "$JSON" "$tmp" <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def gbit(link):
    if link == "none": return 100.0
    n = float(link.rstrip("gbitmk"))
    return n / 1000 if link.endswith("mbit") else n
series = collections.defaultdict(list)
for r in rows: series[(r["layout"], r["stage"])].append((gbit(r["link"]), r["ms_per_step"] / 1000))
for (layout, stage), pts in series.items():
    with open(f"{sys.argv[2]}/{layout}_s{stage}.dat", "w") as f:
        for x, y in sorted(pts): f.write(f"{x} {y}\n")
with open(f"{sys.argv[2]}/layouts", "w") as f: f.write(" ".join(sorted({r["layout"] for r in rows})))
PY
layouts=$(cat "$tmp/layouts")
n=$(wc -w <<<"$layouts")
{
  echo "set terminal pngcairo size $((560 * n)),480 font \",11\""
  echo "set output \"$PNG\""
  echo "set multiplot layout 1,$n title \"ZeRO stages on the cluster in a box: step time against link bandwidth (bench/cluster.sh)\" noenhanced"
  for layout in $layouts; do
    echo "set title \"$layout (nodes x ranks)\" noenhanced"
    echo "set xlabel \"link bandwidth (Gbit/s)\"; set ylabel \"s per step\""
    echo "set logscale xy; set grid; set key top right; set rmargin 6"
    echo "set xtics (\"0.1\" 0.1, \"1\" 1, \"10\" 10, \"unshaped\" 100)"
    echo -n "plot "
    sep=""
    for st in 0 1 2 3; do
      f="$tmp/${layout}_s$st.dat"
      [ -s "$f" ] || continue
      echo -n "$sep\"$f\" u 1:2 w lp lw 2 pt 7 t \"stage $st\""
      sep=", "
    done
    echo
  done
  echo "unset multiplot"
} >"$tmp/plot.gp"
gnuplot "$tmp/plot.gp"
echo "bench/cluster_plot.sh: wrote $PNG" >&2
