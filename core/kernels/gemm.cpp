#include "core/kernels/gemm.h"

#include <cblas.h>

#include <climits>
#include <type_traits>

#include "core/check.h"

namespace zt {

namespace {
// cblas takes blasint (32-bit in the Debian build): refuse sizes that would wrap.
void check_dims(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc, bool ta, bool tb) {
  ZT_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm: negative size M=", M, " N=", N, " K=", K);
  ZT_CHECK(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX && ldc <= INT_MAX,
           "gemm: size exceeds 32-bit BLAS int: M=", M, " N=", N, " K=", K);
  ZT_CHECK(lda >= (ta ? M : K) || (ta ? M : K) == 0, "gemm: lda=", lda, " too small");
  ZT_CHECK(ldb >= (tb ? K : N) || (tb ? K : N) == 0, "gemm: ldb=", ldb, " too small");
  ZT_CHECK(ldc >= N || N == 0, "gemm: ldc=", ldc, " < N=", N);
}
}  // namespace

template <class T>
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  check_dims(M, N, K, lda, ldb, ldc, transA, transB);
  if (M == 0 || N == 0) return;
  const auto ta = transA ? CblasTrans : CblasNoTrans, tb = transB ? CblasTrans : CblasNoTrans;
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  const int la = static_cast<int>(lda < 1 ? 1 : lda), lb = static_cast<int>(ldb < 1 ? 1 : ldb);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, A, la, B, lb, beta, C, static_cast<int>(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, A, la, B, lb, beta, C, static_cast<int>(ldc));
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                          int64_t, float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);

}  // namespace zt
