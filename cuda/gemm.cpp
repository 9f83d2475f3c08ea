// defines: gemm_precision_name, CudaGemm (constructor, destructor, workspace_for, linear, linear_grad_input
//          and 3 more) (cuda/gemm.h); file-local: cublas_status_message, MatmulDesc, Layout, Preference,
//          cuda_type, alignment_of and 3 more
//
// CudaGemm: see gemm.h for the row-major -> column-major mapping, dtypes and the cache.
#include "cuda/gemm.h"

#include <climits>
#include <cmath>
#include <string>

#include "core/check.h"
#include "cuda/check.h"
#include "cuda/cublaslt_api.h"  // defines: cublaslt() (the library, loaded on first use)
#include "cuda/device.h"  // defines: DeviceGuard

namespace zt {

namespace {

// "CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not supported)"
std::string cublas_status_message(cublasStatus_t st) {
  const char* name = cublaslt().GetStatusName(st);
  const char* text = cublaslt().GetStatusString(st);
  return detail::concat(name ? name : "unknown cublasStatus_t", " (", text ? text : "?", ", code ",
                        static_cast<int>(st), ")");
}

#define ZT_CUBLASLT_CHECK(call, context)                                                                \
  do {                                                                                                  \
    const cublasStatus_t zt_lt_st_ = (call);                                                            \
    if (zt_lt_st_ != CUBLAS_STATUS_SUCCESS)                                                             \
      ZT_THROW(#call, " failed: ", cublas_status_message(zt_lt_st_), " in ", (context), " at ", __FILE__, \
               ":", __LINE__);                                                                          \
  } while (0)


// RAII for the per-call descriptors (host objects: creating them queues no device work).
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  ~MatmulDesc() {
    if (d) (void)cublaslt().MatmulDescDestroy(d);
  }
};
struct Layout {
  cublasLtMatrixLayout_t d = nullptr;
  ~Layout() {
    if (d) (void)cublaslt().MatrixLayoutDestroy(d);
  }
};
struct Preference {
  cublasLtMatmulPreference_t d = nullptr;
  ~Preference() {
    if (d) (void)cublaslt().MatmulPreferenceDestroy(d);
  }
};

cudaDataType_t cuda_type(DType t) { return t == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

// The largest power of two <= 256 dividing the address (256 for nullptr: nothing to align).
uint32_t alignment_of(const void* p) {
  const uintptr_t u = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && (u % a) != 0) a >>= 1;
  return a;
}
// The alignment every product of a strided batch has: that of the first pointer and of the batch
// stride in bytes (a stride of 0, or a batch of one, adds nothing).
uint32_t batch_alignment_of(const void* p, int64_t batch, int64_t stride_elems, DType t) {
  const uint32_t a = alignment_of(p);
  if (batch <= 1 || stride_elems == 0) return a;
  const uint32_t s = alignment_of(reinterpret_cast<const void*>(static_cast<uintptr_t>(stride_elems) * dtype_size(t)));
  return a < s ? a : s;
}

const char* epilogue_name(cublasLtEpilogue_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "none";
    case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
    case CUBLASLT_EPILOGUE_GELU: return "GELU";
    case CUBLASLT_EPILOGUE_GELU_AUX: return "GELU_AUX";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "GELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_BGRADB: return "BGRADB";
    default: return "other";
  }
}

}  // namespace

const char* gemm_precision_name(GemmPrecision p) { return p == GemmPrecision::tf32 ? "tf32" : "fp32"; }

// One column-major cuBLASLt call D (m, n) = alpha op(A) op(B) + beta D, plus what is needed to
// describe it in row-major terms in error messages.
struct CudaGemm::Problem {
  enum class Kind { linear, grad_input, grad_weight, gemm } kind;
  int64_t M, N, K;  // the row-major call's sizes
  DType in_dtype, out_dtype;
  GemmPrecision precision;
  // column-major
  cublasOperation_t trans_a, trans_b;
  uint64_t m, n, k;
  const void* A;
  int64_t lda;
  const void* B;
  int64_t ldb;
  void* D;
  int64_t ldd;
  bool accumulate;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;  // bias (BIAS*) or bias gradient (BGRADB)
  void* aux = nullptr;         // pre-GELU output (GELU_AUX*)
  int64_t aux_ld = 0;
  // Kind::gemm only: the scales (otherwise 1, and 0 or 1 from accumulate), the row-major
  // transposes, and the strided batch (column-major operands: stride_a of cuBLASLt's A, ...).
  float alpha = 1.0f, beta = 0.0f;
  bool row_trans_a = false, row_trans_b = false;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_d = 0;

