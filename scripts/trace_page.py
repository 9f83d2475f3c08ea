#!/usr/bin/env python3
"""trace_page.py: a zt-train --trace file as one HTML page that opens offline (every rank, memory over time).

  python3 scripts/trace_page.py runs/guide/stage3-trace.json --out runs/guide/stage3-page.html
  python3 scripts/trace_page.py runs/guide/stage3-trace.json --step 3 --out step3.html

This script turns the trace into the page's data (lanes, rows, samples); scripts/trace_page.html,
beside it, is the page that draws them (its HTML, style and drawing code), into which the data is
written. The page is one self-contained file (its script, style and data inline; no network, no
fonts, no libraries): open it from disk in any browser. For every rank, on one time axis shared by all
ranks (the trace's microseconds, which every rank starts after a barrier):
  markers  the gather (down, purple) and release (up, grey) of each unit, and other instants
  compute  the training thread's spans, nested: the step, its forward / backward passes, each
           unit's forward, backward and recompute, the waits on collectives (red), the optimizer
  comm     each collective while it runs, its tooltip with the bytes this rank sent and the link
           class they crossed (in the node, across nodes: the trace's inter_node_bytes)
  io       NVMe reads and writes (only where the rank has them)
  memory   one lane per tier the trace samples (device, host, nvme swap files): the bytes by
           category (params, grads, optim, activations, ...) stacked over time, labelled
Hover shows the numbers (a span's name, start, duration and bytes; the memory per category at
that time). The mouse wheel zooms around the pointer, dragging pans, a double click shows the
whole range again. --step N restricts the page to step N (from the earliest rank's start of it to
the latest rank's end). trace_plot.py draws one step as a PNG (gnuplot); trace_view.py prints one
rank's step as text; https://ui.perfetto.dev opens the trace itself (online).
"""
import argparse
import json
import os
import sys


def fail(trace, problem):
    sys.exit(f"trace_page: {trace}: {problem}")


