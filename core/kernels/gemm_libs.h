// defines: GemmLib — the float32 GEMM libraries ZeroTensor can run on the CPU (OpenBLAS, BLIS,
//          oneDNN, Eigen); sgemm_serial / sgemm_threaded — one row-major sgemm through a chosen
//          library; gemm_lib / set_gemm_lib — the library zt::gemm<float> uses.
//
// Why several: a training step is ~80% GEMM (bench/results/train_step.md's profile), so the
// library decides the step time. bench/gemm_libs.cpp measures each on the model's own shapes
// (bench/results/gemm_libs.md); the build's default (CMake ZT_GEMM) is the measured winner.
// float64 GEMMs (gradient checks) and one-row products (GEMVs, decoding) always use OpenBLAS.
//
// Shapes as zt::gemm (core/kernels/gemm.h): C (M, N) = alpha op(A) op(B) + beta C, row-major,
// op(A) (M, K) (A is (K, M) when transA), op(B) (K, N) (B is (N, K) when transB); lda, ldb, ldc
// the row strides. beta == 0 ignores C's old contents.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zt {

enum class GemmLib { openblas, blis, onednn, eigen };

const char* gemm_lib_name(GemmLib lib);       // "openblas", "blis", "onednn", "eigen"
GemmLib parse_gemm_lib(const std::string& s);  // the names above; anything else: an error naming it
bool gemm_lib_built(GemmLib lib);              // compiled into this build (BLIS and oneDNN optional)
std::vector<GemmLib> gemm_libs_built();

// The library zt::gemm<float> calls. Starts as the build's default (CMake -DZT_GEMM=...);
// set_gemm_lib is for benchmarks and tests that compare libraries in one process (not
// thread-safe against GEMMs running at the same time).
GemmLib gemm_lib();
void set_gemm_lib(GemmLib lib);

// The file that provides cblas_sgemm to this process: OpenBLAS is linked first, and BLIS carries
// a cblas_sgemm of its own, so zt-info and bench_gemm_libs print which one the loader bound.
std::string cblas_sgemm_provider();

// How zt::gemm<float> spreads one GEMM over threads with this library: true = its own split of C
// into one row (or column) block per thread, each a single-threaded call (OpenBLAS, BLIS, Eigen:
// at n = 1024 OpenBLAS's own threading reached 67% of the FMA ceiling, the split 90%); false =
// one call threaded by the library (oneDNN: its own threading beat the split on every training
// shape, by up to 2x on the transposed-A products of the weight gradients). Measured in
// bench/results/gemm_libs.md ("split" and "native" columns).
bool gemm_lib_splits(GemmLib lib);

// One sgemm on the calling thread only (zt::gemm's per-thread blocks, attention's tiles).
void sgemm_serial(GemmLib lib, bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// One sgemm threaded by the library itself over `threads` OpenMP threads when called outside a
// parallel region (inside one every library runs on the calling thread).
void sgemm_threaded(GemmLib lib, int threads, bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                    float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                    int64_t ldc);

// One entry per library, defined in core/kernels/gemm_<lib>.cpp (a file per library, so each
// sees only its own headers: BLIS ships a cblas.h of its own). threads == 1 starts no thread.
namespace gemm_libs_detail {
// For a library that threads over omp_get_max_threads() outside a parallel region (oneDNN,
// Eigen): that count set to `threads` for one call, and put back. Inside a parallel region (the
// library runs on the calling thread) it changes nothing.
class OmpThreadsForCall {
 public:
  explicit OmpThreadsForCall(int threads);
  ~OmpThreadsForCall();
  OmpThreadsForCall(const OmpThreadsForCall&) = delete;
  OmpThreadsForCall& operator=(const OmpThreadsForCall&) = delete;

 private:
  int before_;
  bool set_;
};

using SgemmFn = void (*)(int threads, bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                         const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                         int64_t ldc);
void sgemm_openblas(int, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                    int64_t, float, float*, int64_t);
void sgemm_blis(int, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                float, float*, int64_t);
void sgemm_onednn(int, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                  int64_t, float, float*, int64_t);
void sgemm_eigen(int, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                 float, float*, int64_t);
}  // namespace gemm_libs_detail

}  // namespace zt
