// defines: CpuBackend (bias_gelu, bias_gelu_backward, linear_gelu, linear_dgelu_backward,
//          residual_layernorm, residual_rmsnorm); file-local: col_sums
//
// CpuBackend, part 3 (core/cpu_backend.h): the fused entries — bias + GELU forward and backward,
// linear + GELU and its backward (composed of the other entries here: the GPU's are the fused
// ones), residual + LayerNorm, residual + RMSNorm (core/backend_ops.def's rows) — each one pass of a
// raw-pointer kernel of core/kernels (activation.h, norm.h), float / double by the tensors' dtype.
//
// bfloat16, as every cpu entry, runs the float32 kernel on float32 stand-ins (core/cpu_bf16.h),
// with the rounding the rows specify: bias_gelu rounds out (and dx, db) once; the residual norms
// round h first and normalize the rounded h (the add, then the norm entry: the reference the GPU's
// fused kernel is checked against), so the backward, which reads h, sees the h the statistics
// describe.
#include "core/cpu_backend.h"
#include "core/cpu_backend_util.h"  // opt, need_contiguous, rows_cols
#include "core/cpu_bf16.h"          // Bf16StandIns
#include "core/dispatch.h"          // dispatch_float
#include "core/kernels/activation.h"
#include "core/kernels/elementwise.h"  // col_sum
#include "core/kernels/norm.h"

namespace zt {

using cpu_detail::need_contiguous;
using cpu_detail::opt;
using cpu_detail::rows_cols;

// ---------------------------------------------------------------------------------------------
// bias + GELU: x, out (R, C), b (C)

void CpuBackend::bias_gelu(const Tensor& out, const Tensor& x, const Tensor& b) {
  if (Bf16StandIns f{&out, &x, &b}; f.active()) {
    bias_gelu(f(out), f(x), f(b));
    return f.store({&out});
  }
  need_contiguous("bias_gelu", {&out, &x, &b});
  const auto rc = rows_cols(x);
  const int64_t R = rc.first, C = rc.second;
  ZT_CHECK(b.numel() == C && out.numel() == x.numel(), "cpu backend bias_gelu: x ", x.str(), ", b ", b.str(),
           ", out ", out.str());
  dispatch_float(x.dtype(), "cpu backend ", "bias_gelu", [&](auto tag) {
    using T = decltype(tag);
    bias_gelu_forward<T>(out.data<T>(), x.data<T>(), b.data<T>(), R, C);
  });
}

void CpuBackend::bias_gelu_backward(const Tensor& dx, const Tensor& db, const Tensor& dout, const Tensor& x,
                                    const Tensor& b, bool accumulate) {
  if (Bf16StandIns f{&dx, &db, &dout, &x, &b}; f.active()) {
    bias_gelu_backward(f(dx), f(db), f(dout), f(x), f(b), accumulate);
    return f.store({&dx, &db});
  }
  need_contiguous("bias_gelu_backward", {&dx, &db, &dout, &x, &b});
  ZT_CHECK(dx.defined() || db.defined(), "cpu backend bias_gelu_backward: neither dx nor db wanted");
  const auto rc = rows_cols(x);
  const int64_t R = rc.first, C = rc.second;
  ZT_CHECK(b.numel() == C && dout.numel() == x.numel() && (!dx.defined() || dx.numel() == x.numel()) &&
               (!db.defined() || db.numel() == C),
           "cpu backend bias_gelu_backward: x ", x.str(), ", b ", b.str(), ", dout ", dout.str(), ", dx ", dx.str(),
           ", db ", db.str());
  dispatch_float(x.dtype(), "cpu backend ", "bias_gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    zt::bias_gelu_backward<T>(opt<T>(dx), opt<T>(db), dout.data<T>(), x.data<T>(), b.data<T>(), R, C, accumulate);
  });
}

// ---------------------------------------------------------------------------------------------
// GPT-2's MLP around its GELU: the linear and GELU entries in turn (each rounds its own output in
// bfloat16), the GELU's derivative in place on the dX GEMM's output, then db's column sums.

namespace {

// db (C) (+)= the column sums of x (R, C), rows in order (core/kernels/elementwise.h's col_sum).
void col_sums(const Tensor& db, const Tensor& x, bool accumulate) {
  need_contiguous("linear_dgelu_backward", {&db, &x});
  const auto rc = rows_cols(x);
  dispatch_float(x.dtype(), "cpu backend ", "linear_dgelu_backward", [&](auto tag) {
    using T = decltype(tag);
    col_sum(db.data<T>(), x.data<T>(), rc.first, rc.second, accumulate);
  });
}

}  // namespace

