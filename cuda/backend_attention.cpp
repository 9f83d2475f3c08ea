// defines: CudaBackend (cudnn_built, gemm, linear, linear_backward, linear_gelu and 9 more); file-local:
//          precision_for, need_here, need_compute, need_shape, rows_of, LinearDims and 6 more
//
// CudaBackend (cuda/backend.h): GEMM, linear, RoPE, attention.
//
// gemm / linear / linear_backward go through cuBLASLt (cuda/gemm.h, the backend's CudaGemm with
// its algorithm cache); RoPE through cuda/kernels/embedding_rope.h; attention through cuDNN's
// scaled-dot-product attention (cuda/cudnn_attention.h) or our own kernels (cuda/kernels/
// attention.h: FlashAttention-2's algorithm on CUDA cores, the CPU's too), both saving the row
// log-sum-exp (B, Hq, T) float32 (natural log, of the scaled masked scores), as the CPU does —
// one `saved` format, so either backward may follow either forward.
//
// Which attention runs (CudaBackend::AttentionImpl, set_attention_impl; attention_impl_name tells):
//   automatic (default)  cuDNN when this build has it (CMake found cudnn.h and libcudnn, ZT_CUDNN
//                        not OFF) AND CudnnAttention::supported(dtype, B, T, Hq, Hkv, D) (bfloat16
//                        only — cuDNN has no float32 flash attention —, D % 8 == 0, D <= 128, and
//                        deterministic forward and backward plans that finalize; checked once per
//                        shape) AND every pointer is 16-byte aligned; otherwise our kernel, and the
//                        first call for each (reason, shape) prints one line on stderr saying so.
//                        float32 always runs our kernel (the expected path; also reported once).
//   cudnn                cuDNN or a zt::Error naming why it cannot (not built, unsupported with
//                        cuDNN's reason, misaligned pointer).
//   own                  always our kernel (the reference), silently: it was asked for.
// The choice is made per call in attention() and attention_backward() independently; the rule
// gives both the same answer for the same tensors.
//
// Precision: float32 GEMMs run in IEEE fp32 (CUBLAS_COMPUTE_32F) by default, so every entry
// matches the CPU backend to float32 rounding; set_f32_matmul_precision(F32Matmul::high) makes
// them TF32 (GemmPrecision::tf32, ~1e-3 relative). bfloat16 GEMMs accumulate in float32 and round
// once, whatever the setting.
//
// linear_backward's bias gradient: cuBLASLt's BGRADB epilogue (fused into the dW GEMM) when dW
// is computed and written (accumulate false); otherwise — accumulate, where the epilogue could
// only overwrite db, or no dW GEMM to ride on — cuda_kernels::bias_grad, which sums dY's columns
// in a fixed order in float32 and adds the sum to db's old value before one rounding (exactly the
// table's "added to what db holds", with one rounding in bfloat16 too).
#include <cuda_runtime_api.h>

#include "core/attention_packed.h"
#include "core/backend.h"
#include "cuda/backend.h"
#include "cuda/device.h"  // DeviceGuard
#include "cuda/gemm.h"
#include "cuda/kernels/activation.h"  // bias_gelu_backward (linear_dgelu_backward)
#include "cuda/kernels/attention.h"
#include "cuda/kernels/bias_grad.h"
#include "cuda/kernels/embedding_rope.h"
#if defined(ZT_HAVE_CUDNN)
#include "cuda/cudnn_attention.h"
#endif

#include <cstdio>

