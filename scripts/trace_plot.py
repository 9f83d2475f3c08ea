#!/usr/bin/env python3
"""trace_plot.py: one step of a zt-train --trace file as a PNG timeline (gnuplot).

  python3 scripts/trace_plot.py runs/guide/stage3-trace.json --step 3 --out runs/guide/step3.png

Draws two rows per rank, with milliseconds from the step's start on the x axis:
  compute  the units' forward (blue) and backward (orange) spans, recomputes (light blue), the
           optimizer (green), and, drawn thin over them, the waits on collectives and on NVMe
           reads (red), which is the communication that compute did not hide;
  comm     each collective while it runs: all-gathers (purple), reduce-scatters (brown),
           all-reduces (grey).
A rank with NVMe offload gets a third row, io (teal): swap-file reads and writes. Under them, a
memory row per tier the trace samples (device; host and nvme with offload): the bytes of each
category (params, grads, optim, activations, ...; the key names the colours) stacked over the
step, scaled to the tier's highest total on any rank in the step (the row's label gives it).
Units are labelled where their span is wide enough. This is the view Perfetto gives
(https://ui.perfetto.dev), as a file, for a README or a report. For every rank's memory over the
whole run, zoomable, with the numbers on hover: scripts/trace_page.py (an HTML page that opens
offline). Needs gnuplot (scripts/install-deps.sh installs gnuplot-nox).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

COLORS = {"forward": "#1f77b4", "backward": "#ff7f0e", "recompute": "#9ecae1", "optimizer": "#2ca02c",
          "offload": "#17becf", "eval": "#bcbd22", "checkpoint": "#7f7f7f", "wait": "#d62728",
          "all_gather": "#9467bd", "reduce_scatter": "#8c564b", "all_reduce": "#7f7f7f",
          "broadcast": "#e377c2", "barrier": "#c7c7c7", "io": "#17becf"}
# The memory categories, bottom of the stack first (the colours of scripts/trace_page.py).
MEM_COLORS = {"params": "#1f77b4", "grads": "#ff7f0e", "optim": "#2ca02c", "activations": "#d62728",
              "comm": "#9467bd", "secondary": "#8c564b", "workspace": "#7f7f7f", "other": "#bcbd22"}
MEM_HALF = 0.7  # a memory row spans y +- MEM_HALF (the span rows: +- 0.35), so its stack has room


def human(n):
    """Bytes as a short number: 1.0 MiB."""
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def memory_rows(events, rank, t0, t1):
    """Rank `rank`'s memory counters in [t0, t1]: {tier: [(start, end, {category: bytes})]}, each
    sample holding until the next one (the last sample before t0 opens the step)."""
    rows = {}
    names = {e["name"] for e in events if e["pid"] == rank and e["ph"] == "C" and e["name"].startswith("memory: ")}
    for name in sorted(names, key=lambda n: (not n.startswith("memory: device"), not n.startswith("memory: host"), n)):
        samples = sorted((e for e in events if e["pid"] == rank and e["ph"] == "C" and e["name"] == name),
                         key=lambda e: e["ts"])
        inside = [e for e in samples if e["ts"] < t0][-1:] + [e for e in samples if t0 <= e["ts"] <= t1]
        ends = [e["ts"] for e in inside[1:]] + [t1]
        rows[name[len("memory: "):]] = [(max(e["ts"], t0), end, e["args"]) for e, end in zip(inside, ends)]
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--step", type=int, default=2, help="the step to draw (1-based)")
    ap.add_argument("--out", required=True, help="the PNG to write")
    a = ap.parse_args()
    try:
        events = json.load(open(a.trace))["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"trace_plot: {a.trace}: not a zt-train trace ({e})")
    ranks = sorted({e["pid"] for e in events})
    boxes, mem_boxes, labels, rows = [], [], [], []
    # Each rank's step window, and its memory rows; a tier's scale is its highest total of the step.
    windows, memory, scale, shown = {}, {}, {}, set()
    for r in ranks:
        step = [e for e in events if e["pid"] == r and e["ph"] == "X" and e["name"] == f"step {a.step}"]
        if not step:
            sys.exit(f"trace_plot: rank {r} has no 'step {a.step}' in {a.trace}")
        windows[r] = (step[0]["ts"], step[0]["ts"] + step[0]["dur"])
        memory[r] = memory_rows(events, r, *windows[r])
        for tier, samples in memory[r].items():
            scale[tier] = max([scale.get(tier, 0)] + [sum(v for v in m.values() if v > 0) for _, _, m in samples])
    y = 0
    longest = 0.0
    for r in reversed(ranks):
        mine = [e for e in events if e["pid"] == r and e["ph"] == "X"]
        t0, t1 = windows[r]
        longest = max(longest, (t1 - t0) / 1000)
        # The memory rows first (y grows upward: they end up under the rank's spans), device on top.
        for tier, samples in reversed(list(memory[r].items())):
            y += 1 + MEM_HALF - 0.35
            rows.append((y, f"rank {r} memory: {tier} (0 - {human(scale[tier])})"))
            for start, end, m in samples:
                base = y - MEM_HALF
                for cat in sorted(m, key=lambda c: list(MEM_COLORS).index(c) if c in MEM_COLORS else 99):
                    if m[cat] <= 0 or not scale[tier]:
                        continue
                    h = m[cat] / scale[tier] * 2 * MEM_HALF
                    x0, x1 = (start - t0) / 1000, (end - t0) / 1000
                    mem_boxes.append(((x0 + x1) / 2, base + h / 2, x0, x1, base, base + h, MEM_COLORS.get(cat, "#17becf")))
                    shown.add(cat)
                    base += h
            y += MEM_HALF - 0.35
        inside = [e for e in mine if t0 <= e["ts"] <= t1 and e["cat"] != "step"]
        tracks = [(0, "compute"), (1, "comm")] + ([(2, "io")] if any(e["tid"] == 2 for e in inside) else [])
        for tid, track in reversed(tracks):
            y += 1
            rows.append((y, f"rank {r} {track}"))
            for e in sorted(inside, key=lambda e: -e["dur"]):
                if e["tid"] != tid:
                    continue
                x0, x1 = (e["ts"] - t0) / 1000, (e["ts"] - t0 + e["dur"]) / 1000
                kind = e["name"].split(" ")[0] if tid == 1 else ("io" if tid == 2 else e["cat"])
                h = 0.12 if e["cat"] == "wait" else 0.35  # waits drawn thin over the spans they sit in
                boxes.append(((x0 + x1) / 2, y, x0, x1, y - h, y + h, COLORS.get(kind, "#000000")))
                # Label a unit's span when it is wide enough and holds no other unit's span
                # (tied weights: `backward embed` encloses the blocks' backward).
                units = ("forward", "backward", "recompute")
                encloses = e["cat"] in units and any(
                    o is not e and o["tid"] == 0 and o["cat"] in units and e["ts"] < o["ts"]
                    and o["ts"] + o["dur"] < e["ts"] + e["dur"] for o in inside)
                if (e["cat"] in units or tid == 1) and not encloses and x1 - x0 > 0.04 * longest:
                    labels.append(((x0 + x1) / 2, y, e["name"].split(" ", 1)[-1]))
        y += 0.5
    with tempfile.TemporaryDirectory() as tmp:
        files = {"spans": os.path.join(tmp, "boxes.dat"), "memory": os.path.join(tmp, "memory.dat")}
        for kind, rects in (("spans", boxes), ("memory", mem_boxes)):
            with open(files[kind], "w") as f:
                f.write("0 -9 0 0 -9 -9 0xffffff\n")  # one row below the plot: gnuplot refuses an empty file
                for b in rects:
                    f.write("%f %f %f %f %f %f 0x%s\n" % (b[0], b[1], b[2], b[3], b[4], b[5], b[6][1:]))
        script = [
            "set terminal pngcairo size 1400,%d font ',10'" % (190 + 38 * y),
            f"set output '{a.out}'",
            f"set title \"{os.path.basename(a.trace)}: step {a.step}, every rank "
            "(forward blue, backward orange, waits red; all-gather purple, reduce-scatter brown)\"",
            "set xlabel 'ms from the start of the step'",
            "set ytics (%s)" % ", ".join(f"'{name}' {yy}" for yy, name in rows),
            f"set yrange [0.3:{y + 0.2}]",
            f"set xrange [0:{longest * 1.01:.4f}]",
            "set grid xtics",
            "set key outside bottom center horizontal title 'memory by category (stacked, bottom first)'",
            "set style fill solid 0.9 border lc rgb '#333333'",
        ]
        for x, yy, text in labels:
            script.append(f"set label \"{text}\" at {x:.4f},{yy} center front noenhanced font ',8'")
        # The spans with a border; the memory stacks without; then one key entry per category shown.
        key = [f"NaN with boxes fs solid 0.8 noborder lc rgb '{c}' title '{k}'" for k, c in MEM_COLORS.items() if k in shown]
        script.append(", ".join([f"plot '{files['spans']}' using 1:2:3:4:5:6:7 with boxxyerror lc rgb variable notitle",
                                 f"'{files['memory']}' using 1:2:3:4:5:6:7 with boxxyerror fs solid 0.8 noborder "
                                 "lc rgb variable notitle"] + key))
        p = subprocess.run(["gnuplot"], input="\n".join(script), text=True, capture_output=True)
        if p.returncode != 0:
            sys.exit(f"trace_plot: gnuplot failed: {p.stderr.strip()}")
    print(f"wrote {a.out}: step {a.step}, {len(ranks)} rank(s), {len(boxes)} spans")


if __name__ == "__main__":
    main()
