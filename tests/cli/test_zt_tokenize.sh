#!/usr/bin/env bash
# zt-tokenize: a BPE vocabulary trained on data/corpus equals the independent Python reference's
# (tests/bpe_reference.py: same merges, same ids); llm.c shards with the right header; zt-train and
# zt-generate with --tokenizer; a SentencePiece model from spm_train; bad tokenizers refused.
source "$(dirname "$0")/common.sh"
T="$B/zt-tokenize"
VAL="$S/data/corpus/val.txt"

# 1. training: our merges == the reference's, byte for byte
"$T" train --vocab-size 512 --out "$TMP/tok" "$VAL" > "$TMP/train.out"
grep -q "512 tokens (256 bytes + 255 merges + 1 special)" "$TMP/train.out" || { cat "$TMP/train.out"; echo "FAIL: train"; exit 1; }
mkdir -p "$TMP/ref"
python3 "$S/tests/bpe_reference.py" train 512 "$TMP/ref" "$VAL"
cmp "$TMP/tok/merges.txt" "$TMP/ref/merges.txt" || { echo "FAIL: merges differ from tests/bpe_reference.py"; exit 1; }
echo "ok: 255 merges on val.txt equal the Python reference's"

# 2. encoding: the shard's ids == GPT-2's bpe() in the reference; header: magic, version 1, count
"$T" encode --tokenizer "$TMP/tok/vocab.json" --out "$TMP/val.bin" --progress "$VAL" > "$TMP/enc.out" 2> "$TMP/enc.err"
grep -q "100.0%" "$TMP/enc.err" || { cat "$TMP/enc.err"; echo "FAIL: no progress bar with --progress"; exit 1; }
grep -q "tokens/s" "$TMP/enc.out" || { cat "$TMP/enc.out"; echo "FAIL: no throughput"; exit 1; }
python3 "$S/tests/bpe_reference.py" encode "$TMP/tok" "$VAL" > "$TMP/ref_ids.txt"
python3 - "$TMP/val.bin" "$TMP/ref_ids.txt" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
h = struct.unpack("<256i", d[:1024])
assert h[0] == 20240520 and h[1] == 1, h[:3]
n = h[2]
assert len(d) == 1024 + 2 * n, (len(d), n)
ids = list(struct.unpack(f"<{n}H", d[1024:]))
ref = list(map(int, open(sys.argv[2]).read().split()))
assert ids[0] == 511, ids[:3]  # the document starts with <|endoftext|> (llm.c's convention)
assert ids[1:] == ref, next(i for i, (a, b) in enumerate(zip(ids[1:], ref)) if a != b)
print(f"ok: {n} ids (<|endoftext|> + {len(ref)}) equal the reference's GPT-2 bpe()")
PY

# 3. zt-train --tokenizer: a named model takes the tokenizer's vocabulary; text and shard give the same losses
"$B/zt-train" --model gpt2-nano --tokenizer "$TMP/tok" --train "$VAL" -b 2 -t 32 --steps 3 --log "$TMP/a.log" \
  --ckpt-dir "$TMP/ck" 2> "$TMP/train.err" > /dev/null || { cat "$TMP/train.err"; exit 1; }
grep -q "(bpe, 512 tokens); the model's vocabulary: 512" "$TMP/train.err" || { cat "$TMP/train.err"; echo "FAIL: tokenizer line"; exit 1; }
"$T" encode --tokenizer "$TMP/tok" --out "$TMP/val_only.bin" "$VAL" > /dev/null
python3 - "$TMP/val_only.bin" <<'PY'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
n = int.from_bytes(d[8:12], "little") - 1  # drop the leading <|endoftext|>: the text file has none
d[8:12] = n.to_bytes(4, "little")
open(sys.argv[1], "wb").write(d[:1024] + d[1026:])
PY
"$B/zt-train" --model gpt2-nano --tokenizer "$TMP/tok" --train "$TMP/val_only.bin" -b 2 -t 32 --steps 3 --log "$TMP/b.log" \
  2> /dev/null > /dev/null
diff <(losses "$TMP/a.log") <(losses "$TMP/b.log") || { echo "FAIL: text through the tokenizer and its shard train differently"; exit 1; }
echo "ok: zt-train --tokenizer: vocabulary 512, text and shard give the same losses"

# 4. zt-generate --tokenizer: text in, text out (the prompt comes back first)
"$B/zt-generate" --ckpt "$TMP/ck" --tokenizer "$TMP/tok" --prompt "int main(" -n 10 --seed 1 > "$TMP/gen.txt"
head -c 9 "$TMP/gen.txt" | grep -qF "int main(" || { cat "$TMP/gen.txt"; echo "FAIL: generate"; exit 1; }
echo "ok: zt-generate --tokenizer continues the prompt"

