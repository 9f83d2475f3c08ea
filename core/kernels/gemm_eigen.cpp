// defines: gemm_libs_detail::sgemm_eigen — core/kernels/gemm_libs.h's entry for Eigen 3.4's
//          matrix product (header-only; compiled with this build's -march, OpenMP-parallel).
#include <Eigen/Core>

#include "core/kernels/gemm_libs.h"

namespace zt::gemm_libs_detail {

namespace {
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstView = Eigen::Map<const RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
using View = Eigen::Map<RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
}  // namespace

// Eigen parallelizes a product over omp_get_max_threads() threads outside a parallel region and
// runs on the calling thread inside one; the count is set for the call and put back.
void sgemm_eigen(int threads, bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                 const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const OmpThreadsForCall scope(threads);
  // A (M, K) or, transposed, stored (K, M); B (K, N) or stored (N, K).
  ConstView a(A, transA ? K : M, transA ? M : K, Eigen::OuterStride<>(lda));
  ConstView b(B, transB ? N : K, transB ? K : N, Eigen::OuterStride<>(ldb));
  View c(C, M, N, Eigen::OuterStride<>(ldc));
  if (beta == 0.0f) c.setZero();  // BLAS semantics: C's old contents (NaN included) ignored
  else if (beta != 1.0f) c *= beta;
  if (!transA && !transB) c.noalias() += alpha * a * b;
  else if (!transA) c.noalias() += alpha * a * b.transpose();
  else if (!transB) c.noalias() += alpha * a.transpose() * b;
  else c.noalias() += alpha * a.transpose() * b.transpose();
}

}  // namespace zt::gemm_libs_detail
