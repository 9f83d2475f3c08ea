#!/usr/bin/env bash
# zt-generate samples from a training checkpoint and from an llm.c checkpoint, deterministically.
source "$(dirname "$0")/common.sh"
"$B/zt-train" --model gpt2-nano --train "$S/data/corpus/train.txt" -b 4 -t 32 --steps 5 --ckpt-dir "$TMP/ck" 2>/dev/null
"$B/zt-generate" --ckpt "$TMP/ck" --prompt "int main(" -n 40 --top-k 20 --seed 3 > "$TMP/a.txt"
"$B/zt-generate" --ckpt "$TMP/ck" --prompt "int main(" -n 40 --top-k 20 --seed 3 > "$TMP/b.txt"
cmp "$TMP/a.txt" "$TMP/b.txt"
head -c 9 "$TMP/a.txt" | grep -qF "int main(" || { echo "FAIL: output does not start with the prompt"; exit 1; }
[ "$(wc -c < "$TMP/a.txt")" -ge 40 ] || { echo "FAIL: too little output"; exit 1; }
echo "ok: byte-level generation is deterministic and continues the prompt"
"$B/zt-generate" --llmc "$S/tests/data/gpt2_tiny.bin" --prompt-ids 1,2,3 -n 5 --temperature 0 > "$TMP/ids.txt"
[ "$(tr ',' '\n' < "$TMP/ids.txt" | wc -l)" -eq 8 ] || { echo "FAIL: expected 8 ids, got $(cat "$TMP/ids.txt")"; exit 1; }
echo "ok: llm.c checkpoint, greedy ids: $(cat "$TMP/ids.txt")"
