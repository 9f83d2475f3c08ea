// The "nn" half of autograd/ops.h: layernorm, rmsnorm, rope, causal_attention.
//
// Each op checks its inputs at the boundary (messages name the op, the argument and what was
// expected), runs a kernel from core/kernels on contiguous buffers, and records a GradFn that
// captures only Tensors (the contiguous inputs and the statistics the forward saved).
#include <cmath>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "core/kernels/attention.h"
#include "core/kernels/norm.h"
#include "core/kernels/rope.h"

namespace zt {

namespace {

using detail::dispatch;
using detail::need_float;
using detail::need_same_dtype;

// A per-channel parameter (weight or bias) of a norm over the last dim C.
void check_channel_param(const Var& p, const Var& x, int64_t C, const char* op, const char* name) {
  need_float(op, name, p);
  need_same_dtype(op, name, p, "x", x);
  if (p.shape() != Shape{C})
    ZT_THROW(op, ": ", name, ": expected shape ", shape_str(Shape{C}), " to match the last dim of x ", shape_str(x.shape()),
             ", got ", shape_str(p.shape()));
}

int64_t norm_channels(const Var& x, const char* op, double eps) {
  need_float(op, "x", x);
  if (x.dim() < 1) ZT_THROW(op, ": x: expected at least 1 dimension, got shape ", shape_str(x.shape()));
  const int64_t C = x.size(-1);
  if (C < 1) ZT_THROW(op, ": x: the normalized (last) dimension is empty in shape ", shape_str(x.shape()));
  if (!(eps >= 0)) ZT_THROW(op, ": eps must be >= 0, got ", eps);
  return C;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// LayerNorm: x (..., C), weight (C), bias (C) or undefined.

Var layernorm(const Var& x, const Var& weight, const Var& bias, double eps) {
  const int64_t C = norm_channels(x, "layernorm", eps);
  check_channel_param(weight, x, C, "layernorm", "weight");
  if (bias.defined()) check_channel_param(bias, x, C, "layernorm", "bias");
  const DType dt = x.dtype();
  Tensor xc = x.value().contiguous(), w = weight.value().contiguous();
  Tensor b = bias.defined() ? bias.value().contiguous() : Tensor();
  const int64_t N = xc.numel() / C;
  Tensor out = Tensor::empty(x.shape(), dt), mean = Tensor::empty({N}, dt), rstd = Tensor::empty({N}, dt);
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    layernorm_forward<T>(out.data<T>(), mean.data<T>(), rstd.data<T>(), xc.data<T>(), w.data<T>(),
                         b.defined() ? b.data<T>() : nullptr, N, C, eps);
  });
  return Var::make(
      out, {x, weight, bias},
      [xc, w, mean, rstd, N, C](std::vector<Var>& in, const Tensor& grad) {
        const bool want_x = in[0].requires_grad(), want_w = in[1].requires_grad();
        const bool want_b = in[2].defined() && in[2].requires_grad();
        const DType dt = xc.dtype();
        Tensor g = grad.contiguous();
        Tensor dx = want_x ? Tensor::empty(xc.shape(), dt) : Tensor();
        Tensor dw = want_w ? Tensor::empty({C}, dt) : Tensor();
        Tensor db = want_b ? Tensor::empty({C}, dt) : Tensor();
        dispatch(dt, [&](auto tag) {
          using T = decltype(tag);
          layernorm_backward<T>(want_x ? dx.data<T>() : nullptr, want_w ? dw.data<T>() : nullptr,
                                want_b ? db.data<T>() : nullptr, g.data<T>(), xc.data<T>(), w.data<T>(),
                                mean.data<T>(), rstd.data<T>(), N, C);
        });
        if (want_x) in[0].add_grad(dx);
        if (want_w) in[1].add_grad(dw);
        if (want_b) in[2].add_grad(db);
      },
      "layernorm");
}

// ---------------------------------------------------------------------------------------------
// RMSNorm: x (..., C), weight (C).

Var rmsnorm(const Var& x, const Var& weight, double eps) {
  const int64_t C = norm_channels(x, "rmsnorm", eps);
  check_channel_param(weight, x, C, "rmsnorm", "weight");
  const DType dt = x.dtype();
  Tensor xc = x.value().contiguous(), w = weight.value().contiguous();
  const int64_t N = xc.numel() / C;
  Tensor out = Tensor::empty(x.shape(), dt), rstd = Tensor::empty({N}, dt);
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    rmsnorm_forward<T>(out.data<T>(), rstd.data<T>(), xc.data<T>(), w.data<T>(), N, C, eps);
  });
  return Var::make(
      out, {x, weight},
      [xc, w, rstd, N, C](std::vector<Var>& in, const Tensor& grad) {
        const bool want_x = in[0].requires_grad(), want_w = in[1].requires_grad();
        const DType dt = xc.dtype();
        Tensor g = grad.contiguous();
        Tensor dx = want_x ? Tensor::empty(xc.shape(), dt) : Tensor();
        Tensor dw = want_w ? Tensor::empty({C}, dt) : Tensor();
        dispatch(dt, [&](auto tag) {
          using T = decltype(tag);
          rmsnorm_backward<T>(want_x ? dx.data<T>() : nullptr, want_w ? dw.data<T>() : nullptr, g.data<T>(),
                              xc.data<T>(), w.data<T>(), rstd.data<T>(), N, C);
        });
        if (want_x) in[0].add_grad(dx);
        if (want_w) in[1].add_grad(dw);
      },
      "rmsnorm");
}

