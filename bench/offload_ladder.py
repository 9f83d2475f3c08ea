#!/usr/bin/env python3
# defines: main (bench/offload_ladder.py); helpers: TIERS, member, tier_config, estimate, ask_estimator, verdict,
#          search, run_trial, measured, write_report and 7 more
"""ZeRO-Offload's headline on one device: the largest model of one family that trains there, per tier.

Ren et al. 2021, "ZeRO-Offload: Democratizing Billion-Scale Model Training", section 6 and
Figure 7: a 10B model on one 32 GB V100 with the host's memory (1.5 TB) at about 40 TFLOP/s. The
ladder here, on one device, with this machine's host memory and disk:

  gpu       no offload, ZeRO-0: the bf16 parameters, their gradients and the fp32 master, m and v
            (16 bytes a parameter) and the activations on the device
  opt-cpu   ZeRO-Offload (stage 2 + offload_optimizer cpu): the fp32 master, m and v and the
            gradient shards in pinned host memory, AdamW on the CPU; the bf16 parameters stay
  cpu       + offload_param cpu (ZeRO-3): the bf16 parameters in host memory too, each block
            fetched to the device when it is needed; the activation checkpoints in host memory
  nvme      ZeRO-Infinity: the optimizer states and the parameters in a swap file on the disk
            (--nvme-dir), host memory holds only their staging buffers

The family is one model config file (default: Llama 3 8B's width, configs/models/llama3-8b.json)
with n_layer free. For each tier a dry run of the trial itself predicts its peaks: zt-estimate
--model runs zt-train's setup and training steps with the trial's config, micro-batch, sequence
length, compute dtype and threads on the meta device (train/dry_run.h), where every allocation is
counted and none holds memory. The prediction per resource is the largest over the simulated
ranks of the device's peak of the total over the run (setup included), the host tier's likewise
and the swap files' reserved bytes. The plan is the largest n_layer whose prediction fits the
device cap, the host cap and the free disk, each with --margin to spare, made in seconds on any
machine (--plan-only). Then, unless --plan-only, zt-train trains that model for --steps steps on
--device (its own process: an out-of-memory is a clean exit), and the next size up, the smallest
n_layer the dry run puts past a cap by more than --margin, must fail with the clean out-of-memory
(or disk-full) error. Each fit's measured peaks, the same quantities from zt-train's --log (the
device's: the setup's peak, in the first line, and every step's; the host tier's and the swap
files': the run's), stand beside the prediction, and its TFLOP/s is 6 N + 6 L C T FLOPs a token
(train/train_report.h) times the median tokens/s of the steps after the first.

On the CPU (--device cpu) the prediction is the measurement: the meta device counts what the CPU
backend's allocators count, to the byte (with cpu_checkpointing the device's peak of a real run
itself moves by one checkpoint, the timing of the copies to the host). On a GPU (--device cuda)
it is not yet: the meta device models the CPU backend's kernels (bfloat16's float32 stand-ins, the
CPU attention's scratch), not the CUDA kernels, so the predicted device workspace is the CPU
backend's, not what the CUDA kernels allocate, and the device's ratio there shows how far the
GPU's run is from it (a known limit).

The caps: --device-mib (default on cuda:N: nvidia-smi's memory.total less --device-reserve-mib,
the CUDA context and what lives outside the caching allocator), --host-mib (default 80% of
MemTotal: the host tier's allocator, zt-train --host-memory-limit-mib; the rest is the process's
own memory and the OS), --disk-mib (default: the free space under --nvme-dir less 2 GiB). zt-train
runs under the same caps (the device's and the host tier's allocators; the disk's as the largest
file it may write, RLIMIT_FSIZE), so running out is our clean error, not the kernel's OOM killer.

  python3 bench/offload_ladder.py --bin build --device cuda:0 --out ladder      # the whole ladder
  python3 bench/offload_ladder.py --bin build --plan-only --device-mib 79000 \\
      --host-mib 104000 --disk-mib 50000 --out ladder                           # the plan only

Writes OUT/ladder.json (the plan and every trial) and OUT/ladder.md (the table).
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# tier -> (ZeRO stage, offload_optimizer device, offload_param device, cpu_checkpointing, what)
TIERS = {
    "gpu": (0, "none", "none", False, "no offload (ZeRO-0)"),
    "opt-cpu": (2, "cpu", "none", False, "ZeRO-Offload: optimizer + gradients in host memory"),
    "cpu": (3, "cpu", "cpu", True, "+ parameters (ZeRO-3) and checkpoints in host memory"),
    "nvme": (3, "nvme", "nvme", True, "ZeRO-Infinity: optimizer + parameters on the disk"),
}


def member(family, n_layer, path):
    """The family's config with n_layer set, written to `path` (zt-train / zt-estimate --model)."""
    cfg = dict(family, n_layer=n_layer)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)
    return path


