#!/usr/bin/env bash
# Command 1 of the README: install what is missing, build, and train gpt-micro (4 layers, 256 wide,
# 3.2M parameters) on the bundled corpus (data/corpus: ZeroTensor's own sources and docs, byte
# tokens) with ZeRO stage 3 across 4 MPI ranks on the CPU (configs/demo-zero3.json: 4 sequences
# per rank, a global batch of 16). Shows the validation loss falling well below the corpus's
# unigram entropy, every rank's memory by category beside its dry run, then samples from the
# consolidated checkpoint. About 10 minutes on 2 cores. DEMO_STEPS=N, DEMO_RANKS=N (a divisor of
# 16) and DEMO_MODEL=name change it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/stages.sh"  # stage: timed parts, their times printed at the end
export BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
STEPS="${DEMO_STEPS:-1000}"
MODEL="${DEMO_MODEL:-gpt-micro}"
RANKS="${DEMO_RANKS:-4}"
RUN="${DEMO_DIR:-$ROOT/runs/demo}"
stage install bash "$ROOT/scripts/install-deps.sh"
stage build bash "$ROOT/scripts/build.sh"
mkdir -p "$RUN"

# The unigram (byte) entropy of the validation split: what a model that ignores context scores.
H=$(python3 - "$ROOT/data/corpus/train.txt" "$ROOT/data/corpus/val.txt" <<'PY'
import collections, math, sys
train = open(sys.argv[1], 'rb').read(); val = open(sys.argv[2], 'rb').read()
c = collections.Counter(train); n = len(train)
# cross-entropy of val under the train byte frequencies (add-one smoothing over 256 bytes)
print(f"{-sum(math.log((c[b] + 1) / (n + 256)) for b in val) / len(val):.4f}")
PY
)
echo "unigram entropy of the validation bytes (train frequencies): $H nats"

# The config fixes 4 sequences per rank; other rank counts keep the global batch of 16.
CONFIG="$ROOT/configs/demo-zero3.json"
if [ "$RANKS" != 4 ]; then
  CONFIG="$RUN/demo-zero3-np$RANKS.json"
  python3 - "$ROOT/configs/demo-zero3.json" "$CONFIG" "$RANKS" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["train_micro_batch_size_per_gpu"] = 16 // int(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY
fi
# --oversubscribe: more ranks than cores; --allow-run-as-root: containers often run as root.
stage train mpirun -np "$RANKS" --oversubscribe --allow-run-as-root --bind-to none \
  "$BUILD_DIR/zt-train" --config "$CONFIG" --model "$MODEL" \
  --train "$ROOT/data/corpus/train.txt" --val "$ROOT/data/corpus/val.txt" --seq-len 128 --steps "$STEPS" \
  --eval-interval 200 --eval-batches 32 --ckpt-dir "$RUN/ckpt" --log "$RUN/log.jsonl"

VAL=$(python3 -c 'import json,sys; print([json.loads(l)["val_loss"] for l in open(sys.argv[1]) if "val_loss" in l][-1])' "$RUN/log.jsonl")
echo
echo "final validation loss: $VAL nats/byte   (unigram entropy: $H nats/byte)"
echo
echo "----- sample (zt-generate --ckpt $RUN/ckpt --prompt '// defines:' -n 400 --temperature 0.8 --top-k 40) -----"
stage sample "$BUILD_DIR/zt-generate" --ckpt "$RUN/ckpt" --prompt "// defines:" -n 400 --temperature 0.8 --top-k 40