namespace zt {

void CudnnAttentionDeleter::operator()(CudnnAttention* p) const {
#if defined(ZT_HAVE_CUDNN)
  delete p;
#else
  (void)p;  // never created in a build without cuDNN
#endif
}

bool CudaBackend::cudnn_built() {
#if defined(ZT_HAVE_CUDNN)
  return true;
#else
  return false;
#endif
}

namespace {

// float32 GEMMs follow the backend's F32Matmul setting; bfloat16 always accumulates in fp32.
GemmPrecision precision_for(DType t, F32Matmul p) {
  return t == DType::f32 && p == F32Matmul::high ? GemmPrecision::tf32 : GemmPrecision::fp32;
}

// Every tensor argument: defined, on this backend's device, contiguous.
void need_here(const Backend& be, const Tensor& t, const char* op, const char* name) {
  ZT_CHECK(t.defined(), "CudaBackend::", op, ": ", name, " is undefined");
  ZT_CHECK(t.device() == be.device(), "CudaBackend::", op, ": ", name, " is on ", t.device().str(),
           ", expected ", be.device().str());
  ZT_CHECK(t.is_contiguous(), "CudaBackend::", op, ": ", name, " ", t.str(), " must be contiguous");
}
// ... and of the compute dtype `dt` (float32 or bfloat16)
void need_compute(const Backend& be, const Tensor& t, DType dt, const char* op, const char* name) {
  need_here(be, t, op, name);
  ZT_CHECK(be.computes(dt), "CudaBackend::", op, ": dtype ", dtype_name(dt),
           " is not a GPU compute dtype (float32, bfloat16)");
  ZT_CHECK(t.dtype() == dt, "CudaBackend::", op, ": ", name, " has dtype ", dtype_name(t.dtype()), ", expected ",
           dtype_name(dt));
}
void need_shape(const Tensor& t, const Shape& s, const char* op, const char* name) {
  ZT_CHECK(t.shape() == s, "CudaBackend::", op, ": ", name, " has shape ", shape_str(t.shape()), ", expected ",
           shape_str(s));
}

// Rows of a (..., features) tensor: the product of its leading dimensions.
int64_t rows_of(const Tensor& t) {
  int64_t r = 1;
  for (int64_t i = 0; i + 1 < t.dim(); ++i) r *= t.size(i);
  return r;
}

// The attention shapes: q (B, T, Hq, D), k and v (B, T, Hkv, D).
struct AttnDims {
  int64_t B, T, Hq, Hkv, D;
};
AttnDims attn_dims(const Tensor& q, const Tensor& k, const Tensor& v, const char* op) {
  ZT_CHECK(q.dim() == 4 && k.dim() == 4, "CudaBackend::", op, ": q ", shape_str(q.shape()), " and k ",
           shape_str(k.shape()), " must be (B, T, H, D)");
  const AttnDims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
  need_shape(k, {d.B, d.T, d.Hkv, d.D}, op, "k");
  need_shape(v, {d.B, d.T, d.Hkv, d.D}, op, "v");
  ZT_CHECK(d.Hkv >= 1 && d.Hq % d.Hkv == 0, "CudaBackend::", op, ": Hq = ", d.Hq, " must be a multiple of Hkv = ",
           d.Hkv);
  ZT_CHECK(d.D >= 1 && d.D <= cuda_kernels::kAttentionMaxHeadDim, "CudaBackend::", op, ": head dimension D = ", d.D,
           " is not supported by the CUDA attention kernel (1 <= D <= ", cuda_kernels::kAttentionMaxHeadDim, ")");
  return d;
}

}  // namespace

// ---- matrix products ----------------------------------------------------------------------------

void CudaBackend::gemm(const GemmShape& g, const Tensor& A, const Tensor& B, const Tensor& C) {
  const char* op = "gemm";
  const DType dt = C.dtype();
  need_compute(*this, A, dt, op, "A");
  need_compute(*this, B, dt, op, "B");
  need_compute(*this, C, dt, op, "C");
  ZT_CHECK(g.M >= 0 && g.N >= 0 && g.K >= 0 && g.batch >= 0 && g.stride_a >= 0 && g.stride_b >= 0 &&
               g.stride_c >= 0,
           "CudaBackend::gemm: negative size or stride (M ", g.M, " N ", g.N, " K ", g.K, " batch ", g.batch, ")");
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  // every product's operands lie inside the tensors
  const auto need_span = [&](const Tensor& t, int64_t stride, int64_t elems, const char* name) {
    ZT_CHECK((g.batch - 1) * stride + elems <= t.numel(), "CudaBackend::gemm: ", name, " ", t.str(), " holds ",
             t.numel(), " elements, the batch needs ", (g.batch - 1) * stride + elems);
  };
  need_span(A, g.stride_a, g.M * g.K, "A");
  need_span(B, g.stride_b, g.K * g.N, "B");
  need_span(C, g.stride_c, g.M * g.N, "C");
  ZT_CHECK(g.batch == 1 || g.stride_c >= g.M * g.N, "CudaBackend::gemm: stride_c = ", g.stride_c,
           " < M N = ", g.M * g.N, ": the products' outputs overlap");
  DeviceGuard guard(index_);
  if (g.K == 0) {  // C = beta C (an empty sum); cuBLASLt needs k >= 1
    for (int64_t p = 0; p < g.batch; ++p) {
      const Tensor Cp = C.flat_view(p * g.stride_c, {g.M, g.N});
      if (g.beta == 0.0) fill(Cp, 0.0);
      else if (g.beta != 1.0) scale_(Cp, g.beta);
    }
    return;
  }
  GemmStridedArgs a;
  a.trans_a = g.trans_a, a.trans_b = g.trans_b;
  a.M = g.M, a.N = g.N, a.K = g.K;
  a.alpha = g.alpha, a.beta = g.beta;
  a.batch = g.batch, a.stride_a = g.stride_a, a.stride_b = g.stride_b, a.stride_c = g.stride_c;
  a.in_dtype = a.out_dtype = dt;
  a.precision = precision_for(dt, f32_matmul_);
  a.a = A.raw();
  a.b = B.raw();
  a.c = C.raw();
  gemm_engine().gemm(a, stream());
}

namespace {

// linear's sizes after its checks (named by op): y (M, out) = x (M, in) w (out, in)^T + b (out).
struct LinearDims {
  int64_t M, in, out;
};
LinearDims check_linear(CudaBackend& be, const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                        const char* op) {
  const DType dt = x.dtype();
  need_compute(be, x, dt, op, "x");
  need_compute(be, w, dt, op, "w");
  need_compute(be, y, dt, op, "y");
  ZT_CHECK(w.dim() == 2 && x.dim() >= 1 && y.dim() >= 1, "CudaBackend::", op, ": w ", shape_str(w.shape()),
           " must be (out, in), x (..., in), y (..., out)");
  const int64_t out = w.size(0), in = w.size(1);
  ZT_CHECK(x.size(-1) == in, "CudaBackend::", op, ": x ", shape_str(x.shape()), " has ", x.size(-1),
           " features, w expects ", in);
  ZT_CHECK(y.size(-1) == out, "CudaBackend::", op, ": y ", shape_str(y.shape()), " has ", y.size(-1),
           " features, w gives ", out);
  const int64_t M = rows_of(x);
  ZT_CHECK(rows_of(y) == M, "CudaBackend::", op, ": y ", shape_str(y.shape()), " does not have the ", M, " rows of x ",
           shape_str(x.shape()));
  if (b.defined()) {
    need_compute(be, b, dt, op, "b");
    need_shape(b, {out}, op, "b");
  }
  ZT_CHECK(y.numel() == 0 || in >= 1, "CudaBackend::", op,
           ": in = 0 (an empty product) is not supported on the GPU; y ", shape_str(y.shape()));
  return {M, in, out};
}

}  // namespace

void CudaBackend::linear(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b) {
  const LinearDims d = check_linear(*this, y, x, w, b, "linear");
  if (y.numel() == 0) return;
  const DType dt = x.dtype();
  DeviceGuard guard(index_);
  GemmArgs a;
  a.M = d.M, a.N = d.out, a.K = d.in;
  a.in_dtype = a.out_dtype = dt;
  a.precision = precision_for(dt, f32_matmul_);
  a.x = x.raw(), a.w = w.raw(), a.y = y.raw();
  a.bias = b.defined() ? b.raw() : nullptr;
  gemm_engine().linear(a, stream());
}

void CudaBackend::linear_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy,
                                  const Tensor& x, const Tensor& w, bool accumulate) {
  const char* op = "linear_backward";
  const DType dt = dy.dtype();
  need_compute(*this, dy, dt, op, "dy");
  ZT_CHECK(dy.dim() >= 1, "CudaBackend::linear_backward: dy must be (..., out), got a scalar");
  const int64_t out = dy.size(-1), M = rows_of(dy);
  int64_t in = -1;
  if (w.defined()) {
    need_compute(*this, w, dt, op, "w");
    ZT_CHECK(w.dim() == 2 && w.size(0) == out, "CudaBackend::linear_backward: w ", shape_str(w.shape()),
             " must be (", out, ", in)");
    in = w.size(1);
  }
  if (x.defined()) {
    need_compute(*this, x, dt, op, "x");
    ZT_CHECK(x.dim() >= 1, "CudaBackend::linear_backward: x must be (..., in)");
    ZT_CHECK(in < 0 || x.size(-1) == in, "CudaBackend::linear_backward: x ", shape_str(x.shape()), " vs w ",
             shape_str(w.shape()));
    in = x.size(-1);
    ZT_CHECK(rows_of(x) == M, "CudaBackend::linear_backward: x ", shape_str(x.shape()), " does not have the ", M,
             " rows of dy ", shape_str(dy.shape()));
  }
  DeviceGuard guard(index_);
  bool db_fused = false;
  if (dx.defined()) {
    need_compute(*this, dx, dt, op, "dx");
    ZT_CHECK(w.defined(), "CudaBackend::linear_backward: dx needs w");
    ZT_CHECK(dx.dim() >= 1 && dx.size(-1) == in && rows_of(dx) == M, "CudaBackend::linear_backward: dx ",
             shape_str(dx.shape()), " must be (..., ", in, ") with ", M, " rows");
    if (dx.numel() > 0) {
      if (out == 0) {
        fill(dx, 0.0);  // an empty sum
      } else {
        GemmGradInputArgs a;
        a.M = M, a.N = out, a.K = in;
        a.in_dtype = a.out_dtype = dt;
        a.precision = precision_for(dt, f32_matmul_);
        a.dy = dy.raw(), a.w = w.raw(), a.dx = dx.raw();
        a.accumulate = false;
        gemm_engine().linear_grad_input(a, stream());
      }
    }
  }
  if (db.defined()) {
    need_compute(*this, db, dt, op, "db");
    need_shape(db, {out}, op, "db");
  }
  if (dw.defined()) {
    need_compute(*this, dw, dt, op, "dw");
    ZT_CHECK(x.defined(), "CudaBackend::linear_backward: dw needs x");
    need_shape(dw, {out, in}, op, "dw");
    if (dw.numel() > 0) {
      if (M == 0) {
        if (!accumulate) fill(dw, 0.0);  // an empty sum
      } else {
        GemmGradWeightArgs a;
        a.M = M, a.N = out, a.K = in;
        a.in_dtype = a.out_dtype = dt;
        a.precision = precision_for(dt, f32_matmul_);
        a.dy = dy.raw(), a.x = x.raw(), a.dw = dw.raw();
        a.accumulate = accumulate;
        // BGRADB writes db: fuse it only when db is written, not accumulated (see the top)
        db_fused = db.defined() && db.numel() > 0 && !accumulate;
        a.dbias = db_fused ? db.raw() : nullptr;
        gemm_engine().linear_grad_weight(a, stream());
      }
    }
  }
  if (db.defined() && db.numel() > 0 && !db_fused) {
    const int64_t ws_bytes = cuda_kernels::bias_grad_workspace_bytes(M, out);
    Tensor ws = Tensor::empty({ws_bytes / 4}, DType::f32, Category::workspace, allocator());
    cuda_kernels::bias_grad(dt, db.raw(), dy.raw(), M, out, accumulate, ws_bytes > 0 ? ws.raw() : nullptr, stream());
  }
}