  // "CudaGemm::linear: Y (3, 5) = X (3, 7) @ W^T, W (5, 7); in bfloat16, out float32, fp32,
  //  epilogue GELU_AUX_BIAS"
  std::string describe() const {
    std::string s;
    switch (kind) {
      case Kind::linear:
        s = detail::concat("CudaGemm::linear: Y (", M, ", ", N, ") = X (", M, ", ", K, ") @ W^T, W (", N, ", ", K, ")");
        break;
      case Kind::grad_input:
        s = detail::concat("CudaGemm::linear_grad_input: dX (", M, ", ", K, ") ", accumulate ? "+=" : "=", " dY (", M,
                           ", ", N, ") @ W (", N, ", ", K, ")");
        break;
      case Kind::grad_weight:
        s = detail::concat("CudaGemm::linear_grad_weight: dW (", N, ", ", K, ") ", accumulate ? "+=" : "=",
                           " dY^T @ X, dY (", M, ", ", N, "), X (", M, ", ", K, ")");
        break;
      case Kind::gemm:
        // our A is cuBLASLt's B (stride_b) and vice versa (gemm.h)
        s = detail::concat("CudaGemm::gemm: C (", M, ", ", N, ") = ", alpha, " A", row_trans_a ? "^T" : "", " B",
                           row_trans_b ? "^T" : "", " + ", beta, " C, M ", M, " N ", N, " K ", K, ", batch ", batch,
                           " strides A ", stride_b, " B ", stride_a, " C ", stride_d);
        break;
    }
    return detail::concat(s, "; in ", dtype_name(in_dtype), ", out ", dtype_name(out_dtype), ", precision ",
                          gemm_precision_name(precision), ", epilogue ", epilogue_name(epilogue));
  }
};

namespace {

// Argument checks shared by the three calls; `what` names the call and its shapes.
void check_common(const std::string& what, int64_t M, int64_t N, int64_t K, DType in, DType out, GemmPrecision prec) {
  if (M < 1 || N < 1 || K < 1) ZT_THROW(what, ": every size must be >= 1");
  const bool ok = (in == DType::f32 && out == DType::f32) || (in == DType::bf16 && (out == DType::bf16 || out == DType::f32));
  if (!ok)
    ZT_THROW(what, ": unsupported dtypes in ", dtype_name(in), ", out ", dtype_name(out),
             " (supported: in float32 -> out float32; in bfloat16 -> out bfloat16 or float32)");
  if (prec == GemmPrecision::tf32 && in != DType::f32)
    ZT_THROW(what, ": precision tf32 needs float32 inputs, got ", dtype_name(in),
             " (bfloat16 inputs always accumulate in fp32: use precision fp32)");
  if (prec != GemmPrecision::fp32 && prec != GemmPrecision::tf32) ZT_THROW(what, ": unknown GemmPrecision");
}

}  // namespace

CudaGemm::CudaGemm(CudaAllocator& alloc, size_t workspace_bytes) : alloc_(alloc), workspace_bytes_(workspace_bytes) {
  DeviceGuard guard(alloc_.device().index);
  ZT_CUBLASLT_CHECK(cublaslt().Create(&handle_), "CudaGemm constructor");
}

CudaGemm::~CudaGemm() {
  for (auto& [stream, p] : workspaces_) {
    try {
      alloc_.deallocate(p, workspace_bytes_, Category::workspace);
    } catch (...) {  // a destructor must not throw (the runtime may be gone at exit)
    }
  }
  if (handle_) (void)cublaslt().Destroy(handle_);
}

void* CudaGemm::workspace_for(cudaStream_t s) {
  if (workspace_bytes_ == 0) return nullptr;
  const auto key = reinterpret_cast<uintptr_t>(s);
  auto it = workspaces_.find(key);
  if (it != workspaces_.end()) return it->second;
  void* p = alloc_.allocate(workspace_bytes_, Category::workspace, s);
  workspaces_.emplace(key, p);
  return p;
}

