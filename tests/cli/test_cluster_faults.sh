#!/usr/bin/env bash
# Faults across nodes, on the cluster in a box (2 nodes x 2 ranks, scripts/cluster.sh): the
# collective timeout (dist/mpi_watchdog.h) ends a job whose rank on the other node stops
# answering, and names that rank and its node; ranks on the other machine are asked over TCP
# (dist/peer_probe.h), so the report says what happened there:
#  1. rank 3 (node 1) stopped (SIGSTOP): the job ends within the timeout, every surviving rank
#     reports, naming rank 3 and its node; the last checkpoint is intact and resumes on one node (2 ranks: fewer nodes,
#     the resharded resume) with the losses of the uninterrupted run;
#  1b. node 1 frozen (both its ranks stopped): node 0's ranks find them over TCP, accepting
#     connections and saying nothing, and name both;
#  2. node 1's link down: the ranks of node 0 report node 1's ranks unreachable within the
#     timeout; with the link back (a flap), the reports of node 1 arrive too and the job ends
#     (OpenMPI's mpirun waits for the daemon behind a link that stays down: docs/multi-node.md);
#  3. node 1's processes killed (SIGKILL): mpirun ends the job, naming the rank and the node.
# Skipped (77) where namespaces cannot be made (not root, no CAP_NET_ADMIN).
source "$(dirname "$0")/common.sh"
C="$S/scripts/cluster.sh"
name="f$(( $$ % 100000 ))"
box=(bash "$C" box --name "$name" --subnet "10.78.$(( $$ % 250 ))" --nodes 2 --ranks 2)

rc=0; "${box[@]}" -- true 2>"$TMP/probe.err" || rc=$?
if [ "$rc" = 77 ]; then echo "SKIP: $(cat "$TMP/probe.err")"; exit 77; fi
[ "$rc" = 0 ] || { echo "FAIL: an empty box failed ($rc):"; cat "$TMP/probe.err"; exit 1; }

A=(--model gpt2-nano --train "$S/data/corpus/train.txt" -t 32 --seed 7 --threads 1 --dist mpi --zero-stage 3)
# The reference: 4 ranks on one node, uninterrupted.
"${MPI[@]}" -np 4 "$B/zt-train" "${A[@]}" -b 2 --steps 300 --log "$TMP/full.jsonl" 2>/dev/null

# start_job TAG: the box runs zt-train (300 steps: the fault comes long before the end),
# checkpointing every 2 steps; returns once step 5 is logged (sets job).
start_job() {
  rm -rf "$TMP/$1" && mkdir -p "$TMP/$1"
  OMP_NUM_THREADS=1 timeout 120 "${box[@]}" -- env "ZT_TEST_TAG=$TMP" "$B/zt-train" "${A[@]}" -b 2 --steps 300 \
    --collective-timeout-s 5 --ckpt-dir "$TMP/$1/ckpt" --ckpt-interval 2 --log "$TMP/$1/log.jsonl" 2>"$TMP/$1/err" &
  job=$!
  for _ in $(seq 600); do
    [ -s "$TMP/$1/log.jsonl" ] && [ "$(wc -l <"$TMP/$1/log.jsonl")" -ge 5 ] && return 0
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL: $1: the box's run did not reach step 5:"; tail -20 "$TMP/$1/err"; exit 1
}
# ended_within TAG SECONDS: waits for the job; fails if it runs longer or exits 0.
ended_within() {
  local t0=$SECONDS
  while kill -0 "$job" 2>/dev/null && ((SECONDS - t0 < $2)); do sleep 0.2; done
  if kill -0 "$job" 2>/dev/null; then
    echo "FAIL: $1: the job still runs $2 s after the fault:"; tail -20 "$TMP/$1/err"; kill "$job"; wait "$job"; exit 1
  fi
  local rc=0; wait "$job" || rc=$?
  [ "$rc" != 0 ] || { echo "FAIL: $1: the job exited 0 after the fault"; exit 1; }
  ended=$((SECONDS - t0))
}
need() {  # need TAG TEXT: the job's stderr has TEXT
  grep -qF -- "$2" "$TMP/$1/err" || { echo "FAIL: $1: the job's error lacks '$2':"; grep -v '^step' "$TMP/$1/err" | head -40; exit 1; }
}

