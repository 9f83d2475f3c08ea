#!/usr/bin/env python3
"""bench/hf_client.py — Hugging Face's own libraries as a client of ZeroTensor's files, both ways.

An outside program reading what we write is the proof that our exports are right, not our own
reader. Where transformers, tokenizers and torch are installed (the GPU machine; this runs on its
CPU, float32), for GPT-2 and Llama (GQA):
  1. ours -> transformers: zt-train trains a small model a few steps and exports it (--save-hf);
     transformers.AutoModelForCausalLM.from_pretrained loads it; the logits of both on the same
     ids (zt-generate --logits) agree to max |difference| <= 1e-4.
  2. transformers -> ours: a seeded random GPT2LMHeadModel / LlamaForCausalLM (and one with
     Llama 3's rope_scaling, at positions past its original context) is written by
     save_pretrained; zt-generate --hf reads it; the logits agree the same way. The llama3 model
     also goes back: zt-train --init-from it, --save-hf, transformers loads that.
  3. tokenizer: zt-tokenize trains a byte-level BPE and writes tokenizer.json; transformers'
     PreTrainedTokenizerFast loads that file; its ids equal ours (zt-tokenize encode) on the
     validation corpus and on hard text (Unicode, digits, whitespace runs, long words).
Prints one line per check and a JSON summary last; exits 1 if any check fails.
Usage: bench/hf_client.py --bin DIR_WITH_zt-programs --data data/corpus [--work /tmp/zt-hf]
"""
import argparse, inspect, json, os, random, struct, subprocess, sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("--bin", required=True)
ap.add_argument("--data", required=True)
ap.add_argument("--work", default="/tmp/zt-hf")
ap.add_argument("--tol", type=float, default=1e-4)
a = ap.parse_args()
os.makedirs(a.work, exist_ok=True)
torch.manual_seed(0)
results, ok = [], True


def zt(prog, *args):
    cmd = [os.path.join(a.bin, prog), *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return r


def our_logits(hf_dir, ids, V):
    out = os.path.join(a.work, "logits.f32")
    zt("zt-generate", "--hf", hf_dir, "--prompt-ids", ",".join(map(str, ids)), "--logits", out, "--threads", 4)
    return np.fromfile(out, dtype="<f4").reshape(len(ids), V)


def their_logits(model_or_dir, ids, V):
    m = model_or_dir
    if isinstance(m, str):
        m = AutoModelForCausalLM.from_pretrained(m, dtype=torch.float32)
    m.eval()
    with torch.no_grad():
        return m(torch.tensor([ids])).logits[0, :, :V].float().numpy()


def record(name, diff, extra=None):
    global ok
    passed = bool(diff <= a.tol)
    ok &= passed
    results.append({"check": name, "max_abs_diff": float(diff), "tol": a.tol, "pass": passed, **(extra or {})})
    print(f"{'PASS' if passed else 'FAIL'} {name}: max |ours - transformers| = {diff:.3g} (bound {a.tol})", flush=True)


def guarded(name, fn):
    global ok
    try:
        fn()
    except Exception as e:  # one check's failure must not hide the others
        ok = False
        results.append({"check": name, "pass": False, "error": str(e)[-1500:]})
        print(f"FAIL {name}: {e}", flush=True)


# 1. ours -> transformers
def ours_to_hf(model, init_from=None):
    d = os.path.join(a.work, f"ours-{model}")
    src = ["--init-from", init_from] if init_from else ["--model", model]
    zt("zt-train", *src, "--train", os.path.join(a.data, "train.txt"), "-b", 4, "-t", 64, "--steps", 3,
       "--save-hf", d, "--threads", 4)
    cfg = json.load(open(os.path.join(d, "config.json")))
    V = cfg["vocab_size"]
    ids = [random.Random(1).randrange(V) for _ in range(48)]
    diff = np.abs(our_logits(d, ids, V) - their_logits(d, ids, V)).max()
    record(f"ours->transformers {model} ({cfg.get('model_type')})", diff)


# 2. transformers -> ours
def hf_to_ours(kind):
    torch.manual_seed(0)
    if kind == "gpt2":
        m = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=128, vocab_size=300))
    elif kind == "llama":
        m = LlamaForCausalLM(LlamaConfig(hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, vocab_size=300,
                                         max_position_embeddings=128, tie_word_embeddings=False, rope_theta=10000.0))
    else:  # llama3: Llama 3's RoPE scaling over an original context of 16 positions, the ids run to 40;
        # theta 500 and head_dim 16 put frequencies in all three of its bands (kept, interpolated, divided)
        scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 16}
        if "rope_parameters" in inspect.signature(LlamaConfig.__init__).parameters:  # transformers 5
            rope = {"rope_parameters": {**scaling, "rope_theta": 500.0}}
        else:
            rope = {"rope_scaling": scaling, "rope_theta": 500.0}
        m = LlamaForCausalLM(LlamaConfig(hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, vocab_size=300,
                                         max_position_embeddings=128, tie_word_embeddings=True, **rope))
    d = os.path.join(a.work, f"theirs-{kind}")
    m.save_pretrained(d)
    ids = [random.Random(2).randrange(300) for _ in range(40)]
    diff = np.abs(our_logits(d, ids, 300) - their_logits(m, ids, 300)).max()
    record(f"transformers->ours {kind}", diff)


