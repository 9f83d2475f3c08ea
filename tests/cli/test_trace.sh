#!/usr/bin/env bash
# zt-train --trace (core/trace.h, dist/trace_file.h): one Chrome trace-event file for every rank.
# Checked on 2 ranks at stage 3, stage 3 + nvme offload, stage 3 + ZeRO++, and one process at stage 0:
#   valid JSON with a process (and its track names) per rank; every unit's forward and backward
#   on every rank; each unit's "gather" paired with a "release" (alternating, none left open);
#   the collectives on the comm track named after their unit, and a prefetched all-gather that
#   runs while another unit computes (the overlap the trace exists to show); the
#   device memory counters equal to the memory report in the --log at the end of every step and
#   never above its peak; nvme IO spans and host/nvme counters with offload. Also the live line
#   (MFU, memory), the end-of-run tables (their calls and bytes per collective against the
#   trace's), and a trace path in a missing directory.
source "$(dirname "$0")/common.sh"
A=(--model gpt2-nano --train "$S/data/corpus/train.txt" -t 32 --threads 1 --steps 4)

python3 - "$S/configs" "$TMP" <<'PY'
import json, sys
src, tmp = sys.argv[1], sys.argv[2]
for name in ["zero3.json", "zero3-nvme.json", "zero3-zeropp.json"]:
    c = json.load(open(f"{src}/{name}"))
    c.pop("model", None)
    c["train_micro_batch_size_per_gpu"] = 2
    z = c["zero_optimization"]
    # gpt2-nano's units are small: prefetch one unit ahead and keep nothing persistent, so every
    # unit is gathered and released every time (the pairing below sees all of them).
    z["stage3_param_persistence_threshold"] = 0
    z["stage3_prefetch_bucket_size"] = 20000
    z["stage3_max_reuse_distance"] = 0
    if z.get("zero_quantized_gradients"):
        z["zero_quantized_gradients_one_node"] = True  # qgZ's intra-node hop on this one node too
    for k in ["offload_optimizer", "offload_param"]:
        if z.get(k, {}).get("device") == "nvme": z[k]["nvme_path"] = f"{tmp}/nvme"
    json.dump(c, open(f"{tmp}/{name}", "w"))
PY

"${MPI[@]}" -np 2 "$B/zt-train" --config "$TMP/zero3.json" "${A[@]}" --log "$TMP/z3.jsonl" --trace "$TMP/z3.json" \
  2>"$TMP/z3.err" || { echo "FAIL: stage 3 run"; cat "$TMP/z3.err"; exit 1; }
"${MPI[@]}" -np 2 "$B/zt-train" --config "$TMP/zero3-nvme.json" "${A[@]}" --log "$TMP/nv.jsonl" --trace "$TMP/nv.json" \
  2>"$TMP/nv.err" || { echo "FAIL: nvme run"; cat "$TMP/nv.err"; exit 1; }
"${MPI[@]}" -np 2 "$B/zt-train" --config "$TMP/zero3-zeropp.json" "${A[@]}" --log "$TMP/zp.jsonl" --trace "$TMP/zp.json" \
  2>"$TMP/zp.err" || { echo "FAIL: ZeRO++ run"; cat "$TMP/zp.err"; exit 1; }
"$B/zt-train" --zero-stage 0 "${A[@]}" --log "$TMP/z0.jsonl" --trace "$TMP/z0.json" --trace-steps 2 \
  2>"$TMP/z0.err" || { echo "FAIL: stage 0 run"; cat "$TMP/z0.err"; exit 1; }

python3 - "$TMP" <<'PY'
import json, sys, re
tmp = sys.argv[1]
def fail(msg):
    print("FAIL:", msg); sys.exit(1)

def load(name, ranks):
    try:
        d = json.load(open(f"{tmp}/{name}.json"))
    except Exception as e:
        fail(f"{name}.json is not valid JSON: {e}")
    ev = d["traceEvents"]
    if d["otherData"]["world_size"] != ranks: fail(f"{name}: otherData.world_size {d['otherData']}")
    pids = {e["pid"] for e in ev}
    if pids != set(range(ranks)): fail(f"{name}: ranks {pids}, expected {list(range(ranks))}")
    for r in range(ranks):
        names = {(e["name"], e.get("tid")) for e in ev if e["pid"] == r and e["ph"] == "M"}
        if ("process_name", None) not in names or ("thread_name", 1) not in names: fail(f"{name}: rank {r} lacks track names")
    for e in ev:
        if e["ph"] == "X" and (e["dur"] < 0 or e["tid"] not in (0, 1, 2)): fail(f"{name}: bad span {e}")
    return ev

