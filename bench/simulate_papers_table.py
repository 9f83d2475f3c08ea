"""bench/simulate_papers_table.py — bench/simulate_papers.sh's rows (JSON lines) as markdown.

Usage: python3 bench/simulate_papers_table.py ROWS.jsonl
Also imported by the script for pace() (the 2019 profiles are scaled by it).
"""
import json
import sys

GiB = 2.0**30
V100_MEMORY = 32 * GiB  # configs/devices/v100-dgx2.json's device_memory_bytes


def megatron_flops(row):
    """Flops one GPU does in a step, as Megatron-LM counts them (arXiv 1909.08053, appendix;
    2104.04473 eq. 3): 96 B s l h^2 (1 + s / 6h + V / 16 l h), activation recomputation included."""
    B, sh = row["B"], row["shape"]
    s, l, h, V = sh["s"], sh["l"], sh["h"], sh["V"]
    return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))


def tflops(row):
    """A GPU's: with tensor parallelism its tp ranks share a data-parallel rank's flops."""
    return megatron_flops(row) / row.get("tp", 1) / row["step_s"] / 1e12


def pace(calibration):
    """The factor on every on-device compute rate that puts the calibration row (predicted on the
    datasheet profile) on its published TFLOP/s."""
    return calibration["paper_tflops"] / tflops(calibration)


def main(rows_path):
    rows = [json.loads(line) for line in open(rows_path)]
    k = pace(next(r for r in rows if r["row"] == "calibration" and not r["profile"].endswith("_2019")))
    by = {(r["row"], r["profile"].endswith("_2019")): r for r in rows}

    def pair(name):
        return by[(name, False)], by[(name, True)]

    cal, cal19 = pair("calibration")
    print("### Calibration: the 2019 software's pace\n")
    print(f"Megatron-LM's GPT-2 1.2B on one V100 (B {cal['B']}, T 1024): published 39 TFLOP/s; the datasheet "
          f"profile predicts {tflops(cal):.1f} TFLOP/s. Every on-device compute rate times **{k:.3f}** puts it on "
          f"39 ({tflops(cal19):.1f} with the scaled profile): the 2019 stack (unfused kernels, PyTorch 1.x, "
          f"fp16 with loss scaling) ran at {k:.2f} of today's kernels' pace on the same GPU.\n")

    print("### The papers' throughput, predicted\n")
    print("| row | paper | predicted, datasheet | predicted / paper | predicted, 2019 pace | predicted / paper | "
          "step s (fwd / bwd / optimizer / exposed comm), 2019 pace | device peak GiB (fits 32?) |")
    print("|---|---:|---:|---:|---:|---:|---|---:|")
    labels = {
        "offload-1": "ZeRO-Offload: 10B on 1 V100, B 10",
        "zero-13b": "ZeRO: 13B without model parallelism, 128 V100s (shape assumed)",
        "zero-100b": "ZeRO: 100B with Megatron's tensor parallelism 16 inside each node, 400 V100s (shape assumed)",
        "infinity-1t": "ZeRO-3 Offload / Infinity: 1T on 512 V100s, B 8 (batch assumed)",
    }
    for name, label in labels.items():
        a, b = pair(name)
        fits = "yes" if a["device_peak"] <= V100_MEMORY else "**no**"
        bd = (f"{b['step_s']:.2f} ({b['forward_s']:.2f} / {b['backward_s']:.2f} / {b['optimizer_s']:.2f} / "
              f"{b['exposed_intra_node_s'] + b['exposed_inter_node_s']:.2f})")
        if name in ("zero-13b", "zero-100b"):
            label += f", B {a['B']} (the largest that fits)"
        print(f"| {label} | {a['paper_tflops']} TFLOP/s | {tflops(a):.1f} | {tflops(a) / a['paper_tflops']:.2f} | "
              f"{tflops(b):.1f} | {tflops(b) / b['paper_tflops']:.2f} | {bd} | {a['device_peak'] / GiB:.1f} ({fits}) |")

    print("\n### ZeRO-Offload's scaling (the paper: near-linear speedup up to 128 GPUs)\n")
    print("| GPUs | TFLOP/s a GPU, datasheet | of 1 GPU's | TFLOP/s a GPU, 2019 pace | of 1 GPU's |")
    print("|---:|---:|---:|---:|---:|")
    one, one19 = pair("offload-1")
    for name in ("offload-1", "offload-16", "offload-128"):
        a, b = pair(name)
        print(f"| {a['world']} | {tflops(a):.1f} | {tflops(a) / tflops(one):.2f} | {tflops(b):.1f} | "
              f"{tflops(b) / tflops(one19):.2f} |")

    print("\n### ZeRO++ on 384 V100s, 100 Gb/s between nodes (the paper: up to 2.16x ZeRO-3)\n")
    print("| tokens a GPU | ZeRO-3 step s, datasheet | ZeRO++ step s, datasheet | speedup, datasheet | "
          "speedup, 2019 pace | speedup / 2.16 (2019 pace) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for tokens in (1024, 2048):
        s3, s319 = pair(f"zeropp-s3-{tokens}")
        zp, zp19 = pair(f"zeropp-zpp-{tokens}")
        sp, sp19 = s3["step_s"] / zp["step_s"], s319["step_s"] / zp19["step_s"]
        print(f"| {tokens} | {s3['step_s']:.2f} | {zp['step_s']:.2f} | {sp:.2f}x | {sp19:.2f}x | {sp19 / 2.16:.2f} |")

    slow = max(rows, key=lambda r: r["seconds"])
    print(f"\nThe slowest row took {slow['seconds']:.2f} s ({slow['row']}, {slow['world']} ranks).")


if __name__ == "__main__":
    main(*sys.argv[1:])