// GPT-2's MLP around its GELU (core/backend_ops.def). Forward: cuBLASLt's GELU_AUX_BIAS epilogue
// writes pre and y from the float32 accumulator in the GEMM (cuBLASLt rounds the product to the
// output dtype before the epilogue: gemm.h's note); without it (set_gelu_epilogue(false), or a
// width cuBLASLt's aux cannot take, % 8 != 0) the bias-epilogue GEMM then the GELU kernel.
// Backward: the plain dX GEMM writes dy w into dpre, then bias_gelu's backward kernel, with no
// bias, turns it into dpre in place and sums db (float32, fixed row chunks, one rounding) in the
// same pass. (cuBLASLt's DGELU_BGRAD epilogue did this slower on an H100: gemm.h.)
void CudaBackend::linear_gelu(const Tensor& y, const Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& b) {
  const LinearDims d = check_linear(*this, pre, x, w, b, "linear_gelu");
  ZT_CHECK(b.defined(), "CudaBackend::linear_gelu: b is undefined (the GELU_AUX_BIAS epilogue adds c_fc's bias)");
  need_compute(*this, y, x.dtype(), "linear_gelu", "y");
  need_shape(y, pre.shape(), "linear_gelu", "y");
  if (y.numel() == 0) return;
  DeviceGuard guard(index_);
  if (!gelu_epilogue_ || d.out % 8 != 0) {
    linear(pre, x, w, b);
    return gelu(y, pre);
  }
  const DType dt = x.dtype();
  GemmArgs a;
  a.M = d.M, a.N = d.out, a.K = d.in;
  a.in_dtype = a.out_dtype = dt;
  a.precision = precision_for(dt, f32_matmul_);
  a.x = x.raw(), a.w = w.raw(), a.y = y.raw(), a.bias = b.raw();
  a.gelu = true;
  a.pre_gelu = pre.raw();
  gemm_engine().linear(a, stream());
}