def spans(ev, r, cat=None, tid=None):
    return [e for e in ev if e["pid"] == r and e["ph"] == "X" and (cat is None or e["cat"] == cat)
            and (tid is None or e["tid"] == tid)]

def check_units(name, ev, ranks, steps):
    units = None
    for r in range(ranks):
        fwd = {e["name"].split(" ", 1)[1] for e in spans(ev, r, "forward")}
        bwd = {e["name"].split(" ", 1)[1] for e in spans(ev, r, "backward")}
        if not fwd or fwd != bwd: fail(f"{name} rank {r}: forward units {fwd} != backward units {bwd}")
        if units is None: units = fwd
        if fwd != units: fail(f"{name}: rank {r} has units {fwd}, rank 0 {units}")
        n_steps = len([e for e in spans(ev, r, "step") if e["name"].startswith("step ")])
        if n_steps != steps: fail(f"{name} rank {r}: {n_steps} step spans, expected {steps}")
    return units

def check_pairs(name, ev, ranks, units):
    for r in range(ranks):
        inst = sorted([e for e in ev if e["pid"] == r and e["ph"] == "i" and e["cat"] == "gather"], key=lambda e: e["ts"])
        for u in units:
            seq = [e["name"].split(" ", 1)[0] for e in inst if e["args"]["unit"] == u]
            if not seq: fail(f"{name} rank {r}: unit {u} never gathered")
            for i, k in enumerate(seq):
                if k != ("gather" if i % 2 == 0 else "release"): fail(f"{name} rank {r} unit {u}: gather/release out of order {seq}")
            if len(seq) % 2: fail(f"{name} rank {r} unit {u}: a gather without its release {seq}")
        comm = [e["name"] for e in spans(ev, r, "comm", 1)]
        for u in units:
            if f"all_gather {u}" not in comm or f"reduce_scatter {u}" not in comm: fail(f"{name} rank {r}: no collectives of {u} on the comm track")
    print(f"ok: {name}: every gather of {len(units)} units paired with a release on {ranks} ranks; collectives named per unit")

def check_overlap(name, ev):
    for r in (0, 1):
        fwd = spans(ev, r, "forward") + spans(ev, r, "backward")
        ag = [e for e in spans(ev, r, "comm", 1) if e["name"].startswith("all_gather ")]
        hit = [(a["name"], f["name"]) for a in ag for f in fwd if a["name"].split(" ", 1)[1] != f["name"].split(" ", 1)[1]
               and f["ts"] < a["ts"] < f["ts"] + f["dur"]]
        if not hit: fail(f"{name} rank {r}: no all-gather runs during another unit's forward or backward (no prefetch overlap)")
    print(f"ok: {name}: prefetch visible, e.g. '{hit[0][0]}' runs during '{hit[0][1]}'")

def check_memory(name, ev, log, counter):
    lines = [json.loads(l) for l in open(f"{tmp}/{log}")]
    steps = sorted([e for e in spans(ev, 0, "step") if e["name"].startswith("step ")], key=lambda e: e["ts"])
    samples = sorted([e for e in ev if e["pid"] == 0 and e["ph"] == "C" and e["name"] == counter], key=lambda e: e["ts"])
    if not samples: fail(f"{name}: no '{counter}' counter")
    for s, line in zip(steps, lines):
        inside = [c for c in samples if s["ts"] <= c["ts"] <= s["ts"] + s["dur"]]
        if not inside: fail(f"{name}: no memory sample in {s['name']}")
        last = inside[-1]["args"]
        for cat, cur in line["memory"]["current"].items():
            if last[cat] != cur: fail(f"{name} {s['name']}: counter {cat} = {last[cat]} at the end, the memory report says {cur}")
            peak = max(c["args"][cat] for c in inside)
            if peak > line["memory"]["peak"][cat]: fail(f"{name} {s['name']}: counter {cat} reached {peak} > the report's peak {line['memory']['peak'][cat]}")
    print(f"ok: {name}: '{counter}' ends every traced step at the memory report's bytes and stays within its peaks ({len(steps)} steps)")

ev = load("z3", 2)
units = check_units("z3", ev, 2, 4)
check_pairs("z3", ev, 2, units)
check_overlap("z3", ev)
check_memory("z3", ev, "z3.jsonl", "memory: device (cpu)")

ev = load("zp", 2)
check_memory("zp", ev, "zp.jsonl", "memory: device (cpu)")
for r in range(2):
    names = {e["name"] for e in ev if e["pid"] == r and e["ph"] == "X" and e["tid"] == 1}
    for part in ["(qwZ int8)", "(hpZ secondary)", "(qgZ int4, in the node)"]:
        if not any(part in n for n in names): fail(f"zp rank {r}: no comm span ending in '{part}': {sorted(names)[:8]}")
