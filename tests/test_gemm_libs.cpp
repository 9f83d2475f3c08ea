// defines: 3 Catch2 test cases tagged [core], [gemm]; helpers: matrix, reference
//
// The float32 GEMM libraries of core/kernels/gemm_libs.h, each against a float64 reference: every
// transpose combination, row strides wider than the rows, alpha and beta (beta = 0 ignores NaN in
// C, beta = 1 accumulates), and zt::gemm's thread split through each library (close to the
// reference on 1 and 2 threads, bitwise the same run to run). Not bitwise the same between 1 and 2
// threads: a block of half the rows may take another kernel path (OpenBLAS's small-matrix kernels
// differ from its blocked ones), which is why gemm.h promises reproducibility per thread count.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "core/kernels/gemm.h"
#include "core/kernels/gemm_libs.h"
#include "core/parallel.h"

using namespace zt;

namespace {

// A (rows, cols) row-major with row stride ld >= cols, filled with a fixed pattern in [-1, 1].
std::vector<float> matrix(int64_t rows, int64_t ld, uint32_t seed) {
  std::vector<float> m(static_cast<size_t>(rows * ld));
  uint32_t s = seed;
  for (float& x : m) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>((s >> 8) * (2.0 / 16777216.0) - 1.0);
  }
  return m;
}

// C = alpha op(A) op(B) + beta C0 in float64.
std::vector<double> reference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const float* A,
                              int64_t lda, const float* B, int64_t ldb, double beta, const float* C0, int64_t ldc) {
  std::vector<double> C(static_cast<size_t>(M * ldc));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t p = 0; p < K; ++p) s += double(ta ? A[p * lda + i] : A[i * lda + p]) * (tb ? B[j * ldb + p] : B[p * ldb + j]);
      C[i * ldc + j] = alpha * s + (beta == 0 ? 0.0 : beta * C0[i * ldc + j]);
    }
  return C;
}

}  // namespace

TEST_CASE("every built float32 GEMM library matches a float64 reference", "[core][gemm]") {
  REQUIRE(gemm_lib_built(GemmLib::openblas));
  REQUIRE(gemm_lib_built(GemmLib::eigen));
  const int64_t M = 37, N = 29, K = 53;  // odd sizes: the libraries' edge tiles
  for (GemmLib lib : gemm_libs_built())
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float beta : {0.0f, 1.0f}) {
          INFO("library " << gemm_lib_name(lib) << " transA " << ta << " transB " << tb << " beta " << beta);
          const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
          const auto A = matrix(ta ? K : M, lda, 1), B = matrix(tb ? N : K, ldb, 2);
          auto C = matrix(M, ldc, 3);
          if (beta == 0) C.assign(C.size(), std::numeric_limits<float>::quiet_NaN());  // must be ignored
          const auto want = reference(ta, tb, M, N, K, 0.5, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
          for (int threads : {1, 2}) {
            auto got = C;
            sgemm_threaded(lib, threads, ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, beta, got.data(), ldc);
            double worst = 0;
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = 0; j < N; ++j) worst = std::max(worst, std::abs(got[i * ldc + j] - want[i * ldc + j]));
            CHECK(worst < 1e-5);
            for (int64_t i = 0; i < M; ++i)  // the padding between rows is not written
              for (int64_t j = N; j < ldc; ++j) CHECK(std::isnan(got[i * ldc + j]) == std::isnan(C[i * ldc + j]));
          }
        }
}

TEST_CASE("zt::gemm through each library: right on 1 and 2 threads, bitwise reproducible", "[core][gemm]") {
  const GemmLib before = gemm_lib();
  const int before_threads = num_threads();
  const int64_t M = 256, N = 96, K = 160;  // above zt::gemm's parallel threshold: the split runs
  const auto A = matrix(M, K, 4), B = matrix(N, K, 5);
  for (GemmLib lib : gemm_libs_built()) {
    INFO("library " << gemm_lib_name(lib));
    set_gemm_lib(lib);
    const auto want = reference(false, true, M, N, K, 1.0, A.data(), K, B.data(), K, 0.0, nullptr, N);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      std::vector<float> c1(M * N), c2(M * N, std::numeric_limits<float>::quiet_NaN());
      gemm<float>(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, c1.data(), N);
      gemm<float>(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, c2.data(), N);
      CHECK(c1 == c2);
      double worst = 0;
      for (int64_t i = 0; i < M * N; ++i) worst = std::max(worst, std::abs(c1[i] - want[i]));
      CHECK(worst < 1e-4);
      // a weight gradient's shape: op(A) = A^T with A (K2, M2), long K (split across threads
      // by a library that threads itself): still the same bits run to run
      const int64_t M2 = 96, N2 = 64, K2 = 1024;
      const auto A2 = matrix(K2, M2, 6), B2 = matrix(K2, N2, 7);
      std::vector<float> d1(M2 * N2), d2(M2 * N2);
      gemm<float>(true, false, M2, N2, K2, 1.0f, A2.data(), M2, B2.data(), N2, 0.0f, d1.data(), N2);
      gemm<float>(true, false, M2, N2, K2, 1.0f, A2.data(), M2, B2.data(), N2, 0.0f, d2.data(), N2);
      CHECK(d1 == d2);
    }
  }
  set_gemm_lib(before);
  set_num_threads(before_threads);
}

TEST_CASE("gemm library names: parsed back, and an unknown one is an error naming it", "[core][gemm]") {
  for (GemmLib lib : {GemmLib::openblas, GemmLib::blis, GemmLib::onednn, GemmLib::eigen})
    CHECK(parse_gemm_lib(gemm_lib_name(lib)) == lib);
  CHECK_THROWS_WITH(parse_gemm_lib("mkl"), Catch::Contains("'mkl'") && Catch::Contains("openblas, blis, onednn or eigen"));
}