void CudaBackend::linear_dgelu_backward(const Tensor& dpre, const Tensor& db, const Tensor& dy, const Tensor& w,
                                        const Tensor& pre, bool accumulate) {
  const char* op = "linear_dgelu_backward";
  const DType dt = dy.dtype();
  need_compute(*this, dy, dt, op, "dy");
  need_compute(*this, w, dt, op, "w");
  need_compute(*this, pre, dt, op, "pre");
  need_compute(*this, dpre, dt, op, "dpre");
  ZT_CHECK(dy.dim() >= 1 && w.dim() == 2 && w.size(0) == dy.size(-1), "CudaBackend::", op, ": dy ",
           shape_str(dy.shape()), " must be (..., out) and w ", shape_str(w.shape()), " (out, in)");
  const int64_t M = rows_of(dy), out = w.size(0), in = w.size(1);
  ZT_CHECK(pre.dim() >= 1 && pre.size(-1) == in && rows_of(pre) == M, "CudaBackend::", op, ": pre ",
           shape_str(pre.shape()), " must be (..., ", in, ") with the ", M, " rows of dy");
  need_shape(dpre, pre.shape(), op, "dpre");
  if (db.defined()) {
    need_compute(*this, db, dt, op, "db");
    need_shape(db, {in}, op, "db");
  }
  if (pre.numel() == 0) {
    if (db.defined() && !accumulate) fill(db, 0.0);
    return;
  }
  ZT_CHECK(out >= 1, "CudaBackend::", op, ": out = 0 (an empty product) is not supported on the GPU");
  DeviceGuard guard(index_);
  GemmGradInputArgs a;
  a.M = M, a.N = out, a.K = in;
  a.in_dtype = a.out_dtype = dt;
  a.precision = precision_for(dt, f32_matmul_);
  a.dy = dy.raw(), a.w = w.raw(), a.dx = dpre.raw();
  gemm_engine().linear_grad_input(a, stream());  // dpre = dy w, the GELU output's gradient
  Tensor ws;  // db's chunk partials (float32), freed on return (stream-ordered reuse)
  if (db.defined()) ws = scratch(static_cast<size_t>(cuda_kernels::bias_grad_workspace_bytes(M, in)));
  cuda_kernels::bias_gelu_backward(dt, dpre.raw(), db.defined() ? db.raw() : nullptr, dpre.raw(), pre.raw(),
                                   /*b=*/nullptr, M, in, accumulate, db.defined() ? ws.raw() : nullptr, stream());
}

