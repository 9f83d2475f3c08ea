// defines: gemm_libs_detail::OmpThreadsForCall (constructor, destructor), gemm_lib_name, parse_gemm_lib,
//          gemm_lib_built, gemm_lib_splits, gemm_libs_built, gemm_lib, set_gemm_lib, cblas_sgemm_provider,
//          sgemm_serial and 1 more (core/kernels/gemm_libs.h); file-local: entry, build_default, current,
//          need
#include "core/kernels/gemm_libs.h"

#include <dlfcn.h>
#include <omp.h>

#include "core/check.h"

namespace zt {

namespace {
using gemm_libs_detail::SgemmFn;

// nullptr: not compiled into this build.
SgemmFn entry(GemmLib lib) {
  switch (lib) {
    case GemmLib::openblas: return gemm_libs_detail::sgemm_openblas;
    case GemmLib::eigen: return gemm_libs_detail::sgemm_eigen;
    case GemmLib::blis:
#ifdef ZT_HAVE_BLIS
      return gemm_libs_detail::sgemm_blis;
#else
      return nullptr;
#endif
    case GemmLib::onednn:
#ifdef ZT_HAVE_ONEDNN
      return gemm_libs_detail::sgemm_onednn;
#else
      return nullptr;
#endif
  }
  return nullptr;
}

GemmLib build_default() {
#ifdef ZT_GEMM_DEFAULT
  return parse_gemm_lib(ZT_GEMM_DEFAULT);
#else
  return GemmLib::openblas;
#endif
}

GemmLib& current() {
  static GemmLib lib = build_default();
  return lib;
}

SgemmFn need(GemmLib lib) {
  SgemmFn f = entry(lib);
  ZT_CHECK(f != nullptr, "gemm library '", gemm_lib_name(lib),
           "' is not in this build (CMake did not find it; scripts/install-deps.sh installs BLIS and oneDNN)");
  return f;
}
}  // namespace

gemm_libs_detail::OmpThreadsForCall::OmpThreadsForCall(int threads)
    : before_(omp_get_max_threads()), set_(!omp_in_parallel() && before_ != threads) {
  if (set_) omp_set_num_threads(threads);
}
gemm_libs_detail::OmpThreadsForCall::~OmpThreadsForCall() {
  if (set_) omp_set_num_threads(before_);
}

const char* gemm_lib_name(GemmLib lib) {
  switch (lib) {
    case GemmLib::openblas: return "openblas";
    case GemmLib::blis: return "blis";
    case GemmLib::onednn: return "onednn";
    case GemmLib::eigen: return "eigen";
  }
  return "?";
}

GemmLib parse_gemm_lib(const std::string& s) {
  for (GemmLib l : {GemmLib::openblas, GemmLib::blis, GemmLib::onednn, GemmLib::eigen})
    if (s == gemm_lib_name(l)) return l;
  ZT_THROW("unknown gemm library '", s, "': expected openblas, blis, onednn or eigen");
}

bool gemm_lib_built(GemmLib lib) { return entry(lib) != nullptr; }

bool gemm_lib_splits(GemmLib lib) { return lib != GemmLib::onednn; }

std::vector<GemmLib> gemm_libs_built() {
  std::vector<GemmLib> out;
  for (GemmLib l : {GemmLib::openblas, GemmLib::blis, GemmLib::onednn, GemmLib::eigen})
    if (gemm_lib_built(l)) out.push_back(l);
  return out;
}

GemmLib gemm_lib() { return current(); }

void set_gemm_lib(GemmLib lib) {
  need(lib);
  current() = lib;
}

std::string cblas_sgemm_provider() {
  Dl_info info{};
  void* sym = dlsym(RTLD_DEFAULT, "cblas_sgemm");
  return sym && dladdr(sym, &info) && info.dli_fname ? info.dli_fname : "unknown";
}

void sgemm_serial(GemmLib lib, bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  need(lib)(1, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void sgemm_threaded(GemmLib lib, int threads, bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                    float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                    int64_t ldc) {
  ZT_CHECK(threads >= 1, "sgemm_threaded: threads ", threads);
  need(lib)(threads, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace zt
