// defines: gemm_libs_detail::sgemm_openblas — core/kernels/gemm_libs.h's entry for OpenBLAS
//          (Debian's OpenMP build, cblas_sgemm).
#include <cblas.h>
#include <omp.h>

#include "core/kernels/gemm_libs.h"

namespace zt::gemm_libs_detail {

// Inside an OpenMP parallel region the OpenMP build runs on the calling thread; outside one it
// uses openblas_get_num_threads() threads: set for the call when the caller asks for another
// count, and put back (openblas_set_num_threads also sets OpenMP's count, which our kernels read).
void sgemm_openblas(int threads, bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                    const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const int before = openblas_get_num_threads();
  const bool set = !omp_in_parallel() && before != threads;
  if (set) openblas_set_num_threads(threads);
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B,
              static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
  if (set) openblas_set_num_threads(before);
}

}  // namespace zt::gemm_libs_detail