// ---- RoPE -------------------------------------------------------------------------------------------

void CudaBackend::rope_tables(const Tensor& cos_t, const Tensor& sin_t, const RopeParams& p) {
  const char* op = "rope_tables";
  need_compute(*this, cos_t, DType::f32, op, "cos_t");
  need_compute(*this, sin_t, DType::f32, op, "sin_t");
  ZT_CHECK(cos_t.dim() == 2, "CudaBackend::rope_tables: cos_t ", shape_str(cos_t.shape()), " must be (T, D/2)");
  need_shape(sin_t, cos_t.shape(), op, "sin_t");
  DeviceGuard guard(index_);
  cuda_kernels::rope_tables(cos_t.data<float>(), sin_t.data<float>(), cos_t.size(0), 2 * cos_t.size(1), p, stream());
}

void CudaBackend::rope(const Tensor& out, const Tensor& x, const Tensor& cos_t, const Tensor& sin_t, bool inverse,
                       int64_t rot_heads) {
  const char* op = "rope";
  const DType dt = x.dtype();
  need_compute(*this, x, dt, op, "x");
  need_compute(*this, out, dt, op, "out");
  need_compute(*this, cos_t, stats_dtype(dt), op, "cos_t");
  need_compute(*this, sin_t, stats_dtype(dt), op, "sin_t");
  ZT_CHECK(x.dim() == 4, "CudaBackend::rope: x ", shape_str(x.shape()), " must be (B, T, H, D)");
  need_shape(out, x.shape(), op, "out");
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), D = x.size(3);
  ZT_CHECK(D % 2 == 0 && D >= 2, "CudaBackend::rope: head dimension D = ", D, " must be even");
  need_shape(cos_t, {T, D / 2}, op, "cos_t");
  need_shape(sin_t, {T, D / 2}, op, "sin_t");
  DeviceGuard guard(index_);
  if (inverse)
    cuda_kernels::rope_backward(dt, out.raw(), x.raw(), cos_t.data<float>(), sin_t.data<float>(), B, T, H, D, rot_heads,
                                stream());
  else
    cuda_kernels::rope_forward(dt, out.raw(), x.raw(), cos_t.data<float>(), sin_t.data<float>(), B, T, H, D, rot_heads,
                               stream());
}

