#!/usr/bin/env bash
# Two builds of zt-train, one behaviour: runs both over a matrix of ZeRO configurations (stages
# 0-3, fp32 / bf16 / fp16, bf16 compute, gradient accumulation, activation checkpointing,
# offload to cpu and nvme) on 2 MPI ranks and compares, bit for bit, every step's loss, gradient
# norm, bytes communicated and memory by category (current and peak), and the saved checkpoint
# files. Made for refactors that promise "behaviour bitwise unchanged" (bench/results/engine_refactor.md).
#
#   bench/compare_builds.sh OLD_ZT_TRAIN NEW_ZT_TRAIN [OUT_DIR]
#
# Exits 1 naming the first configuration that differs. Timings (step_ms, tokens/s, MFU) are not
# compared, nor the first line's memory.setup (a report older builds do not write).
set -euo pipefail
OLD="$1"; NEW="$2"
OUT="${3:-$(mktemp -d)}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATA="$ROOT/data/corpus/train.txt"
mkdir -p "$OUT"
MPI=(mpirun --oversubscribe -np 2)
[ "$(id -u)" = 0 ] && MPI=(mpirun --allow-run-as-root --oversubscribe -np 2)

# name | a config made from configs/BASE with these top-level / zero_optimization overrides, or
# "-" for none | further zt-train arguments. Every run: gpt2-nano, B=2, T=64, 3 steps, 1 thread per rank.
cases=(
  "stage0|zero0.json:stage=0|"
  "stage1|zero1.json:stage=1,accum=2|"
  "stage2|zero2.json:stage=2,accum=2|"
  "stage3|zero3.json:stage=3,accum=2|"
  "stage3-act-ckpt-eval|zero3.json:stage=3,act=1|--eval-interval 1 --val $ROOT/data/corpus/val.txt --eval-batches 2"
  "stage1-bf16|zero3-bf16.json:stage=1|"
  "stage3-bf16|zero3-bf16.json:stage=3,accum=2|"
  "stage3-bf16-compute|zero3-bf16.json:stage=3|--compute-dtype bf16"
  "stage0-bf16-compute|zero3-bf16.json:stage=0|--compute-dtype bf16"
  "stage2-fp16|zero2-fp16.json:stage=2,accum=2|"
  "stage1-offload-cpu|zero3-offload.json:stage=1,param=none|"
  "stage3-offload-cpu|zero3-offload.json:stage=3|"
  "stage3-offload-nvme|zero3-nvme.json:stage=3,accum=2|"
)

make_config() {  # BASE:k=v,... DIR -> DIR/config.json (micro batch 2, no model key, nvme in the run directory)
  python3 - "$ROOT/configs/${1%%:*}" "${1#*:}" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); dir = sys.argv[3]
c.pop("model", None); c["train_micro_batch_size_per_gpu"] = 2; c.pop("train_batch_size", None)
for kv in filter(None, sys.argv[2].split(",")):
    k, v = kv.split("=")
    if k == "stage": c["zero_optimization"]["stage"] = int(v)
    if k == "accum": c["gradient_accumulation_steps"] = int(v)
    if k == "param": c["zero_optimization"]["offload_param"] = {"device": v}
    if k == "act": c["activation_checkpointing"] = {"enabled": True}
for key in ("offload_optimizer", "offload_param"):
    o = c.get("zero_optimization", {}).get(key)
    if o and o.get("device") == "nvme": o["nvme_path"] = "nvme"  # relative: each run's own directory
json.dump(c, open(dir + "/config.json", "w"), indent=1)
PY
}

strip() {  # the log without timings, one step per line
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    for k in ("step_ms", "tokens_per_s", "mfu"): j.pop(k, None)
    j.get("memory", {}).pop("setup", None)  # the setup stats of the first line: older builds do not log them
    print(json.dumps(j, sort_keys=True))' "$1"
}

fail=0
for c in "${cases[@]}"; do
  name="${c%%|*}"; rest="${c#*|}"; base="${rest%%|*}"; args="${rest#*|}"
  for which in old new; do
    bin="$OLD"; [ "$which" = new ] && bin="$NEW"
    dir="$OUT/$name/$which"; rm -rf "$dir"; mkdir -p "$dir"
    make_config "$base" "$OUT/$name"
    # shellcheck disable=SC2086
    (cd "$dir" && "${MPI[@]}" "$bin" --model gpt2-nano --train "$DATA" --steps 3 -t 64 --threads 1 \
       --config "$OUT/$name/config.json" $args --log log.jsonl --ckpt-dir ckpt > "$dir/stdout.txt" 2>&1) \
      || { echo "FAIL $name: $which run failed (see $dir/stdout.txt)"; fail=1; continue 2; }
    strip "$dir/log.jsonl" > "$dir/log.txt"
  done
  if ! diff -q "$OUT/$name/old/log.txt" "$OUT/$name/new/log.txt" >/dev/null; then
    echo "FAIL $name: step logs differ"; diff "$OUT/$name/old/log.txt" "$OUT/$name/new/log.txt" | head -4; fail=1; continue
  fi
  # checkpoint payloads (meta.json holds no timings)
  if ! diff -rq -x nvme "$OUT/$name/old/ckpt" "$OUT/$name/new/ckpt" >/dev/null; then
    echo "FAIL $name: checkpoints differ"; diff -rq "$OUT/$name/old/ckpt" "$OUT/$name/new/ckpt" | head -4; fail=1; continue
  fi
  echo "same $name: $(wc -l < "$OUT/$name/new/log.txt") steps (loss, grad norm, comm bytes, memory current/peak), checkpoint files"
done
exit $fail
