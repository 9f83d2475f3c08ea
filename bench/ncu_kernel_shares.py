#!/usr/bin/env python3
"""bench/ncu_kernel_shares.py — where a GPU step's kernel time goes, from Nsight Compute's CSV.

Input: `ncu --metrics gpu__time_duration.sum --csv --print-units base PROGRAM ...` (stdout; the
program's own lines are mixed in and skipped). Output (markdown): the total kernel time, the share
of each class of kernel (GEMMs: cuBLASLt's; attention: cuDNN's; ours by name) and the top kernels
by name with their call counts. Kernel names are cut at the first '(' or '<' (after dropping
"(anonymous namespace)::") so the instances of one template sum together. Usage: bench/ncu_kernel_shares.py ncu.csv [--top 30]
"""
import argparse, collections, csv, re, sys

ap = argparse.ArgumentParser()
ap.add_argument("csv")
ap.add_argument("--top", type=int, default=30)
a = ap.parse_args()

rows = [l for l in open(a.csv, errors="replace") if l.startswith('"')]
if not rows:
    sys.exit(f"{a.csv}: no CSV rows from ncu (did it profile any kernel?)")
reader = csv.DictReader(rows)
time_ns = collections.Counter()
calls = collections.Counter()
for r in reader:
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    name = re.sub(r"\(anonymous namespace\)::|<unnamed>::", "", r["Kernel Name"])
    name = re.split(r"[(<]", name, maxsplit=1)[0].strip()
    name = re.sub(r"^void\s+", "", name)
    time_ns[name] += float(r["Metric Value"].replace(",", ""))
    calls[name] += 1


def kind(name):
    n = name.lower()
    if any(k in n for k in ("gemm", "nvjet", "xmma", "cutlass", "sm90_", "sm80_", "splitk", "cublas")):
        return "GEMM (cuBLASLt)"
    if any(k in n for k in ("cudnn", "flash", "fmha", "sdpa", "attn")):
        return "attention (cuDNN) and its layout"
    return name


total = sum(time_ns.values())
by_kind = collections.Counter()
for name, t in time_ns.items():
    by_kind[kind(name)] += t
print(f"kernels: {sum(calls.values())} launches, {total / 1e6:.2f} ms of kernel time\n")
print("| class | ms | share |\n|---|---:|---:|")
for k, t in by_kind.most_common(a.top):
    print(f"| {k} | {t / 1e6:.2f} | {100 * t / total:.1f}% |")
print("\n| kernel | calls | ms | share |\n|---|---:|---:|---:|")
for name, t in time_ns.most_common(a.top):
    print(f"| `{name[:90]}` | {calls[name]} | {t / 1e6:.2f} | {100 * t / total:.1f}% |")
