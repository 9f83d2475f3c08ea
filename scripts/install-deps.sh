#!/usr/bin/env bash
# Installs the Debian packages ZeroTensor needs to build and test, if any are missing, and the
# pinned npm packages the tests use (into third_party/npm/, ignored by git): tiktoken, which the
# tokenizer tests compare against, and puppeteer-core, which drives Chromium for the trace page.
# Safe to run again: it does nothing when everything is present. Needs root (or sudo) for apt.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

pkgs=(
  cmake g++ make ccache          # toolchain (ccache keeps rebuilds fast)
  libeigen3-dev                  # Eigen 3.4
  libopenblas-openmp-dev         # OpenBLAS, OpenMP build (GEMMs; see CMakeLists.txt)
  libblis-openmp-dev libdnnl-dev # BLIS and oneDNN: the other float32 GEMM libraries (core/kernels/gemm_libs.h, CMake ZT_GEMM)
  ocl-icd-opencl-dev opencl-c-headers  # OpenCL: Debian's oneDNN CMake config (dnnl-config.cmake) requires it,
                                 # though libdnnl-dev does not depend on it; without it configure stops
  nlohmann-json3-dev             # JSON (configs, checkpoint meta, logs)
  libcli11-dev                   # command lines
  catch2                         # unit tests (Catch2 v2)
  python3                        # data/make_corpus.sh statistics, CLI tests
  libopenmpi-dev openmpi-bin     # OpenMPI: dist/ (the MPI process group), mpirun for multi-rank runs
  pkg-config liburing-dev        # io_uring: the NVMe tier's asynchronous IO (zero/aio_engine.cpp), found by pkg-config
  fio                            # the reference for bench/nvme.sh (NVMe bandwidth through io_uring)
  gnuplot-nox                    # bench/paper.sh: the plots of bench/results/zero_paper.md (PNG)
  iproute2                       # scripts/cluster.sh: the cluster in a box (ip netns, veth, bridge, tc);
                                 # unshare and nsenter come with util-linux (essential)
  patchelf                       # scripts/gpu-pack.sh: the packed binaries and libraries find each other ($ORIGIN)
  clang libclang-rt-14-dev libomp-dev  # scripts/fuzz.sh: libFuzzer, ASan, UBSan and OpenMP under clang
  clang-format                   # scripts/check-format.sh (CI): the changed lines against .clang-format
  libpcre2-dev                   # PCRE2: GPT-2's pre-tokenization regex, Unicode properties (formats/bpe_tokenizer.cpp)
  libsentencepiece-dev sentencepiece  # SentencePiece models (formats/sentencepiece_tokenizer.cpp); spm_train for tests
  python3-regex                  # tests/bpe_reference.py: the independent BPE reference (\p{L} in Python)
  chromium                       # tests/cli/test_trace_page.sh: scripts/trace_page.py's page opened in a real
                                 # browser (headless, offline), driven by npm's puppeteer-core below
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm (tests/tiktoken_reference.mjs runs OpenAI's tiktoken, the reference for tiktoken-family
# tokenizer.json): Debian's nodejs and npm where the commands are missing. Not by package name: a
# machine may have them from elsewhere (NodeSource's nodejs bundles npm and conflicts with Debian's).
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]} == 0)); then
  echo "[install-deps] all packages present" >&2
else
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  echo "[install-deps] installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >&2
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# npm packages, pinned, as the user who runs this script (no sudo): they live in the source tree,
# like a build directory. tiktoken: tests/test_tiktoken.cpp finds it here through CMake's
# ZT_TIKTOKEN_DIR. puppeteer-core (the library alone, no browser download): tests/trace_page_check.mjs
# drives Debian's chromium with it. Installed together: `npm install` into a prefix without a
# package.json removes the packages it was not given, so installing one alone would drop the other.
TIKTOKEN_VERSION=1.0.22
PUPPETEER_VERSION=24.43.1
NPM_DIR="$ROOT/third_party/npm"
npm_version() { node -p "require('$NPM_DIR/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [ "$(npm_version tiktoken)" = "$TIKTOKEN_VERSION" ] && [ "$(npm_version puppeteer-core)" = "$PUPPETEER_VERSION" ]; then
  echo "[install-deps] npm tiktoken $TIKTOKEN_VERSION and puppeteer-core $PUPPETEER_VERSION present in $NPM_DIR" >&2
else
  echo "[install-deps] installing npm tiktoken $TIKTOKEN_VERSION and puppeteer-core $PUPPETEER_VERSION into $NPM_DIR" >&2
  mkdir -p "$NPM_DIR"
  npm install --prefix "$NPM_DIR" --no-save --no-audit --no-fund --loglevel=error \
    "tiktoken@$TIKTOKEN_VERSION" "puppeteer-core@$PUPPETEER_VERSION" >&2
fi
