// defines: cross_entropy, linear_cross_entropy; file-local: Targets, checked_targets, valid_columns
//
// The losses of ops.h: the softmax cross-entropy over logits, and the same with the classifier's
// matmul in front of it, fused the way llm.c's classifier is (the logits' buffer becomes their
// gradient in the forward, so the (N, V) logits exist once and are read once).
#include <string>

#include "autograd/op_util.h"
#include "autograd/ops.h"

namespace zt {

namespace {

using namespace detail;  // autograd/op_util.h: the ops' input checks, outputs, gradient slots

// Targets (lead shape, int32) checked on the host against the valid vocabulary Vv: each in
// [0, Vv) or -1 (ignored); count = the rows that take part. dev: the kernels' copy, (N).
struct Targets {
  Tensor dev;
  int64_t count = 0;
};
// `of`: what the shape comes from, for the message ("logits (4, 3, 40)").
Targets checked_targets(const char* op, const Tensor& targets, const Shape& lead, int64_t Vv, const std::string& of,
                        const Backend& be) {
  if (!targets.defined()) ZT_THROW(op, ": targets is undefined");
  if (targets.dtype() != DType::i32)
    ZT_THROW(op, ": targets must be int32, got ", dtype_name(targets.dtype()), shape_str(targets.shape()));
  if (targets.shape() != lead)
    ZT_THROW(op, ": targets must have shape ", shape_str(lead), " for ", of, ", got ", shape_str(targets.shape()));
  const Indices tg = indices_for(targets, be.device());  // checked and counted on the host
  const int32_t* pt = tg.host.data<int32_t>();
  const int64_t N = shape_numel(lead);
  Targets r;
  for (int64_t i = 0; i < N; ++i) {
    if (pt[i] == -1) continue;
    if (pt[i] < 0 || pt[i] >= Vv)
      ZT_THROW(op, ": target ", pt[i], " at position ", i, " is outside [0, ", Vv,
               ") (valid_vocab) and is not -1 (ignored)");
    ++r.count;
  }
  r.dev = tg.dev.view({N});
  return r;
}

// valid_vocab as given (-1: all V), checked against V.
int64_t valid_columns(const char* op, int64_t valid_vocab, int64_t V, const Shape& logits_shape) {
  const int64_t Vv = valid_vocab < 0 ? V : valid_vocab;
  if (valid_vocab < -1 || Vv < 1 || Vv > V)
    ZT_THROW(op, ": valid_vocab must be -1 (all) or in [1, ", V, "] for logits ", shape_str(logits_shape), ", got ",
             valid_vocab);
  return Vv;
}

}  // namespace

Var cross_entropy(const Var& logits, const Tensor& targets, int64_t valid_vocab) {
  Backend& be = op_backend("cross_entropy", {{"logits", &logits}});
  need_compute("cross_entropy", "logits", logits, be);
  if (logits.dim() < 1) ZT_THROW("cross_entropy: logits must be (..., V), got a scalar");
  const Shape lead = drop_last(logits.shape());
  const int64_t V = logits.size(-1), N = shape_numel(lead);
  const int64_t Vv = valid_columns("cross_entropy", valid_vocab, V, logits.shape());
  const Targets tg = checked_targets("cross_entropy", targets, lead, Vv, "logits " + shape_str(logits.shape()), be);
  const int64_t count = tg.count;
  const DType dt = logits.dtype();
  Tensor L = logits.value().contiguous().view({N, V});
  Tensor lse = new_output(be, {N}, be.stats_dtype(dt));  // per-row log-sum-exp, kept for the backward
  Tensor y = new_output(be, {}, be.stats_dtype(dt));     // bf16 logits: a float32 loss (a 2^-8 loss is no use)
  Tensor t_dev = tg.dev;
  be.cross_entropy(y, lse, L, t_dev, Vv, count);
  return Var::make(
      y, {logits},
      [lse, t_dev, count, N, V, Vv, &be = be](std::vector<Var>& in, const Tensor& grad_out) {
        Tensor L = in[0].value().contiguous();
        Tensor dl = new_output(be, L.shape(), L.dtype());
        be.cross_entropy_backward(dl.view({N, V}), L.view({N, V}), lse, t_dev, grad_out, Vv, count);
        in[0].add_grad(dl);
      },
      "cross_entropy");
}

Var linear_cross_entropy(const Var& x, const Var& w, const Tensor& targets, int64_t valid_vocab) {
  const char* op = "linear_cross_entropy";
  Backend& be = op_backend(op, {{"x", &x}, {"w", &w}});
  need_compute(op, "x", x, be);
  need_compute(op, "w", w, be);
  need_same_dtype(op, "w", w, "x", x);
  if (w.dim() != 2) ZT_THROW(op, ": w must be 2-D (V, C), got ", shape_str(w.shape()));
  if (x.dim() < 1) ZT_THROW(op, ": x must be (..., C), got a scalar");
  const int64_t V = w.size(0), C = w.size(1);
  if (x.size(-1) != C)
    ZT_THROW(op, ": x ", shape_str(x.shape()), " has ", x.size(-1), " features but w ", shape_str(w.shape()),
             " (V, C) expects ", C);
  // Without a backward to feed, the two ops as they are (the logits' gradient is not wanted).
  if (!grad_enabled() || (!x.requires_grad() && !w.requires_grad()))
    return cross_entropy(linear(x, w, Var()), targets, valid_vocab);
  const Shape lead = drop_last(x.shape());
  const int64_t N = shape_numel(lead);
  Shape logits_shape = lead;
  logits_shape.push_back(V);
  const int64_t Vv = valid_columns(op, valid_vocab, V, logits_shape);
  const Targets tg = checked_targets(op, targets, lead, Vv, "x " + shape_str(x.shape()), be);
  const DType dt = x.dtype();
  // G (N, V): the logits, then (cross_entropy_and_grad) their gradient for a loss gradient of 1,
  // which the backward scales by the real one on the (N, C) side: dx = g (G w), dw = G^T (g x).
  Tensor G = new_output(be, {N, V}, dt);
  be.linear(G, x.value().contiguous().view({N, C}), w.value().contiguous(), Tensor());
  Tensor y = new_output(be, {}, be.stats_dtype(dt));
  be.cross_entropy_and_grad(y, G, tg.dev, Vv, tg.count);
  return Var::make(
      y, {x, w},
      [G, N, V, C, &be = be](std::vector<Var>& in, const Tensor& grad_out) {
        const DType dt = G.dtype();
        const bool want_x = in[0].requires_grad();
        const GradSlot dw = grad_slot(be, in[1], {V, C}, dt);
        Tensor X = in[0].value().contiguous().view({N, C});
        Tensor Xs = dw.t.defined() ? new_output(be, {N, C}, dt) : Tensor();  // g x
        if (Xs.defined()) be.scale_by(Xs, X, grad_out);
        Tensor dx = want_x ? new_output(be, {N, C}, dt) : Tensor();
        linear_backward_slots(be, dx, dw, GradSlot{}, G, Xs.defined() ? Xs : X, in[1].value().contiguous());
        if (want_x) {
          be.scale_by(dx, dx, grad_out);
          in[0].add_grad(dx.view(in[0].shape()));
        }
        add_grad_unless_direct(in[1], dw);
      },
      op);
}

}  // namespace zt
