#!/usr/bin/env bash
# bench/simulate_budget.sh — the table a user budgets with: zt-estimate --compare --tokens on the
# bundled H100 profile (configs/devices/h100-sxm.json), Llama 2 13B on one 8-GPU node and Llama 2
# 70B on four: every ZeRO choice that fits, fastest first, with the hours and the price of 1e11
# tokens at 2.00 a GPU-hour (an example price, not a quote). bf16, T 4096, micro-batch 1,
# activation checkpointing. Prints markdown.
#
# Usage: bench/simulate_budget.sh   (about a minute on one core)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${BUILD_DIR:-$ROOT/build}" && pwd)"
[ $# = 0 ] || { echo "usage: bench/simulate_budget.sh" >&2; exit 2; }
cd "$ROOT"  # configs/ named relative to the checkout, as a user types them
echo "### Every ZeRO choice on H100s, with hours and price (\`zt-estimate --compare --tokens 1e11 --price-per-gpu-hour 2\`)"
for job in "llama2-13b 1" "llama2-70b 4"; do
  set -- $job
  echo; echo '```'
  "$BUILD/zt-estimate" --model "configs/models/$1.json" --nodes "$2" --gpus-per-node 8 -b 1 -t 4096 \
    --activation-checkpointing --precision bf16 --compute-dtype bf16 --threads 1 \
    --cluster configs/devices/h100-sxm.json --compare --tokens 1e11 --price-per-gpu-hour 2
  echo '```'
done