# 4b. a tiktoken-family tokenizer.json (Llama 3's shape: the file's split pattern, ignore_merges)
# with a BOS named by tokenizer_config.json: each document is <|begin_of_text|> text <|endoftext|>
mkdir -p "$TMP/ll3"
python3 - "$TMP/tok/tokenizer.json" "$TMP/ll3" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
pattern = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
j["model"]["ignore_merges"] = True
n = max(t["id"] for t in j["added_tokens"]) + 1
j["added_tokens"].append({"id": n, "content": "<|begin_of_text|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True})
json.dump(j, open(sys.argv[2] + "/tokenizer.json", "w"))
json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|endoftext|>"}, open(sys.argv[2] + "/tokenizer_config.json", "w"))
PY
printf 'one doc' > "$TMP/d1.txt"; printf 'two docs' > "$TMP/d2.txt"
"$T" encode --tokenizer "$TMP/ll3" --out "$TMP/ll3.bin" "$TMP/d1.txt" "$TMP/d2.txt" > /dev/null
python3 - "$TMP/ll3.bin" "$TMP/ll3/tokenizer.json" <<'PY' || { echo "FAIL: BOS / EOS layout of a tiktoken-family shard"; exit 1; }
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
hdr = struct.unpack("<256i", raw[:1024])
ids = struct.unpack(f"<{hdr[2]}H", raw[1024:1024 + 2 * hdr[2]])
added = {t["content"]: t["id"] for t in json.load(open(sys.argv[2]))["added_tokens"]}
bos, eos = added["<|begin_of_text|>"], added["<|endoftext|>"]
starts = [i for i, t in enumerate(ids) if t == bos]
ends = [i for i, t in enumerate(ids) if t == eos]
assert ids[0] == bos and ids[-1] == eos and len(starts) == 2 and len(ends) == 2, ids
assert ends[0] + 1 == starts[1], ids  # doc 1 ends, doc 2 starts
print("ok: zt-tokenize encode, tiktoken family with a BOS: " + " ".join(map(str, ids)))
PY

# 5. SentencePiece: spm_train, then a shard through the .model
spm_train --input="$VAL" --model_prefix="$TMP/sp" --vocab_size=400 --model_type=bpe --byte_fallback=true \
  --character_coverage=1.0 --num_threads=1 --minloglevel=2 > /dev/null 2>&1
"$T" encode --tokenizer "$TMP/sp.model" --out "$TMP/sp.bin" "$VAL" > "$TMP/sp.out"
grep -q "sentencepiece" "$TMP/sp.out" || { cat "$TMP/sp.out"; echo "FAIL: sentencepiece encode"; exit 1; }
echo "ok: $(head -1 "$TMP/sp.out")"

# 6. bad input: clear errors naming the file and the problem
"$B/zt-train" --model gpt2-nano --train "$VAL" -b 2 -t 32 --steps 1 --ckpt-dir "$TMP/ck256" > /dev/null 2>&1
expect_fail "tokenizer larger than the model" "has 512 tokens but the model has a vocabulary of 256" \
  "$B/zt-generate" --ckpt "$TMP/ck256" --tokenizer "$TMP/tok" --prompt "x" -n 1
echo '{"model": {"type": "Unigram", "vocab": []}}' > "$TMP/uni.json"
expect_fail "a tokenizer.json of another kind" "uni.json': model.type is 'Unigram'" \
  "$T" encode --tokenizer "$TMP/uni.json" --out "$TMP/x.bin" "$VAL"
head -c 300 "$TMP/tok/tokenizer.json" > "$TMP/cut.json"
expect_fail "a truncated tokenizer.json" "cut.json' is not valid JSON" "$T" show --tokenizer "$TMP/cut.json" "x"
echo "not a model" > "$TMP/bad.model"
expect_fail "a broken SentencePiece model" "bad.model': cannot be loaded" "$T" show --tokenizer "$TMP/bad.model" "x"
expect_fail "an unknown kind" "cannot tell its kind" "$T" show --tokenizer "$VAL" "x"
expect_fail "zt-train with a tokenizer too large for --init-from" "has 512 tokens but the model of --init-from" \
  "$B/zt-train" --init-from "$S/tests/data/gpt2_tiny.bin" --tokenizer "$TMP/tok" --train "$VAL" -b 1 -t 8 --steps 1