// ---------------------------------------------------------------------------------------------
// RoPE: x (B, T, H, D), D even. The cos/sin tables (T, D/2) are built once in the forward and
// kept for the backward (the inverse rotation).

Var rope(const Var& x, double theta) {
  need_float("rope", "x", x);
  if (x.dim() != 4) ZT_THROW("rope: x: expected shape (B, T, H, D), got ", shape_str(x.shape()));
  const int64_t B = x.size(0), T_len = x.size(1), H = x.size(2), D = x.size(3);
  if (D < 2 || D % 2 != 0)
    ZT_THROW("rope: head dim D must be even and >= 2 (pairs (d, d + D/2) rotate), got D = ", D, " in x ",
             shape_str(x.shape()));
  if (!(theta > 0)) ZT_THROW("rope: theta must be > 0, got ", theta);
  const DType dt = x.dtype();
  Tensor xc = x.value().contiguous();
  Tensor cos_t = Tensor::empty({T_len, D / 2}, dt), sin_t = Tensor::empty({T_len, D / 2}, dt);
  Tensor out = Tensor::empty(x.shape(), dt);
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    rope_tables<T>(cos_t.data<T>(), sin_t.data<T>(), T_len, D, theta);
    rope_apply<T>(out.data<T>(), xc.data<T>(), cos_t.data<T>(), sin_t.data<T>(), B, T_len, H, D, false);
  });
  return Var::make(
      out, {x},
      [cos_t, sin_t, B, T_len, H, D](std::vector<Var>& in, const Tensor& grad) {
        Tensor g = grad.contiguous();
        Tensor dx = Tensor::empty(g.shape(), g.dtype());
        dispatch(g.dtype(), [&](auto tag) {
          using T = decltype(tag);
          rope_apply<T>(dx.data<T>(), g.data<T>(), cos_t.data<T>(), sin_t.data<T>(), B, T_len, H, D, true);
        });
        in[0].add_grad(dx);
      },
      "rope");
}

// ---------------------------------------------------------------------------------------------
// Causal attention: q (B, T, Hq, D), k, v (B, T, Hkv, D) -> (B, T, Hq, D).

Var causal_attention(const Var& q, const Var& k, const Var& v) {
  const char* op = "causal_attention";
  need_float(op, "q", q);
  need_float(op, "k", k);
  need_float(op, "v", v);
  if (q.dim() != 4) ZT_THROW(op, ": q: expected shape (B, T, Hq, D), got ", shape_str(q.shape()));
  if (k.dim() != 4) ZT_THROW(op, ": k: expected shape (B, T, Hkv, D), got ", shape_str(k.shape()));
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
    ZT_THROW(op, ": q, k, v must share one dtype, got ", dtype_name(q.dtype()), ", ", dtype_name(k.dtype()), ", ",
             dtype_name(v.dtype()));
  const int64_t B = q.size(0), T_len = q.size(1), Hq = q.size(2), D = q.size(3), Hkv = k.size(2);
  if (D < 1 || Hq < 1) ZT_THROW(op, ": q: heads and head dim must be >= 1, got ", shape_str(q.shape()));
  if (k.size(0) != B || k.size(1) != T_len || k.size(3) != D || Hkv < 1)
    ZT_THROW(op, ": k: expected shape (", B, ", ", T_len, ", Hkv, ", D, ") with Hkv >= 1 to match q ",
             shape_str(q.shape()), ", got ", shape_str(k.shape()));
  if (v.shape() != k.shape())
    ZT_THROW(op, ": v: expected the shape of k ", shape_str(k.shape()), ", got ", shape_str(v.shape()));
  if (Hq % Hkv != 0)
    ZT_THROW(op, ": query heads Hq = ", Hq, " must be a multiple of kv heads Hkv = ", Hkv, " (q ",
             shape_str(q.shape()), ", k ", shape_str(k.shape()), ")");

  const DType dt = q.dtype();
  Tensor qc = q.value().contiguous(), kc = k.value().contiguous(), vc = v.value().contiguous();
  Tensor out = Tensor::empty(q.shape(), dt);
  // P (B, Hq, T, T) is kept only when a backward can follow (see core/kernels/attention.h).
  const bool keep = grad_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  Tensor P = keep ? Tensor::empty({B, Hq, T_len, T_len}, dt) : Tensor();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    attention_forward<T>(out.data<T>(), keep ? P.data<T>() : nullptr, qc.data<T>(), kc.data<T>(), vc.data<T>(), B,
                         T_len, Hq, Hkv, D);
  });
  return Var::make(
      out, {q, k, v},
      [qc, kc, vc, P, B, T_len, Hq, Hkv, D](std::vector<Var>& in, const Tensor& grad) {
        const DType dt = qc.dtype();
        Tensor g = grad.contiguous();
        Tensor dq = Tensor::empty(qc.shape(), dt), dk = Tensor::empty(kc.shape(), dt),
               dv = Tensor::empty(vc.shape(), dt);
        dispatch(dt, [&](auto tag) {
          using T = decltype(tag);
          attention_backward<T>(dq.data<T>(), dk.data<T>(), dv.data<T>(), g.data<T>(), qc.data<T>(), kc.data<T>(),
                                vc.data<T>(), P.data<T>(), B, T_len, Hq, Hkv, D);
        });
        in[0].add_grad(dq);
        in[1].add_grad(dk);
        in[2].add_grad(dv);
      },
      "causal_attention");
}

}  // namespace zt