def load_events(path):
    """The trace's events, or an exit naming the file and what is wrong with it."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        fail(path, f"cannot read it ({e.strerror})")
    except ValueError as e:
        fail(path, f"not a zt-train trace: not JSON ({e})")
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        fail(path, "not a zt-train trace: no 'traceEvents' list (write one with zt-train --trace FILE)")
    for i, e in enumerate(events):
        if not (isinstance(e, dict) and isinstance(e.get("ph"), str) and isinstance(e.get("pid"), int)):
            fail(path, f"not a zt-train trace: event {i} lacks 'ph' or an integer 'pid': {str(e)[:120]}")
        if e["ph"] in "XiC" and not isinstance(e.get("ts"), (int, float)):
            fail(path, f"not a zt-train trace: event {i} ('{e.get('name')}') has no time 'ts'")
        if e["ph"] == "X" and not isinstance(e.get("dur"), (int, float)):
            fail(path, f"not a zt-train trace: span {i} ('{e.get('name')}') has no duration 'dur'")
    return doc, events


def time_window(path, events, step):
    """[lo, hi] in trace microseconds: the whole run, or step `step` on every rank."""
    timed = [e for e in events if e["ph"] in "XiC"]
    if not timed:
        fail(path, "has no spans, instants or counters (was the run traced with --trace-steps 0?)")
    if step is None:
        return min(e["ts"] for e in timed), max(e["ts"] + e.get("dur", 0) for e in timed)
    steps = [e for e in timed if e["ph"] == "X" and e.get("name") == f"step {step}"]
    if not steps:
        traced = sorted({int(e["name"][5:]) for e in timed if e["ph"] == "X" and e.get("cat") == "step"
                         and e.get("name", "").startswith("step ") and e["name"][5:].isdigit()})
        fail(path, f"has no 'step {step}' (traced steps: {traced})")
    return min(e["ts"] for e in steps), max(e["ts"] + e["dur"] for e in steps)


def assign_rows(spans):
    """Each span's row on its track ("depth"): the first row free when it starts. Nested spans
    (a step, its forward pass, a unit's forward, a wait inside it) land one row below their
    parent; spans that overlap without nesting (NVMe requests in flight together) share rows."""
    row_ends = []  # per row, the end of the last span placed in it
    for s in sorted(spans, key=lambda s: (s["ts"], -s["dur"])):
        row = next((i for i, end in enumerate(row_ends) if end <= s["ts"]), len(row_ends))
        if row == len(row_ends):
            row_ends.append(0)
        row_ends[row] = s["ts"] + s["dur"]
        s["depth"] = row
    return spans


def rank_data(events, rank, lo, hi):
    """What the page draws of one rank, times in microseconds from `lo`."""
    mine = [e for e in events if e["pid"] == rank and e["ph"] in "XiC"]  # not the metadata ("M")
    t = lambda ts: round(ts - lo, 3)
    spans = []
    for track in (0, 1, 2):
        spans += assign_rows([e for e in mine if e["ph"] == "X" and e.get("tid") == track and lo <= e["ts"] <= hi])
    # One array per span (compact: a 20-step trace of 4 ranks holds thousands of them):
    # [track, depth, start, duration, name, category, bytes or -1, inter-node bytes or -1].
    out_spans = []
    for s in sorted(spans, key=lambda s: (s["tid"], s["depth"], s["ts"])):
        args = s.get("args") or {}
        out_spans.append([s["tid"], s["depth"], t(s["ts"]), round(s.get("dur", 0), 3), s.get("name", ""),
                          s.get("cat", ""), args.get("bytes", -1), args.get("inter_node_bytes", -1)])
    instants = [[t(e["ts"]), e.get("name", ""), e.get("tid", 0)]
                for e in sorted(mine, key=lambda e: e["ts"]) if e["ph"] == "i" and lo <= e["ts"] <= hi]
    # Memory: one lane per counter name ("memory: device (cpu)", "memory: host (host)", "memory:
    # nvme (swap files)"). A counter holds its value until its next sample, so the last sample
    # before the window is kept: the lane starts at the level the window opened with.
    memory = []
    for name in sorted({e["name"] for e in mine if e["ph"] == "C" and e.get("name", "").startswith("memory: ")},
                       key=lambda n: (not n.startswith("memory: device"), not n.startswith("memory: host"), n)):
        samples = sorted((e for e in mine if e["ph"] == "C" and e["name"] == name), key=lambda e: e["ts"])
        before = [s for s in samples if s["ts"] < lo][-1:]
        samples = before + [s for s in samples if lo <= s["ts"] <= hi]
        if not samples:
            continue
        series = []
        for s in samples:
            series += [k for k in s.get("args", {}) if k not in series]
        memory.append({"tier": name[len("memory: "):], "series": series,
                       "samples": [[max(0.0, t(s["ts"]))] + [s["args"].get(k, 0) for k in series] for s in samples]})
    return {"rank": rank, "spans": out_spans, "instants": instants, "memory": memory}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", help="a zt-train --trace file")
    ap.add_argument("--out", required=True, help="the HTML page to write")
    ap.add_argument("--step", type=int, help="show only this step (1-based); default: the whole run")
    a = ap.parse_args()
    doc, events = load_events(a.trace)
    lo, hi = time_window(a.trace, events, a.step)
    ranks = sorted({e["pid"] for e in events if e["ph"] in "XiC"})
    data = {
        "title": os.path.basename(a.trace),
        "run": doc.get("otherData", {}),
        "range": "step %d" % a.step if a.step is not None else "the whole run",
        "duration": round(hi - lo, 3),
        "ranks": [rank_data(events, r, lo, hi) for r in ranks],
    }
    # "</" inside the inline JSON would end the <script> element early: escape it for HTML.
    blob = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    page = read_page(a.trace).replace("/*TRACE_DATA*/null", blob).replace("<!--TITLE-->", html_escape(data["title"]))
    try:
        with open(a.out, "w") as f:
            f.write(page)
    except OSError as e:
        sys.exit(f"trace_page: cannot write {a.out} ({e.strerror})")
    n_events = sum(len(r["spans"]) + len(r["instants"]) + sum(len(m["samples"]) for m in r["memory"])
                   for r in data["ranks"])
    print(f"wrote {a.out}: {len(ranks)} rank(s), {n_events} events")


def read_page(trace):
    """The page's HTML, style and drawing code (scripts/trace_page.html, beside this script): the
    data replaces its /*TRACE_DATA*/null, the trace's name its <!--TITLE-->."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trace_page.html")
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        sys.exit(f"trace_page: cannot read the page template {path} ({e.strerror})")


def html_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


if __name__ == "__main__":
    main()
