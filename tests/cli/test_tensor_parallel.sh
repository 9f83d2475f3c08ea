#!/usr/bin/env bash
# zt-train on a process grid (docs/parallel.md): 4 ranks under mpirun with --tensor-parallel-size 2
# at ZeRO stage 3. The banner names the grid; every rank's measured memory equals its own dry run
# (the grid made on the simulated rank too), as printed; the losses equal one rank's run of the
# same global batch within 1e-5; the checkpoint, consolidated by zt-ckpt, holds the weights one
# rank's consolidated checkpoint holds (within 1e-3 of each tensor's largest value: float32 sums
# in another order through Adam, as tests/mpi/test_tensor_parallel.cpp measures); the config key
# gives the same run as the flag; sp 2 x tp 2 (Ulysses) trains as one rank too; the flag beside
# the key, a degree that does not divide the ranks, a sequence the sequence group does not split
# and Megatron's sequence parallelism without a tensor group are refused by name; tp 2 with
# Megatron's sequence parallelism trains as one rank, and its --save-hf and --save-llmc equal the
# consolidated checkpoint's files; zt-estimate dry-runs the grid.
source "$(dirname "$0")/common.sh"
A=(--model gpt2-nano --train "$S/data/corpus/train.txt" -t 32 --steps 8 --seed 7 --threads 1 --zero-stage 3)

"$B/zt-train" "${A[@]}" -b 8 --log "$TMP/one.jsonl" --ckpt-dir "$TMP/one" 2>/dev/null
"${MPI[@]}" -np 4 "$B/zt-train" "${A[@]}" -b 4 --tensor-parallel-size 2 --log "$TMP/tp.jsonl" --ckpt-dir "$TMP/tp" \
  2>"$TMP/tp.err"
grep -qF "zt-train: process grid dp 2 x sp 1 x tp 2 (tensor and sequence groups inside a node): each block split over 2 ranks (tensor), ZeRO over the 2 ranks holding the same parameters" "$TMP/tp.err" ||
  { echo "FAIL: the banner does not name the grid:"; head -5 "$TMP/tp.err"; exit 1; }
echo "ok: the banner names the grid"

python3 - "$TMP/one.jsonl" "$TMP/tp.jsonl" <<'PY'
import json, sys
one = [json.loads(l)["loss"] for l in open(sys.argv[1])]
tp = [json.loads(l)["loss"] for l in open(sys.argv[2])]
assert len(one) == len(tp) == 8, (len(one), len(tp))
worst = max(abs(a - b) / abs(a) for a, b in zip(one, tp))
assert worst <= 1e-5, f"tp 2 x dp 2 losses within {worst} of one rank's (bound 1e-5)"
print(f"ok: tp 2 x dp 2 trains as one rank: losses within {worst:.2e}")
PY
python3 "$(dirname "$0")/dry_run_rows.py" --device-rows 4 "$TMP/tp.err"

# Ulysses: each sequence over 2 ranks and each block over 2, one data-parallel rank of the same batch.
"${MPI[@]}" -np 4 "$B/zt-train" "${A[@]}" -b 8 --sequence-parallel-size 2 --tensor-parallel-size 2 \
  --log "$TMP/sp.jsonl" 2>"$TMP/sp.err"
grep -qF "process grid dp 1 x sp 2 x tp 2 (tensor and sequence groups inside a node): each block split over 2 ranks (tensor), each sequence over 2 ranks (Ulysses), ZeRO over the 2 ranks holding the same parameters" "$TMP/sp.err" ||
  { echo "FAIL: the banner does not name the sequence split:"; head -4 "$TMP/sp.err"; exit 1; }
python3 - "$TMP/one.jsonl" "$TMP/sp.jsonl" <<'PY'
import json, sys
one, sp = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:])
worst = max(abs(a - b) / abs(a) for a, b in zip(one, sp))
assert len(sp) == 8 and worst <= 1e-5, f"sp 2 x tp 2 losses within {worst} of one rank's (bound 1e-5)"
print(f"ok: sp 2 x tp 2 (Ulysses and Megatron) trains as one rank: losses within {worst:.2e}")
PY

