#!/usr/bin/env bash
# zt-ckpt inspects and consolidates ZeRO sharded checkpoints. The checkpoints come from the hidden
# Catch test "[.zt_ckpt_fixture]" (gpt2-nano saved on 2 ranks, llama-nano on 3, and the gpt2
# model's llm.c files written directly): the consolidated llm.c files must equal those byte for
# byte, and the safetensors file is checked by an independent reader (Python's json + struct).
source "$(dirname "$0")/common.sh"
ZT_CKPT_FIXTURE_DIR="$TMP" "$B/tests/zt_tests" "[.zt_ckpt_fixture]" >/dev/null
CK="$TMP/ck"

"$B/zt-ckpt" inspect "$CK" > "$TMP/inspect.txt"
for needle in "format:      zerotensor-zero-checkpoint version 1" "step:        20" "world size:  2" \
              "stage:       2" '"family":"gpt2"' "h.1" "rank 1" "rank_00001.bin" "exp_avg"; do
  grep -qF -- "$needle" "$TMP/inspect.txt" || { echo "FAIL: inspect lacks '$needle':"; cat "$TMP/inspect.txt"; exit 1; }
done
[ "$(grep -c "checksum ok" "$TMP/inspect.txt")" -eq 2 ] || { echo "FAIL: expected 2 verified files"; cat "$TMP/inspect.txt"; exit 1; }
echo "ok: inspect shows the layout and verifies both rank files"

"$B/zt-ckpt" consolidate "$CK" --out "$TMP/f32.bin" --format llmc
cmp "$TMP/f32.bin" "$TMP/ref_f32.bin"
"$B/zt-ckpt" consolidate "$CK/step_00000020" --out "$TMP/bf16.bin" --format llmc --dtype bf16
cmp "$TMP/bf16.bin" "$TMP/ref_bf16.bin"
echo "ok: llmc fp32 and bf16 equal the model's own llm.c files byte for byte"

"$B/zt-ckpt" consolidate "$CK" --out "$TMP/m.safetensors" --dtype bf16
"$B/zt-ckpt" consolidate "$CK" --out "$TMP/m32.safetensors"
python3 - "$TMP/m32.safetensors" "$TMP/m.safetensors" <<'PY'
import json, struct, sys
for path, dtype, size in ((sys.argv[1], "F32", 4), (sys.argv[2], "BF16", 2)):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    assert n % 8 == 0, n
    h = json.loads(data[8:8 + n])
    meta = h.pop("__metadata__")
    assert meta["step"] == "20", meta
    # gpt2-nano: C=32, vocab 256, context 64, 2 layers
    want = {"embed.wte.weight": [256, 32], "embed.wpe.weight": [64, 32], "h.0.attn.c_attn.weight": [96, 32],
            "h.1.mlp.c_proj.weight": [32, 128], "head.ln_f.bias": [32]}
    for k, s in want.items():
        assert h[k]["shape"] == s and h[k]["dtype"] == dtype, (k, h.get(k))
    total = 0
    for k, v in sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, e = v["data_offsets"]
        assert b == total, (k, b, total)
        numel = 1
        for d in v["shape"]: numel *= d
        assert e - b == numel * size, k
        total = e
    assert len(data) == 8 + n + total
    params = total // size
    assert params == 256*32 + 64*32 + 2*(12*32*32 + 13*32) + 2*32, params
print("ok: safetensors fp32 and bf16: names, shapes, offsets and parameter count")
PY
# fp32 safetensors values equal the llm.c file's wte (the first tensor after the 1024-byte header).
python3 - "$TMP/m32.safetensors" "$TMP/ref_f32.bin" <<'PY'
import json, struct, sys
st = open(sys.argv[1], "rb").read(); ref = open(sys.argv[2], "rb").read()
(n,) = struct.unpack("<Q", st[:8]); h = json.loads(st[8:8 + n])
b, e = h["embed.wte.weight"]["data_offsets"]
assert st[8 + n + b: 8 + n + e] == ref[1024:1024 + (e - b)]
print("ok: safetensors embed.wte.weight equals llm.c's wte bytes")
PY

"$B/zt-ckpt" inspect "$TMP/llama" | grep -qF "world size:  3"
"$B/zt-ckpt" consolidate "$TMP/llama" --out "$TMP/llama.safetensors"
expect_fail "llmc of a llama" "writes GPT-2 models only" "$B/zt-ckpt" consolidate "$TMP/llama" --out "$TMP/x.bin" --format llmc
expect_fail "no checkpoint" "no meta.json" "$B/zt-ckpt" inspect "$TMP/nothing"
expect_fail "bad --dtype" "dtype" "$B/zt-ckpt" consolidate "$CK" --out "$TMP/x" --dtype fp16

# A corrupted rank file: inspect reports it and fails; consolidate refuses.
printf 'X' | dd of="$CK/step_00000020/rank_00001.bin" bs=1 seek=100 conv=notrunc 2>/dev/null
if "$B/zt-ckpt" inspect "$CK" > "$TMP/inspect2.txt" 2>"$TMP/err"; then echo "FAIL: inspect of a corrupted file exits 0"; exit 1; fi
grep -qF "CORRUPTED" "$TMP/inspect2.txt" || { echo "FAIL: inspect does not say CORRUPTED"; cat "$TMP/inspect2.txt"; exit 1; }
echo "ok: inspect flags the corrupted rank file"
expect_fail "consolidate corrupted" "rank_00001.bin' is corrupted" "$B/zt-ckpt" consolidate "$CK" --out "$TMP/y.safetensors"

# Checkpoints written by zt-train (one rank, and two MPI ranks when mpirun is present) consolidate
# to exactly the llm.c file zt-train writes itself from the model at the end.
if [ -x "$B/zt-train" ]; then
  TR=("$B/zt-train" --model gpt2-nano --train "$S/data/corpus/train.txt" -b 2 -t 16 --steps 3)
  "${TR[@]}" --zero-stage 1 --ckpt-dir "$TMP/tr1" --save-llmc "$TMP/tr1.bin" 2>/dev/null
  "$B/zt-ckpt" inspect "$TMP/tr1" | grep -qF "stage:       1"
  "$B/zt-ckpt" consolidate "$TMP/tr1" --format llmc --out "$TMP/c1.bin" >/dev/null
  cmp "$TMP/c1.bin" "$TMP/tr1.bin"
  echo "ok: zt-train's checkpoint (1 rank, stage 1) consolidates to its own llm.c file"
  if command -v mpirun >/dev/null; then
    OMP_NUM_THREADS=1 mpirun -np 2 --oversubscribe --allow-run-as-root --bind-to none \
      "${TR[@]}" --zero-stage 2 --ckpt-dir "$TMP/tr2" --save-llmc "$TMP/tr2.bin" 2>/dev/null
    "$B/zt-ckpt" inspect "$TMP/tr2" | grep -qF "world size:  2"
    "$B/zt-ckpt" consolidate "$TMP/tr2" --format llmc --out "$TMP/c2.bin" >/dev/null
    cmp "$TMP/c2.bin" "$TMP/tr2.bin"
    echo "ok: zt-train's checkpoint (2 MPI ranks, stage 2) consolidates to its own llm.c file"
  fi
fi
