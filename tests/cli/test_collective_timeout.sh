#!/usr/bin/env bash
# A rank that stops answering without dying (SIGSTOP) must not hang the job: the collective
# timeout (dist/mpi_watchdog.h) aborts it, and the message names the collective and the rank.
# Real processes: zt-train under mpirun, a real SIGSTOP.
source "$(dirname "$0")/common.sh"
A=(--model gpt2-nano --train "$S/data/corpus/train.txt" -t 32 -b 2 --seed 7 --zero-stage 3 --threads 1)

# Values the timeout refuses.
expect_fail "negative --collective-timeout-s" "collective-timeout-s" "$B/zt-train" "${A[@]}" --steps 1 --collective-timeout-s -1
printf '{"train_micro_batch_size_per_gpu": 2, "collective_timeout_s": -5}\n' >"$TMP/neg.json"
expect_fail "negative collective_timeout_s in a config" "collective_timeout_s = -5 is invalid" \
  "$B/zt-train" --config "$TMP/neg.json" --model gpt2-nano --train "$S/data/corpus/train.txt" -t 32 --steps 1

# A healthy 2-rank run with a short timeout finishes: the watchdog does not fire on its own.
"${MPI[@]}" -np 2 "$B/zt-train" "${A[@]}" --steps 4 --collective-timeout-s 5 2>"$TMP/ok.err" ||
  { echo "FAIL: a healthy run with --collective-timeout-s 5 failed:"; cat "$TMP/ok.err"; exit 1; }
echo "ok: a healthy run with a 5 s collective timeout completes"

# Rank 1 stopped mid-run: rank 0 waits in its next collective, times out after 5 s and aborts.
"${MPI[@]}" -np 2 "$B/zt-train" "${A[@]}" --steps 100000 --collective-timeout-s 5 --log "$TMP/s.jsonl" 2>"$TMP/stop.err" &
job=$!
victim=""
for _ in $(seq 600); do
  if [ -s "$TMP/s.jsonl" ] && [ "$(wc -l <"$TMP/s.jsonl")" -ge 2 ]; then victim=$(rank_pid 1); break; fi
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
[ -n "$victim" ] || { echo "FAIL: the run did not reach step 2"; cat "$TMP/stop.err"; kill -9 "$job" 2>/dev/null; exit 1; }
kill -STOP "$victim"
t0=$(date +%s)
for _ in $(seq 600); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$job" 2>/dev/null; then
  echo "FAIL: job still running 60 s after rank 1 was stopped"; kill -9 "$victim" "$job" 2>/dev/null; exit 1
fi
kill -9 "$victim" 2>/dev/null || true
dt=$(( $(date +%s) - t0 ))
wait "$job" && { echo "FAIL: a job whose rank stopped answering exited 0"; exit 1; }
for needle in "collective timeout:" "longer than collective_timeout_s = 5" "rank 1 (pid $victim, node $(hostname)) has not answered" "suspect: rank 1 (node $(hostname))"; do
  grep -qF -- "$needle" "$TMP/stop.err" || { echo "FAIL: the job's error lacks '$needle':"; cat "$TMP/stop.err"; exit 1; }
done
echo "ok: rank 1 stopped: the job ended in $dt s: $(grep -m1 -F 'collective timeout:' "$TMP/stop.err" | cut -c1-150)"
grep -A3 -F 'collective timeout:' "$TMP/stop.err" | sed 's/^/    /'