void CudaGemm::linear(const GemmArgs& a, cudaStream_t s) {
  const std::string what = detail::concat("CudaGemm::linear (Y (", a.M, ", ", a.N, ") = X (", a.M, ", ", a.K,
                                          ") @ W^T, W (", a.N, ", ", a.K, "))");
  check_common(what, a.M, a.N, a.K, a.in_dtype, a.out_dtype, a.precision);
  if (!a.x || !a.w || !a.y) ZT_THROW(what, ": x, w and y must be device pointers, got a nullptr");
  if (a.pre_gelu && !a.gelu) ZT_THROW(what, ": pre_gelu is set but gelu is false (pre_gelu is GELU's input)");
  if (a.pre_gelu && a.N % 8 != 0)
    ZT_THROW(what, ": the pre-GELU output needs N % 8 == 0 (cuBLASLt's EPILOGUE_AUX_LD must be a multiple of 8), got N = ",
             a.N);
  Problem p{Problem::Kind::linear, a.M, a.N, a.K, a.in_dtype, a.out_dtype, a.precision,
            CUBLAS_OP_T, CUBLAS_OP_N, static_cast<uint64_t>(a.N), static_cast<uint64_t>(a.M), static_cast<uint64_t>(a.K),
            a.w, a.K, a.x, a.K, a.y, a.N, /*accumulate=*/false};
  if (a.gelu) {
    if (a.bias) p.epilogue = a.pre_gelu ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
    else p.epilogue = a.pre_gelu ? CUBLASLT_EPILOGUE_GELU_AUX : CUBLASLT_EPILOGUE_GELU;
  } else if (a.bias) {
    p.epilogue = CUBLASLT_EPILOGUE_BIAS;
  }
  p.bias = a.bias;
  p.aux = a.pre_gelu;
  p.aux_ld = a.pre_gelu ? a.N : 0;
  run(p, s);
}

void CudaGemm::linear_grad_input(const GemmGradInputArgs& a, cudaStream_t s) {
  const std::string what = detail::concat("CudaGemm::linear_grad_input (dX (", a.M, ", ", a.K, ") = dY (", a.M, ", ",
                                          a.N, ") @ W (", a.N, ", ", a.K, "))");
  check_common(what, a.M, a.N, a.K, a.in_dtype, a.out_dtype, a.precision);
  if (!a.dy || !a.w || !a.dx) ZT_THROW(what, ": dy, w and dx must be device pointers, got a nullptr");
  Problem p{Problem::Kind::grad_input,
            a.M,
            a.N,
            a.K,
            a.in_dtype,
            a.out_dtype,
            a.precision,
            CUBLAS_OP_N,
            CUBLAS_OP_N,
            static_cast<uint64_t>(a.K),
            static_cast<uint64_t>(a.M),
            static_cast<uint64_t>(a.N),
            a.w,
            a.K,
            a.dy,
            a.N,
            a.dx,
            a.K,
            a.accumulate};
  run(p, s);
}

void CudaGemm::linear_grad_weight(const GemmGradWeightArgs& a, cudaStream_t s) {
  const std::string what = detail::concat("CudaGemm::linear_grad_weight (dW (", a.N, ", ", a.K, ") = dY^T @ X, dY (",
                                          a.M, ", ", a.N, "), X (", a.M, ", ", a.K, "))");
  check_common(what, a.M, a.N, a.K, a.in_dtype, a.out_dtype, a.precision);
  if (!a.dy || !a.x || !a.dw) ZT_THROW(what, ": dy, x and dw must be device pointers, got a nullptr");
  Problem p{Problem::Kind::grad_weight, a.M, a.N, a.K, a.in_dtype, a.out_dtype, a.precision,
            CUBLAS_OP_N, CUBLAS_OP_T, static_cast<uint64_t>(a.K), static_cast<uint64_t>(a.N), static_cast<uint64_t>(a.M),
            a.x, a.K, a.dy, a.N, a.dw, a.K, a.accumulate};
  if (a.dbias) {
    p.epilogue = CUBLASLT_EPILOGUE_BGRADB;
    p.bias = a.dbias;
  }
  run(p, s);
}