# 1. SIGSTOP of rank 3, on node 1
start_job stop
victim=$(rank_pid 3)
[ -n "$victim" ] || { echo "FAIL: no rank 3 found"; exit 1; }
kill -STOP "$victim"
ended_within stop 30
kill -9 "$victim" 2>/dev/null || true
need stop "collective timeout:"
need stop "suspect: rank 3 (node $name-node1)"
for r in 0 1 2; do need stop "error on rank $r of 4: collective timeout:"; done  # every surviving rank reports
echo "ok: rank 3 stopped on node 1: the job ended in $ended s (timeout 5 s), suspect: rank 3 (node $name-node1)"
grep -A5 -F 'collective timeout:' "$TMP/stop/err" | grep -F -e 'collective timeout' -e 'rank ' | head -5 | sed 's/^/    /'

# ... its last checkpoint resumes on one node, 2 ranks (4 -> 2: resharded), 3 steps
ck="$TMP/stop/ckpt"
[ -s "$ck/latest" ] && [ -d "$ck/$(cat "$ck/latest")" ] || { echo "FAIL: no intact checkpoint after the fault"; ls "$ck"; exit 1; }
k=$((10#$(cat "$ck/latest" | sed 's/^step_//')))
((k + 3 <= 300)) || { echo "FAIL: the run reached step $k before the fault"; exit 1; }
"${MPI[@]}" -np 2 "$B/zt-train" "${A[@]}" -b 4 --steps 300 --ckpt-dir "$ck" --resume --log "$TMP/resumed.jsonl" 2>"$TMP/resume.err" ||
  { echo "FAIL: resuming step $k on one node failed:"; grep -v "^step" "$TMP/resume.err" | head -20; exit 1; }
python3 - "$TMP/full.jsonl" "$TMP/resumed.jsonl" "$k" <<'PY'
import json, sys
k = int(sys.argv[3])
full = [json.loads(l)["loss"] for l in open(sys.argv[1])][k:k + 3]
got = [json.loads(l)["loss"] for l in open(sys.argv[2])][:3]  # the steps after the checkpoint
assert len(got) == 3, f"the resumed run logged {len(got)} steps"
worst = max(abs(a - b) / abs(b) for a, b in zip(got, full))
assert worst <= 1e-5, f"resumed losses differ from the uninterrupted run by {worst:.2e} relative"
PY
echo "ok: the checkpoint of step $k, written by 2 nodes x 2 ranks, resumed on 1 node x 2 ranks: steps $((k + 1))-$((k + 3)) within 1e-5 of the uninterrupted run"

# 1b. node 1 frozen: both its ranks stopped. Only node 0's ranks can report, and they ask node 1.
start_job frozen
f2=$(rank_pid 2) f3=$(rank_pid 3)
kill -STOP $f2 $f3
ended_within frozen 30
kill -9 $f2 $f3 2>/dev/null || true
need frozen "rank 3 (node $name-node1, another machine) does not answer: its machine accepted the connection"
need frozen "suspect: rank 2 (node $name-node1), 3 (node $name-node1)"
echo "ok: node 1 frozen (both ranks stopped): the job ended in $ended s, node 0's ranks asked node 1 over TCP:"
grep -m1 -F "rank 3 (node $name-node1, another machine)" "$TMP/frozen/err" | sed 's/^/    /'

# 2. node 1's link down, then up again
start_job link
ip netns exec "$name-n1" ip link set eth0 down
t0=$SECONDS
for _ in $(seq 300); do grep -q "is unreachable" "$TMP/link/err" && break; sleep 0.1; done
seen=$((SECONDS - t0))
ip netns exec "$name-n1" ip link set eth0 up
((seen < 20)) || { echo "FAIL: link: no report of an unreachable rank 20 s after the link went down"; tail -20 "$TMP/link/err"; exit 1; }
ended_within link 60
need link "(node $name-node1, another machine) is unreachable: no connection in 2.0 s (its machine or its link is down)"
need link "(node $name-node0, another machine) is unreachable"
echo "ok: node 1's link down: node 0's ranks named node 1's ranks unreachable after $seen s; the link back, node 1's reports arrived and the job ended"

# 3. node 1's processes killed
start_job kill
v2=$(rank_pid 2) v3=$(rank_pid 3)
kill -9 $v2 $v3
ended_within kill 30
need kill "exited on signal 9"
echo "ok: node 1's ranks killed: the job ended in $ended s: $(grep -m1 -F 'exited on signal 9' "$TMP/kill/err")"
[ -z "$(ip netns list 2>/dev/null | grep -E "^$name-")" ] || { echo "FAIL: namespaces left behind"; exit 1; }
