#!/usr/bin/env python3
"""bench/torch_llama_gpu.py — the GPU peer of bench_train_step for the Llama models, trained by PyTorch.

The same models as ZeroTensor's presets (models/model_config.cpp), chosen by --model:
  llama-100m   8 layers, 768 wide, 12 heads over 4 KV heads (GQA), SwiGLU 2048, RMSNorm eps 1e-5,
               RoPE theta 10000, vocabulary 32000, untied lm_head, no biases: 99,496,704 parameters
  llama3.2-1b  16 layers, 2048 wide, 32 heads over 8 KV heads, SwiGLU 8192, vocabulary 128256, tied
               embeddings, RoPE theta 500000 with Llama 3's scaling (factor 32, low 1, high 4,
               original 8192 positions): 1,235,814,400 parameters
RoPE on half-split pairs as Hugging Face's Llama. The same step and FLOP count (6 N + 6 L C T per
token) as bench/torch_gpt2_gpu.py, whose timing loop it shares (autocast bf16, SDPA flash
attention, fused AdamW, eager or --compile). Usage:

    python3 bench/torch_llama_gpu.py [--model llama-100m] [--batch 16] [--seq 1024] [--steps 10]
                                     [--warmup 3] [--compile]
"""
import argparse, math
import os, sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt2_gpu import run  # noqa: E402


def rope(x, cos, sin):  # x (B, H, T, D); rotate the halves (Hugging Face's rotate_half)
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Block(nn.Module):
    def __init__(self, C, H, Hkv, F_):
        super().__init__()
        self.H, self.Hkv, self.D = H, Hkv, C // H
        self.input_layernorm = nn.RMSNorm(C, eps=1e-5)
        self.post_attention_layernorm = nn.RMSNorm(C, eps=1e-5)
        self.q = nn.Linear(C, C, bias=False)
        self.k = nn.Linear(C, Hkv * self.D, bias=False)
        self.v = nn.Linear(C, Hkv * self.D, bias=False)
        self.o = nn.Linear(C, C, bias=False)
        self.gate = nn.Linear(C, F_, bias=False)
        self.up = nn.Linear(C, F_, bias=False)
        self.down = nn.Linear(F_, C, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        h = self.input_layernorm(x)
        q = self.q(h).view(B, T, self.H, self.D).transpose(1, 2)
        k = self.k(h).view(B, T, self.Hkv, self.D).transpose(1, 2)
        v = self.v(h).view(B, T, self.Hkv, self.D).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(y.transpose(1, 2).reshape(B, T, C))
        h = self.post_attention_layernorm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def llama3_inv_freq(inv, factor, low, high, original):
    """Llama 3's rope_scaling (transformers' _compute_llama3_parameters; core/rope.h): wavelengths
    below original / high kept, above original / low divided by factor, smooth in between."""
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > original / low, inv / factor, inv)
    smooth = (original / wavelen - low) / (high - low)
    mid = (1 - smooth) * scaled / factor + smooth * scaled
    is_mid = (wavelen >= original / high) & (wavelen <= original / low)
    return torch.where(is_mid, mid, scaled)


class Llama(nn.Module):
    def __init__(self, L=8, C=768, H=12, Hkv=4, F_=2048, T=1024, V=32000, theta=10000.0, tied=False, scaling=None):
        super().__init__()
        self.embed = nn.Embedding(V, C)
        self.layers = nn.ModuleList([Block(C, H, Hkv, F_) for _ in range(L)])
        self.norm = nn.RMSNorm(C, eps=1e-5)
        self.lm_head = nn.Linear(C, V, bias=False)
        D = C // H
        inv = 1.0 / theta ** (torch.arange(0, D, 2, dtype=torch.float32) / D)
        if scaling:
            inv = llama3_inv_freq(inv, *scaling)
        ang = torch.outer(torch.arange(T, dtype=torch.float32), inv)
        ang = torch.cat((ang, ang), dim=-1)  # (T, D)
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.02)
        if tied:
            self.lm_head.weight = self.embed.weight  # counted once by parameters()

    def forward(self, idx, targets):
        T = idx.shape[1]
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.embed(idx)
        for b in self.layers:
            x = b(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


MODELS = {
    "llama-100m": dict(L=8, C=768, H=12, Hkv=4, F_=2048, V=32000, theta=10000.0),
    "llama3.2-1b": dict(L=16, C=2048, H=32, Hkv=8, F_=8192, V=128256, theta=500000.0, tied=True,
                        scaling=(32.0, 1.0, 4.0, 8192.0)),
}

if __name__ == "__main__":
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--model", default="llama-100m", choices=sorted(MODELS))
    known, rest = pre.parse_known_args()
    sys.argv = sys.argv[:1] + rest  # the rest are run()'s flags
    m = MODELS[known.model]
    run(lambda T: Llama(T=T, **m), known.model, m["V"], m["L"], m["C"])
