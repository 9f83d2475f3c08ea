#!/usr/bin/env bash
# What a CPU training run costs the operating system beyond what the allocators count: a CUDA
# build must not load cuBLASLt on the CPU (cuda/cublaslt_api.h: it is dlopened by the first GPU
# GEMM; linked at build time it cost ~146 MiB of RSS per process), and a one-step gpt2-nano run
# stays small. bench/results/rss.md has the measurements behind both.
source "$(dirname "$0")/common.sh"
run=("$B/zt-train" --model gpt2-nano --train "$S/data/corpus/train.txt" -b 2 -t 32 --steps 1)

# 1. The libraries the dynamic loader opens, dlopen included (LD_DEBUG=files names each one).
LD_DEBUG=files "${run[@]}" >"$TMP/out" 2>"$TMP/ld"
if grep -q "libcublasLt" "$TMP/ld"; then
  echo "FAIL: a CPU run of zt-train loaded cuBLASLt:"; grep "libcublasLt" "$TMP/ld" | head -3; exit 1
fi
echo "ok: a CPU run opens no cuBLASLt ($(grep -c 'file=' "$TMP/ld") library events seen)"

# 2. Peak RSS of the whole process (getrusage of the child). Measured 2026-11-25: 14 MiB; before
# the lazy cuBLASLt, 207 MiB. The bound leaves room for other machines' libraries, not for a
# second copy of a GPU library.
peak_kib=$(python3 - "${run[@]}" <<'PY'
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
)
echo "peak RSS of a one-step gpt2-nano zt-train: $((peak_kib / 1024)) MiB"
if ((peak_kib > 64 * 1024)); then
  echo "FAIL: peak RSS $((peak_kib / 1024)) MiB > 64 MiB"; exit 1
fi
echo "ok: peak RSS below 64 MiB"
