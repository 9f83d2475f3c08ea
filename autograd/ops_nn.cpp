// defines: layernorm, residual_layernorm, rmsnorm, residual_rmsnorm, rope, rope_packed, causal_attention,
//          causal_attention_packed; file-local: check_channel_param, norm_channels, give_dx, layernorm_grad_fn,
//          rmsnorm_grad_fn, residual_grad, check_residual, rope_heads
//
// The "nn" half of autograd/ops.h: layernorm, rmsnorm, residual_layernorm, residual_rmsnorm, rope,
// causal_attention, causal_attention_packed.
//
// Each op checks its inputs at the boundary (one device; messages name the op, the argument and
// what was expected), allocates its outputs on the inputs' device, calls one entry of that
// device's Backend on contiguous tensors, and records a GradFn that captures only Tensors (the
// contiguous inputs and the statistics the forward saved, in the backend's stats dtype).
#include <cmath>
#include <utility>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "core/attention_packed.h"  // defines: packed_qkv

namespace zt {

namespace {

using detail::need_compute;
using detail::need_same_dtype;
using detail::new_output;
using detail::op_backend;

// A per-channel parameter (weight or bias) of a norm over the last dim C.
void check_channel_param(const Var& p, const Var& x, int64_t C, const char* op, const char* name, const Backend& be) {
  need_compute(op, name, p, be);
  need_same_dtype(op, name, p, "x", x);
  if (p.shape() != Shape{C})
    ZT_THROW(op, ": ", name, ": expected shape ", shape_str(Shape{C}), " to match the last dim of x ", shape_str(x.shape()),
             ", got ", shape_str(p.shape()));
}

int64_t norm_channels(const Var& x, const char* op, double eps, const Backend& be) {
  need_compute(op, "x", x, be);
  if (x.dim() < 1) ZT_THROW(op, ": x: expected at least 1 dimension, got shape ", shape_str(x.shape()));
  const int64_t C = x.size(-1);
  if (C < 1) ZT_THROW(op, ": x: the normalized (last) dimension is empty in shape ", shape_str(x.shape()));
  if (!(eps >= 0)) ZT_THROW(op, ": eps must be >= 0, got ", eps);
  return C;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// LayerNorm: x (..., C), weight (C), bias (C) or undefined.

namespace {

// A norm's dx to its input x: dx already holds x's gradient so far when the backend added it
// (prior defined: Var::grad_to_fold), else it joins by add_grad. Nothing when x wants none.
void give_dx(const Var& x, const Tensor& dx, const Tensor& prior) {
  if (prior.defined()) x.set_folded_grad(dx);
  else if (dx.defined()) x.add_grad(dx);
}

// The backward of a LayerNorm node with inputs {x, weight, bias}: xc (N, C) is the value of x it
// normalized (layernorm's input, or residual_layernorm's h), mean and rstd its statistics.
GradFn layernorm_grad_fn(Tensor xc, Tensor w, Tensor mean, Tensor rstd, int64_t C, Backend& be) {
  return [xc, w, mean, rstd, C, &be = be](std::vector<Var>& in, const Tensor& grad) {
    const bool want_x = in[0].requires_grad(), want_w = in[1].requires_grad();
    const bool want_b = in[2].defined() && in[2].requires_grad();
    const DType dt = xc.dtype();
    Tensor g = grad.contiguous();
    Tensor dx = want_x ? new_output(be, in[0].shape(), dt) : Tensor();
    Tensor dw = want_w ? new_output(be, {C}, dt) : Tensor();
    Tensor db = want_b ? new_output(be, {C}, dt) : Tensor();
    const Tensor prior = want_x ? in[0].grad_to_fold(dt) : Tensor();  // x's gradient so far, added in the same pass
    be.layernorm_backward(want_x ? dx.view(xc.shape()) : Tensor(), dw, db, g.view(xc.shape()), xc, w, mean, rstd,
                          prior.defined() ? prior.view(xc.shape()) : Tensor());
    give_dx(in[0], dx, prior);
    if (want_w) in[1].add_grad(dw);
    if (want_b) in[2].add_grad(db);
  };
}

// The backward of an RMSNorm node with inputs {x, weight} (rmsnorm, or residual_rmsnorm's n).
GradFn rmsnorm_grad_fn(Tensor xc, Tensor w, Tensor rstd, int64_t C, Backend& be) {
  return [xc, w, rstd, C, &be = be](std::vector<Var>& in, const Tensor& grad) {
    const bool want_x = in[0].requires_grad(), want_w = in[1].requires_grad();
    const DType dt = xc.dtype();
    Tensor g = grad.contiguous();
    Tensor dx = want_x ? new_output(be, in[0].shape(), dt) : Tensor();
    Tensor dw = want_w ? new_output(be, {C}, dt) : Tensor();
    const Tensor prior = want_x ? in[0].grad_to_fold(dt) : Tensor();
    be.rmsnorm_backward(want_x ? dx.view(xc.shape()) : Tensor(), dw, g.view(xc.shape()), xc, w, rstd,
                        prior.defined() ? prior.view(xc.shape()) : Tensor());
    give_dx(in[0], dx, prior);
    if (want_w) in[1].add_grad(dw);
  };
}

// h = x + y's backward: the gradient of h is the gradient of both, handed on as it is (add_grad
// never writes into a gradient it did not copy), as add's.
void residual_grad(std::vector<Var>& in, const Tensor& grad) {
  in[0].add_grad(grad);
  in[1].add_grad(grad);
}

// The residual norms' second input: y of x's device, dtype and shape.
void check_residual(const char* op, const Var& x, const Var& y, const Backend& be) {
  need_compute(op, "y", y, be);
  need_same_dtype(op, "y", y, "x", x);
  if (y.shape() != x.shape())
    ZT_THROW(op, ": y: expected the shape of x ", shape_str(x.shape()), ", got ", shape_str(y.shape()));
}

}  // namespace

Var layernorm(const Var& x, const Var& weight, const Var& bias, double eps) {
  Backend& be = op_backend("layernorm", {{"x", &x}, {"weight", &weight}, {"bias", &bias}});
  const int64_t C = norm_channels(x, "layernorm", eps, be);
  check_channel_param(weight, x, C, "layernorm", "weight", be);
  if (bias.defined()) check_channel_param(bias, x, C, "layernorm", "bias", be);
  const DType dt = x.dtype(), st = be.stats_dtype(dt);
  const int64_t N = x.value().numel() / C;
  Tensor xc = x.value().contiguous().view({N, C}), w = weight.value().contiguous();
  Tensor b = bias.defined() ? bias.value().contiguous() : Tensor();
  Tensor out = new_output(be, x.shape(), dt), mean = new_output(be, {N}, st), rstd = new_output(be, {N}, st);
  be.layernorm(out.view({N, C}), mean, rstd, xc, w, b, eps);
  return Var::make(out, {x, weight, bias}, layernorm_grad_fn(xc, w, mean, rstd, C, be), "layernorm");
}

// Residual + LayerNorm: x, y (..., C), weight (C), bias (C) or undefined -> {h, n}.
std::pair<Var, Var> residual_layernorm(const Var& x, const Var& y, const Var& weight, const Var& bias, double eps) {
  const char* op = "residual_layernorm";
  Backend& be = op_backend(op, {{"x", &x}, {"y", &y}, {"weight", &weight}, {"bias", &bias}});
  const int64_t C = norm_channels(x, op, eps, be);
  check_residual(op, x, y, be);
  check_channel_param(weight, x, C, op, "weight", be);
  if (bias.defined()) check_channel_param(bias, x, C, op, "bias", be);
  const DType dt = x.dtype(), st = be.stats_dtype(dt);
  const int64_t N = x.value().numel() / C;
  Tensor xc = x.value().contiguous().view({N, C}), yc = y.value().contiguous().view({N, C});
  Tensor w = weight.value().contiguous(), b = bias.defined() ? bias.value().contiguous() : Tensor();
  Tensor h = new_output(be, x.shape(), dt), out = new_output(be, x.shape(), dt);
  Tensor mean = new_output(be, {N}, st), rstd = new_output(be, {N}, st);
  be.residual_layernorm(h.view({N, C}), out.view({N, C}), mean, rstd, xc, yc, w, b, eps);
  Var hv = Var::make(h, {x, y}, residual_grad, "residual_layernorm.h");
  Var n = Var::make(out, {hv, weight, bias}, layernorm_grad_fn(h.view({N, C}), w, mean, rstd, C, be),
                    "residual_layernorm");
  return {std::move(hv), std::move(n)};
}

// ---------------------------------------------------------------------------------------------
// RMSNorm: x (..., C), weight (C).

Var rmsnorm(const Var& x, const Var& weight, double eps) {
  Backend& be = op_backend("rmsnorm", {{"x", &x}, {"weight", &weight}});
  const int64_t C = norm_channels(x, "rmsnorm", eps, be);
  check_channel_param(weight, x, C, "rmsnorm", "weight", be);
  const DType dt = x.dtype();
  const int64_t N = x.value().numel() / C;
  Tensor xc = x.value().contiguous().view({N, C}), w = weight.value().contiguous();
  Tensor out = new_output(be, x.shape(), dt), rstd = new_output(be, {N}, be.stats_dtype(dt));
  be.rmsnorm(out.view({N, C}), rstd, xc, w, eps);
  return Var::make(out, {x, weight}, rmsnorm_grad_fn(xc, w, rstd, C, be), "rmsnorm");
}

// Residual + RMSNorm: x, y (..., C), weight (C) -> {h, n}.
std::pair<Var, Var> residual_rmsnorm(const Var& x, const Var& y, const Var& weight, double eps) {
  const char* op = "residual_rmsnorm";
  Backend& be = op_backend(op, {{"x", &x}, {"y", &y}, {"weight", &weight}});
  const int64_t C = norm_channels(x, op, eps, be);
  check_residual(op, x, y, be);
  check_channel_param(weight, x, C, op, "weight", be);
  const DType dt = x.dtype();
  const int64_t N = x.value().numel() / C;
  Tensor xc = x.value().contiguous().view({N, C}), yc = y.value().contiguous().view({N, C});
  Tensor w = weight.value().contiguous();
  Tensor h = new_output(be, x.shape(), dt), out = new_output(be, x.shape(), dt);
  Tensor rstd = new_output(be, {N}, be.stats_dtype(dt));
  be.residual_rmsnorm(h.view({N, C}), out.view({N, C}), rstd, xc, yc, w, eps);
  Var hv = Var::make(h, {x, y}, residual_grad, "residual_rmsnorm.h");
  Var n = Var::make(out, {hv, weight}, rmsnorm_grad_fn(h.view({N, C}), w, rstd, C, be), "residual_rmsnorm");
  return {std::move(hv), std::move(n)};
}

// ---------------------------------------------------------------------------------------------
// RoPE: x (B, T, H, D), D even. The cos/sin tables (T, D/2) are built once in the forward and
// kept for the backward (the inverse rotation).

namespace {
// RoPE over the first rot_heads heads of x (B, T, H, D), the rest passed through (one op for the
// plain rope and the packed one).
Var rope_heads(const char* op, const Var& x, int64_t rot_heads, const RopeParams& p) {
  Backend& be = op_backend(op, {{"x", &x}});
  need_compute(op, "x", x, be);
  const int64_t T_len = x.size(1), D = x.size(3);
  if (D < 2 || D % 2 != 0)
    ZT_THROW(op, ": head dim D must be even and >= 2 (pairs (d, d + D/2) rotate), got D = ", D, " in ",
             shape_str(x.shape()));
  if (!(p.theta > 0)) ZT_THROW(op, ": theta must be > 0, got ", p.theta);
  const DType dt = x.dtype(), st = be.stats_dtype(dt);
  Tensor xc = x.value().contiguous();
  Tensor cos_t = new_output(be, {T_len, D / 2}, st), sin_t = new_output(be, {T_len, D / 2}, st);
  Tensor out = new_output(be, x.shape(), dt);
  be.rope_tables(cos_t, sin_t, p);
  be.rope(out, xc, cos_t, sin_t, /*inverse=*/false, rot_heads);
  return Var::make(
      out, {x},
      [cos_t, sin_t, rot_heads, &be = be](std::vector<Var>& in, const Tensor& grad) {
        Tensor g = grad.contiguous();
        Tensor dx = new_output(be, g.shape(), g.dtype());
        be.rope(dx, g, cos_t, sin_t, /*inverse=*/true, rot_heads);
        in[0].add_grad(dx);
      },
      op);
}
}  // namespace

Var rope(const Var& x, const RopeParams& p) {
  if (x.dim() != 4) ZT_THROW("rope: x: expected shape (B, T, H, D), got ", shape_str(x.shape()));
  return rope_heads("rope", x, x.size(2), p);
}

Var rope_packed(const Var& qkv, int64_t Hq, int64_t Hkv, const RopeParams& p) {
  const char* op = "rope_packed";
  if (Hq < 1 || Hkv < 1 || Hq % Hkv != 0 || qkv.dim() != 3 || qkv.size(2) % (Hq + 2 * Hkv) != 0)
    ZT_THROW(op, ": qkv ", shape_str(qkv.shape()), " is not (B, T, (Hq + 2 Hkv) D) for Hq = ", Hq, ", Hkv = ", Hkv);
  const int64_t B = qkv.size(0), T_len = qkv.size(1), H = Hq + 2 * Hkv, D = qkv.size(2) / H;
  return reshape(rope_heads(op, reshape(qkv, {B, T_len, H, D}), Hq + Hkv, p), qkv.shape());
}

// ---------------------------------------------------------------------------------------------
// Causal attention: q (B, T, Hq, D), k, v (B, T, Hkv, D) -> (B, T, Hq, D).

Var causal_attention(const Var& q, const Var& k, const Var& v) {
  const char* op = "causal_attention";
  Backend& be = op_backend(op, {{"q", &q}, {"k", &k}, {"v", &v}});
  need_compute(op, "q", q, be);
  need_compute(op, "k", k, be);
  need_compute(op, "v", v, be);
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

  const bool keep = grad_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  // contiguous() of a contiguous input is the input itself: nothing is copied or kept twice
  Tensor qc = q.value().contiguous(), kc = k.value().contiguous(), vc = v.value().contiguous();
  Tensor out = new_output(be, qc.shape(), qc.dtype());
  // What the backward needs (the row log-sum-exp (B, Hq, T)) is kept only when a backward can follow.
  Tensor saved = be.attention(out, qc, kc, vc, keep);
  return Var::make(
      out, {q, k, v},
      [qc, kc, vc, out, saved, &be = be](std::vector<Var>& in, const Tensor& grad) {
        Tensor dq = new_output(be, qc.shape(), qc.dtype()), dk = new_output(be, kc.shape(), kc.dtype()),
               dv = new_output(be, vc.shape(), vc.dtype());
        be.attention_backward(dq, dk, dv, grad.contiguous(), qc, kc, vc, out, saved);
        in[0].add_grad(dq);
        in[1].add_grad(dk);
        in[2].add_grad(dv);
      },
      "causal_attention");
}

Var causal_attention_packed(const Var& qkv, int64_t Hq, int64_t Hkv) {
  const char* op = "causal_attention_packed";
  Backend& be = op_backend(op, {{"qkv", &qkv}});
  need_compute(op, "qkv", qkv, be);
  const PackedQkv p = packed_qkv(qkv.value(), Hq, Hkv, op);  // the shape checks, once for every backend
  // The backend reads q, k, v from the packed rows (in place where its kernel takes strides:
  // cuDNN; else copies that live for the call: core/attention_packed.h), and writes dq, dk, dv
  // into one dqkv of the same layout.
  const bool keep = grad_enabled() && qkv.requires_grad();
  const Tensor x = qkv.value().contiguous();
  Tensor out = new_output(be, {p.B, p.T, Hq, p.D}, x.dtype());
  Tensor saved = be.attention_packed(out, x, Hq, Hkv, keep);
  return Var::make(
      out, {qkv},
      [x, out, saved, Hq, Hkv, &be = be](std::vector<Var>& in, const Tensor& grad) {
        Tensor dqkv = new_output(be, x.shape(), x.dtype());
        be.attention_packed_backward(dqkv, grad.contiguous(), x, out, saved, Hq, Hkv);
        in[0].add_grad(dqkv);
      },
      "causal_attention_packed");
}

}  // namespace zt