# 3. tokenizer
HARD = ("Ünïcödé — ドイツ語 🙂🙂 naïve café\n  \t\t  spaces   and\n\n\nnewlines 1234567890 3.14159 "
        "x" * 300 + " don't won't I'm y'all  's 'LL  \u00a0nbsp")


def tokenizer_check():
    from transformers import PreTrainedTokenizerFast
    tok_dir = os.path.join(a.work, "tok")
    zt("zt-tokenize", "train", "--vocab-size", 512, "--out", tok_dir, os.path.join(a.data, "train.txt"))
    theirs = PreTrainedTokenizerFast(tokenizer_file=os.path.join(tok_dir, "tokenizer.json"))
    hard = os.path.join(a.work, "hard.txt")
    open(hard, "w", encoding="utf-8").write(HARD)
    global ok
    for name, path in (("validation corpus", os.path.join(a.data, "val.txt")), ("hard text", hard)):
        shard = os.path.join(a.work, "ids.bin")
        zt("zt-tokenize", "encode", "--tokenizer", tok_dir, "--out", shard, path)
        raw = open(shard, "rb").read()
        magic, _, n = struct.unpack("<3i", raw[:12])
        ours = list(np.frombuffer(raw[1024:], dtype="<u2" if magic == 20240520 else "<u4")[:n])
        text = open(path, encoding="utf-8").read()
        want = theirs(text, add_special_tokens=False)["input_ids"]
        eot = theirs.convert_tokens_to_ids("<|endoftext|>")
        if ours and eot is not None and ours[0] == eot and (not want or want[0] != eot):
            ours = ours[1:]  # the shard's document separator (llm.c's convention), not the text's
        same = [int(x) for x in ours] == list(want)
        first = next((i for i, (x, y) in enumerate(zip(ours, want)) if x != y), min(len(ours), len(want)))
        ok &= same
        results.append({"check": f"tokenizer ids, {name}", "pass": same, "tokens": len(want), "first_difference": None if same else first})
        print(f"{'PASS' if same else 'FAIL'} tokenizer on {name}: {len(want)} tokens"
              + ("" if same else f", first difference at {first}: ours {ours[first:first+5]} theirs {want[first:first+5]}"), flush=True)


for model in ("gpt2-nano", "llama-nano"):
    guarded(f"ours->transformers {model}", lambda: ours_to_hf(model))
for kind in ("gpt2", "llama", "llama3"):
    guarded(f"transformers->ours {kind}", lambda: hf_to_ours(kind))
# Llama 3's RoPE scaling the other way: trained 3 steps from transformers' llama3 model, exported
# by --save-hf (rope_scaling written back), loaded by transformers.
guarded("ours->transformers llama3 (rope_scaling)",
        lambda: ours_to_hf("llama3-from-theirs", init_from=os.path.join(a.work, "theirs-llama3")))
guarded("tokenizer", tokenizer_check)
print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__, "pass": ok, "checks": results}))
sys.exit(0 if ok else 1)
