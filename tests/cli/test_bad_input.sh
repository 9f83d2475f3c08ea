#!/usr/bin/env bash
# Bad input is a clear error with a non-zero exit code, never a crash or a silent run.
source "$(dirname "$0")/common.sh"
T="$S/data/corpus/train.txt"
CK="$S/tests/data/gpt2_tiny.bin"
SH="$S/tests/data/tiny_tokens.bin"

expect_fail "unknown model name" "unknown model" "$B/zt-train" --model gpt-huge --train "$T" --steps 1
expect_fail "missing data file" "$TMP/nope.bin" "$B/zt-train" --model gpt2-nano --train "$TMP/nope.bin" --steps 1

# A memory cap too small for the run: out of memory, naming the category that asked and what each held.
expect_fail "memory cap" "out of memory" "$B/zt-train" --model gpt-mini --train "$T" --steps 1 -b 8 -t 256 --memory-limit-mib 200
grep -qF "'activations'" "$TMP/err" && grep -qF "optim" "$TMP/err" || { echo "FAIL: the OOM message does not name the categories"; cat "$TMP/err"; exit 1; }

# llm.c checkpoints: wrong magic, truncated, unknown version.
python3 - "$CK" "$TMP" <<'PY'
import struct, sys
src, tmp = sys.argv[1], sys.argv[2]
data = open(src, 'rb').read()
open(tmp + '/magic.bin', 'wb').write(struct.pack('<i', 12345) + data[4:])
open(tmp + '/trunc.bin', 'wb').write(data[: len(data) // 2])
open(tmp + '/version.bin', 'wb').write(data[:4] + struct.pack('<i', 4) + data[8:])
open(tmp + '/short.bin', 'wb').write(data[:100])
PY
expect_fail "checkpoint with wrong magic" "12345" "$B/zt-train" --init-from "$TMP/magic.bin" --train "$SH" --steps 1 -t 32 -b 2
expect_fail "truncated checkpoint" "trunc.bin" "$B/zt-train" --init-from "$TMP/trunc.bin" --train "$SH" --steps 1 -t 32 -b 2
expect_fail "checkpoint version" "version" "$B/zt-train" --init-from "$TMP/version.bin" --train "$SH" --steps 1 -t 32 -b 2
expect_fail "checkpoint shorter than its header" "short.bin" "$B/zt-train" --init-from "$TMP/short.bin" --train "$SH" --steps 1 -t 32 -b 2

# Token shards: wrong magic, wrong version, a count that disagrees with the size, truncation; and a
# binary file that is not a shard.
python3 - "$SH" "$TMP" <<'PY'
import struct, sys
src, tmp = sys.argv[1], sys.argv[2]
data = open(src, 'rb').read()
open(tmp + '/ver.bin', 'wb').write(data[:4] + struct.pack('<i', 2) + data[8:])
open(tmp + '/count.bin', 'wb').write(data[:8] + struct.pack('<i', 999999) + data[12:])
open(tmp + '/cut.bin', 'wb').write(data[:-10])
open(tmp + '/magic_shard.bin', 'wb').write(struct.pack('<i', 777) + data[4:])
open(tmp + '/binary.dat', 'wb').write(data[4:])
PY
expect_fail "shard with wrong magic" "777" "$B/zt-train" --model gpt2-nano --train "$TMP/magic_shard.bin" --steps 1
expect_fail "binary file that is not a shard" "NUL byte" "$B/zt-train" --model gpt2-nano --train "$TMP/binary.dat" --steps 1
expect_fail "shard with wrong version" "version" "$B/zt-train" --model gpt2-nano --train "$TMP/ver.bin" --steps 1
expect_fail "shard whose size disagrees with its header" "999999" "$B/zt-train" --model gpt2-nano --train "$TMP/count.bin" --steps 1
expect_fail "truncated shard" "cut.bin" "$B/zt-train" --model gpt2-nano --train "$TMP/cut.bin" --steps 1
python3 - "$TMP/big.bin" <<'PY'
import struct, sys
toks = [i % 300 for i in range(2000)]  # ids up to 299: beyond a 256-token vocabulary
hdr = [20240520, 1, len(toks)] + [0] * 253
open(sys.argv[1], 'wb').write(struct.pack('<256i', *hdr) + struct.pack('<%dH' % len(toks), *toks))
PY
expect_fail "token ids beyond the vocabulary" "vocab" "$B/zt-train" --model gpt2-nano --train "$TMP/big.bin" --steps 1 -t 32 -b 2

# Training checkpoints: another model, a corrupted rank file, a missing rank file.
"$B/zt-train" --model gpt2-nano --train "$T" -b 2 -t 16 --steps 2 --ckpt-dir "$TMP/ck" 2>/dev/null
expect_fail "resume with another model" "another model" "$B/zt-train" --model llama-nano --train "$T" -b 2 -t 16 --steps 4 --ckpt-dir "$TMP/ck" --resume
expect_fail "resume with another batch size" "global batch" "$B/zt-train" --model gpt2-nano --train "$T" -b 3 -t 16 --steps 2 --ckpt-dir "$TMP/ck" --resume
expect_fail "resume with another learning rate" "lr" "$B/zt-train" --model gpt2-nano --train "$T" -b 2 -t 16 --steps 2 --lr 5e-4 --ckpt-dir "$TMP/ck" --resume
cp -r "$TMP/ck" "$TMP/ck3"
python3 -c 'import json,sys; p=sys.argv[1]; m=json.load(open(p)); del m["data_position"]; json.dump(m, open(p, "w"))' "$TMP/ck3/step_00000002/meta.json"
expect_fail "meta.json without a field" "meta.json lacks" "$B/zt-train" --model gpt2-nano --train "$T" -b 2 -t 16 --steps 2 --ckpt-dir "$TMP/ck3" --resume
echo "../../etc" > "$TMP/ck3/latest"
expect_fail "a latest pointer outside the directory" "does not name a step directory" "$B/zt-train" --model gpt2-nano --train "$T" -b 2 -t 16 --steps 2 --ckpt-dir "$TMP/ck3" --resume
cp -r "$TMP/ck" "$TMP/ck2"
printf '\x01' | dd of="$TMP/ck2/step_00000002/rank_00000.bin" bs=1 seek=100 conv=notrunc 2>/dev/null
expect_fail "corrupted rank file" "corrupted" "$B/zt-train" --model gpt2-nano --train "$T" -b 2 -t 16 --steps 4 --ckpt-dir "$TMP/ck2" --resume
rm "$TMP/ck/step_00000002/rank_00000.bin"
expect_fail "missing rank file" "missing" "$B/zt-train" --model gpt2-nano --train "$T" -b 2 -t 16 --steps 4 --ckpt-dir "$TMP/ck" --resume
expect_fail "resume without a checkpoint" "latest" "$B/zt-train" --model gpt2-nano --train "$T" --steps 4 --ckpt-dir "$TMP/none" --resume
expect_fail "generate without a checkpoint" "meta.json" "$B/zt-generate" --ckpt "$TMP"

# DeepSpeed-style configs (every invalid case is in tests/test_zero_config.cpp; here: through zt-train).
echo '{"zero_optimization": {"stage": 4}}' > "$TMP/stage4.json"
expect_fail "config with stage 4" "zero_optimization.stage" "$B/zt-train" --config "$TMP/stage4.json" --train "$T" --steps 1
echo '{"train_micro_batch_size_per_gpu": 2, "seq_len": 1e46}' > "$TMP/float_int.json"
expect_fail "a run key's integer given as a huge float" "seq_len = 1e+46 is invalid: expected an integer" "$B/zt-train" --config "$TMP/float_int.json" --train "$T" --steps 1
echo '{"zero_optimisation": {"stage": 1}}' > "$TMP/typo.json"
expect_fail "config with an unknown key" "zero_optimisation" "$B/zt-train" --config "$TMP/typo.json" --train "$T" --steps 1
expect_fail "a flag that contradicts --config" "--lr cannot be combined with --config" "$B/zt-train" --config "$S/configs/zero1.json" --lr 1e-2 --train "$T" --steps 1
echo '{"fp16": {"enabled": true, "hysteresis": 0}}' > "$TMP/fp16.json"
expect_fail "fp16 with hysteresis 0" "fp16.hysteresis" "$B/zt-train" --config "$TMP/fp16.json" --model gpt2-nano --train "$T" -t 16 --steps 1
echo '{"bf16": {"enabled": true}, "fp16": {"enabled": true}}' > "$TMP/both.json"
expect_fail "bf16 and fp16 together" "expected at most one of them" "$B/zt-train" --config "$TMP/both.json" --model gpt2-nano --train "$T" -t 16 --steps 1
# Devices: an unknown device, NCCL on the cpu; --device cuda where this machine or this build has
# no GPU (the CI machine has neither a GPU nor a driver) names the reason, never trains on the CPU.
expect_fail "unknown device" "'tpu' is not a device" "$B/zt-train" --model gpt2-nano --train "$T" --steps 1 --device tpu
expect_fail "nccl on the cpu" "--dist nccl needs --device cuda" "$B/zt-train" --model gpt2-nano --train "$T" --steps 1 --dist nccl
expect_fail "unknown dist backend" "'gloo' is not a communication backend" "$B/zt-train" --model gpt2-nano --train "$T" --steps 1 --dist gloo
expect_fail "tf32 on the cpu" "tf32 is a GPU matmul mode; device cpu" "$B/zt-train" --model gpt2-nano --train "$T" --steps 1 --f32-matmul high
expect_fail "unknown float32 matmul precision" "float32 matmul precision 'medium' is not one of" "$B/zt-train" --model gpt2-nano --train "$T" --steps 1 --f32-matmul medium
if ! "$B/zt-info" --json | python3 -c 'import json,sys; sys.exit(0 if any(d["supported"] for d in json.load(sys.stdin)["cuda"].get("devices", [])) else 1)'; then
  expect_fail "cuda without a usable GPU" "--device cuda: " "$B/zt-train" --model gpt2-nano --train "$T" --steps 1 --device cuda
fi