void CpuBackend::linear_gelu(const Tensor& y, const Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& b) {
  ZT_CHECK(y.numel() == pre.numel() && y.dtype() == pre.dtype(), "cpu backend linear_gelu: y ", y.str(), ", pre ",
           pre.str());
  linear(pre, x, w, b);  // pre (M, out) = x w^T + b
  gelu(y, pre);          // y = gelu(pre)
}

void CpuBackend::linear_dgelu_backward(const Tensor& dpre, const Tensor& db, const Tensor& dy, const Tensor& w,
                                       const Tensor& pre, bool accumulate) {
  ZT_CHECK(dpre.numel() == pre.numel() && w.dim() == 2 && (!db.defined() || db.numel() == w.size(1)),
           "cpu backend linear_dgelu_backward: dpre ", dpre.str(), ", pre ", pre.str(), ", w ", w.str(), ", db ",
           db.str());
  linear_backward(dpre, Tensor(), Tensor(), dy, Tensor(), w, false);  // dpre = dy w: the GELU output's gradient
  gelu_backward(dpre, dpre, pre);  // dpre *= gelu'(pre), element by element (in place)
  if (!db.defined()) return;
  if (Bf16StandIns f{&db, &dpre}; f.active()) {  // the sums in float32, db rounded once
    col_sums(f(db), f(dpre), accumulate);
    return f.store({&db});
  }
  col_sums(db, dpre, accumulate);
}

// ---------------------------------------------------------------------------------------------
// residual + norm over the last dimension C: x, y, h, out (N, C)

void CpuBackend::residual_layernorm(const Tensor& h, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                    const Tensor& x, const Tensor& y, const Tensor& w, const Tensor& b, double eps) {
  if (x.dtype() == DType::bf16) {  // h rounded, then normalized: the add and the norm entry in turn
    binary(BinaryOp::add, h, x, y);
    return layernorm(out, mean, rstd, h, w, b, eps);
  }
  need_contiguous("residual_layernorm", {&h, &out, &mean, &rstd, &x, &y, &w, &b});
  const auto rc = rows_cols(x);
  const int64_t N = rc.first, C = rc.second;
  ZT_CHECK(C >= 1 && y.numel() == x.numel() && h.numel() == x.numel() && out.numel() == x.numel() &&
               w.numel() == C && (!b.defined() || b.numel() == C) && mean.numel() == N && rstd.numel() == N,
           "cpu backend residual_layernorm: x ", x.str(), ", y ", y.str(), ", w ", w.str());
  dispatch_float(x.dtype(), "cpu backend ", "residual_layernorm", [&](auto tag) {
    using T = decltype(tag);
    residual_layernorm_forward<T>(h.data<T>(), out.data<T>(), mean.data<T>(), rstd.data<T>(), x.data<T>(),
                                  y.data<T>(), w.data<T>(), opt<T>(b), N, C, eps);
  });
}

void CpuBackend::residual_rmsnorm(const Tensor& h, const Tensor& out, const Tensor& rstd, const Tensor& x,
                                  const Tensor& y, const Tensor& w, double eps) {
  if (x.dtype() == DType::bf16) {
    binary(BinaryOp::add, h, x, y);
    return rmsnorm(out, rstd, h, w, eps);
  }
  need_contiguous("residual_rmsnorm", {&h, &out, &rstd, &x, &y, &w});
  const auto rc = rows_cols(x);
  const int64_t N = rc.first, C = rc.second;
  ZT_CHECK(C >= 1 && y.numel() == x.numel() && h.numel() == x.numel() && out.numel() == x.numel() &&
               w.numel() == C && rstd.numel() == N,
           "cpu backend residual_rmsnorm: x ", x.str(), ", y ", y.str(), ", w ", w.str());
  dispatch_float(x.dtype(), "cpu backend ", "residual_rmsnorm", [&](auto tag) {
    using T = decltype(tag);
    residual_rmsnorm_forward<T>(h.data<T>(), out.data<T>(), rstd.data<T>(), x.data<T>(), y.data<T>(), w.data<T>(),
                                N, C, eps);
  });
}

}  // namespace zt
