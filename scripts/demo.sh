#!/usr/bin/env bash
# Command 1 of the README: install what is missing, build, and train gpt-micro (4 layers, 256 wide,
# 3.2M parameters) on the bundled corpus (data/corpus: ZeroTensor's own sources and docs, byte
# tokens), on the CPU. Shows the validation loss falling well below the corpus's unigram entropy,
# then samples. Takes about 7 minutes on 2 cores. DEMO_STEPS=N and DEMO_MODEL=name change it
# (DEMO_MODEL=gpt-mini trains nanoGPT's shakespeare-char shape, ~3x slower per token).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
STEPS="${DEMO_STEPS:-1000}"
MODEL="${DEMO_MODEL:-gpt-micro}"
RUN="${DEMO_DIR:-$ROOT/runs/demo}"
bash "$ROOT/scripts/install-deps.sh"
bash "$ROOT/scripts/build.sh"
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

"$BUILD_DIR/zt-train" --model "$MODEL" --train "$ROOT/data/corpus/train.txt" --val "$ROOT/data/corpus/val.txt" \
  --steps "$STEPS" --batch 16 --seq-len 128 --lr 2e-3 --warmup 50 --min-lr-frac 0.1 --grad-clip 1.0 \
  --eval-interval 200 --eval-batches 32 --ckpt-dir "$RUN/ckpt" --log "$RUN/log.jsonl"

VAL=$(python3 -c 'import json,sys; print([json.loads(l)["val_loss"] for l in open(sys.argv[1]) if "val_loss" in l][-1])' "$RUN/log.jsonl")
echo
echo "final validation loss: $VAL nats/byte   (unigram entropy: $H nats/byte)"
echo
echo "----- sample (zt-generate --ckpt $RUN/ckpt --prompt '// defines:' -n 400 --temperature 0.8 --top-k 40) -----"
"$BUILD_DIR/zt-generate" --ckpt "$RUN/ckpt" --prompt "// defines:" -n 400 --temperature 0.8 --top-k 40
