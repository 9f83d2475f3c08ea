// defines: gemm (core/kernels/gemm.h); file-local: check_dims, blas_call
#include "core/kernels/gemm.h"

#include <cblas.h>

#include <omp.h>

#include <algorithm>
#include <climits>
#include <type_traits>

#include "core/check.h"
#include "core/kernels/gemm_libs.h"

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

// One BLAS call: on the calling thread inside a parallel region (every library of gemm_libs.h
// runs single-threaded there), on the library's own `threads` threads outside one.
template <class T>
void blas_call(int threads, bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
               const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  const auto ta = transA ? CblasTrans : CblasNoTrans, tb = transB ? CblasTrans : CblasNoTrans;
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  const int la = static_cast<int>(lda < 1 ? 1 : lda), lb = static_cast<int>(ldb < 1 ? 1 : ldb);
  if (M == 1 && K > 0) {
    // One row of C (a decode step's linear: x (1, in) w^T): a GEMV. OpenBLAS's sgemm packs all
    // of B for M = 1 (a copy of the whole weight per call: 70% of a gpt-mini decode step), gemv
    // reads it once. c (N) = alpha op(B)^T a + beta c, with a's K elements lda apart when transA.
    // beta == 0 must ignore C's old contents (NaN included, as the GEMM promises): zeroed first.
    if (beta == T(0)) std::fill(C, C + N, T(0));
    const int inc = transA ? la : 1;
    // op(B) = B^T, B (N, K) row-major: c = B a. op(B) = B (K, N): c = B^T a.
    const auto gt = transB ? CblasNoTrans : CblasTrans;
    const int rows = transB ? n : k, cols = transB ? k : n;
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemv(CblasRowMajor, gt, rows, cols, alpha, B, lb, A, inc, beta, C, 1);
    else
      cblas_dgemv(CblasRowMajor, gt, rows, cols, alpha, B, lb, A, inc, beta, C, 1);
    return;
  }
  if constexpr (std::is_same_v<T, float>)  // the build's float32 library (core/kernels/gemm_libs.h)
    sgemm_threaded(gemm_lib(), threads, transA, transB, M, N, K, alpha, A, la, B, lb, beta, C, ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, A, la, B, lb, beta, C, static_cast<int>(ldc));
}

// Below this many multiply-adds a GEMM stays on one thread (thread start-up would dominate).
constexpr double kParallelMacs = 1 << 21;
}  // namespace

// Threads split C into contiguous blocks of rows (or of columns when N > M), each computed by one
// single-threaded BLAS call. Measured on the 2-core AVX2 machine (bench/results/gemm.md): at
// n = 1024 this reaches ~85% of the FMA ceiling on 2 threads where OpenBLAS's own threading reached
// 67%; every element is still produced by one thread in one fixed order (deterministic). A library
// whose own threading is faster (gemm_lib_splits false: oneDNN) gets the whole call instead; its
// partition is fixed for a thread count, so results stay reproducible (tests/test_gemm_libs.cpp).
template <class T>
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  check_dims(M, N, K, lda, ldb, ldc, transA, transB);
  if (M == 0 || N == 0) return;
  const int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool split_rows = M >= N;
  const int64_t extent = split_rows ? M : N;
  // A library that threads a GEMM better than our split gets the whole call (gemm_lib_splits).
  const bool library_threads = std::is_same_v<T, float> && !gemm_lib_splits(gemm_lib());
  if (nt <= 1 || library_threads || static_cast<double>(M) * N * K < kParallelMacs || extent < 16 * nt) {
    blas_call(nt, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    // Block boundaries on multiples of 16 (whole micro-kernel tiles) where possible.
    const int64_t per = (extent / nt + 15) / 16 * 16;
    const int64_t lo = std::min<int64_t>(extent, t * per), hi = t == nt - 1 ? extent : std::min<int64_t>(extent, lo + per);
    if (hi > lo) {
      if (split_rows) {  // C rows [lo, hi) = A rows [lo, hi) @ B
        const T* a = transA ? A + lo : A + lo * lda;
        blas_call(1, transA, transB, hi - lo, N, K, alpha, a, lda, B, ldb, beta, C + lo * ldc, ldc);
      } else {  // C columns [lo, hi) = A @ B columns [lo, hi)
        const T* b = transB ? B + lo * ldb : B + lo;
        blas_call(1, transA, transB, M, hi - lo, K, alpha, A, lda, b, ldb, beta, C + lo, ldc);
      }
    }
  }
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                          int64_t, float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);

}  // namespace zt