# The checkpoint, consolidated: the one-rank run's weights.
"$B/zt-ckpt" consolidate "$TMP/one" --out "$TMP/one.safetensors" >/dev/null
"$B/zt-ckpt" consolidate "$TMP/tp" --out "$TMP/tp.safetensors" >/dev/null
python3 - "$TMP/one.safetensors" "$TMP/tp.safetensors" <<'PY'
import json, struct, sys
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        s, e = v["data_offsets"]
        assert v["dtype"] == "F32", v["dtype"]
        out[k] = (v["shape"], struct.unpack(f"<{(e - s) // 4}f", b[8 + n + s:8 + n + e]))
    return out
one, tp = tensors(sys.argv[1]), tensors(sys.argv[2])
assert one.keys() == tp.keys(), sorted(set(one) ^ set(tp))
worst = 0
for k in one:
    assert one[k][0] == tp[k][0], f"{k}: shape {one[k][0]} vs {tp[k][0]}"
    scale = max(abs(x) for x in one[k][1]) or 1
    worst = max(worst, max(abs(a - b) for a, b in zip(one[k][1], tp[k][1])) / scale)
assert worst <= 1e-3, f"consolidated weights within {worst} of one rank's (bound 1e-3)"
print(f"ok: the grid's checkpoint consolidates to one rank's weights: {len(one)} tensors, whole shapes, within {worst:.2e}")
PY

# The config key gives the same run as the flag.
echo '{"train_micro_batch_size_per_gpu": 4, "tensor_parallel_size": 2, "zero_optimization": {"stage": 3},
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.1}}}' >"$TMP/tp.json"
"${MPI[@]}" -np 4 "$B/zt-train" --model gpt2-nano --train "$S/data/corpus/train.txt" -t 32 --steps 2 --seed 7 \
  --threads 1 --config "$TMP/tp.json" --log "$TMP/cfg.jsonl" 2>"$TMP/cfg.err"
grep -qF "process grid dp 2 x sp 1 x tp 2" "$TMP/cfg.err" || { echo "FAIL: the config key made no grid"; exit 1; }
echo "ok: tensor_parallel_size in the config file makes the same grid"

expect_fail "the flag beside the config key" "--tensor-parallel-size cannot be combined with --config" \
  "$B/zt-train" --model gpt2-nano --train "$S/data/corpus/train.txt" --config "$TMP/tp.json" --tensor-parallel-size 2
expect_fail "a degree that does not divide the ranks" "does not divide the 4 rank(s) of the job" \
  "${MPI[@]}" -np 4 "$B/zt-train" "${A[@]}" -b 4 --tensor-parallel-size 3
expect_fail "a sequence the sequence group does not split" "seq_len = 31 is invalid: expected a multiple of sequence_parallel_size 2" \
  "${MPI[@]}" -np 2 "$B/zt-train" --model gpt2-nano --train "$S/data/corpus/train.txt" -t 31 -b 4 --sequence-parallel-size 2
expect_fail "Megatron's sequence parallelism without a tensor group" \
  "megatron_sequence_parallel = true is invalid: expected tensor_parallel_size > 1" \
  "${MPI[@]}" -np 2 "$B/zt-train" "${A[@]}" -b 4 --megatron-sequence-parallel

# Megatron's sequence parallelism, and the whole model saved at the end of a grid run (A's stage 3
# made 2: each rank holds its slices whole): --save-hf and --save-llmc write, bit for bit, what zt-ckpt
# consolidate writes from the same run's checkpoint.
"${MPI[@]}" -np 4 "$B/zt-train" "${A[@]::${#A[@]}-1}" 2 -b 4 --tensor-parallel-size 2 --megatron-sequence-parallel \
  --log "$TMP/msp.jsonl" --ckpt-dir "$TMP/msp" --save-hf "$TMP/msp-hf" --save-llmc "$TMP/msp.bin" 2>"$TMP/msp.err"
grep -qF "sequence parallel" "$TMP/msp.err" || { echo "FAIL: the banner does not name Megatron's sequence parallelism"; head -5 "$TMP/msp.err"; exit 1; }
python3 - "$TMP/one.jsonl" "$TMP/msp.jsonl" <<'PY'
import json, sys
one, msp = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:])
worst = max(abs(a - b) / abs(a) for a, b in zip(one, msp))
assert len(msp) == 8 and worst <= 1e-5, f"tp 2 with Megatron's sequence parallelism: losses within {worst} of one rank's (bound 1e-5)"
print(f"ok: tp 2 x dp 2 with Megatron's sequence parallelism trains as one rank: losses within {worst:.2e}")
PY
"$B/zt-ckpt" consolidate "$TMP/msp" --format hf --out "$TMP/msp-consolidated" >/dev/null
"$B/zt-ckpt" consolidate "$TMP/msp" --format llmc --out "$TMP/msp-consolidated.bin" >/dev/null
cmp "$TMP/msp-hf/model.safetensors" "$TMP/msp-consolidated/model.safetensors" ||
  { echo "FAIL: --save-hf on a grid differs from the consolidated checkpoint"; exit 1; }
