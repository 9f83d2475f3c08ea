#!/usr/bin/env bash
# The DeepSpeed keys zt-train reads beside the engine's, each shown to do what it says (or to be
# refused by name): steps_per_print decides which step lines are printed, wall_clock_breakdown adds
# the phases' times to them, and the scheduler drives the learning rate each step logs, with
# DeepSpeed's formulas (the expected lrs are deepspeed/runtime/lr_schedules.py's, run in Python as
# DeepSpeedEngine drives it; tests/test_optim.cpp checks the same curves against the formulas).
source "$(dirname "$0")/common.sh"
T="$B/zt-train"
RUN=(--model gpt2-nano --train "$S/data/corpus/train.txt" -t 32 --threads 1)
cfg() {  # cfg NAME JSON-fragment: a config with a micro batch of 2 and the fragment's keys
  printf '{"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW", "params": {"lr": 0.002}}%s}\n' "$2" \
    > "$TMP/$1.json"
}
step_lines() { grep -oE '^step +[0-9]+/[0-9]+' "$1" | awk '{print $2}' | tr '\n' ' '; }
# lrs FILE: the lr column of a --log file, one per line (exact decimal repr).
lrs() { python3 -c 'import json,sys; [print(repr(json.loads(l)["lr"])) for l in open(sys.argv[1])]' "$1" | tr '\n' ' '; }
same() {  # same WHAT GOT WANT
  if [ "$2" != "$3" ]; then echo "FAIL: $1: got '$2', expected '$3'"; exit 1; fi
  echo "ok: $1: $2"
}

# steps_per_print: the config's key, then the flag; the last step is always printed
cfg print ', "steps_per_print": 3'
"$T" "${RUN[@]}" --config "$TMP/print.json" --steps 7 2> "$TMP/print.err" > /dev/null
same "steps_per_print 3 prints steps" "$(step_lines "$TMP/print.err")" "3/7 6/7 7/7 "
"$T" "${RUN[@]}" -b 2 --steps 5 --steps-per-print 2 2> "$TMP/flag.err" > /dev/null
same "--steps-per-print 2 prints steps" "$(step_lines "$TMP/flag.err")" "2/5 4/5 5/5 "
cfg default ''
"$T" "${RUN[@]}" --config "$TMP/default.json" --steps 12 2> "$TMP/default.err" > /dev/null
same "DeepSpeed's default steps_per_print (10)" "$(step_lines "$TMP/default.err")" "10/12 12/12 "

# wall_clock_breakdown: a line of phase times after each printed step line, the collectives of
# the stage among them; none without the key
cfg clock ', "steps_per_print": 2, "wall_clock_breakdown": true, "zero_optimization": {"stage": 3}'
"${MPI[@]}" -np 2 "$T" "${RUN[@]}" --config "$TMP/clock.json" --steps 4 2> "$TMP/clock.err" > /dev/null
n=$(grep -c '^time (ms) | fwd: [0-9.]* | bwd: [0-9.]* | step: [0-9.]* |' "$TMP/clock.err" || true)
same "wall_clock_breakdown lines" "$n" 2
for phase in all_gather reduce_scatter offload "MiB sent intra-node"; do
  grep -q "^time (ms) .*| $phase" "$TMP/clock.err" || { echo "FAIL: no '$phase' in:"; cat "$TMP/clock.err"; exit 1; }
done
echo "ok: the breakdown names the stage-3 collectives: $(grep -m1 '^time (ms)' "$TMP/clock.err")"
grep -q '^time (ms)' "$TMP/print.err" && { echo "FAIL: a breakdown without wall_clock_breakdown"; exit 1; }
echo "ok: no breakdown without the key"

