#!/usr/bin/env bash
# zt-train: the same seed and data give bitwise the same run; a run resumed from a checkpoint
# continues bitwise identically, also after kill -9 at an arbitrary point (even during a save).
source "$(dirname "$0")/common.sh"
A=(--model gpt2-nano --train "$S/data/corpus/train.txt" -b 4 -t 32 --steps 24 --seed 7 --threads 2)

"$B/zt-train" "${A[@]}" --log "$TMP/full.jsonl" --ckpt-dir "$TMP/full" 2>/dev/null
"$B/zt-train" "${A[@]}" --log "$TMP/again.jsonl" 2>/dev/null
diff <(losses "$TMP/full.jsonl") <(losses "$TMP/again.jsonl") >/dev/null || { echo "FAIL: same seed, different losses"; exit 1; }
echo "ok: same seed and data, bitwise the same losses"
python3 - "$TMP/full.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 24, len(rows)
for r in rows:
    missing = {"step", "loss", "lr", "grad_norm", "tokens_per_s", "step_ms", "memory"} - r.keys()
    assert not missing, f"log line lacks {missing}"
    assert set(r["memory"]["current"]) == {"params", "grads", "optim", "activations", "comm", "workspace", "secondary"}
assert [r["step"] for r in rows] == list(range(1, 25))
print("ok: --log has one JSON object per step with step, loss, lr, grad_norm, tokens_per_s, step_ms, memory by category")
PY

# Resume from the step-12 checkpoint of a run that saved every 4 steps (same config, so the
# same cosine schedule), and run to 24.
"$B/zt-train" "${A[@]}" --ckpt-dir "$TMP/part" --ckpt-interval 4 --log "$TMP/p1.jsonl" 2>/dev/null
mkdir -p "$TMP/resume" && cp -r "$TMP/part/step_00000012" "$TMP/resume/" && echo step_00000012 > "$TMP/resume/latest"
"$B/zt-train" "${A[@]}" --ckpt-dir "$TMP/resume" --resume --log "$TMP/p2.jsonl" 2>/dev/null
diff <(losses "$TMP/full.jsonl" | tail -n 12) <(losses "$TMP/p2.jsonl") >/dev/null || { echo "FAIL: resumed losses differ"; exit 1; }
cmp "$TMP/full/step_00000024/rank_00000.bin" "$TMP/resume/step_00000024/rank_00000.bin"
echo "ok: resumed at step 12, steps 13-24 and the final state bitwise identical"

# kill -9 right after the checkpoint of step k is published (so mid-step or mid-save of step k+1),
# then resume from whatever `latest` says: the final state must be bitwise the uninterrupted one.
mid=0
for k in 3 9 15; do
  rm -rf "$TMP/k"
  "$B/zt-train" "${A[@]}" --ckpt-dir "$TMP/k" --ckpt-interval 1 2>/dev/null &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if [ -f "$TMP/k/latest" ] && [ "$((10#$(sed 's/^step_//' "$TMP/k/latest")))" -ge "$k" ]; then
      kill -9 "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.005
  done
  wait "$pid" 2>/dev/null || true
  at=$(cat "$TMP/k/latest")
  [ "$at" != step_00000008 ] && mid=$((mid + 1))
  "$B/zt-train" "${A[@]}" --ckpt-dir "$TMP/k" --resume 2>/dev/null
  cmp "$TMP/full/step_00000024/rank_00000.bin" "$TMP/k/step_00000024/rank_00000.bin"
  echo "ok: kill -9 after step $k's save (latest = $at), resumed: final state bitwise identical"
done
[ "$mid" -ge 2 ] || { echo "FAIL: only $mid of 3 kills landed before the end of the run (machine too fast for the test?)"; exit 1; }

# --log on resume keeps the lines up to the checkpoint and drops those a killed run wrote later.
rm -rf "$TMP/L"; mkdir -p "$TMP/L"
cp -r "$TMP/part/step_00000012" "$TMP/L/" && echo step_00000012 > "$TMP/L/latest"
cp "$TMP/full.jsonl" "$TMP/L.jsonl"  # as if a run had logged all 24 steps, then died after saving 12
"$B/zt-train" "${A[@]}" --ckpt-dir "$TMP/L" --resume --log "$TMP/L.jsonl" 2>/dev/null
diff <(losses "$TMP/full.jsonl") <(losses "$TMP/L.jsonl") >/dev/null || { echo "FAIL: resumed log differs from the uninterrupted one"; exit 1; }
echo "ok: the resumed --log has each step once and equals the uninterrupted log's losses"

# --keep-last 2: after every save only the two newest step directories remain.
K=(--model gpt2-nano --train "$S/data/corpus/train.txt" -b 4 -t 32 --steps 8 --seed 7 --threads 2)
"$B/zt-train" "${K[@]}" --ckpt-dir "$TMP/keep" --ckpt-interval 2 --keep-last 2 2>/dev/null
[ "$(cd "$TMP/keep" && ls -d step_* | tr '\n' ' ')" = "step_00000006 step_00000008 " ] ||
  { echo "FAIL: --keep-last 2 left: $(ls "$TMP/keep")"; exit 1; }
[ "$(cat "$TMP/keep/latest")" = step_00000008 ] || { echo "FAIL: latest is $(cat "$TMP/keep/latest")"; exit 1; }
expect_fail "--keep-last -1" "--keep-last" "$B/zt-train" "${K[@]}" --keep-last -1
echo "ok: --keep-last 2 keeps step_00000006 and step_00000008 of four saves"
