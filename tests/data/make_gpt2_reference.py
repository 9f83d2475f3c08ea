#!/usr/bin/python3
"""PyTorch reference data for the GPT-2 tests: a tiny GPT-2, its llm.c checkpoint, a token shard,
and the losses of 10 AdamW steps.

Run ONCE, with Debian's python3-torch (/usr/bin/python3; `python3 -c "import torch"` must work),
from the repository root, after data/make_corpus.sh has made data/corpus/train.txt:

    /usr/bin/python3 tests/data/make_gpt2_reference.py

It writes, next to itself (all three are shipped as test data; re-running overwrites them):
  gpt2_tiny.bin             llm.c GPT-2 checkpoint, version 3 (float32), of the model at init
  tiny_tokens.bin           llm.c token shard: the first 5000 bytes of data/corpus/train.txt, id = byte % 250
  gpt2_tiny_reference.json  config, hyperparameters, torch version, the loss of each of the 10 steps
                            (before its update) and logits of batch 0 at step 0

The C++ model tests load gpt2_tiny.bin and tiny_tokens.bin, run the same 10 steps, and compare
against gpt2_tiny_reference.json. They read only these files, never data/corpus, so the shipped
reference stays valid when the corpus is re-made.

The model is nanoGPT's GPT-2 (github.com/karpathy/nanoGPT, model.py), written out here in float32:
pre-LN blocks, learned positions (wpe), lm_head tied to wte, tanh GELU, LayerNorm eps 1e-5 with
bias, causal attention scaled by 1/sqrt(head_dim), no dropout. nanoGPT's init: normal(0, 0.02)
for Linear and Embedding weights, 0.02/sqrt(2*n_layer) for every c_proj weight, zero biases,
LayerNorm weight 1 and bias 0. The checkpoint layout is llm.c's train_gpt2.py write_model.
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CONFIG = dict(n_layer=2, n_embd=64, n_head=4, max_seq_len=64, vocab_size=250, padded_vocab_size=256)
TRAIN = dict(seed=0, steps=10, B=4, T=32, lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1,
             grad_clip=None, lr_schedule="constant")
NUM_TOKENS = 5000

CKPT_MAGIC, CKPT_VERSION_FP32 = 20240326, 3
SHARD_MAGIC, SHARD_VERSION = 20240520, 1


class CausalSelfAttention(nn.Module):
    def __init__(self, C, n_head, max_T):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(C, 3 * C)  # (3C, C): q, k, v stacked
        self.c_proj = nn.Linear(C, C)
        self.register_buffer("mask", torch.tril(torch.ones(max_T, max_T)).view(1, 1, max_T, max_T))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T)
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc = nn.Linear(C, 4 * C)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, C, n_head, max_T):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = CausalSelfAttention(C, n_head, max_T)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer, n_embd, n_head, max_seq_len, vocab_size):
        super().__init__()
        self.n_layer = n_layer
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(max_seq_len, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head, max_seq_len) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd, eps=1e-5),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied (nanoGPT)
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        # nn.LayerNorm's own init is weight 1, bias 0.

    def forward(self, idx):
        B, T = idx.shape
        pos = torch.arange(T, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)  # (B, T, C)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))  # (B, T, V): the unpadded V rows

    def configure_optimizers(self, weight_decay, lr, betas, eps):
        # nanoGPT: decay every parameter with dim >= 2 (the tied wte/lm_head once), not biases/LN.
        params = {pn: p for pn, p in self.named_parameters()}  # named_parameters dedups tied weights
        decay = [p for p in params.values() if p.dim() >= 2]
        nodecay = [p for p in params.values() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": nodecay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)


def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def checkpoint_bytes(model, cfg):
    """llm.c train_gpt2.py write_model, float32 (version 3)."""
    header = [0] * 256
    header[0:8] = [CKPT_MAGIC, CKPT_VERSION_FP32, cfg["max_seq_len"], cfg["vocab_size"], cfg["n_layer"],
                   cfg["n_head"], cfg["n_embd"], cfg["padded_vocab_size"]]
    sd = {k: v.detach().cpu().float() for k, v in model.named_parameters()}
    wte = sd["transformer.wte.weight"]  # (V, C)
    pad = torch.zeros(cfg["padded_vocab_size"] - cfg["vocab_size"], wte.size(1))
    tensors = [torch.cat([wte, pad], dim=0), sd["transformer.wpe.weight"]]  # (Vp, C), (maxT, C)
    L = cfg["n_layer"]
    for name in ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                 "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                 "mlp.c_proj.weight", "mlp.c_proj.bias"]:
        tensors += [sd[f"transformer.h.{i}.{name}"] for i in range(L)]  # nn.Linear (out, in) layout
    tensors += [sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]]
    body = b"".join(t.contiguous().numpy().astype("<f4").tobytes() for t in tensors)
    return struct.pack("<256i", *header) + body, sum(t.numel() for t in tensors)


def shard_bytes(tokens):
    header = [0] * 256
    header[0:3] = [SHARD_MAGIC, SHARD_VERSION, len(tokens)]
    return struct.pack("<256i", *header) + struct.pack(f"<{len(tokens)}H", *tokens)


def main():
    torch.set_num_threads(1)  # one summation order: re-runs give the same bytes
    cfg, hp = CONFIG, TRAIN

    corpus = os.path.join(ROOT, "data", "corpus", "train.txt")
    raw = open(corpus, "rb").read()[:NUM_TOKENS]
    if len(raw) < NUM_TOKENS:
        sys.exit(f"{corpus} has {len(raw)} bytes, need {NUM_TOKENS}: run data/make_corpus.sh first")
    tokens = [b % cfg["vocab_size"] for b in raw]
    assert hp["steps"] * hp["B"] * hp["T"] + 1 <= len(tokens)

    torch.manual_seed(hp["seed"])
    model = GPT(cfg["n_layer"], cfg["n_embd"], cfg["n_head"], cfg["max_seq_len"], cfg["vocab_size"])
    ckpt, nparams = checkpoint_bytes(model, cfg)
    opt = model.configure_optimizers(hp["weight_decay"], hp["lr"], (hp["beta1"], hp["beta2"]), hp["eps"])

    data = torch.tensor(tokens, dtype=torch.long)
    B, T = hp["B"], hp["T"]
    losses, logits_t0, logits_tlast = [], None, None
    for step in range(hp["steps"]):
        buf = data[step * B * T: step * B * T + B * T + 1]  # batch k = tokens [k*B*T, k*B*T + B*T + 1)
        x, y = buf[:-1].view(B, T), buf[1:].view(B, T)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        if step == 0:
            logits_t0 = [float(v) for v in logits[0, 0, :8].detach()]
            logits_tlast = [float(v) for v in logits[0, T - 1, :8].detach()]
        losses.append(float(loss.detach()))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step}: loss {losses[-1]!r}")

    ref = {
        "description": "tests/data/make_gpt2_reference.py: nanoGPT GPT-2 in float32, 10 AdamW steps on tiny_tokens.bin",
        "torch_version": torch.__version__,
        "config": cfg,
        "num_parameters_in_checkpoint": nparams,  # with the padded wte rows
        "num_parameters": sum(p.numel() for p in model.parameters()),  # unpadded, wte counted once
        "train": hp | {"optimizer": "torch.optim.AdamW, nanoGPT groups: weight decay on dim >= 2 only",
                       "batch": "step k reads tokens [k*B*T, k*B*T + B*T + 1): inputs, targets shifted by 1",
                       "loss": "F.cross_entropy over the vocab_size (unpadded) logits, mean over B*T"},
        "tokens": {"file": "tiny_tokens.bin", "count": len(tokens),
                   "source": "first 5000 bytes of data/corpus/train.txt, id = byte % vocab_size"},
        "checkpoint": "gpt2_tiny.bin (the weights at init, before step 0)",
        "losses": losses,  # loss of step k, computed before step k's update
        "logits_step0_b0_t0_first8": logits_t0,  # logits[0, 0, :8] of batch 0 at step 0
        "logits_step0_b0_tlast_first8": logits_tlast,  # logits[0, T-1, :8]
    }
    write_atomic(os.path.join(HERE, "gpt2_tiny.bin"), ckpt)
    write_atomic(os.path.join(HERE, "tiny_tokens.bin"), shard_bytes(tokens))
    write_atomic(os.path.join(HERE, "gpt2_tiny_reference.json"), (json.dumps(ref, indent=2) + "\n").encode())
    print(f"wrote gpt2_tiny.bin ({len(ckpt)} bytes, {nparams} floats), tiny_tokens.bin ({len(tokens)} tokens), "
          f"gpt2_tiny_reference.json")


if __name__ == "__main__":
    main()
