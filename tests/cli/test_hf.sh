#!/usr/bin/env bash
# Hugging Face weights from the command line (formats/hf_weights.h): a trained checkpoint exported
# with `zt-ckpt consolidate --format hf` and with `zt-train --save-hf` (the same bytes), generated
# from with `zt-generate --hf` (the same greedy tokens as `--ckpt`), started from with
# `zt-train --init-from DIR` (GPT-2: the same losses as from the llm.c file of the same weights;
# with lr 0 the exported weights come back bit for bit), and the errors a user meets first.
source "$(dirname "$0")/common.sh"
TRAIN="$S/data/corpus/train.txt"

for model in gpt2-nano llama-nano; do
  D="$TMP/$model"
  "$B/zt-train" --model "$model" --train "$TRAIN" -b 4 -t 32 --steps 3 --ckpt-dir "$D/ck" --save-hf "$D/end" 2>/dev/null
  "$B/zt-ckpt" consolidate "$D/ck" --format hf --out "$D/hf" > /dev/null
  for f in config.json model.safetensors; do
    [ -f "$D/hf/$f" ] || { echo "FAIL: $model: consolidate --format hf wrote no $f"; exit 1; }
  done
  cmp "$D/hf/model.safetensors" "$D/end/model.safetensors"
  cmp "$D/hf/config.json" "$D/end/config.json"
  echo "ok: $model: zt-train --save-hf and zt-ckpt consolidate --format hf write the same files"

  "$B/zt-generate" --ckpt "$D/ck" --prompt "int main(" -n 40 --temperature 0 > "$D/a.txt"
  "$B/zt-generate" --hf "$D/hf" --prompt "int main(" -n 40 --temperature 0 > "$D/b.txt"
  cmp "$D/a.txt" "$D/b.txt" || { echo "FAIL: $model: --hf and --ckpt differ:"; cat "$D/a.txt" "$D/b.txt"; exit 1; }
  "$B/zt-generate" --hf "$D/hf/model.safetensors" --prompt "int main(" -n 40 --temperature 0 > "$D/c.txt"
  cmp "$D/a.txt" "$D/c.txt"
  [ "$(wc -c < "$D/a.txt")" -ge 40 ] || { echo "FAIL: $model: too little output"; exit 1; }
  echo "ok: $model: zt-generate --hf prints the same greedy tokens as --ckpt"

  "$B/zt-ckpt" consolidate "$D/ck" --format hf --dtype bf16 --out "$D/hf16" > /dev/null
  grep -qF '"torch_dtype": "bfloat16"' "$D/hf16/config.json" || { echo "FAIL: bf16 config"; exit 1; }
  "$B/zt-generate" --hf "$D/hf16" --prompt-ids 105,110,116 -n 10 --temperature 0 > "$D/bf.txt"
  [ "$(head -c 3 "$D/bf.txt")" = "int" ] && [ "$(wc -c < "$D/bf.txt")" -ge 13 ] ||
    { echo "FAIL: bf16 export: expected 'int' + 10 bytes, got '$(cat "$D/bf.txt")'"; exit 1; }
  echo "ok: $model: bfloat16 export generates"

  # lr 0: AdamW changes nothing, so the weights zt-train read come back out unchanged.
  "$B/zt-train" --init-from "$D/hf" --train "$TRAIN" -b 4 -t 32 --steps 1 --lr 0 --save-hf "$D/again" 2>/dev/null
  cmp "$D/hf/model.safetensors" "$D/again/model.safetensors"
  echo "ok: $model: zt-train --init-from DIR reads the exported weights bit for bit"
done

G="$TMP/gpt2-nano"
"$B/zt-ckpt" consolidate "$G/ck" --format llmc --out "$G/w.bin" > /dev/null
"$B/zt-train" --init-from "$G/hf" --train "$TRAIN" -b 4 -t 32 --steps 3 --log "$G/hf.jsonl" 2>/dev/null
"$B/zt-train" --init-from "$G/w.bin" --train "$TRAIN" -b 4 -t 32 --steps 3 --log "$G/llmc.jsonl" 2>/dev/null
[ "$(losses "$G/hf.jsonl")" = "$(losses "$G/llmc.jsonl")" ] || {
  echo "FAIL: --init-from HF and llm.c losses differ:"; losses "$G/hf.jsonl"; losses "$G/llmc.jsonl"; exit 1; }
echo "ok: gpt2: --init-from HF dir and --init-from llm.c .bin give the same losses: $(losses "$G/hf.jsonl" | tr '\n' ' ')"

expect_fail "no such directory" "HF checkpoint '$TMP/nothing/model.safetensors': no such file" \
  "$B/zt-generate" --hf "$TMP/nothing/model.safetensors" --prompt x
mkdir -p "$TMP/empty"
expect_fail "directory without weights" "has neither model.safetensors" "$B/zt-generate" --hf "$TMP/empty" --prompt x
expect_fail "two sources" "excludes" "$B/zt-generate" --hf "$G/hf" --ckpt "$G/ck"
cp "$G/hf/config.json" "$TMP/empty/config.json"
printf 'garbage!' > "$TMP/empty/model.safetensors"
expect_fail "bad safetensors" "runs past the end of the file" "$B/zt-generate" --hf "$TMP/empty" --prompt x
mkdir -p "$TMP/empty2"
expect_fail "init-from a directory without weights" "has neither model.safetensors" \
  "$B/zt-train" --init-from "$TMP/empty2" --train "$TRAIN" --steps 1