print("ok: zp: ZeRO++'s collectives on the comm track, named after their part (qwZ, hpZ, qgZ)")

ev = load("nv", 2)
units = check_units("nv", ev, 2, 4)
check_pairs("nv", ev, 2, units)
check_memory("nv", ev, "nv.jsonl", "memory: device (cpu)")
for r in (0, 1):
    io = [e["name"] for e in spans(ev, r, "io", 2)]
    if not any(n.startswith("nvme read") for n in io) or not any(n.startswith("nvme write") for n in io):
        fail(f"nv rank {r}: no nvme reads and writes on the io track: {io[:5]}")
    cn = {e["name"] for e in ev if e["pid"] == r and e["ph"] == "C"}
    if not {"memory: host (host)", "memory: nvme (swap files)"} <= cn: fail(f"nv rank {r}: counters {cn}")
    nv = [e["args"]["optim"] for e in ev if e["pid"] == r and e["ph"] == "C" and e["name"] == "memory: nvme (swap files)"]
    if min(nv) <= 0: fail(f"nv rank {r}: the swap file holds no optimizer state: {nv[:3]}")
print("ok: nv: nvme reads/writes on the io track; host and nvme counters; the optimizer state in the swap file")

ev = load("z0", 1)
units = check_units("z0", ev, 1, 2)  # --trace-steps 2 of 4
check_memory("z0", ev, "z0.jsonl", "memory: device (cpu)")
PY

# The live line and the end-of-run tables.
grep -qE "step +4/4 \| loss [0-9.]+ \| lr .* tok/s \| MFU [0-9.]+% \| mem .* \(peak .*\) \| ETA" "$TMP/z3.err" \
  || { echo "FAIL: the live line lacks MFU / memory"; cat "$TMP/z3.err"; exit 1; }
grep -q "bytes moved per rank over 4 steps" "$TMP/z3.err" && grep -q "time per rank over the steps" "$TMP/z3.err" \
  || { echo "FAIL: no end-of-run summary"; cat "$TMP/z3.err"; exit 1; }
echo "ok: the live line shows MFU and memory; the end-of-run summary is printed"
# The summary against the trace (the same run): every collective the trace shows on a rank's
# comm track is in that rank's row of the bytes table (calls exactly, bytes to the table's
# rounding), and the time table's offload column is 0 without offload and not with nvme.
python3 - "$TMP" <<'PY'
import json, re, sys
tmp = sys.argv[1]
UNIT = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}
KINDS = ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "barrier", "all_to_all"]
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
for name in ["z3", "nv", "zp"]:
    t = open(f"{tmp}/{name}.err").read()
    table = t.split("bytes moved per rank")[1].split("time per rank")[0]
    rows = re.findall(r"^  ([01]) +((?:[0-9.]+ (?:B|KiB|MiB|GiB) \([0-9]+\) +){6})", table, re.M)
    if len(rows) != 2: fail(f"{name}: bytes table rows {rows}")
    ev = json.load(open(f"{tmp}/{name}.json"))["traceEvents"]
    for r, cells in rows:
        got = re.findall(r"([0-9.]+) (B|KiB|MiB|GiB) \(([0-9]+)\)", cells)
        for kind, (num, unit, calls) in zip(KINDS, got):
            spans = [e for e in ev if e["pid"] == int(r) and e["ph"] == "X" and e["tid"] == 1
                     and e["name"].split(" ")[0] == kind]
            traced = sum(e["args"]["bytes"] for e in spans)
            if len(spans) != int(calls): fail(f"{name} rank {r} {kind}: {len(spans)} in the trace, the summary says {calls} calls")
            if abs(traced - float(num) * UNIT[unit]) > 0.006 * UNIT[unit]:
                fail(f"{name} rank {r} {kind}: {traced} bytes in the trace, the summary says {num} {unit}")
    times = re.findall(r"^  ([01]) +([0-9.]+) +([0-9.-]+) +([0-9.]+) +([0-9.]+) +([0-9.]+) ", t.split("time per rank")[1], re.M)
    if len(times) != 2: fail(f"{name}: time table rows {times}")
    for r, step, comp, busy, wait, off in times:
        if not (float(step) > 0 and float(wait) <= float(step) and float(busy) > 0):
            fail(f"{name} rank {r}: step {step}, comm busy {busy}, comm wait {wait}")
        if (name == "nv") != (float(off) > 0): fail(f"{name} rank {r}: offload time {off}")
print("ok: the summary's calls and bytes per collective are the trace's, rank by rank; offload time only with offload")
PY
expect_fail "trace into a missing directory" "/nonexistent/dir/t.json" \
  "$B/zt-train" --zero-stage 0 "${A[@]}" --trace /nonexistent/dir/t.json
