// defines: gemm — a typed row-major GEMM: float32 through the build's library (core/kernels/gemm_libs.h),
//          float64 through OpenBLAS cblas_dgemm.
//
// C (M, N) = alpha * op(A) (M, K) @ op(B) (K, N) + beta * C, all row-major:
//   op(A) = A (M, K) with lda >= K       when !transA,  A^T where A is (K, M), lda >= M when transA
//   op(B) = B (K, N) with ldb >= N       when !transB,  B^T where B is (N, K), ldb >= K when transB
//   C: ldc >= N.
// Outside an OpenMP parallel region the GEMM is split over all threads (one block of C each);
// inside one it runs on the calling thread (every library is an OpenMP build), so callers may
// loop over heads/batches in parallel. For a fixed thread count the results are bitwise identical
// run to run (tests/test_gemm_libs.cpp). beta == 0 ignores C's old contents (NaN included), as
// BLAS specifies. M == 1 (a decode step's linear) is a GEMV through OpenBLAS for every library.
#pragma once
#include <cstdint>

namespace zt {

template <class T>
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

extern template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                 const float*, int64_t, float, float*, int64_t);
extern template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                                  const double*, int64_t, double, double*, int64_t);

}  // namespace zt