// ---- attention ----------------------------------------------------------------------------------

bool CudaBackend::use_cudnn(DType dt, int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D, int64_t qkv_row,
                            std::initializer_list<const void*> ptrs, const char* op, std::string* why) {
  if (attention_impl_ == AttentionImpl::own) {
    *why = "forced by set_attention_impl(own)";
    return false;
  }
  std::string reason;
#if defined(ZT_HAVE_CUDNN)
  if (!cudnn_attn_) cudnn_attn_.reset(new CudnnAttention(alloc_));
  const CudnnAttnShape shape{B, T, Hq, Hkv, D, dt, qkv_row};
  if (cudnn_attn_->supported(shape, &reason)) {
    for (const void* p : ptrs)
      if (!CudnnAttention::aligned16(p)) {
        reason = detail::concat("a tensor at ", p, " is not 16-byte aligned (cuDNN needs 16)");
        break;
      }
    if (reason.empty()) return true;
  }
#else
  (void)B, (void)T, (void)Hq, (void)Hkv, (void)D, (void)qkv_row, (void)ptrs;
  reason = "this build has no cuDNN (cudnn.h / libcudnn not found by CMake, or ZT_CUDNN=OFF)";
#endif
  if (attention_impl_ == AttentionImpl::cudnn)
    ZT_THROW("CudaBackend::", op, " on ", device().str(), ": set_attention_impl(cudnn) but cuDNN cannot run ",
             dtype_name(dt), " B ", B, " T ", T, " Hq ", Hq, " Hkv ", Hkv, " D ", D, ": ", reason);
  *why = reason;
  return false;
}

std::string CudaBackend::attention_impl_name(DType dt, int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D) {
  std::string why;
  DeviceGuard guard(index_);
  if (use_cudnn(dt, B, T, Hq, Hkv, D, 0, {}, "attention_impl_name", &why)) {
#if defined(ZT_HAVE_CUDNN)
    return "cudnn " + CudnnAttention::version_string();
#endif
  }
  return "own: " + why;
}

