#!/usr/bin/python3
"""bench/torch_parity.py — gpt-mini trained by PyTorch and by ZeroTensor from the same weights.

The test suite checks a tiny GPT-2 against PyTorch (tests/test_pytorch_reference.cpp). This script
does the same at the benchmark's shape — gpt-mini (6 layers, 384 wide, 6 heads), B=8, T=256 — on the
bundled corpus: it builds nanoGPT's GPT-2 with Debian's python3-torch (seed 0), writes it as an llm.c
checkpoint, trains N AdamW steps in PyTorch, runs `zt-train --init-from` on the same checkpoint and
tokens with the same hyperparameters, and prints both loss curves and the largest difference.
Slow (PyTorch on the CPU), so it is not a test. Usage:

    /usr/bin/python3 bench/torch_parity.py [--steps 40] [--lr 1e-3] [--build build]
"""
import argparse, importlib.util, json, os, subprocess, sys, tempfile

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("ref", os.path.join(ROOT, "tests", "data", "make_gpt2_reference.py"))
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)  # nanoGPT's GPT and the llm.c checkpoint writer of the test data

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=40)
ap.add_argument("--lr", type=float, default=1e-3)
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--threads", type=int, default=2)
a = ap.parse_args()

cfg = dict(n_layer=6, n_embd=384, n_head=6, max_seq_len=256, vocab_size=256, padded_vocab_size=256)
B, T = 8, 256
torch.manual_seed(0)
torch.set_num_threads(a.threads)
model = ref.GPT(cfg["n_layer"], cfg["n_embd"], cfg["n_head"], cfg["max_seq_len"], cfg["vocab_size"])
tmp = tempfile.mkdtemp()
ckpt, _ = ref.checkpoint_bytes(model, cfg)
open(os.path.join(tmp, "mini.bin"), "wb").write(ckpt)
corpus = os.path.join(ROOT, "data", "corpus", "train.txt")
raw = open(corpus, "rb").read()
data = torch.tensor(list(raw), dtype=torch.long)
opt = model.configure_optimizers(0.1, a.lr, (0.9, 0.95), 1e-8)
nb = (len(raw) - 1) // (B * T)  # llm.c's loader: whole batches, then wrap to the start
torch_losses = []
for step in range(a.steps):
    k = step % nb
    buf = data[k * B * T: k * B * T + B * T + 1]
    x, y = buf[:-1].view(B, T), buf[1:].view(B, T)
    loss = F.cross_entropy(model(x).view(-1, cfg["vocab_size"]), y.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    torch_losses.append(float(loss))

log = os.path.join(tmp, "zt.jsonl")
subprocess.run([os.path.join(a.build, "zt-train"), "--init-from", os.path.join(tmp, "mini.bin"), "--train", corpus,
                "-b", str(B), "-t", str(T), "--steps", str(a.steps), "--lr", str(a.lr), "--schedule", "constant",
                "--grad-clip", "0", "--weight-decay", "0.1", "--beta1", "0.9", "--beta2", "0.95",
                "--threads", str(a.threads), "--log", log], check=True, stderr=subprocess.DEVNULL)
zt_losses = [json.loads(l)["loss"] for l in open(log)]
worst = max(abs(p - q) for p, q in zip(torch_losses, zt_losses))
print("| step | PyTorch loss | ZeroTensor loss | difference |\n|---:|---:|---:|---:|")
for i, (p, q) in enumerate(zip(torch_losses, zt_losses)):
    if i < 5 or i % 10 == 9 or i == a.steps - 1:
        print(f"| {i} | {p:.6f} | {q:.6f} | {q - p:+.2e} |")
print(f"\nlargest |difference| over {a.steps} steps: {worst:.2e} (torch {torch.__version__}, {a.threads} threads)")
