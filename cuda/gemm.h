// defines: CudaGemm — the linear layer's GEMMs on the GPU through cuBLASLt (forward with fused
//          bias / GELU epilogues, the two backward GEMMs with an optional fused bias gradient)
//          and the general row-major strided-batched GEMM of core/backend.h's GemmShape,
//          GemmPrecision, GemmArgs, GemmGradInputArgs, GemmGradWeightArgs, GemmStridedArgs.
//
// Layout: everything is ROW-MAJOR and contiguous, as the CPU side (core/kernels/gemm.h,
// nn.Linear): W is the weight of nn.Linear, (out, in) = (N, K). Shapes:
//   linear:            Y (M, N)  = X (M, K) @ W^T          [+ b (N) on every row] [then GELU]
//   linear_grad_input: dX (M, K) (+)= dY (M, N) @ W (N, K)
//   linear_grad_weight: dW (N, K) (+)= dY^T (N, M) @ X (M, K);  db (N) = sum over m of dY[m, :]
//
// Row-major through cuBLASLt's column-major: a row-major (r, c) matrix with leading dimension c
// is, bit for bit, the column-major (c, r) matrix — its transpose. So each row-major product is
// computed as the column-major product of the transposes, D = op(A) op(B) with (m, n, k):
//   linear:  Y^T (N, M) = W (N, K) . X^T (K, M)
//            A = W as col-major (K, N) ld K, op T;  B = X as col-major (K, M) ld K, op N;
//            D = Y as col-major (N, M) ld N;  m = N, n = M, k = K.
//            The bias epilogue adds a vector of length m (= D's rows = N) to every column of D,
//            i.e. b[n] to Y[row, n]: nn.Linear's bias. The GELU aux output (pre-GELU values,
//            same layout as D) has ld N, which cuBLASLt requires to be a multiple of 8.
//   grad_input:  dX^T (K, M) = W^T (K, N) . dY^T (N, M)
//            A = W as col-major (K, N) ld K, op N;  B = dY as col-major (N, M) ld N, op N;
//            D = dX as col-major (K, M) ld K;  m = K, n = M, k = N.
//   grad_weight: dW^T (K, N) = X^T (K, M) . dY (M, N)
//            A = X as col-major (K, M) ld K, op N;  B = dY as col-major (N, M) ld N, op T;
//            D = dW as col-major (K, N) ld K;  m = K, n = N, k = M.
//            CUBLASLT_EPILOGUE_BGRADB sums op(B) = dY (M, N) over the GEMM's k (= M): a vector
//            of length n = N, exactly db. (The same mapping as Apex / flash-attention's
//            linear_bias_wgrad: opA N, opB T, bgradb.) The epilogue WRITES db: with accumulate,
//            dW accumulates but db is overwritten (the caller accumulates it if it must).
//   gemm (GemmStridedArgs = core/backend.h's GemmShape): C (M, N) = alpha op(A) op(B) + beta C,
//            row-major, `batch` products at element strides stride_a / stride_b / stride_c.
//            Transposing both sides, C^T (N, M) = op(B)^T op(A)^T, which is a column-major
//            product with m = N, n = M, k = K:
//            cuBLASLt's A is our B: stored (K, N) row-major = col-major (N, K) ld N, op N; or, when
//            trans_b, stored (N, K) = col-major (K, N) ld K, op T. cuBLASLt's B is our A: stored
//            (M, K) = col-major (K, M) ld K, op N; or, when trans_a, stored (K, M) = col-major
//            (M, K) ld M, op T. D = C as col-major (N, M) ld N. Every layout gets
//            CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = batch (int32_t, the same on all of them, as
//            cuBLASLt requires) and CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = its stride
//            (int64_t, in elements). A stride of 0 on A or B reuses one matrix for every product
//            (cuBLASLt accepts 0 there); C's stride must be >= M N when batch > 1 (the products'
//            outputs must not overlap). alpha and beta are rounded to float (the scale type);
//            with beta == 0, C is not read (it may hold NaN).
//
// Dtypes (cuBLASLt's supported combinations for CUBLAS_COMPUTE_32F*, scale type float):
//   in (X, W, dY) float32  -> out (Y, dX, dW, bias, db, pre-GELU) float32;
//       precision fp32: CUBLAS_COMPUTE_32F (IEEE float32 products and sums);
//       precision tf32: CUBLAS_COMPUTE_32F_FAST_TF32 — the inputs may be rounded to TF32 (10
//       explicit mantissa bits, relative error <= 2^-11 per input, 2^-10 if truncated), so a
//       product may be off by ~2^-10 relative and the result by up to ~1e-3 of
//       sum_k |x_k w_k| (the tests use 2e-3 of that sum); accumulation stays float32.
//   in bfloat16 -> out bfloat16 or float32 (fp32 accumulation; a bf16 output is rounded once,
//       at the end). precision must be fp32 (tf32 is a float32-input mode: refused).
//   Everything else (f16, f64, float32 in with bf16 out, ...) is refused with a zt::Error that
//   names the operation, the shapes and the dtypes. bias / db / pre-GELU have the output dtype
//   (cuBLASLt's default for BIAS_DATA_TYPE and EPILOGUE_AUX_DATA_TYPE).
//
// GELU: cuBLASLt's GELU epilogue is the tanh approximation — PyTorch's _addmm_activation uses
// CUBLASLT_EPILOGUE_GELU_BIAS for gelu(approximate="tanh") and falls back to gelu_(x, "tanh"),
// and llm.c fuses it as GPT-2's gelu. cuBLASLt's own documentation names no formula, so
// tests/gpu/test_cuda_gemm.cpp checks it against the CPU's tanh gelu (core/kernels/activation.h)
// in fp32 mode at ~1e-5 on a small-K shape: the erf form differs by up to ~5e-4 and fails there.
// The backward's DGELU / DGELU_BGRAD epilogues are not offered: measured on an H100 (cuBLASLt
// 13.1, GPT-2 124M bf16, B 16), cuBLASLt ran DGELU_BGRAD as the plain dX GEMM plus a separate
// epilogue::globalKernel of 0.35 ms a call, where our one-pass kernel after the GEMM
// (cuda_kernels::bias_gelu_backward, in place) takes 0.12 ms (bench/results/gpu.md).
//
// Algorithm cache: the first call for a key — (m, n, k, dtypes, transposes, epilogue,
// precision, accumulate (beta != 0), batch count and strides, and the alignment of every pointer
// (in a batch, of every product's pointer: also of stride * element size), since cuBLASLt's
// algorithms may need aligned buffers: MIN_ALIGNMENT_*_BYTES preferences, and the bias / aux pointers' own
// alignment that the heuristic reads from the descriptor) — asks cublasLtMatmulAlgoGetHeuristic
// for the best algorithm whose workspace fits (MAX_WORKSPACE_BYTES = workspace_bytes()); later
// calls with the same key reuse it without asking. No algorithm: a zt::Error naming the shapes,
// dtypes and epilogue.
// Workspace: workspace_bytes() (32 MiB by default, what cuBLAS recommends for Hopper) from the
// CudaAllocator, Category::workspace, one buffer PER STREAM (allocated on that stream at its first
// call, kept until the CudaGemm is destroyed), so GEMMs on two streams never share scratch memory.
// Determinism: for a fixed algorithm, shape and GPU cuBLASLt gives the same bits every run (the
// cuBLAS docs, "Results reproducibility"; its split-K reductions are sequential — INPLACE uses
// counters "to guarantee the sequentiality", COMPUTE_TYPE reduces in a separate step); the cache
// fixes the algorithm for the object's lifetime. Another GPU model or cuBLAS version may pick
// another algorithm and give other (equally valid) bits.
//
// Calls are asynchronous on the given stream; argument errors throw before anything is queued.
// cuBLASLt errors throw zt::Error with the call, cublasLtGetStatusName / cublasLtGetStatusString
// and the operation. Pointers are device pointers on the allocator's device (made current for
// each call, the caller's device restored after). Outputs must not overlap inputs. Not thread
// safe: one CudaGemm per thread (or a lock around it).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>