void CudaGemm::gemm(const GemmStridedArgs& a, cudaStream_t s) {
  const GemmStridedArgs& g = a;
  const std::string what = detail::concat("CudaGemm::gemm (C (", g.M, ", ", g.N, ") = A", g.trans_a ? "^T" : "", " B",
                                          g.trans_b ? "^T" : "", ", K ", g.K, ", batch ", g.batch, ")");
  check_common(what, g.M, g.N, g.K, a.in_dtype, a.out_dtype, a.precision);
  if (!a.a || !a.b || !a.c) ZT_THROW(what, ": a, b and c must be device pointers, got a nullptr");
  if (g.batch < 1 || g.batch > INT32_MAX)
    ZT_THROW(what, ": batch must be in [1, 2^31 - 1] (cuBLASLt's BATCH_COUNT is an int32_t), got ", g.batch);
  if (g.stride_a < 0 || g.stride_b < 0 || g.stride_c < 0)
    ZT_THROW(what, ": strides must be >= 0, got ", g.stride_a, ", ", g.stride_b, ", ", g.stride_c);
  if (g.batch > 1 && g.stride_c < g.M * g.N)
    ZT_THROW(what, ": stride_c = ", g.stride_c, " < M N = ", g.M * g.N, " makes the batch's outputs overlap");
  if (!std::isfinite(g.alpha) || !std::isfinite(g.beta))
    ZT_THROW(what, ": alpha = ", g.alpha, " and beta = ", g.beta, " must be finite");
  const uint64_t m = static_cast<uint64_t>(g.N), n = static_cast<uint64_t>(g.M), k = static_cast<uint64_t>(g.K);
  Problem p{Problem::Kind::gemm, g.M, g.N, g.K, a.in_dtype, a.out_dtype, a.precision,
            g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
            a.b, g.trans_b ? g.K : g.N, a.a, g.trans_a ? g.M : g.K, a.c, g.N, /*accumulate=*/g.beta != 0.0};
  p.alpha = static_cast<float>(g.alpha);
  p.beta = static_cast<float>(g.beta);
  p.row_trans_a = g.trans_a;
  p.row_trans_b = g.trans_b;
  p.batch = g.batch;
  p.stride_a = g.stride_b;  // cuBLASLt's A is our B
  p.stride_b = g.stride_a;
  p.stride_d = g.stride_c;
  run(p, s);
}

