#!/usr/bin/env bash
# Mixed precision through zt-train under mpirun: the ready bf16 (stage 3) and fp16 (stage 2)
# configs train; an fp16 run whose first loss scale is far too large logs its skipped steps and
# the falling scale, then trains; the memory table shows 2-byte parameters and gradients.
source "$(dirname "$0")/common.sh"
A=(--model gpt2-nano --train "$S/data/corpus/train.txt" -t 32 --threads 1)

"${MPI[@]}" -np 2 "$B/zt-train" --config "$S/configs/zero3-bf16.json" "${A[@]}" --steps 12 --log "$TMP/bf16.jsonl" 2>"$TMP/bf16.err"
grep -q "ZeRO stage 3, bf16" "$TMP/bf16.err" || { echo "FAIL: the banner does not say bf16"; cat "$TMP/bf16.err"; exit 1; }
python3 - "$TMP/bf16.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 12, f"{len(rows)} steps logged"
assert rows[-1]["loss"] < rows[0]["loss"] - 0.15, f"bf16 did not train: {rows[0]['loss']} -> {rows[-1]['loss']}"
PY
echo "ok: configs/zero3-bf16.json trains on 2 ranks"

# bf16 compute: the model built in bfloat16 (on the cpu through float32 stand-ins), the same
# 12 steps within tests/mpi/test_zero.cpp's bf16-compute bound of the float32-compute run.
"${MPI[@]}" -np 2 "$B/zt-train" --config "$S/configs/zero3-bf16.json" "${A[@]}" --steps 12 --compute-dtype bf16 \
  --log "$TMP/bf16c.jsonl" 2>"$TMP/bf16c.err"
grep -q "ZeRO stage 3, bf16 (compute bf16)" "$TMP/bf16c.err" || { echo "FAIL: the banner does not say compute bf16"; cat "$TMP/bf16c.err"; exit 1; }
python3 - "$TMP/bf16.jsonl" "$TMP/bf16c.jsonl" <<'PY'
import json, sys
f32c = [json.loads(l)["loss"] for l in open(sys.argv[1])]
bf16c = [json.loads(l)["loss"] for l in open(sys.argv[2])]
assert len(bf16c) == 12, f"{len(bf16c)} steps logged"
worst = max(abs(a - b) / b for a, b in zip(bf16c, f32c))
assert worst <= 1e-3, f"bf16 compute differs from float32 compute by {worst:.2e} relative"
print(f"ok: --compute-dtype bf16 trains on 2 ranks, within {worst:.1e} of float32 compute")
PY
expect_fail "bf16 compute without bf16 enabled" "compute_dtype = bf16 is invalid" \
  "$B/zt-train" --model gpt2-nano --train "$S/data/corpus/train.txt" --steps 1 --compute-dtype bf16

# fp16 from 2^40: the first ~24 steps overflow and are skipped while the scale halves.
python3 - "$S/configs/zero2-fp16.json" "$TMP/fp16.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["fp16"]["initial_scale_power"] = 40
json.dump(c, open(sys.argv[2], "w"))
PY
"${MPI[@]}" -np 2 "$B/zt-train" --config "$TMP/fp16.json" "${A[@]}" --steps 40 --log "$TMP/fp16.jsonl" 2>"$TMP/fp16.err"
grep -q "overflow: step skipped" "$TMP/fp16.err" || { echo "FAIL: no skipped step in the progress output"; cat "$TMP/fp16.err"; exit 1; }
python3 - "$TMP/fp16.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
skipped = [r for r in rows if r["skipped"]]
applied = [r for r in rows if not r["skipped"]]
assert rows[0]["skipped"] and rows[0]["loss_scale"] == 2.0**40, rows[0]
assert len(skipped) >= 10 and len(applied) >= 5, (len(skipped), len(applied))
assert all(r["loss_scale"] <= 2.0**31 for r in applied), "a step ran with a scale that overflows float16"
assert applied[-1]["loss"] < applied[0]["loss"], "fp16 did not train after the scale settled"
print(f"ok: fp16 skipped {len(skipped)} steps, then trained at scale {applied[-1]['loss_scale']:g}")
PY
