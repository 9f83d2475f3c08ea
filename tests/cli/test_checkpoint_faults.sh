#!/usr/bin/env bash
# kill -9 at chosen instants of a checkpoint save (core/fault_point.h: before any data, in the
# middle of a rank file, before meta.json, between the step directory and `latest`): `latest`
# still names the last complete checkpoint, it loads, and the resumed run is bitwise the
# uninterrupted one. Then checkpoint directories that do not belong to the run: clear errors.
# Real processes: zt-train under mpirun, a real SIGKILL.
source "$(dirname "$0")/common.sh"
A=(--model gpt2-nano --train "$S/data/corpus/train.txt" -t 32 -b 2 --steps 8 --seed 7 --zero-stage 3 --threads 1)

"${MPI[@]}" -np 2 "$B/zt-train" "${A[@]}" --ckpt-dir "$TMP/full" --ckpt-interval 2 --log "$TMP/full.jsonl" 2>/dev/null
[ "$(losses "$TMP/full.jsonl" | wc -l)" = 8 ] || { echo "FAIL: the uninterrupted run logged $(wc -l <"$TMP/full.jsonl") steps"; exit 1; }

# The second save (step 4) is killed; step 2 is the last complete checkpoint.
for fault in checkpoint.before_data:2@1 checkpoint.mid_file:2@1 checkpoint.before_meta:2@0 checkpoint.before_latest:2@0; do
  rm -rf "$TMP/k" "$TMP/k.jsonl"
  if "${MPI[@]}" -x ZT_FAULT_KILL_AT="$fault" -np 2 "$B/zt-train" "${A[@]}" --ckpt-dir "$TMP/k" --ckpt-interval 2 \
       --log "$TMP/k.jsonl" 2>"$TMP/k.err"; then
    echo "FAIL: $fault: the run was not killed"; exit 1
  fi
  want_rank="${fault#*@}"
  grep -q "rank $want_rank .*signal 9" "$TMP/k.err" ||
    { echo "FAIL: $fault: mpirun's message does not name rank $want_rank killed by signal 9:"; cat "$TMP/k.err"; exit 1; }
  [ "$(cat "$TMP/k/latest")" = step_00000002 ] || { echo "FAIL: $fault: latest is '$(cat "$TMP/k/latest")'"; exit 1; }
  left="$(cd "$TMP/k" && ls -d step_* | tr '\n' ' ')"
  "${MPI[@]}" -np 2 "$B/zt-train" "${A[@]}" --ckpt-dir "$TMP/k" --ckpt-interval 2 --resume --log "$TMP/k.jsonl" 2>"$TMP/r.err" ||
    { echo "FAIL: $fault: resume failed:"; cat "$TMP/r.err"; exit 1; }
  grep -q "resumed at step 2" "$TMP/r.err" || { echo "FAIL: $fault: did not resume at step 2:"; cat "$TMP/r.err"; exit 1; }
  diff <(losses "$TMP/full.jsonl") <(losses "$TMP/k.jsonl") >"$TMP/diff" ||
    { echo "FAIL: $fault: resumed losses differ from the uninterrupted run:"; head -20 "$TMP/diff"; exit 1; }
  for r in 0 1; do cmp "$TMP/full/step_00000008/rank_0000$r.bin" "$TMP/k/step_00000008/rank_0000$r.bin"; done
  [ -z "$(cd "$TMP/k" && ls -d ./*.tmp 2>/dev/null)" ] || { echo "FAIL: $fault: leftovers: $(ls "$TMP/k")"; exit 1; }
  echo "ok: kill -9 at $fault (left: $left): latest = step_00000002, resumed bitwise (8 losses, final shards)"
done

# Checkpoint directories that are not this run's.
C=(--ckpt-dir "$TMP/bad" --resume)
cp -r "$TMP/full" "$TMP/bad"
expect_fail "another model" "another model" "${MPI[@]}" -np 2 "$B/zt-train" "${A[@]/gpt2-nano/llama-nano}" "${C[@]}"
python3 - "$TMP/bad/step_00000008/meta.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["world_size"] = 4; json.dump(m, open(sys.argv[1], "w"))
PY
expect_fail "meta.json's world size disagrees with its files" "world_size" "${MPI[@]}" -np 2 "$B/zt-train" "${A[@]}" "${C[@]}"
rm -rf "$TMP/bad" && cp -r "$TMP/full" "$TMP/bad"
cp "$TMP/full/step_00000006/rank_00001.bin" "$TMP/bad/step_00000008/rank_00001.bin"  # same size, other step
expect_fail "a rank file of another step" "rank_00001.bin" "${MPI[@]}" -np 2 "$B/zt-train" "${A[@]}" "${C[@]}"
rm -rf "$TMP/bad" && cp -r "$TMP/full" "$TMP/bad" && echo step_00000005 >"$TMP/bad/latest"
expect_fail "latest names a missing step" "step_00000005" "${MPI[@]}" -np 2 "$B/zt-train" "${A[@]}" "${C[@]}"