void CudaGemm::run(const Problem& p, cudaStream_t s) {
  DeviceGuard guard(alloc_.device().index);
  const cublasComputeType_t compute =
      p.precision == GemmPrecision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cudaDataType_t ab_type = cuda_type(p.in_dtype), cd_type = cuda_type(p.out_dtype);
  const char* ctx = "CudaGemm";  // cheap context for descriptor calls; the matmul gets describe()

  MatmulDesc op;
  ZT_CUBLASLT_CHECK(cublaslt().MatmulDescCreate(&op.d, compute, CUDA_R_32F), ctx);
  const int32_t ta = p.trans_a, tb = p.trans_b;  // cublasOperation_t, int32_t attributes
  ZT_CUBLASLT_CHECK(cublaslt().MatmulDescSetAttribute(op.d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), ctx);
  ZT_CUBLASLT_CHECK(cublaslt().MatmulDescSetAttribute(op.d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), ctx);
  const uint32_t epi = static_cast<uint32_t>(p.epilogue);  // uint32_t attribute
  ZT_CUBLASLT_CHECK(cublaslt().MatmulDescSetAttribute(op.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), ctx);
  if (p.bias) {
    const void* bias = p.bias;
    ZT_CUBLASLT_CHECK(cublaslt().MatmulDescSetAttribute(op.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)), ctx);
  }
  if (p.aux) {
    void* aux = p.aux;
    const int64_t aux_ld = p.aux_ld;
    ZT_CUBLASLT_CHECK(cublaslt().MatmulDescSetAttribute(op.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)),
                      ctx);
    ZT_CUBLASLT_CHECK(cublaslt().MatmulDescSetAttribute(op.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)),
                      ctx);
  }

  // Layouts (column-major, the default order): A is stored (m, k) when op N, (k, m) when op T;
  // B is (k, n) when op N, (n, k) when op T; C = D is (m, n).
  Layout la, lb, ld;
  const bool a_n = p.trans_a == CUBLAS_OP_N, b_n = p.trans_b == CUBLAS_OP_N;
  ZT_CUBLASLT_CHECK(cublaslt().MatrixLayoutCreate(&la.d, ab_type, a_n ? p.m : p.k, a_n ? p.k : p.m, p.lda), ctx);
  ZT_CUBLASLT_CHECK(cublaslt().MatrixLayoutCreate(&lb.d, ab_type, b_n ? p.k : p.n, b_n ? p.n : p.k, p.ldb), ctx);
  ZT_CUBLASLT_CHECK(cublaslt().MatrixLayoutCreate(&ld.d, cd_type, p.m, p.n, p.ldd), ctx);
  if (p.batch > 1) {  // the same count on every layout; C = D shares ld's
    const int32_t count = static_cast<int32_t>(p.batch);
    const int64_t strides[3] = {p.stride_a, p.stride_b, p.stride_d};
    const cublasLtMatrixLayout_t layouts[3] = {la.d, lb.d, ld.d};
    for (int i = 0; i < 3; ++i) {
      ZT_CUBLASLT_CHECK(
          cublaslt().MatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)), ctx);
      ZT_CUBLASLT_CHECK(cublaslt().MatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                         &strides[i], sizeof(strides[i])),
                        ctx);
    }
  }

  AlgoKey key;
  key.m = static_cast<int64_t>(p.m);
  key.n = static_cast<int64_t>(p.n);
  key.k = static_cast<int64_t>(p.k);
  key.in_dtype = static_cast<uint8_t>(p.in_dtype);
  key.out_dtype = static_cast<uint8_t>(p.out_dtype);
  key.precision = static_cast<uint8_t>(p.precision);
  key.accumulate = p.accumulate ? 1 : 0;
  key.trans_a = ta;
  key.trans_b = tb;
  key.epilogue = epi;
  key.batch = p.batch;
  key.stride_a = p.batch > 1 ? p.stride_a : 0;
  key.stride_b = p.batch > 1 ? p.stride_b : 0;
  key.stride_d = p.batch > 1 ? p.stride_d : 0;
  key.align_a = batch_alignment_of(p.A, p.batch, p.stride_a, p.in_dtype);
  key.align_b = batch_alignment_of(p.B, p.batch, p.stride_b, p.in_dtype);
  key.align_c = key.align_d = batch_alignment_of(p.D, p.batch, p.stride_d, p.out_dtype);
  key.align_bias = p.bias ? alignment_of(p.bias) : 0;
  key.align_aux = p.aux ? alignment_of(p.aux) : 0;

  auto it = algos_.find(key);
  if (it == algos_.end()) {
    Preference pref;
    ZT_CUBLASLT_CHECK(cublaslt().MatmulPreferenceCreate(&pref.d), ctx);
    const uint64_t max_ws = workspace_bytes_;
    ZT_CUBLASLT_CHECK(cublaslt().MatmulPreferenceSetAttribute(pref.d, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                                           sizeof(max_ws)),
                      ctx);
    const uint32_t aligns[4] = {key.align_a, key.align_b, key.align_c, key.align_d};
    const cublasLtMatmulPreferenceAttributes_t align_attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      ZT_CUBLASLT_CHECK(cublaslt().MatmulPreferenceSetAttribute(pref.d, align_attrs[i], &aligns[i], sizeof(aligns[i])), ctx);

    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    const cublasStatus_t st =
        cublaslt().MatmulAlgoGetHeuristic(handle_, op.d, la.d, lb.d, ld.d, ld.d, pref.d, 1, &result, &count);
    ++heuristic_queries_;
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && (count < 1 || result.state != CUBLAS_STATUS_SUCCESS)))
      ZT_THROW(p.describe(), ": cuBLASLt has no algorithm for this combination (cublasLtMatmulAlgoGetHeuristic: ",
               cublas_status_message(st == CUBLAS_STATUS_SUCCESS && count >= 1 ? result.state : st), ", ", count,
               " results; workspace limit ", workspace_bytes_, " bytes; pointer alignments A ", key.align_a, " B ",
               key.align_b, " D ", key.align_d, " bytes)");
    ZT_CUBLASLT_CHECK(st, p.describe());
    it = algos_.emplace(key, result.algo).first;
  }

  void* ws = workspace_for(s);
  const float alpha = p.kind == Problem::Kind::gemm ? p.alpha : 1.0f;
  const float beta = p.kind == Problem::Kind::gemm ? p.beta : (p.accumulate ? 1.0f : 0.0f);
  // C = D (in place): with beta = 0 cuBLASLt does not read C.
  const cublasStatus_t st = cublaslt().Matmul(handle_, op.d, &alpha, p.A, la.d, p.B, lb.d, &beta, p.D, ld.d, p.D, ld.d,
                                           &it->second, ws, workspace_bytes_, s);
  if (st != CUBLAS_STATUS_SUCCESS) ZT_THROW(p.describe(), ": cublasLtMatmul failed: ", cublas_status_message(st));
  last_algo_ = it->second;
}

}  // namespace zt