#include "core/dtype.h"
#include "cuda/allocator.h"

namespace zt {

enum class GemmPrecision : uint8_t {
  fp32,  // CUBLAS_COMPUTE_32F: IEEE float32 (float32 and bfloat16 inputs)
  tf32,  // CUBLAS_COMPUTE_32F_FAST_TF32: float32 inputs only, ~1e-3 relative (see above)
};
const char* gemm_precision_name(GemmPrecision p);  // "fp32", "tf32"

// Y (M, N) = X (M, K) @ W^T [+ bias] [then GELU]
struct GemmArgs {
  int64_t M = 0, N = 0, K = 0;          // each >= 1
  DType in_dtype = DType::f32;          // X, W
  DType out_dtype = DType::f32;         // Y, bias, pre_gelu
  GemmPrecision precision = GemmPrecision::fp32;
  const void* x = nullptr;              // (M, K)
  const void* w = nullptr;              // (N, K), nn.Linear's weight
  const void* bias = nullptr;           // (N), or nullptr for none
  void* y = nullptr;                    // (M, N), written
  bool gelu = false;                    // Y = gelu_tanh(X W^T + b)
  void* pre_gelu = nullptr;             // (M, N): X W^T + b before GELU (for the backward), or
                                        // nullptr; only with gelu, and needs N % 8 == 0
};

// dX (M, K) = dY (M, N) @ W (N, K), or += with accumulate
struct GemmGradInputArgs {
  int64_t M = 0, N = 0, K = 0;
  DType in_dtype = DType::f32;          // dY, W
  DType out_dtype = DType::f32;         // dX
  GemmPrecision precision = GemmPrecision::fp32;
  const void* dy = nullptr;             // (M, N)
  const void* w = nullptr;              // (N, K)
  void* dx = nullptr;                   // (M, K)
  bool accumulate = false;              // dX += ... (beta = 1) instead of dX = ...
};

// C = alpha op(A) op(B) + beta C, batched and strided: the fields of core/backend.h's GemmShape
// (row-major, natural leading dimensions; this header stays free of the Tensor headers).
// in_dtype: A, B; out_dtype: C (the same combinations as above).
struct GemmStridedArgs {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;          // each >= 1
  double alpha = 1.0, beta = 0.0;       // finite; rounded to float
  int64_t batch = 1;                    // >= 1
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements, >= 0
  DType in_dtype = DType::f32;
  DType out_dtype = DType::f32;
  GemmPrecision precision = GemmPrecision::fp32;
  const void* a = nullptr;              // (M, K), or (K, M) when trans_a; product p at p * stride_a
  const void* b = nullptr;              // (K, N), or (N, K) when trans_b; product p at p * stride_b
  void* c = nullptr;                    // (M, N); product p at p * stride_c; read only if beta != 0
};

// dW (N, K) = dY^T @ X, or += with accumulate; db (N) = column sums of dY, always written
struct GemmGradWeightArgs {
  int64_t M = 0, N = 0, K = 0;
  DType in_dtype = DType::f32;          // dY, X
  DType out_dtype = DType::f32;         // dW, db
  GemmPrecision precision = GemmPrecision::fp32;
  const void* dy = nullptr;             // (M, N)
  const void* x = nullptr;              // (M, K)
  void* dw = nullptr;                   // (N, K)
  bool accumulate = false;              // dW += ... (beta = 1); db is written either way
  void* dbias = nullptr;                // (N), or nullptr: CUBLASLT_EPILOGUE_BGRADB
};

class CudaGemm {
 public:
  static constexpr size_t kDefaultWorkspace = size_t(32) << 20;  // 32 MiB

