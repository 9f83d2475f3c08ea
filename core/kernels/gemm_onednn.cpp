// defines: gemm_libs_detail::sgemm_onednn — core/kernels/gemm_libs.h's entry for oneDNN
//          (Debian's libdnnl-dev, dnnl_sgemm: row-major, OpenMP runtime). Compiled only when
//          CMake found oneDNN.
#include <oneapi/dnnl/dnnl.h>

#include "core/check.h"
#include "core/kernels/gemm_libs.h"

namespace zt::gemm_libs_detail {

// oneDNN's OpenMP runtime runs on the calling thread inside a parallel region and on
// omp_get_max_threads() threads outside one: that count is set for the call and put back.
void sgemm_onednn(int threads, bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const OmpThreadsForCall scope(threads);
  const dnnl_status_t st =
      dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  ZT_CHECK(st == dnnl_success, "gemm (oneDNN dnnl_sgemm): status ", static_cast<int>(st), " for M=", M, " N=", N,
           " K=", K);
}

}  // namespace zt::gemm_libs_detail
