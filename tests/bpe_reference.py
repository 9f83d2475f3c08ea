#!/usr/bin/env python3
"""An independent reference for ZeroTensor's byte-level BPE (tests/cli/test_zt_tokenize.sh).

Written from GPT-2's encoder.py algorithm and the training rule in formats/bpe_trainer.h, in plain
Python with the `regex` module (Unicode properties), sharing no code with the C++:

  bpe_reference.py train VOCAB_SIZE OUT_DIR FILE...   -> OUT_DIR/merges.txt (GPT-2's format)
  bpe_reference.py encode DIR FILE                     -> the ids of FILE, one line, space-separated

encode reads DIR/vocab.json + DIR/merges.txt and applies GPT-2's bpe(): repeatedly merge every
occurrence of the lowest-ranked adjacent pair, left to right. "<|endoftext|>" in the text is its
own id. The file must be valid UTF-8 (Python str), as GPT-2's encoder assumes.
"""
import json
import sys

import regex

PAT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
EOT = "<|endoftext|>"


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return bs, dict(zip(bs, [chr(c) for c in cs]))


def pieces(text):
    for part in text.split(EOT):
        yield from PAT.findall(part)


def train(vocab_size, out_dir, files):
    order, b2u = bytes_to_unicode()
    tokens = [bytes([b]) for b in order]  # id -> bytes, GPT-2's order
    byte_id = {b: i for i, b in enumerate(order)}
    counts = {}
    for f in files:
        for p in pieces(open(f, encoding="utf-8").read()):
            counts[p] = counts.get(p, 0) + 1
    words = [[[byte_id[b] for b in p.encode("utf-8")], c] for p, c in counts.items()]
    merges = []
    while len(tokens) + 1 < vocab_size:  # + 1: <|endoftext|>, last
        pc = {}
        for ids, c in words:
            for a, b in zip(ids, ids[1:]):
                pc[(a, b)] = pc.get((a, b), 0) + c
        if not pc:
            break
        best = min(pc, key=lambda k: (-pc[k], k))  # highest count, then the smallest (left, right)
        if pc[best] < 2:
            break
        new = len(tokens)
        tokens.append(tokens[best[0]] + tokens[best[1]])
        merges.append(best)
        for w in words:
            ids, out, i = w[0], [], 0
            while i < len(ids):
                if i + 1 < len(ids) and (ids[i], ids[i + 1]) == best:
                    out.append(new)
                    i += 2
                else:
                    out.append(ids[i])
                    i += 1
            w[0] = out
    form = lambda t: "".join(b2u[b] for b in t)
    with open(f"{out_dir}/merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{form(tokens[a])} {form(tokens[b])}\n")


def encode(d, path):
    _, b2u = bytes_to_unicode()
    vocab = json.load(open(f"{d}/vocab.json", encoding="utf-8"))
    lines = open(f"{d}/merges.txt", encoding="utf-8").read().split("\n")
    ranks = {tuple(l.split(" ")): i for i, l in enumerate(x for x in lines[1:] if x)}

    def bpe(word):  # GPT-2's encoder.py
        word = tuple(word)
        while len(word) > 1:
            pairs = set(zip(word, word[1:]))
            best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
            if best not in ranks:
                break
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = tuple(out)
        return word

    text = open(path, encoding="utf-8").read()
    ids = []
    for k, part in enumerate(text.split(EOT)):
        if k:
            ids.append(vocab[EOT])
        for p in PAT.findall(part):
            ids.extend(vocab[t] for t in bpe("".join(b2u[b] for b in p.encode("utf-8"))))
    print(" ".join(map(str, ids)))


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(int(sys.argv[2]), sys.argv[3], sys.argv[4:])
    else:
        encode(sys.argv[2], sys.argv[3])
