#!/usr/bin/env python3
"""trace_view.py: one rank's step of a zt-train --trace file, as text (docs/memory-mechanics.md).

  python3 scripts/trace_view.py runs/guide/stage3-trace.json --rank 0 --step 3

Prints the step's spans in time order: the compute track (units' forward / backward, waits on
collectives, the optimizer), the comm track (each collective while it runs) and the io track
(swap-file reads and writes), each with its start (ms from the step's start) and duration, and
then the device memory counter's params and grads bytes at each sample. A collective that runs
while a unit computes is marked with the unit ("during forward h.0"): the overlap of ZeRO-3's
prefetch. For the picture, open the file in https://ui.perfetto.dev, draw a step with
scripts/trace_plot.py (PNG), or make a page of the whole run with scripts/trace_page.py (HTML that
opens offline, every rank's memory over time).
"""
import argparse
import json
import sys

TRACKS = {0: "compute", 1: "comm", 2: "io"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--step", type=int, default=2, help="the step to show (1-based)")
    a = ap.parse_args()
    try:
        events = json.load(open(a.trace))["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"trace_view: {a.trace}: not a zt-train trace ({e})")
    mine = [e for e in events if e.get("pid") == a.rank]
    if not mine:
        sys.exit(f"trace_view: {a.trace} has no rank {a.rank} (ranks: {sorted({e['pid'] for e in events})})")
    steps = [e for e in mine if e["ph"] == "X" and e["name"] == f"step {a.step}"]
    if not steps:
        sys.exit(f"trace_view: rank {a.rank} has no 'step {a.step}' (traced steps: "
                 f"{sorted(int(e['name'][5:]) for e in mine if e['ph'] == 'X' and e['name'].startswith('step '))})")
    t0, t1 = steps[0]["ts"], steps[0]["ts"] + steps[0]["dur"]
    inside = sorted((e for e in mine if e["ph"] == "X" and t0 <= e["ts"] <= t1 and e["cat"] != "step"),
                    key=lambda e: (e["ts"], -e["dur"]))
    units = [e for e in inside if e["cat"] in ("forward", "backward", "recompute")]
    print(f"rank {a.rank}, step {a.step}: {steps[0]['dur'] / 1000:.3f} ms")
    print(f"  {'start ms':>9} {'dur ms':>8}  {'track':<8} event")
    for e in inside:
        note = ""
        if e["tid"] == 1:
            name_unit = e["name"].split(" ", 1)[-1]
            during = [u["name"] for u in units if u["ts"] < e["ts"] < u["ts"] + u["dur"]
                      and u["name"].split(" ", 1)[-1] != name_unit]
            if during:
                note = f"   <- during {during[-1]}"
        print(f"  {(e['ts'] - t0) / 1000:9.3f} {e['dur'] / 1000:8.3f}  {TRACKS[e['tid']]:<8} {e['name']}{note}")
    samples = [e for e in mine if e["ph"] == "C" and e["name"].startswith("memory: device") and t0 <= e["ts"] <= t1]
    if samples:
        print("  device memory (params / grads bytes) at each sample:")
        print("   ", " ".join(f"{s['args']['params']}/{s['args']['grads']}" for s in samples))


if __name__ == "__main__":
    main()
