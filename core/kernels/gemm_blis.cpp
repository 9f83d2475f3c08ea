// defines: gemm_libs_detail::sgemm_blis — core/kernels/gemm_libs.h's entry for BLIS (Debian's
//          libblis-openmp-dev, its typed API bli_sgemm_ex). Compiled only when CMake found BLIS.
//
// BLIS takes a row stride and a column stride per matrix, so a row-major matrix is (rs = ld,
// cs = 1) and no transposition trick is needed. The thread count goes in a runtime object
// (rntm_t) per call: nothing global changes.
#include <blis.h>

#include "core/kernels/gemm_libs.h"

namespace zt::gemm_libs_detail {

void sgemm_blis(int threads, bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  rntm_t rntm = BLIS_RNTM_INITIALIZER;
  bli_rntm_set_num_threads(threads, &rntm);
  // BLIS's typed API takes non-const pointers; it does not write A or B.
  bli_sgemm_ex(transA ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, transB ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, M, N, K,
               &alpha, const_cast<float*>(A), lda, 1, const_cast<float*>(B), ldb, 1, &beta, C, ldc, 1, nullptr,
               &rntm);
}

}  // namespace zt::gemm_libs_detail