namespace {

// The automatic mode's fallback, said once per (reason, shape) (docs/architecture.md: a slow path
// that replaces a fast one says so once, loudly).
void report_fallback(std::set<std::string>& reported, const Device& dev, const char* op, DType dt,
                     const AttnDims& d, const std::string& why) {
  const std::string line = detail::concat("zt: ", op, " on ", dev.str(), " (", dtype_name(dt), " B ", d.B, " T ", d.T,
                                          " Hq ", d.Hq, " Hkv ", d.Hkv, " D ", d.D,
                                          ") runs our own attention kernel, not cuDNN: ", why);
  if (reported.insert(line).second) std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

Tensor CudaBackend::attention(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                              bool keep_for_backward) {
  const char* op = "attention";
  const DType dt = q.dtype();
  need_compute(*this, q, dt, op, "q");
  need_compute(*this, k, dt, op, "k");
  need_compute(*this, v, dt, op, "v");
  need_compute(*this, out, dt, op, "out");
  const AttnDims d = attn_dims(q, k, v, op);
  need_shape(out, q.shape(), op, "out");
  DeviceGuard guard(index_);
  // the row log-sum-exp (B, Hq, T) float32, kept as an activation for the backward; the kernel
  // skips it (nullptr) when not kept
  Tensor lse;
  if (keep_for_backward) lse = Tensor::empty({d.B, d.Hq, d.T}, DType::f32, Category::activations, allocator());
  std::string why;
  if (use_cudnn(dt, d.B, d.T, d.Hq, d.Hkv, d.D, 0, {out.raw(), q.raw(), k.raw(), v.raw()}, op, &why)) {
#if defined(ZT_HAVE_CUDNN)
    // cuDNN's graph always writes the statistics: a scratch buffer when they are not kept
    Tensor stats = keep_for_backward ? lse
                                     : Tensor::empty({d.B, d.Hq, d.T}, DType::f32, Category::workspace, allocator());
    cudnn_attn_->forward(CudnnAttnShape{d.B, d.T, d.Hq, d.Hkv, d.D, dt}, out.raw(), stats.data<float>(), q.raw(),
                         k.raw(), v.raw(), stream());
    return lse;
#endif
  }
  if (attention_impl_ == AttentionImpl::automatic) report_fallback(fallback_reported_, device(), op, dt, d, why);
  cuda_kernels::attention_forward(dt, out.raw(), keep_for_backward ? lse.data<float>() : nullptr, q.raw(), k.raw(),
                                  v.raw(), d.B, d.T, d.Hq, d.Hkv, d.D, stream());
  return lse;
}

void CudaBackend::attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                                     const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                     const Tensor& saved) {
  const char* op = "attention_backward";
  const DType dt = q.dtype();
  need_compute(*this, q, dt, op, "q");
  need_compute(*this, k, dt, op, "k");
  need_compute(*this, v, dt, op, "v");
  need_compute(*this, out, dt, op, "out");
  need_compute(*this, dout, dt, op, "dout");
  need_compute(*this, dq, dt, op, "dq");
  need_compute(*this, dk, dt, op, "dk");
  need_compute(*this, dv, dt, op, "dv");
  const AttnDims d = attn_dims(q, k, v, op);
  need_shape(out, q.shape(), op, "out");
  need_shape(dout, q.shape(), op, "dout");
  need_shape(dq, q.shape(), op, "dq");
  need_shape(dk, k.shape(), op, "dk");
  need_shape(dv, v.shape(), op, "dv");
  ZT_CHECK(saved.defined(), "CudaBackend::attention_backward: `saved` is undefined (the forward ran with "
                            "keep_for_backward = false)");
  need_compute(*this, saved, DType::f32, op, "saved (the forward's row log-sum-exp)");
  need_shape(saved, {d.B, d.Hq, d.T}, op, "saved (the forward's row log-sum-exp)");
  DeviceGuard guard(index_);
  std::string why;
  if (use_cudnn(dt, d.B, d.T, d.Hq, d.Hkv, d.D, 0,
                {dq.raw(), dk.raw(), dv.raw(), dout.raw(), q.raw(), k.raw(), v.raw(), out.raw(), saved.raw()}, op,
                &why)) {
#if defined(ZT_HAVE_CUDNN)
    cudnn_attn_->backward(CudnnAttnShape{d.B, d.T, d.Hq, d.Hkv, d.D, dt}, dq.raw(), dk.raw(), dv.raw(), dout.raw(),
                          q.raw(), k.raw(), v.raw(), out.raw(), saved.data<float>(), stream());
    return;
#endif
  }
  if (attention_impl_ == AttentionImpl::automatic) report_fallback(fallback_reported_, device(), op, dt, d, why);
  const int64_t ws_bytes = cuda_kernels::attention_backward_workspace_bytes(d.B, d.T, d.Hq);
  Tensor ws = Tensor::empty({ws_bytes / 4}, DType::f32, Category::workspace, allocator());
  cuda_kernels::attention_backward(dt, dq.raw(), dk.raw(), dv.raw(), dout.raw(), q.raw(), k.raw(), v.raw(), out.raw(),
                                   saved.data<float>(), ws.raw(), d.B, d.T, d.Hq, d.Hkv, d.D, stream());
}

// The packed projection qkv (B, T, (Hq + 2 Hkv) D): cuDNN reads q, k, v in place and writes dq,
// dk, dv into dqkv's blocks (CudnnAttnShape::qkv_row, the row's width); where cuDNN cannot (our
// kernel, or a shape cuDNN refuses) the blocks are copied out (core/attention_packed.h) and
// attention() / attention_backward() run on them — in the automatic mode said once, as above.
namespace {
struct PackedBlocks {
  const void *q, *k, *v;
};
PackedBlocks packed_blocks(const Tensor& t, const PackedQkv& p) {
  const int64_t nq = p.Hq * p.D, nkv = p.Hkv * p.D;
  return {t.raw(), t.slice(2, nq, nq + nkv).raw(), t.slice(2, nq + nkv, p.width()).raw()};
}
}  // namespace

Tensor CudaBackend::attention_packed(const Tensor& out, const Tensor& qkv, int64_t Hq, int64_t Hkv,
                                     bool keep_for_backward) {
  const char* op = "attention_packed";
  const DType dt = qkv.dtype();
  need_compute(*this, qkv, dt, op, "qkv");
  need_compute(*this, out, dt, op, "out");
  const PackedQkv p = packed_qkv(qkv, Hq, Hkv, "CudaBackend::attention_packed");
  need_shape(out, {p.B, p.T, Hq, p.D}, op, "out");
  DeviceGuard guard(index_);
  const PackedBlocks in = packed_blocks(qkv, p);
  std::string why;
  if (use_cudnn(dt, p.B, p.T, Hq, Hkv, p.D, p.width(), {out.raw(), in.q, in.k, in.v}, op, &why)) {
#if defined(ZT_HAVE_CUDNN)
    Tensor lse;
    if (keep_for_backward) lse = Tensor::empty({p.B, Hq, p.T}, DType::f32, Category::activations, allocator());
    Tensor stats = keep_for_backward ? lse
                                     : Tensor::empty({p.B, Hq, p.T}, DType::f32, Category::workspace, allocator());
    cudnn_attn_->forward(CudnnAttnShape{p.B, p.T, Hq, Hkv, p.D, dt, p.width()}, out.raw(), stats.data<float>(), in.q,
                         in.k, in.v, stream());
    return lse;
#endif
  }
  if (attention_impl_ == AttentionImpl::automatic)
    report_fallback(fallback_reported_, device(), op, dt, AttnDims{p.B, p.T, Hq, Hkv, p.D},
                    why + " (q, k, v copied out of the packed rows)");
  return attention_packed_by_copies(*this, out, qkv, Hq, Hkv, keep_for_backward);
}

void CudaBackend::attention_packed_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                            const Tensor& out, const Tensor& saved, int64_t Hq, int64_t Hkv) {
  const char* op = "attention_packed_backward";
  const DType dt = qkv.dtype();
  need_compute(*this, qkv, dt, op, "qkv");
  need_compute(*this, dqkv, dt, op, "dqkv");
  need_compute(*this, out, dt, op, "out");
  need_compute(*this, dout, dt, op, "dout");
  const PackedQkv p = packed_qkv(qkv, Hq, Hkv, "CudaBackend::attention_packed_backward");
  need_shape(dqkv, qkv.shape(), op, "dqkv");
  need_shape(out, {p.B, p.T, Hq, p.D}, op, "out");
  need_shape(dout, {p.B, p.T, Hq, p.D}, op, "dout");
  ZT_CHECK(saved.defined(),
           "CudaBackend::attention_packed_backward: `saved` is undefined (the forward ran with "
           "keep_for_backward = false)");
  need_compute(*this, saved, DType::f32, op, "saved (the forward's row log-sum-exp)");
  need_shape(saved, {p.B, Hq, p.T}, op, "saved (the forward's row log-sum-exp)");
  DeviceGuard guard(index_);
  const PackedBlocks in = packed_blocks(qkv, p), d = packed_blocks(dqkv, p);
  std::string why;
  if (use_cudnn(dt, p.B, p.T, Hq, Hkv, p.D, p.width(),
                {d.q, d.k, d.v, dout.raw(), in.q, in.k, in.v, out.raw(), saved.raw()}, op, &why)) {
#if defined(ZT_HAVE_CUDNN)
    cudnn_attn_->backward(CudnnAttnShape{p.B, p.T, Hq, Hkv, p.D, dt, p.width()}, const_cast<void*>(d.q),
                          const_cast<void*>(d.k), const_cast<void*>(d.v), dout.raw(), in.q, in.k, in.v, out.raw(),
                          saved.data<float>(), stream());
    return;
#endif
  }
  if (attention_impl_ == AttentionImpl::automatic)
    report_fallback(fallback_reported_, device(), op, dt, AttnDims{p.B, p.T, Hq, Hkv, p.D},
                    why + " (q, k, v copied out of the packed rows)");
  attention_packed_backward_by_copies(*this, dqkv, dout, qkv, out, saved, Hq, Hkv);
}

}  // namespace zt
