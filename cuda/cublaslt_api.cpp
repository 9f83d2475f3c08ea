// defines: cublaslt_library_name, cublaslt (cuda/cublaslt_api.h); file-local: resolve, load
#include "cuda/cublaslt_api.h"

#include <dlfcn.h>

#include "core/check.h"

namespace zt {

#define ZT_STR2(x) #x
#define ZT_STR(x) ZT_STR2(x)

const char* cublaslt_library_name() { return "libcublasLt.so." ZT_STR(CUBLAS_VER_MAJOR); }

namespace {

template <class Fn>
void resolve(void* lib, Fn& fn, const char* symbol) {
  dlerror();  // clear a stale error: dlsym may legitimately return null only with dlerror() set
  fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
  if (!fn) {
    const char* why = dlerror();
    ZT_THROW(cublaslt_library_name(), " has no entry point ", symbol, ": ", why ? why : "null symbol",
             " (ZeroTensor was compiled against the cuBLASLt ", CUBLAS_VER_MAJOR, ".", CUBLAS_VER_MINOR,
             " headers)");
  }
}

CublasLtApi load() {
  // RTLD_LOCAL: the symbols stay private to our pointers; RTLD_NOW: a missing dependency fails
  // here, with dlerror()'s text, not at the first call.
  void* lib = dlopen(cublaslt_library_name(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    ZT_THROW("cannot load ", cublaslt_library_name(), " (cuBLASLt, needed for GEMMs on a CUDA device): ",
             why ? why : "dlopen failed",
             ". Put the CUDA toolkit's lib directory on LD_LIBRARY_PATH (docs/cuda.md).");
  }
  // The handle is never closed: the pointers live for the process, as a linked library's would.
  CublasLtApi a{};
  resolve(lib, a.Create, "cublasLtCreate");
  resolve(lib, a.Destroy, "cublasLtDestroy");
  resolve(lib, a.GetStatusName, "cublasLtGetStatusName");
  resolve(lib, a.GetStatusString, "cublasLtGetStatusString");
  resolve(lib, a.Matmul, "cublasLtMatmul");
  resolve(lib, a.MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
  resolve(lib, a.MatmulDescCreate, "cublasLtMatmulDescCreate");
  resolve(lib, a.MatmulDescDestroy, "cublasLtMatmulDescDestroy");
  resolve(lib, a.MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
  resolve(lib, a.MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
  resolve(lib, a.MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
  resolve(lib, a.MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
  resolve(lib, a.MatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
  resolve(lib, a.MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
  resolve(lib, a.MatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute");
  return a;
}

}  // namespace

const CublasLtApi& cublaslt() {
  static const CublasLtApi api = load();  // a throwing initializer is retried by the next call
  return api;
}

}  // namespace zt