# the scheduler drives the learning rate, with DeepSpeed's meaning
cfg warmup ', "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 0.002, "warmup_num_steps": 4, "warmup_type": "linear"}}'
"$T" "${RUN[@]}" --config "$TMP/warmup.json" --steps 7 --log "$TMP/warmup.jsonl" 2> /dev/null
same "WarmupLR (linear) lrs" "$(lrs "$TMP/warmup.jsonl")" "0.0 0.0 0.0005 0.001 0.0015 0.002 0.002 "
cfg decay ', "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_max_lr": 0.01, "warmup_num_steps": 3, "warmup_type": "linear", "total_num_steps": 10}}'
"$T" "${RUN[@]}" --config "$TMP/decay.json" --steps 8 --log "$TMP/decay.jsonl" 2> /dev/null
same "WarmupDecayLR lrs" "$(lrs "$TMP/decay.jsonl")" \
  "0.0 0.0 0.003333333333333333 0.006666666666666666 0.01 0.008571428571428572 0.0071428571428571435 0.005714285714285714 "
cfg cosine ', "scheduler": {"type": "WarmupCosineLR", "params": {"warmup_num_steps": 0, "total_num_steps": "auto"}}'
"$T" "${RUN[@]}" --config "$TMP/cosine.json" --steps 6 --log "$TMP/cosine.jsonl" 2> /dev/null
python3 - "$TMP/cosine.jsonl" <<'PY'
import json, sys
got = [json.loads(l)["lr"] for l in open(sys.argv[1])]
want = [0.0, 0.0, 0.002, 0.001707136070508429, 0.0010001, 0.0002930639294915712]  # lr 0.002, T = the run's 6
assert all(abs(g - w) <= 1e-15 for g, w in zip(got, want)) and len(got) == len(want), (got, want)
print("ok: WarmupCosineLR (DeepSpeed's log default, warmup 0 -> 2, total_num_steps auto = the run's steps):", got)
PY
# llm.c's cosine from the flags and from the config: the same lrs
cfg llmc ', "scheduler": {"type": "cosine", "params": {"warmup_num_steps": 2, "cos_min_ratio": 0.1}}'
"$T" "${RUN[@]}" --config "$TMP/llmc.json" --steps 5 --log "$TMP/llmc.jsonl" 2> /dev/null
"$T" "${RUN[@]}" -b 2 --lr 0.002 --schedule cosine --warmup 2 --min-lr-frac 0.1 --steps 5 --log "$TMP/llmc-flags.jsonl" 2> /dev/null
same "llm.c cosine: config and flags" "$(lrs "$TMP/llmc.jsonl")" "$(lrs "$TMP/llmc-flags.jsonl")"

# refused by name
cfg zero_print ', "steps_per_print": 0'
expect_fail "steps_per_print 0" "steps_per_print = 0 is invalid: expected an integer >= 1" \
  "$T" "${RUN[@]}" --config "$TMP/zero_print.json" --steps 1
cfg bad_param ', "scheduler": {"type": "WarmupLR", "params": {"total_num_steps": 10}}'
expect_fail "a parameter WarmupLR does not read" "unknown key 'scheduler.params.total_num_steps' (known keys for WarmupLR" \
  "$T" "${RUN[@]}" --config "$TMP/bad_param.json" --steps 1
cfg short ', "scheduler": {"type": "WarmupCosineLR", "params": {"warmup_num_steps": 10}}'
expect_fail "WarmupCosineLR shorter than its warmup" "total_num_steps = 5 (the run's steps) is invalid for WarmupCosineLR" \
  "$T" "${RUN[@]}" --config "$TMP/short.json" --steps 5
expect_fail "--warmup without a schedule" "--warmup sets scheduler.params.warmup_num_steps, which --schedule none does not use" \
  "$T" "${RUN[@]}" --warmup 3 --steps 1
expect_fail "--steps-per-print beside --config" "--steps-per-print cannot be combined with --config" \
  "$T" "${RUN[@]}" --config "$TMP/default.json" --steps-per-print 2 --steps 1
expect_fail "--schedule unknown" "--schedule" "$T" "${RUN[@]}" --schedule OneCycle --steps 1
