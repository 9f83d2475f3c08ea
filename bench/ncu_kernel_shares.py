#!/usr/bin/env python3
"""bench/ncu_kernel_shares.py — where a GPU step's kernel time goes, from Nsight Compute's CSV.

Input: `ncu --metrics gpu__time_duration.sum --csv --print-units base PROGRAM ...` (stdout; the
program's own lines are mixed in and skipped). Output (markdown): the total kernel time, the share
of each class of kernel (GEMMs: cuBLASLt's; attention: cuDNN's; ours by name) and the top kernels
by name with their call counts. Kernel names are cut at the first '(' or '<' (after dropping
"(anonymous namespace)::") so the instances of one template sum together. Usage: bench/ncu_kernel_shares.py ncu.csv [--top 30] [--from emb_fwd_kernel]
"""
import argparse, collections, csv, re, sys

ap = argparse.ArgumentParser()
ap.add_argument("csv")
ap.add_argument("--top", type=int, default=30)
ap.add_argument("--from", dest="start", default=None,
                help="count from the first launch of this kernel on (e.g. the step's first kernel, so that "
                     "the program's setup is left out)")
a = ap.parse_args()

rows = [l for l in open(a.csv, errors="replace") if l.startswith('"')]
if not rows:
    sys.exit(f"{a.csv}: no CSV rows from ncu (did it profile any kernel?)")
reader = csv.DictReader(rows)
time_ns = collections.Counter()
calls = collections.Counter()
counting = a.start is None
for r in reader:
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    name = re.sub(r"\(anonymous namespace\)::|<unnamed>::", "", r["Kernel Name"])
    name = re.split(r"[(<]", name, maxsplit=1)[0].strip()
    name = re.sub(r"^void\s+", "", name)
    counting = counting or name.endswith(a.start)
    if not counting:
        continue
    time_ns[name] += float(r["Metric Value"].replace(",", ""))
    calls[name] += 1
if not calls:
    sys.exit(f"{a.csv}: no kernel named ...{a.start} (--from)")


def kind(name):
    n = name.lower()  # attention first: cuDNN's fused kernels are named sm90_... too
    if any(k in n for k in ("cudnn", "flash", "fmha", "sdpa", "attn")):
        return "attention (cuDNN)"
    if any(k in n for k in ("gemm", "nvjet", "xmma", "cutlass", "sm90_", "sm80_", "splitk", "cublas")):
        return "GEMM (cuBLASLt)"
    return name


total = sum(time_ns.values())
by_kind = collections.Counter()
for name, t in time_ns.items():
    by_kind[kind(name)] += t
print(f"kernels{' from the first ' + a.start if a.start else ''}: {sum(calls.values())} launches, "
      f"{total / 1e6:.2f} ms of kernel time\n")
print("| class | ms | share |\n|---|---:|---:|")
for k, t in by_kind.most_common(a.top):
    print(f"| {k} | {t / 1e6:.2f} | {100 * t / total:.1f}% |")
print("\n| kernel | calls | ms | share |\n|---|---:|---:|---:|")
for name, t in time_ns.most_common(a.top):
    print(f"| `{name[:90]}` | {calls[name]} | {t / 1e6:.2f} | {100 * t / total:.1f}% |")
