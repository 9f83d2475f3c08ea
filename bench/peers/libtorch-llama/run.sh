#!/usr/bin/env bash
# Build (into /tmp) and run the libtorch Llama training-step benchmark.
# Usage: ./run.sh [--layers 6 --embd 384 --heads 6 --kv-heads 2 --ffn 1024 --seq 256 --batch 8 --vocab 256
#                  --steps 10 --warmup 2 --threads 2]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="${BUILD_DIR:-/tmp/libtorch-llama-build}"

# 1. Dependencies. libopenblas0-pthread makes the libblas.so.3 alternative (which Debian's
#    libtorch calls for every matmul) OpenBLAS instead of the ~20x slower netlib reference BLAS.
need=()
for p in libtorch-dev cmake g++ make libopenblas0-pthread; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  echo "[run.sh] apt-get install ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y --no-install-recommends "${need[@]}" ||
    { apt-get update && apt-get install -y --no-install-recommends "${need[@]}"; }; } >&2
fi
blas="$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)"
echo "[run.sh] libblas.so.3 -> $blas" >&2
case "$blas" in
  *openblas*) ;;
  *) echo "[run.sh] WARNING: libblas.so.3 is not OpenBLAS; matmuls will be slow." \
          "Check: update-alternatives --display libblas.so.3-x86_64-linux-gnu" >&2 ;;
esac

# 2. Build out of tree (log shown only on failure).
mkdir -p "$BUILD"
{ cmake -S "$HERE" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release && cmake --build "$BUILD" -j"$(nproc)"; } \
  >"$BUILD/build.log" 2>&1 || { cat "$BUILD/build.log" >&2; exit 1; }

# 3. Run. Default = ZeroTensor's llama-mini shape, batch 8. Idle OpenMP threads sleep instead of
#    spinning, so they do not steal cores from OpenBLAS's own thread pool.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
if (($# == 0)); then
  set -- --layers 6 --embd 384 --heads 6 --kv-heads 2 --ffn 1024 --seq 256 --batch 8 --vocab 256 \
         --steps 10 --warmup 2 --threads 2
fi
exec "$BUILD/llama" "$@"
