#!/usr/bin/env bash
# gpu-pack.sh [PACK_DIR]: build ZeroTensor for a bare GPU machine and pack what scripts/gpu-check.sh
# runs there into one self-contained folder. Runs here, on the build machine.
#
# The GPU machine has the NVIDIA driver, the CUDA toolkit, CMake, ninja and a Python with PyTorch
# (whose wheels carry cuDNN and NCCL), and none of our Debian packages. So the pack holds:
#   bin/     the programs the check runs (stripped), OpenMPI's mpirun and orted
#   lib/     every non-CUDA shared library they load (OpenBLAS, OpenMPI, PMIx, hwloc, libevent,
#            liburing, libgomp, libgfortran, ...), RUNPATH $ORIGIN; bin/ has $ORIGIN/../lib
#   lib/openmpi, lib/pmix: the plugins OpenMPI and PMIx dlopen; share/openmpi: their help texts
#   etc/openmpi-mca-params.conf, env.sh: the settings that point OpenMPI at this folder
#   tests/, data/, configs/: the GPU test scripts and the data and configs they use; bench/: the
#            PyTorch peers of the training-step benchmark (bench/torch_{gpt2,llama}_gpu.py), the
#            transformers client (bench/hf_client.py), the profile's summary (ncu_kernel_shares.py),
#            the offload ladder (offload_ladder.py)
#   peers/llm.c: llm.c's trainer, its sources and a train_gpt2cu built here (the other peer)
#   MANIFEST: what is in it, from where, and the build's commit
# CUDA's own libraries (cudart, cuBLAS/cuBLASLt, cuDNN, NCCL) and the C/C++ runtime (glibc,
# libstdc++, libgcc_s) are not packed: gpu-check.sh finds CUDA's on the target (toolkit or wheels)
# and reports what it uses.
#
# Size: OpenBLAS alone is 36 MiB and each CUDA program carries the same 11 MiB of kernels (sm_80,
# sm_90), so the folder is larger than what may travel (64 MiB). What travels is PACK_DIR.tar.xz,
# one xz stream with a 64 MiB dictionary, in which the repeated kernels compress to one copy; the
# script fails if the archive is over 64 MiB.
#
# Build: Release, CUDA required, sm_80 and sm_90 (ZT_PACK_CUDA_ARCHS, e.g. "90" for an H100/H200
# only: half the CUDA compile time), and -march=x86-64-v3 instead of -march=native (the GPU
# machine's CPU is not this one). BUILD_DIR (default build-pack) keeps the build.
# ZT_PACK_NO_BUILD=1 packs BUILD_DIR as it is and ZT_PACK_NO_ARCHIVE=1 skips the archive (the pack
# test does both: it proves the packing, not the build flags).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build-pack}"
PACK="$(realpath -m "${1:-$ROOT/gpu-pack}")"
MAX_MIB=64
say() { echo "[gpu-pack] $*" >&2; }

command -v patchelf >/dev/null || { say "error: patchelf is missing (scripts/install-deps.sh installs it)"; exit 1; }
command -v nvcc >/dev/null || { say "error: nvcc is not on PATH: the pack needs a CUDA build"; exit 1; }

progs=(zt-info zt-train zt-estimate zt-profile zt-generate zt-tokenize zt_mpi_tests zt_gpu_tests bench_gpu_kernels bench_train_step)
if [ "${ZT_PACK_NO_BUILD:-0}" = 1 ]; then  # the pack test (tests/cli/test_gpu_pack.sh): BUILD as it is
  say "packing the existing build $BUILD"
else
  archs="${ZT_PACK_CUDA_ARCHS:-80;90}"
  say "building in $BUILD (Release, CUDA sm $archs, -march=x86-64-v3)"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DZT_CUDA=ON -DZT_NATIVE=OFF \
    "-DCMAKE_CXX_FLAGS=-march=x86-64-v3" "-DCMAKE_CUDA_ARCHITECTURES=$archs" >/dev/null
  cmake --build "$BUILD" -j"$(nproc)" --target "${progs[@]}"
fi

rm -rf "$PACK" "$PACK.tar.xz"
mkdir -p "$PACK"/{bin,lib/openmpi,lib/pmix,share,etc,tests/gpu,tests/cli}
manifest="$PACK/MANIFEST"
{
  echo "ZeroTensor GPU pack, built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "commit $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "nvcc: $(nvcc --version | tail -1)"
  echo "not packed, found on the target: cudart, cuBLAS/cuBLASLt, cuDNN, NCCL, the driver, glibc, libstdc++, libgcc_s"
} >"$manifest"

