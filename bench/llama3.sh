#!/usr/bin/env bash
# bench/llama3.sh — Llama 3.2 1B's shape trained on this machine's CPU: ZeRO-3 on 2 ranks with the
# optimizer states and the parameters on the NVMe tier (configs/llama3.2-1b-infinity.json), from
# the process start under a device cap and a host cap, on the bundled corpus tokenized with a
# Llama-3-style tokenizer. What it runs, in order:
#   1. the tokenizer: OpenAI's cl100k_base (Llama 3's split pattern and its first 100,256 tokens;
#      Llama 3 adds 28,000 more) converted by npm's tiktoken 1.0.22 to a tiktoken-family
#      tokenizer.json (tests/tiktoken_reference.mjs; scripts/install-deps.sh installs the package)
#   2. data/corpus/train.txt -> a uint32 token shard (zt-tokenize encode: ids past 65535)
#   3. zt-estimate for the run (per-rank bytes by category, device / host / nvme)
#   4. zt-train --model llama3.2-1b (1,235,814,400 parameters, a seeded init: no weights are
#      downloaded), --steps S, B 1 x T --seq per rank, 1 thread per rank; its end-of-run report
#      prints the measured peaks beside the estimate
# Writes the logs to OUT (default runs/llama3); bench/results/llama3.md quotes them.
# Usage: bench/llama3.sh [--steps 6] [--seq 256] [--device-cap-mib 6144] [--host-cap-mib 5120] [--out DIR]
#        (needs the build in ${BUILD_DIR:-build}; about 8 GiB of RAM and 20 GiB of disk per rank)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
STEPS=6; SEQ=256; DEV_CAP=6144; HOST_CAP=5120; OUT="$ROOT/runs/llama3"
while (($#)); do case "$1" in
  --steps) STEPS=$2; shift 2;; --seq) SEQ=$2; shift 2;; --device-cap-mib) DEV_CAP=$2; shift 2;;
  --host-cap-mib) HOST_CAP=$2; shift 2;; --out) OUT=$2; shift 2;; *) echo "unknown flag $1" >&2; exit 2;; esac; done
TIKTOKEN="${ZT_TIKTOKEN_DIR:-$ROOT/third_party/npm/node_modules/tiktoken}"
[ -f "$TIKTOKEN/package.json" ] || { echo "bench/llama3.sh: npm tiktoken not at $TIKTOKEN (scripts/install-deps.sh installs it)" >&2; exit 1; }
for p in zt-tokenize zt-estimate zt-train; do
  [ -x "$BUILD/$p" ] || { echo "bench/llama3.sh: $BUILD/$p is missing: build first (scripts/build.sh)" >&2; exit 1; }
done
mkdir -p "$OUT/tok" "$OUT/nvme"
CFG="$OUT/config.json"  # the config with its swap files under OUT
python3 - "$ROOT/configs/llama3.2-1b-infinity.json" "$CFG" "$OUT/nvme" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
for k in ("offload_optimizer", "offload_param"):
    c["zero_optimization"][k]["nvme_path"] = sys.argv[3]
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY

echo "== 1. cl100k_base -> tokenizer.json (tiktoken 1.0.22)" >&2
node "$ROOT/tests/tiktoken_reference.mjs" --tiktoken "$TIKTOKEN" --encoding cl100k_base --out "$OUT/tok" >&2
echo "== 2. the corpus -> a uint32 shard" >&2
"$BUILD/zt-tokenize" encode --tokenizer "$OUT/tok/tokenizer.json" --out "$OUT/train.bin" "$ROOT/data/corpus/train.txt"
echo "== 3. zt-estimate" >&2
"$BUILD/zt-estimate" --model llama3.2-1b --world-size 2 -b 1 -t "$SEQ" --config "$CFG" --threads 1 | tee "$OUT/estimate.txt"
echo "== 4. zt-train, 2 ranks" >&2
start=$(date +%s)
mpirun -np 2 --oversubscribe --allow-run-as-root --bind-to none "$BUILD/zt-train" --config "$CFG" \
  --model llama3.2-1b --train "$OUT/train.bin" -t "$SEQ" --steps "$STEPS" --threads 1 \
  --memory-limit-mib "$DEV_CAP" --host-memory-limit-mib "$HOST_CAP" --log "$OUT/log.jsonl" 2>&1 | tee "$OUT/train.log"
echo "bench/llama3.sh: $((  $(date +%s) - start )) s of training; logs in $OUT" >&2