def block_params(f):
    """One block's parameters: q, k, v, o; gate, up, down; two norms (Llama; the SwiGLU width
    defaults as models/model_config.h's default_ffn_hidden does)."""
    c, hd = f["n_embd"], f["n_embd"] // f["n_head"]
    kv = f.get("n_kv_head", f["n_head"]) * hd
    ffn = f.get("ffn_hidden", (8 * c // 3 + 255) // 256 * 256)
    return c * (2 * c + 2 * kv) + 3 * c * ffn + 2 * c


def largest_unit(f):
    """At least the elements of the largest unit's parameters: the embedding's or the head's
    (padded vocabulary x C, and the final norm), else a block's; rounded up past the padding."""
    rows = f.get("padded_vocab_size", f["vocab_size"])
    return (max(rows * f["n_embd"] + f["n_embd"], block_params(f)) + 255) // 256 * 256


def tier_config(tier, family, a, model_path, path):
    """The DeepSpeed-style config of one trial (zt-train's run keys beside the engine's)."""
    stage, opt, param, cpu_ckpt, _ = TIERS[tier]
    bp = block_params(family)
    # overlap_comm with offload (DeepSpeed's ZeRO-Offload configs set it): a unit's gradient copy to
    # the host is waited for once the next unit's backward is queued, so the two overlap
    zero = {"stage": stage, "overlap_comm": stage == 3 or opt != "none", "contiguous_gradients": True,
            "sub_group_size": a.sub_group_size,
            "offload_optimizer": {"device": opt, "pin_memory": True},
            "offload_param": {"device": param, "pin_memory": True}}
    if stage == 3:  # about one block prefetched, two gathered at most, nothing kept for reuse;
        # DeepSpeed's persistence threshold (1e5), but below a block: blocks are always offloaded
        zero.update({"stage3_prefetch_bucket_size": bp, "stage3_max_live_parameters": 2 * bp,
                     "stage3_max_reuse_distance": 0, "stage3_param_persistence_threshold": min(100000, bp // 2)})
    for key, dev in (("offload_optimizer", opt), ("offload_param", param)):
        if dev == "nvme":
            zero[key]["nvme_path"] = a.swap_dir
    if param == "nvme":
        # a unit's parameter shard must fit one buffer (DeepSpeed's rule): the default, 1e8 elements,
        # is below Llama 3's embedding (128256 x 4096); a bound only, nothing is allocated by it
        zero["offload_param"]["buffer_size"] = largest_unit(family)
    cfg = {"model": model_path, "train_data": a.data, "seq_len": a.seq_len, "steps": a.steps,
           "compute_dtype": a.compute_dtype,
           "train_micro_batch_size_per_gpu": a.batch, "gradient_accumulation_steps": 1,
           "gradient_clipping": 1.0, "bf16": {"enabled": True},
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "betas": [0.9, 0.95], "eps": 1e-8,
                                                     "weight_decay": 0.1}},
           "zero_optimization": zero,
           "activation_checkpointing": {"enabled": True, "cpu_checkpointing": cpu_ckpt}}
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)
    return path


_estimates = {}  # (tier, n_layer) -> estimate(): the search asks some sizes more than once


def estimate(a, tier, family, n_layer, work):
    """The dry run's prediction for one member on one tier (bytes), asked once per size."""
    key = (tier, n_layer)
    if key not in _estimates:
        _estimates[key] = ask_estimator(a, tier, family, n_layer, work)
    return _estimates[key]


def ask_estimator(a, tier, family, n_layer, work):
    """The dry run's peaks for one member on one tier (bytes): zt-estimate --model runs the
    trial's own setup and training steps on the meta device (train/dry_run.h), with the trial's
    config, batch, sequence length, compute dtype and threads. Per resource the largest over the
    simulated ranks: the device's and the host tier's peak of the total over the run (setup
    included), the swap files' reserved bytes."""
    model = member(family, n_layer, os.path.join(work, f"model-{n_layer}.json"))
    config = tier_config(tier, family, a, model, os.path.join(work, f"{tier}-{n_layer}.json"))
    out = subprocess.run([os.path.join(a.bin, "zt-estimate"), "--model", model, "--config", config,
                          "--batch", str(a.batch), "--seq-len", str(a.seq_len), "--compute-dtype", a.compute_dtype,
                          "--threads", str(a.threads), "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"offload_ladder: zt-estimate failed on {tier}, n_layer {n_layer}:\n{out.stderr}")
    ranks = json.loads(out.stdout)  # rank 0 and the last rank
    per_cat = lambda get: {c: max(get(r)[c]["peak"] for r in ranks)
                           for c in get(ranks[0]) if c != "peak_total"}
    return {"n_layer": n_layer, "psi": ranks[0]["psi"],
            "device": max(r["device"]["run"]["peak_total"] for r in ranks),
            "host": max(r["host"]["run"]["peak_total"] for r in ranks),
            "disk": max(r["nvme"]["peak_total"] for r in ranks),
            "device_peak": per_cat(lambda r: r["device"]["run"]), "host_peak": per_cat(lambda r: r["host"]["run"]),
            "nvme_peak": per_cat(lambda r: r["nvme"])}


def verdict(e, caps, scale):
    """The resources whose prediction passes cap * scale (empty: fits)."""
    return [r for r in ("device", "host", "disk") if e[r] > caps[r] * scale]


def search(a, tier, family, caps, work):
    """Largest n_layer predicted to fit with --margin to spare, and the next size up: the smallest
    n_layer predicted past a cap by more than --margin. Doubling, then bisection."""
    fits = lambda n: not verdict(estimate(a, tier, family, n, work), caps, 1 - a.margin)
    if not fits(1):
        return None, None
    lo, hi = 1, 2
    while hi <= a.max_layers and fits(hi):
        lo, hi = hi, hi * 2
    if hi > a.max_layers:
        return estimate(a, tier, family, lo, work), None
    while hi - lo > 1:  # fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    over = lambda n: bool(verdict(estimate(a, tier, family, n, work), caps, 1 + a.margin))
    nxt = hi
    while not over(nxt):
        nxt += 1
    return estimate(a, tier, family, lo, work), estimate(a, tier, family, nxt, work)


def run_trial(a, tier, family, n_layer, caps, work, deadline):
    """zt-train on one member: (exit code, seconds, the output's tail, the --log's lines)."""
    model = member(family, n_layer, os.path.join(work, f"model-{n_layer}.json"))
    config = tier_config(tier, family, a, model, os.path.join(work, f"{tier}-{n_layer}.json"))
    log = os.path.join(work, f"{tier}-{n_layer}.jsonl")
    if os.path.exists(log):
        os.remove(log)
    cmd = [os.path.join(a.bin, "zt-train"), "--config", config, "--device", a.device,
           "--memory-limit-mib", str(caps["device"] // 2**20),
           "--host-memory-limit-mib", str(caps["host"] // 2**20), "--threads", str(a.threads), "--log", log]
    timeout = max(1, min(a.trial_timeout, deadline - time.time()))
    t0 = time.time()
    print("$ " + " ".join(cmd), flush=True)
    # The disk cap holds for real: no file of the trial (the swap file is one per rank, the
    # optimizer's and the parameters' regions together) may grow past it (RLIMIT_FSIZE: zt-train
    # turns the EFBIG into the swap file's disk-full error).
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (caps["disk"], caps["disk"]))
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=limit)
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, text = "timeout", (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
    secs = time.time() - t0
    if os.path.isdir(a.swap_dir):  # a killed trial may leave its swap file
        shutil.rmtree(a.swap_dir, ignore_errors=True)
    lines = [json.loads(x) for x in open(log)] if os.path.exists(log) else []
    print(text[-1500:], flush=True)
    return rc, secs, text[-4000:], lines


def measured(lines, est, family, a):
    """A fit's numbers from its --log, the same quantities as the prediction: the device's peak of
    the total over the run (the setup's, in the first line, and every step's: the device's peaks
    restart each step), the host tier's peak of the total over the run (its peaks are the run's,
    setup included: the last line's) and the swap files' reserved bytes; and the TFLOP/s."""
    setup = lines[0]["memory"]["setup"]
    dev, dev_total = dict(setup["peak"]), setup["peak_total"]
    for l in lines:
        for k, v in l["memory"]["peak"].items():
            dev[k] = max(dev.get(k, 0), v)
        dev_total = max(dev_total, l["memory"]["peak_total"])
    last = lines[-1]["memory"]
    host = last["host"] if "host" in last else {"peak": {}, "peak_total": 0}
    nvme = last["nvme"] if "nvme" in last else {"peak": {}, "peak_total": 0}
    tps = statistics.median([l["tokens_per_s"] for l in lines[1:]] or [lines[-1]["tokens_per_s"]])
    flops_tok = 6 * est["psi"] + 6 * est["n_layer"] * family["n_embd"] * a.seq_len
    m = {"device": dev_total, "host": host["peak_total"], "disk": nvme["peak_total"],
         "device_peak": dev, "host_peak": host["peak"], "nvme_peak": nvme["peak"],
         "tokens_per_s": tps, "tflops": tps * flops_tok / 1e12,
         "step_ms": [l["step_ms"] for l in lines], "losses": [l["loss"] for l in lines]}
    # None: neither side has the resource; a measured one the prediction lacks is off by infinity
    m["ratio"] = {r: (m[r] / est[r] if est[r] else None if not m[r] else float("inf"))
                  for r in ("device", "host", "disk")}
    m["within"] = all(r is None or abs(r - 1) <= a.within for r in m["ratio"].values())
    return m


# The clean error of each resource: our allocator's out-of-memory (device, host tier), zt-train's
# refusal of a host cap below the offloaded states (train/memory_caps.cpp), the swap file's
# refusal of a disk without room (zero/aio.cpp).
EXPECTED_FAILURE = {"device": ["out of memory"], "host": ["out of memory", "host_memory_limit_mib = "],
                    "disk": ["cannot allocate the NVMe tier's swap space"]}


def fmt_bytes(b):
    """Bytes as the reports print them: the largest binary unit under the value."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= size:
            return f"{b / size:.2f} {unit}"
    return f"{b} B"


def count(n):
    """A parameter count: 8.03 B, 722.8 M, 49.3 K."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}" if unit == "B" else f"{n / size:.1f} {unit}"
    return str(n)


def row(t):
    """One tier's line of the table."""
    what = TIERS[t["tier"]][4]
    p = t["plan"]
    if p is None:
        return f"| {t['tier']} | {what} | - | - | - | not even one layer fits | | | | | |"
    pred = " / ".join(fmt_bytes(p[r]) for r in ("device", "host", "disk"))
    fit = t.get("fit", {})
    m = fit.get("measured")
    if m:
        meas = " / ".join(fmt_bytes(m[r]) for r in ("device", "host", "disk"))
        ratios = ", ".join(f"{v:.3f}" if v else "-" for v in m["ratio"].values())
        within = f"{'yes' if m['within'] else 'no'} ({ratios})"
        speed = f"{m['tflops']:.3g} | {m['tokens_per_s']:.0f}"
    else:
        meas, within, speed = fit.get("status", "not run"), "", " | "
    fb = t.get("fallback")
    if fb:  # the plan failed; the largest size below it that trained
        fm = fb["measured"]
        meas += (f"; {fb['plan']['n_layer']} layers ({count(fb['plan']['psi'])}) trained: "
                 + " / ".join(fmt_bytes(fm[r]) for r in ("device", "host", "disk")))
        speed = f"{fm['tflops']:.3g} | {fm['tokens_per_s']:.0f}"
    nxt, nr = t.get("next_plan"), t.get("next", {})
    nxt_s = f"{nxt['n_layer']} layers, {count(nxt['psi'])}: {nr.get('status', 'not run')}" if nxt else "-"
    return (f"| {t['tier']} | {what} | {p['n_layer']} | {count(p['psi'])} | {', '.join(t['binds']) or '-'} "
            f"| {pred} | {meas} | {within} | {speed} | {nxt_s} |")


def write_report(doc, out, show=False):
    with open(os.path.join(out, "ladder.json"), "w") as f:
        json.dump(doc, f, indent=1)
    caps = doc["caps"]
    lines = [f"# The offload ladder: {doc['family_file']} with n_layer free, B {doc['batch']} x T "
             f"{doc['seq_len']}, bf16 (compute {doc['compute_dtype']}), {doc['device']}",
             "",
             f"{doc['date']}; caps: device {fmt_bytes(caps['device'])}, host tier {fmt_bytes(caps['host'])}, "
             f"disk {fmt_bytes(caps['disk'])}; margin {doc['margin']:.0%}",
             "",
             f"`{doc['command']}`",
             "",
             "| tier | what | n_layer | parameters | binds | predicted device / host / disk "
             "| measured device / host / disk | within | TFLOP/s | tokens/s | next size up |",
             "|---|---|---:|---:|---|---|---|---|---:|---:|---|"]
    lines += [row(t) for t in doc["tiers"]]
    lines += ["", "Predicted: zt-estimate --model, the trial's setup and steps on the meta device (the "
              "device's and the host tier's peak of the total over the run, setup included; the swap "
              "files' reserved bytes). Measured: the same from zt-train --log. On a GPU the predicted "
              "device workspace is the CPU backend's kernels' (the meta device models those). within: "
              f"every measured / predicted ratio (device, host, disk) within {doc['within']:.0%}. binds: "
              "the resource the next size up overflows; it must fail with that resource's clean error."]
    with open(os.path.join(out, "ladder.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if show:
        print("\n".join(lines))


def default_caps(a):
    """Bytes: the device's, the host tier's and the disk's caps (the flags, else measured here)."""
    caps = {}
    if a.device_mib:
        caps["device"] = a.device_mib * 2**20
    elif a.device.startswith("cuda"):
        idx = a.device.split(":")[1] if ":" in a.device else "0"
        total = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", idx],
                               capture_output=True, text=True, check=True).stdout.split()[0]
        caps["device"] = (int(total) - a.device_reserve_mib) * 2**20
    else:
        sys.exit("offload_ladder: --device-mib is needed on a cpu device")
    if a.host_mib:
        caps["host"] = a.host_mib * 2**20
    else:
        kib = int(re.search(r"MemTotal:\s+(\d+)", open("/proc/meminfo").read()).group(1))
        caps["host"] = int(kib * 1024 * 0.8) // 2**20 * 2**20
    os.makedirs(a.nvme_dir, exist_ok=True)
    st = os.statvfs(a.nvme_dir)
    free = st.f_bavail * st.f_frsize - 2 * 2**30
    caps["disk"] = min(free, a.disk_mib * 2**20) if a.disk_mib else free
    return caps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="folder with zt-train and zt-estimate")
    ap.add_argument("--family", default=os.path.join(ROOT, "configs/models/llama3-8b.json"))
    ap.add_argument("--tiers", default="gpu,opt-cpu,cpu,nvme")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--device-mib", type=int, default=0)
    ap.add_argument("--device-reserve-mib", type=int, default=2048,
                    help="off nvidia-smi's total: the CUDA context, the libraries' own memory")
    ap.add_argument("--host-mib", type=int, default=0)
    ap.add_argument("--disk-mib", type=int, default=0)
    ap.add_argument("--nvme-dir", default="/tmp/zt-ladder-nvme")
    ap.add_argument("--data", default=os.path.join(ROOT, "data/corpus/train.txt"))
    ap.add_argument("--compute-dtype", choices=["f32", "bf16"],
                    help="zt-train --compute-dtype (default: bf16 on a GPU, f32 on the CPU, as zt-train's auto)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--sub-group-size", type=int, default=100_000_000)
    ap.add_argument("--threads", type=int, default=0,
                    help="zt-train's and the dry run's --threads (0: the cores this process may use, zt-train's default)")
    ap.add_argument("--margin", type=float, default=0.03, help="the plan's headroom under each cap")
    ap.add_argument("--within", type=float, default=0.05, help="measured / predicted must be within this")
    ap.add_argument("--max-layers", type=int, default=256)
    ap.add_argument("--trial-timeout", type=float, default=600)
    ap.add_argument("--budget-s", type=float, default=3600, help="all trials together")
    ap.add_argument("--plan-only", action="store_true")
    ap.add_argument("--out", default="ladder")
    a = ap.parse_args()
    a.data, a.nvme_dir = os.path.abspath(a.data), os.path.abspath(a.nvme_dir)
    a.swap_dir = os.path.join(a.nvme_dir, "zt-ladder-swap")  # the trials' own: removed after each
    a.compute_dtype = a.compute_dtype or ("bf16" if a.device.startswith("cuda") else "f32")
    a.threads = a.threads or len(os.sched_getaffinity(0))  # the dry run's threads are the trials'
    os.makedirs(a.out, exist_ok=True)
    work = os.path.join(os.path.abspath(a.out), "work")
    os.makedirs(work, exist_ok=True)
    family = json.load(open(a.family))
    tiers = a.tiers.split(",")
    for t in tiers:
        if t not in TIERS:
            sys.exit(f"offload_ladder: --tiers: unknown tier '{t}' (known: {', '.join(TIERS)})")
    caps = default_caps(a)
    deadline = time.time() + a.budget_s
    doc = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "command": " ".join(sys.argv),
           "family_file": os.path.relpath(a.family, ROOT) if a.family.startswith(ROOT) else a.family,
           "family": family, "device": a.device, "compute_dtype": a.compute_dtype, "batch": a.batch, "seq_len": a.seq_len, "steps": a.steps,
           "caps": caps, "margin": a.margin, "within": a.within, "tiers": []}
    for t in tiers:  # the plan: dry runs only, seconds
        fit, nxt = search(a, t, family, caps, work)
        binds = verdict(nxt, caps, 1 + a.margin) if nxt else []
        doc["tiers"].append({"tier": t, "plan": fit, "next_plan": nxt, "binds": binds})
        print(f"plan {t}: {fit and fit['n_layer']} layers ({fit and fit['psi']} parameters); next size up "
              f"{nxt and nxt['n_layer']} past {binds}", flush=True)
    ok = True
    if not a.plan_only:
        # Every fit first (the numbers), then every next size up (the clean failures).
        for t in doc["tiers"]:
            if t["plan"] is None:
                continue
            rc, secs, tail, lines = run_trial(a, t["tier"], family, t["plan"]["n_layer"], caps, work, deadline)
            good = rc == 0 and len(lines) == a.steps
            t["fit"] = {"rc": rc, "seconds": round(secs, 1), "status": "trained" if good else f"failed ({rc})",
                        "tail": tail}
            if good:
                t["fit"]["measured"] = measured(lines, t["plan"], family, a)
                ok = ok and t["fit"]["measured"]["within"]
            elif rc == 1 and any(w in tail for w in EXPECTED_FAILURE["device"] + EXPECTED_FAILURE["host"]):
                # The prediction was short: the check fails, but the tier still gets its numbers from
                # the largest size that trains, searched down from the plan (its prediction beside it).
                for n in range(t["plan"]["n_layer"] - 1, max(0, t["plan"]["n_layer"] - 4), -1):
                    est = estimate(a, t["tier"], family, n, work)
                    rc2, secs2, tail2, lines2 = run_trial(a, t["tier"], family, n, caps, work, deadline)
                    if rc2 == 0 and len(lines2) == a.steps:
                        t["fallback"] = {"plan": est, "seconds": round(secs2, 1),
                                         "measured": measured(lines2, est, family, a)}
                        break
            ok = ok and good
            write_report(doc, a.out)
        for t in doc["tiers"]:
            if t["next_plan"] is None:
                continue
            rc, secs, tail, _ = run_trial(a, t["tier"], family, t["next_plan"]["n_layer"], caps, work, deadline)
            # the error of any resource the dry run puts past its cap
            want = [w for r in verdict(t["next_plan"], caps, 1.0) for w in EXPECTED_FAILURE[r]]
            clean = rc == 1 and any(w in tail for w in want)
            t["next"] = {"rc": rc, "seconds": round(secs, 1), "tail": tail,
                         "status": "failed cleanly" if clean else f"did not fail cleanly ({rc})"}
            ok = ok and clean
            write_report(doc, a.out)
    write_report(doc, a.out, show=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