  // One cublasLt handle, created here (on the allocator's device). Throws zt::Error when
  // cuBLASLt cannot be initialized (no driver / device).
  explicit CudaGemm(CudaAllocator& alloc, size_t workspace_bytes = kDefaultWorkspace);
  // Returns the workspaces to the allocator (stream-ordered: work still queued on a stream may
  // finish with its buffer; only that stream can get it back before then) and destroys the
  // handle. Never throws.
  ~CudaGemm();
  CudaGemm(const CudaGemm&) = delete;
  CudaGemm& operator=(const CudaGemm&) = delete;

  void linear(const GemmArgs& a, cudaStream_t s);
  void linear_grad_input(const GemmGradInputArgs& a, cudaStream_t s);
  void linear_grad_weight(const GemmGradWeightArgs& a, cudaStream_t s);
  void gemm(const GemmStridedArgs& a, cudaStream_t s);

  size_t workspace_bytes() const { return workspace_bytes_; }
  size_t algo_cache_size() const { return algos_.size(); }   // distinct keys seen
  int64_t heuristic_queries() const { return heuristic_queries_; }  // cache misses
  // The algorithm the last successful call ran (to check that a repeated shape reuses it).
  const cublasLtMatmulAlgo_t& last_algo() const { return last_algo_; }

  // The cache key (public so gemm.cpp's helpers can build it; not part of the API).
  struct AlgoKey {
    int64_t m = 0, n = 0, k = 0;
    uint8_t in_dtype = 0, out_dtype = 0, precision = 0, accumulate = 0;
    int32_t trans_a = 0, trans_b = 0;
    uint32_t epilogue = 0;
    int64_t batch = 1, stride_a = 0, stride_b = 0, stride_d = 0;  // column-major operands' strides
    uint32_t align_a = 0, align_b = 0, align_c = 0, align_d = 0, align_bias = 0, align_aux = 0;
    auto operator<=>(const AlgoKey&) const = default;
  };
  struct Problem;  // one column-major cuBLASLt call (gemm.cpp)

 private:
  void run(const Problem& p, cudaStream_t s);
  void* workspace_for(cudaStream_t s);

  CudaAllocator& alloc_;
  const size_t workspace_bytes_;
  cublasLtHandle_t handle_ = nullptr;
  std::map<AlgoKey, cublasLtMatmulAlgo_t> algos_;
  std::map<uintptr_t, void*> workspaces_;  // stream -> its workspace (workspace_bytes_)
  int64_t heuristic_queries_ = 0;
  cublasLtMatmulAlgo_t last_algo_{};
};

}  // namespace zt