# ---- programs ----
for p in "${progs[@]}"; do
  f="$(find "$BUILD" -maxdepth 3 -type f -name "$p" -perm -u+x | head -1)"
  [ -n "$f" ] || { say "error: $p was not built in $BUILD"; exit 1; }
  strip --strip-unneeded -o "$PACK/bin/$p" "$f"
  echo "bin/$p <- ${f#"$ROOT"/}" >>"$manifest"
done
# OpenMPI's launcher (mpirun is orterun) and its daemon
ORTERUN="$(readlink -f "$(command -v mpirun)")"
cp "$ORTERUN" "$PACK/bin/mpirun"
cp "$(dirname "$ORTERUN")/orted" "$PACK/bin/orted"

# ---- OpenMPI and PMIx plugins, help texts, settings ----
OMPI_LIBDIR="$(ompi_info --path libdir --parsable | sed 's/^path:libdir://')"
OMPI_PKGLIBDIR="$(ompi_info --path pkglibdir --parsable | sed 's/^path:pkglibdir://')"
OMPI_PKGDATADIR="$(ompi_info --path pkgdatadir --parsable | sed 's/^path:pkgdatadir://')"
PMIX_PLUGINS="$(dirname "$(readlink -f "$(ldconfig -p | awk '/libpmix\.so\.2 /{print $NF; exit}')")")/pmix"
# Plugins for what this check does not use stay out: InfiniBand, UCX, OFI, PSM (large libraries),
# batch systems, MPI-IO and OpenSHMEM. OpenMPI skips a plugin that is not there. Ranks on one
# machine use the shared-memory (vader) and TCP transports, ob1, the collectives and the launch
# plugins, which all come along.
for f in "$OMPI_PKGLIBDIR"/*.so; do
  n="$(basename "$f")"
  [[ "$n" =~ _(ofi|ucx|openib|psm|psm2|slurm|flux|jsm|gridengine|romio321|monitoring)\.so$ ]] && continue
  [[ "$n" =~ ^mca_(io|fs|fbtl|fcoll|sharedfp|memheap|scoll|spml|sshmem|atomic)_ ]] && continue
  cp "$f" "$PACK/lib/openmpi/"
done
[ -d "$PMIX_PLUGINS" ] && cp "$PMIX_PLUGINS"/*.so "$PACK/lib/pmix/" 2>/dev/null || true
cp -r "$OMPI_PKGDATADIR" "$PACK/share/openmpi"
PMIX_DATA="$(dirname "$PMIX_PLUGINS")/../share/pmix"
[ -d "$PMIX_DATA" ] && cp -r "$PMIX_DATA" "$PACK/share/pmix" || true
cat >"$PACK/etc/openmpi-mca-params.conf" <<'EOF'
# The pack's OpenMPI settings (ranks on one machine): shared memory and TCP, no InfiniBand/UCX.
btl = self,vader,tcp
pml = ob1
mtl = ^ofi
osc = ^ucx,pt2pt
btl_base_warn_component_unused = 0
mca_base_component_show_load_errors = 0
EOF
# env.sh: source it to run the pack's programs (gpu-check.sh does); PACK is this folder.
cat >"$PACK/env.sh" <<'EOF'
# Points OpenMPI and PMIx at this folder (they look in their build-time prefix otherwise).
PACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PATH="$PACK/bin:$PATH"
export OPAL_PREFIX="$PACK" OPAL_BINDIR="$PACK/bin" OPAL_LIBDIR="$PACK/lib" OPAL_PKGLIBDIR="$PACK/lib/openmpi"
export OPAL_DATADIR="$PACK/share" OPAL_PKGDATADIR="$PACK/share/openmpi" OPAL_SYSCONFDIR="$PACK/etc"
export OMPI_MCA_mca_base_component_path="$PACK/lib/openmpi"
export OMPI_MCA_mca_base_param_files="$PACK/etc/openmpi-mca-params.conf"
export PMIX_MCA_mca_base_component_path="$PACK/lib/pmix" PMIX_INSTALL_PREFIX="$PACK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# the pack has no zlib plugin path PMIx accepts; its warning about that says nothing about the runs
export PMIX_MCA_pcompress_base_silence_warning=1
EOF

# ---- the shared libraries: everything the programs and plugins load, but CUDA's and the C runtime ----
is_system() {  # libraries the target must provide itself
  case "$1" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libutil.so*|libresolv.so*) return 0 ;;
    libstdc++.so*|libgcc_s.so*) return 0 ;;
    libcuda.so*|libcudart.so*|libcublas.so*|libcublasLt.so*|libcudnn*|libnccl.so*|libnvidia-*) return 0 ;;
  esac
  return 1
}
declare -A seen=()
queue=("$PACK"/bin/* "$PACK"/lib/openmpi/*.so "$PACK"/lib/pmix/*.so)
while ((${#queue[@]})); do
  f="${queue[0]}"; queue=("${queue[@]:1}")
  while read -r name path; do
    is_system "$name" && continue
    [ -n "${seen[$name]:-}" ] && continue
    seen[$name]=1
    [ -f "$path" ] || { say "error: $f needs $name, which is not found here"; exit 1; }
    cp -L "$path" "$PACK/lib/$name"
    echo "lib/$name <- $(readlink -f "$path")" >>"$manifest"
    queue+=("$PACK/lib/$name")
  done < <(ldd "$f" 2>/dev/null | awk '/=>/ && $3 ~ /^\// {print $1, $3}')
done
# OpenMPI's own libraries are found through its libdir by the plugins (libmca_common_*)
for f in "$OMPI_LIBDIR"/libmca_common_sm.so*; do
  [ -e "$f" ] && cp -L "$f" "$PACK/lib/$(basename "$f")"
done

# ---- RUNPATHs: bin/ -> ../lib; lib/ -> itself; plugins -> .. ----
for f in "$PACK"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$PACK"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$f"; done
for f in "$PACK"/lib/openmpi/*.so "$PACK"/lib/pmix/*.so; do [ -e "$f" ] && patchelf --set-rpath '$ORIGIN/..' "$f"; done

# ---- tests, data, configs ----
cp "$ROOT"/tests/gpu/*.sh "$ROOT"/tests/gpu/tests.cmake "$PACK/tests/gpu/"
cp "$ROOT"/tests/cli/common.sh "$PACK/tests/cli/"
cp -r "$ROOT/data" "$ROOT/configs" "$PACK/"
mkdir -p "$PACK/bench" && cp "$ROOT"/bench/{torch_gpt2_gpu,torch_llama_gpu,hf_client,ncu_kernel_shares,offload_ladder}.py "$PACK/bench/"
cp "$ROOT/scripts/gpu-check.sh" "$PACK/"

# ---- the peers: llm.c's GPT-2 trainer (train_gpt2cu), built here so no GPU minute builds it ----
# ZT_LLMC_PEER: the peer's folder (default ../shared/peers/llm.c; its README says what it is);
# ZT_LLMC_ARCH: the one compute capability it is built for (default 90: H100, H200). The build is
# cached in BUILD_DIR-llmc. No peer folder, or ZT_PACK_NO_PEERS=1 (the pack test): no peer packed,
# and gpu-check.sh records its part as skipped.
LLMC_SRC="${ZT_LLMC_PEER:-$ROOT/../shared/peers/llm.c}"
if [ "${ZT_PACK_NO_PEERS:-0}" != 1 ] && [ -f "$LLMC_SRC/run.sh" ]; then
  LLMC_WORK="$BUILD-llmc"
  bash "$LLMC_SRC/run.sh" --build-only --arch "${ZT_LLMC_ARCH:-90}" --work "$LLMC_WORK"
  mkdir -p "$PACK/peers"
  cp -r "$LLMC_SRC" "$PACK/peers/llm.c"
  mkdir -p "$PACK/peers/llm.c/bin"
  cp "$LLMC_WORK/train_gpt2cu" "$LLMC_WORK/build.key" "$PACK/peers/llm.c/bin/"
  echo "peers/llm.c <- $(realpath "$LLMC_SRC") (train_gpt2cu built for sm_${ZT_LLMC_ARCH:-90})" >>"$manifest"
else
  say "no llm.c peer packed (${LLMC_SRC})"
fi

du_mib=$(( $(du -sk "$PACK" | cut -f1) / 1024 ))
if [ "${ZT_PACK_NO_ARCHIVE:-0}" = 1 ]; then say "folder: $PACK ($du_mib MiB); no archive"; exit 0; fi
say "folder: $PACK ($du_mib MiB); compressing"
tar -C "$(dirname "$PACK")" -cf - "$(basename "$PACK")" | xz -9e --lzma2=dict=64MiB -T1 >"$PACK.tar.xz"
ar_mib=$(( $(stat -c %s "$PACK.tar.xz") / 1048576 ))
echo "folder $du_mib MiB, archive $ar_mib MiB" >>"$manifest"
if ((ar_mib >= MAX_MIB)); then say "error: $PACK.tar.xz is $ar_mib MiB, over the $MAX_MIB MiB that may travel"; exit 1; fi
say "archive: $PACK.tar.xz ($ar_mib MiB)"
