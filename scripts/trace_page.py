#!/usr/bin/env python3
"""trace_page.py: a zt-train --trace file as one HTML page that opens offline (every rank, memory over time).

  python3 scripts/trace_page.py runs/guide/stage3-trace.json --out runs/guide/stage3-page.html
  python3 scripts/trace_page.py runs/guide/stage3-trace.json --step 3 --out step3.html

The page is one self-contained file (its script, style and data inline; no network, no fonts, no
libraries): open it from disk in any browser. For every rank, on one time axis shared by all
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
    page = PAGE.replace("/*TRACE_DATA*/null", blob).replace("<!--TITLE-->", html_escape(data["title"]))
    try:
        with open(a.out, "w") as f:
            f.write(page)
    except OSError as e:
        sys.exit(f"trace_page: cannot write {a.out} ({e.strerror})")
    n_events = sum(len(r["spans"]) + len(r["instants"]) + sum(len(m["samples"]) for m in r["memory"])
                   for r in data["ranks"])
    print(f"wrote {a.out}: {len(ranks)} rank(s), {n_events} events")


def html_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# The page. Everything it needs is in this one string; the data replaces /*TRACE_DATA*/null.
PAGE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title><!--TITLE--> - ZeroTensor trace</title>
<style>
  body { font: 13px sans-serif; margin: 12px; color: #222; }
  h1 { font-size: 16px; margin: 0 0 4px 0; }
  #sub, #help { color: #555; margin-bottom: 6px; }
  #legend span { display: inline-block; margin-right: 10px; }
  #legend i { display: inline-block; width: 10px; height: 10px; margin-right: 3px; vertical-align: -1px; }
  #view { position: relative; }
  canvas { display: block; cursor: crosshair; }
  #tip { position: absolute; display: none; pointer-events: none; background: #fffff4; border: 1px solid #888;
         padding: 4px 6px; font: 12px monospace; white-space: pre; box-shadow: 1px 1px 3px #0003; }
</style>
</head>
<body>
<h1><!--TITLE--></h1>
<div id="sub"></div>
<div id="legend"></div>
<div id="help">Hover for numbers. Mouse wheel: zoom around the pointer; drag: pan; double click: the whole range.</div>
<div id="view"><canvas id="canvas"></canvas><div id="tip"></div></div>
<script>
"use strict";
const DATA = /*TRACE_DATA*/null;

// ---- Layout (CSS pixels). The canvas is one column of lane groups, one group per rank:
//   a header "rank r"; a marker row (gather / release instants); the compute track and the comm
//   track (and io, where present), each as many rows as trace_page.py's assign_rows gave its
//   spans (a nested span one row below its parent); then one memory
//   lane per tier. Left of the lanes is a gutter with their names (and, for memory, the peak and
//   the categories in their colours, and the lane's scale). Above everything, the time axis in ms.
const GUTTER = 250, AXIS = 26, HEADER = 18, MARKERS = 12, ROW = 15, MEM_ROW = 12, GAP = 14, RIGHT = 12;
const TRACKS = ["compute", "comm", "io"];
const SPAN_COLORS = {
  step: "#e8e8e8", forward: "#1f77b4", backward: "#ff7f0e", recompute: "#9ecae1", optimizer: "#2ca02c",
  offload: "#17becf", eval: "#bcbd22", checkpoint: "#7f7f7f", wait: "#d62728", io: "#17becf",
  all_gather: "#9467bd", reduce_scatter: "#8c564b", all_reduce: "#7f7f7f", broadcast: "#e377c2",
  barrier: "#c7c7c7", all_to_all: "#bcbd22",
};
const MEM_COLORS = {
  params: "#1f77b4", grads: "#ff7f0e", optim: "#2ca02c", activations: "#d62728", comm: "#9467bd",
  secondary: "#8c564b", workspace: "#7f7f7f", other: "#bcbd22",
};
const memColor = (k) => MEM_COLORS[k] || "#17becf";
// A comm span's colour is its collective ("all_gather h.0" -> all_gather); others by category.
const spanColor = (s) => SPAN_COLORS[s.track === 1 ? s.name.split(" ")[0] : s.cat] || "#444";

// ---- The data as objects, and the lanes with their heights (computed once).
const ranks = DATA.ranks.map((r) => {
  const spans = r.spans.map(([track, depth, ts, dur, name, cat, bytes, inter]) =>
    ({ track, depth, ts, dur, name, cat, bytes, inter }));
  const lanes = [{ kind: "markers", h: MARKERS, items: r.instants.map(([ts, name, track]) => ({ ts, name, track })) }];
  TRACKS.forEach((track, tid) => {
    const mine = spans.filter((s) => s.track === tid);
    if (tid === 2 && !mine.length) return;  // io only where the rank has it
    const rows = mine.reduce((m, s) => Math.max(m, s.depth + 1), 1);
    lanes.push({ kind: "track", track, h: rows * ROW, items: mine });
  });
  for (const m of r.memory) {
    // The categories in MEM_COLORS's order (params at the bottom of the stack), others after
    // them; those that stay zero in the range are left out (drawn nowhere, so not labelled).
    const order = (k) => (k in MEM_COLORS ? Object.keys(MEM_COLORS).indexOf(k) : 99);
    const cats = m.series.map((k, i) => ({ k, i: i + 1 })).filter(({ i }) => m.samples.some((s) => s[i] > 0))
      .sort((a, b) => order(a.k) - order(b.k));
    const peak = m.samples.reduce((p, s) => Math.max(p, cats.reduce((a, c) => a + s[c.i], 0)), 0);
    lanes.push({ kind: "memory", tier: m.tier, cats, peak, samples: m.samples,
                 h: Math.max(60, MEM_ROW * (cats.length + 2) + 4) });
  }
  return { rank: r.rank, spans, lanes };
});
// One scale per tier, the highest peak of any rank, so that the ranks' lanes compare at a glance.
const tierScale = {};
for (const r of ranks) for (const l of r.lanes)
  if (l.kind === "memory") tierScale[l.tier] = Math.max(tierScale[l.tier] || 0, l.peak);

const canvas = document.getElementById("canvas"), tip = document.getElementById("tip");
const ctx = canvas.getContext("2d");
let view = { t0: 0, t1: Math.max(DATA.duration, 1) };  // the visible time range, microseconds
let width = 0, height = 0;

// Time (microseconds from the window's start) to x, and back.
const xOf = (t) => GUTTER + (t - view.t0) / (view.t1 - view.t0) * (width - GUTTER - RIGHT);
const tOf = (x) => view.t0 + (x - GUTTER) / (width - GUTTER - RIGHT) * (view.t1 - view.t0);

// ---- Formatting.
const ms = (us) => (us / 1000).toFixed(3) + " ms";
const grouped = (n) => String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
function human(b) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i ? b.toFixed(1) : String(b)) + " " + u[i];
}
function niceStep(span, target) {  // a 1/2/5 x 10^k step giving about `target` ticks
  const raw = span / target, p = Math.pow(10, Math.floor(Math.log10(raw)));
  return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
}

// ---- Drawing. Every lane gets its y here; the hover uses the same numbers.
function layout() {
  let y = AXIS;
  for (const r of ranks) {
    r.y = y;
    y += HEADER;
    for (const l of r.lanes) { l.y = y; y += l.h + 2; }
    y += GAP;
  }
  return y;
}

function draw() {
  const start = performance.now();
  width = Math.max(600, document.getElementById("view").clientWidth);
  height = layout();
  const dpr = window.devicePixelRatio || 1;
  canvas.width = width * dpr; canvas.height = height * dpr;
  canvas.style.width = width + "px"; canvas.style.height = height + "px";
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, width, height);
  const stats = { spansDrawn: 0, instantsDrawn: 0, lanes: [] };
  drawAxis();
  for (const r of ranks) {
    ctx.fillStyle = "#000"; ctx.font = "bold 13px sans-serif"; ctx.textBaseline = "middle";
    ctx.fillText("rank " + r.rank, 4, r.y + HEADER / 2);
    for (const l of r.lanes) {
      // Faint lane background across the plot; the lane's name in the gutter.
      ctx.fillStyle = l.kind === "memory" ? "#f7f9fc" : "#fafafa";
      ctx.fillRect(GUTTER, l.y, width - GUTTER - RIGHT, l.h);
      const labels = [];
      ctx.save();
      ctx.beginPath(); ctx.rect(GUTTER, l.y, width - GUTTER - RIGHT, l.h); ctx.clip();
      if (l.kind === "markers") stats.instantsDrawn += drawMarkers(l);
      if (l.kind === "track") stats.spansDrawn += drawSpans(l);
      if (l.kind === "memory") drawMemory(l);
      ctx.restore();
      ctx.font = "11px sans-serif"; ctx.textBaseline = "middle";
      const say = (text, y, color) => { ctx.fillStyle = color; ctx.fillText(text, 16, y); labels.push(text); };
      if (l.kind === "markers") say("gather / release", l.y + l.h / 2, "#555");
      if (l.kind === "track") say(l.track, l.y + ROW / 2, "#222");
      if (l.kind === "memory") {
        // The categories listed top to bottom as they are stacked; the lane's top is tierScale.
        say("memory: " + l.tier, l.y + MEM_ROW / 2 + 1, "#222");
        l.cats.slice().reverse().forEach((c, j) => say("\u25A0 " + c.k, l.y + MEM_ROW * (j + 1.5) + 1, memColor(c.k)));
        say("peak " + human(l.peak), l.y + MEM_ROW * (l.cats.length + 1.5) + 1, "#555");
        ctx.fillStyle = "#888"; ctx.textAlign = "right";
        ctx.fillText(human(tierScale[l.tier]), GUTTER - 4, l.y + 6); ctx.fillText("0", GUTTER - 4, l.y + l.h - 6);
        ctx.textAlign = "left";
      }
      stats.lanes.push({ rank: r.rank, kind: l.kind, name: l.kind === "memory" ? l.tier : (l.track || l.kind),
                         y: l.y, h: l.h, labels, categories: l.cats ? l.cats.map((c) => c.k) : [] });
    }
  }
  stats.drawMs = performance.now() - start;
  return stats;
}

function drawAxis() {
  const step = niceStep(view.t1 - view.t0, 10);
  ctx.font = "11px sans-serif"; ctx.textBaseline = "middle"; ctx.textAlign = "center";
  for (let t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
    const x = xOf(t);
    ctx.fillStyle = "#eee"; ctx.fillRect(x, AXIS - 4, 1, height - AXIS);
    ctx.fillStyle = "#444"; ctx.fillText((t / 1000).toFixed(step < 1000 ? 2 : step < 10000 ? 1 : 0), x, AXIS / 2);
  }
  ctx.textAlign = "left";
  ctx.fillText("ms", 4, AXIS / 2);
}

// Spans: one rectangle each, in its row (span.depth), at least a pixel wide so that
// none disappears at the whole-run scale. Names are written inside the spans wide enough.
function drawSpans(l) {
  let n = 0;
  ctx.font = "10px sans-serif"; ctx.textBaseline = "middle";
  for (const s of l.items) {
    if (s.ts + s.dur < view.t0 || s.ts > view.t1) continue;
    const x0 = xOf(s.ts), w = Math.max(1, xOf(s.ts + s.dur) - x0), y = l.y + s.depth * ROW;
    const thin = s.cat === "wait";  // waits are drawn thin, over the span they sit in
    ctx.fillStyle = spanColor(s);
    ctx.fillRect(x0, y + (thin ? 4 : 1), w, ROW - (thin ? 8 : 2));
    if (w > 40) {
      ctx.fillStyle = s.cat === "step" ? "#333" : "#fff";
      ctx.fillText(s.name.slice(0, Math.floor((w - 4) / 6)), Math.max(x0, GUTTER) + 2, y + ROW / 2);
    }
    n++;
  }
  return n;
}

// Instants: gather (a purple triangle pointing down), release (grey, pointing up), others (a dot).
function drawMarkers(l) {
  let n = 0;
  for (const e of l.items) {
    if (e.ts < view.t0 || e.ts > view.t1) continue;
    const x = xOf(e.ts), kind = e.name.split(" ")[0], y0 = l.y + 1, y1 = l.y + l.h - 1;
    ctx.fillStyle = kind === "gather" ? "#9467bd" : kind === "release" ? "#999" : "#17becf";
    ctx.beginPath();
    if (kind === "gather") { ctx.moveTo(x - 4, y0); ctx.lineTo(x + 4, y0); ctx.lineTo(x, y1); }
    else if (kind === "release") { ctx.moveTo(x - 4, y1); ctx.lineTo(x + 4, y1); ctx.lineTo(x, y0); }
    else ctx.arc(x, (y0 + y1) / 2, 3, 0, 2 * Math.PI);
    ctx.fill();
    n++;
  }
  return n;
}

// Memory: the categories stacked (params at the bottom), each a step function (a counter keeps
// its value until its next sample), 0 at the lane's bottom and its tier's scale at the top.
function drawMemory(l) {
  if (!l.peak) return;
  const yOf = (v) => l.y + l.h - v / tierScale[l.tier] * (l.h - 2);
  const s = l.samples, end = s.length;
  const until = (i) => (i + 1 < end ? s[i + 1][0] : DATA.duration);  // sample i holds until then
  const base = new Float64Array(end);  // the stack's height below the current category
  for (const c of l.cats) {
    ctx.beginPath();
    ctx.moveTo(xOf(s[0][0]), yOf(base[0]));
    for (let i = 0; i < end; i++) {  // the bottom edge, left to right
      ctx.lineTo(xOf(s[i][0]), yOf(base[i])); ctx.lineTo(xOf(until(i)), yOf(base[i]));
    }
    for (let i = end - 1; i >= 0; i--) {  // the top edge, right to left
      const top = yOf(base[i] + s[i][c.i]);
      ctx.lineTo(xOf(until(i)), top); ctx.lineTo(xOf(s[i][0]), top);
    }
    ctx.closePath();
    ctx.fillStyle = memColor(c.k); ctx.globalAlpha = 0.75; ctx.fill(); ctx.globalAlpha = 1;
    for (let i = 0; i < end; i++) base[i] += s[i][c.i];
  }
}

// ---- Hover: find the lane under the pointer, then what it holds at that x.
function hit(x, y) {
  if (x < GUTTER || x > width - RIGHT) return null;
  for (const r of ranks) for (const l of r.lanes) {
    if (y < l.y || y >= l.y + l.h) continue;
    const t = tOf(x), slack = (view.t1 - view.t0) / (width - GUTTER - RIGHT) * 3;  // 3 px
    if (l.kind === "track") {
      const depth = Math.floor((y - l.y) / ROW);
      const s = l.items.filter((s) => s.depth === depth && s.ts - slack / 3 <= t && t <= s.ts + s.dur + slack / 3)
        .sort((a, b) => a.dur - b.dur)[0];
      if (!s) return null;
      const lines = [`rank ${r.rank} ${l.track}`, s.name, `start ${ms(s.ts)}   duration ${ms(s.dur)}`];
      if (s.bytes >= 0) {
        const link = s.inter <= 0 ? "in the node" : s.inter >= s.bytes ? "across nodes"
          : `${grouped(s.inter)} of them across nodes`;
        lines.push(`${grouped(s.bytes)} bytes sent (${human(s.bytes)}), ${link}`);
      }
      return lines.join("\n");
    }
    if (l.kind === "markers") {
      const near = l.items.filter((e) => Math.abs(e.ts - t) <= slack);
      if (!near.length) return null;
      return [`rank ${r.rank}`].concat(near.slice(0, 8).map((e) => `${ms(e.ts)}  ${e.name}`)).join("\n");
    }
    if (l.kind === "memory") {
      let i = -1;  // the last sample at or before t (binary search: samples are in time order)
      for (let a = 0, b = l.samples.length - 1; a <= b;) {
        const m = (a + b) >> 1;
        if (l.samples[m][0] <= t) { i = m; a = m + 1; } else b = m - 1;
      }
      if (i < 0) return null;
      const s = l.samples[i];
      const total = l.cats.reduce((a, c) => a + s[c.i], 0);
      return [`rank ${r.rank} memory: ${l.tier} at ${ms(t)} (sample at ${ms(s[0])})`]
        .concat(l.cats.map((c) => `${c.k.padEnd(12)} ${grouped(s[c.i]).padStart(14)} bytes`))
        .concat([`${"total".padEnd(12)} ${grouped(total).padStart(14)} bytes (${human(total)})`]).join("\n");
    }
  }
  return null;
}

canvas.addEventListener("mousemove", (ev) => {
  const b = canvas.getBoundingClientRect(), x = ev.clientX - b.left, y = ev.clientY - b.top;
  if (drag) {  // panning
    const dt = (drag.x - x) / (width - GUTTER - RIGHT) * (view.t1 - view.t0);
    view = { t0: drag.view.t0 + dt, t1: drag.view.t1 + dt };
    redraw();
  }
  const text = hit(x, y);
  tip.style.display = text ? "block" : "none";
  if (text) {
    tip.textContent = text;
    tip.style.left = Math.min(x + 14, width - tip.offsetWidth - 4) + "px";
    tip.style.top = (y + 16) + "px";
  }
});
canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; drag = null; });

// ---- Zoom and pan.
let drag = null;
canvas.addEventListener("mousedown", (ev) => {
  drag = { x: ev.clientX - canvas.getBoundingClientRect().left, view: { ...view } };
});
window.addEventListener("mouseup", () => { drag = null; });
canvas.addEventListener("wheel", (ev) => {
  ev.preventDefault();
  const t = tOf(ev.clientX - canvas.getBoundingClientRect().left), k = ev.deltaY > 0 ? 1.25 : 0.8;
  const span = Math.max(10, (view.t1 - view.t0) * k);  // no closer than 10 microseconds across
  const f = (t - view.t0) / (view.t1 - view.t0);
  view = { t0: t - f * span, t1: t - f * span + span };
  redraw();
}, { passive: false });
canvas.addEventListener("dblclick", () => { view = { t0: 0, t1: Math.max(DATA.duration, 1) }; redraw(); });
window.addEventListener("resize", () => redraw());

// ---- The header, the legend, the first draw. window.ztPage reports what was drawn and how
// long it took (tests/trace_page_check.mjs reads it).
const run = DATA.run;
document.getElementById("sub").textContent =
  `${run.model || "?"}, ZeRO stage ${run.zero_stage ?? "?"}, ${DATA.ranks.length} rank(s), ` +
  `${DATA.range}: ${ms(DATA.duration)} (times from its start, on every rank's clock after a barrier)`;
const legendOf = (colors, keys) => keys.map((k) => `<span><i style="background:${colors[k]}"></i>${k}</span>`).join("");
document.getElementById("legend").innerHTML =
  "spans: " + legendOf(SPAN_COLORS, ["forward", "backward", "recompute", "optimizer", "wait", "all_gather",
                                     "reduce_scatter", "all_reduce", "io"]) +
  "<br>memory: " + legendOf(MEM_COLORS, Object.keys(MEM_COLORS));

function redraw() {
  const s = draw();
  window.ztPage.drawMs = s.drawMs;
  window.ztPage.spansDrawn = s.spansDrawn;
}
const first = draw();
window.ztPage = {
  ranks: ranks.length,
  spans: ranks.reduce((n, r) => n + r.spans.length, 0),  // the spans the page holds
  firstDrawMs: first.drawMs,  // the first draw of the whole range
  drawMs: first.drawMs,       // the latest draw
  spansDrawn: first.spansDrawn,
  instantsDrawn: first.instantsDrawn,
  lanes: first.lanes,         // each lane: rank, kind, name, y, h, the labels written beside it
  xOf,                        // microseconds from the range's start -> x on the canvas
};
</script>
</body>
</html>
"""

if __name__ == "__main__":
    main()