cmp "$TMP/msp.bin" "$TMP/msp-consolidated.bin" ||
  { echo "FAIL: --save-llmc on a grid differs from the consolidated checkpoint"; exit 1; }
echo "ok: --save-hf and --save-llmc at the end of a tp 2 run equal zt-ckpt consolidate's files, bit for bit"
# llama-nano on tp 4: its 2 kv heads each held by 2 ranks, gathered once into the whole model
"${MPI[@]}" -np 4 "$B/zt-train" --model llama-nano --train "$S/data/corpus/train.txt" -t 32 --steps 4 --seed 7 \
  --threads 1 --zero-stage 1 -b 8 --tensor-parallel-size 4 --ckpt-dir "$TMP/kv" --save-hf "$TMP/kv-hf" 2>"$TMP/kv.err" ||
  { echo "FAIL: llama-nano on tp 4:"; tail -5 "$TMP/kv.err"; exit 1; }
"$B/zt-ckpt" consolidate "$TMP/kv" --format hf --out "$TMP/kv-consolidated" >/dev/null
cmp "$TMP/kv-hf/model.safetensors" "$TMP/kv-consolidated/model.safetensors" ||
  { echo "FAIL: --save-hf of llama-nano on tp 4 differs from the consolidated checkpoint"; exit 1; }
echo "ok: llama-nano on tp 4 (kv heads shared by 2 ranks): --save-hf equals the consolidated checkpoint, bit for bit"

# zt-estimate --time on a grid counts the job's tokens once: B T x the data-parallel degree a step.
"$B/zt-estimate" --model gpt2-nano --nodes 1 --gpus-per-node 4 --tensor-parallel-size 2 --stage 3 -b 2 -t 64 \
  --time "$S/configs/devices/h100-sxm.json" --threads 1 --json >"$TMP/time.json"
python3 - "$TMP/time.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))[0]["time"]
tokens = t["tokens_per_s"] * t["step_s"]
assert abs(tokens - 2 * 64 * 2) < 1e-6, f"tokens a step {tokens}, expected B 2 x T 64 x dp 2 = 256"
print(f"ok: zt-estimate --time on tp 2 x dp 2 counts {tokens:.0f} tokens a step (B T x dp)")
PY

# zt-estimate dry-runs the grid: rank 0's model states as zt-train's own dry run of rank 0 printed them.
"$B/zt-estimate" --model gpt2-nano --world-size 4 --tensor-parallel-size 2 --stage 3 -b 4 -t 32 --threads 1 --json \
  >"$TMP/est.json"
python3 - "$TMP/est.json" "$TMP/tp.err" <<'PY'
import json, re, sys
def fmt(b):  # core/memory.cpp's format_bytes
    if b < 1024: return f"{b} B"
    for unit, k in (("KiB", 1), ("MiB", 2), ("GiB", 3)):
        if b < 1024.0 ** (k + 1) or unit == "GiB": return f"{b / 1024.0 ** k:.2f} {unit}"
est = next(r for r in json.load(open(sys.argv[1])) if r["rank"] == 0)
lines = open(sys.argv[2]).read().splitlines()
header = next(l for l in lines if l.strip().startswith("rank") and "params" in l).split()[1:]
row = next(lines[i + 1] for i, l in enumerate(lines) if re.match(r"\s+0\s", l) and lines[i + 1].strip().startswith("dry run"))
peaks = dict(zip(header, re.findall(r"peak (\S+ \S+)", row)))
for cat in ("params", "grads", "optim"):
    want = fmt(est["device"]["steady_step"][cat]["peak"])
    assert peaks[cat] == want, f"{cat}: zt-estimate {want}, zt-train's dry run {peaks[cat]}"
print("ok: zt-estimate --tensor-parallel-size 2 gives rank 0's model states as zt-train's dry run:",
      ", ".join(f"{c} {peaks[c]}" for c in ("params", "grads", "optim")))
PY
