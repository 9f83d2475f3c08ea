#!/usr/bin/env python3
"""bench/torch_gpt2_gpu.py — the GPU peer of bench_train_step: GPT-2 124M trained by PyTorch.

The same model as ZeroTensor's gpt2-124m (nanoGPT's GPT-2: 12 layers, 768 wide, 12 heads, the
vocabulary padded to 50304, tied embedding, tanh GELU), the same step (forward, backward, AdamW
with fp32 parameters and bf16 compute), the same B x T, the same FLOP count
(6 N + 6 L C T per token, N = 124,475,904) and the same peak (989 TFLOP/s, H100 / H200 SXM dense
bf16), so its MFU sits beside bench_train_step's in bench/results/gpu.md. PyTorch runs it with
autocast(bfloat16), F.scaled_dot_product_attention (flash attention) and fused AdamW, eager and,
with --compile, through torch.compile. Fresh random tokens every step (the speed does not depend
on them; a fixed batch would only be memorized).
Runs where PyTorch and a GPU are (scripts/gpu-check.sh's torch_peer part). Usage:

    python3 bench/torch_gpt2_gpu.py [--batch 64] [--seq 1024] [--steps 10] [--warmup 3] [--compile]
"""
import argparse, json, math, time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.fc_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.attn_proj(y)
        return x + self.fc_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L=12, C=768, H=12, T=1024, V=50304):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.h = nn.ModuleList([Block(C, H) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.wte.weight = self.lm_head.weight
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.h:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def run(make_model, name, vocab, n_layer, n_embd):
    """Times the step of make_model(seq) (a module whose forward(idx, targets) returns the loss) and
    prints one JSON line; the flags are this script's. torch_llama_gpu.py runs its Llama through it."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = "cuda"
    model = make_model(a.seq).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
    step_fn = model
    if a.compile:
        step_fn = torch.compile(model)
    times = []
    for i in range(a.warmup + a.steps):
        # fresh random ids every step, as bench_train_step draws them (drawn before the clock starts)
        x = torch.randint(0, vocab, (a.batch, a.seq), device=dev)
        y = torch.randint(0, vocab, (a.batch, a.seq), device=dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    ms = times[len(times) // 2]
    tokens = a.batch * a.seq
    flops_per_token = 6 * n_params + 6 * n_layer * n_embd * a.seq
    tps = tokens / (ms / 1e3)
    out = {"impl": "pytorch " + torch.__version__ + (" compiled" if a.compile else " eager"),
           "device": torch.cuda.get_device_name(), "model": name, "params": n_params, "batch": a.batch,
           "seq": a.seq, "ms_per_step_median": ms, "tokens_per_s": tps,
           "mfu": flops_per_token * tps / (a.peak_tflops * 1e12), "peak_tflops": a.peak_tflops,
           "peak_bytes": torch.cuda.max_memory_allocated(), "final_loss": float(loss)}
    print(json.dumps(out))


if __name__ == "__main__":
    run(lambda T: GPT(T=T), "gpt2-124m", 50257, 12, 768)
