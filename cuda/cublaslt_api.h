// defines: CublasLtApi, cublaslt() — cuBLASLt's entry points, resolved with dlopen/dlsym the
//          first time a CUDA GEMM is made, instead of linking libcublasLt at build time.
//
// Why: loading libcublasLt runs its static initializers, which write ~84 MiB of its .bss, and
// relocates ~60 MiB of its pages. Linked at build time, every process of a CUDA build paid
// ~146 MiB of resident memory at start — a CPU-only `zt-train` of gpt2-nano peaked at 207 MiB
// instead of ~60 MiB (bench/results/rss.md, measured with /proc/PID/smaps). A process that never
// makes a CudaGemm (every CPU run) now never maps the library.
//
// The library is "libcublasLt.so.<CUBLAS_VER_MAJOR>", the major version of the headers we
// compiled against, found the way the dynamic linker finds any library (the executable's
// RUNPATH, LD_LIBRARY_PATH, ld.so.cache). If it cannot be loaded, or lacks one of the entry
// points, cublaslt() throws zt::Error naming the library, the symbol and dlerror()'s reason.
// Thread-safe: resolved once (a function-local static).
#pragma once
#include <cublasLt.h>

namespace zt {

// One pointer per cuBLASLt function ZeroTensor calls (cuda/gemm.cpp), typed by the header's own
// declarations, so a mismatch with the headers does not compile.
struct CublasLtApi {
  decltype(&::cublasLtCreate) Create;
  decltype(&::cublasLtDestroy) Destroy;
  decltype(&::cublasLtGetStatusName) GetStatusName;
  decltype(&::cublasLtGetStatusString) GetStatusString;
  decltype(&::cublasLtMatmul) Matmul;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
  decltype(&::cublasLtMatmulDescCreate) MatmulDescCreate;
  decltype(&::cublasLtMatmulDescDestroy) MatmulDescDestroy;
  decltype(&::cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
  decltype(&::cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
  decltype(&::cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
  decltype(&::cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
  decltype(&::cublasLtMatrixLayoutSetAttribute) MatrixLayoutSetAttribute;
};

// The library's file name, e.g. "libcublasLt.so.13".
const char* cublaslt_library_name();

// Loads the library on the first call and returns its entry points. Throws zt::Error (see above).
const CublasLtApi& cublaslt();

}  // namespace zt
