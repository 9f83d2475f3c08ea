// defines: reshape, transpose, add, sub, mul, scale, sum, mean, sum_last, matmul and 8 more; file-local:
//          binary, reduce_all, Act, unary_act
//
// The basic differentiable ops of ops.h: shape, elementwise, reductions, matmul/linear,
// activations, softmax, embedding. (Losses: ops_loss.cpp; norms, RoPE and attention: ops_nn.cpp.)
//
// Pattern of every op: check the inputs (one device; messages name the op, the argument, what
// was expected and what came), make them contiguous, allocate the output on the inputs' device,
// call one entry of that device's Backend (core/backend.h), and record a GradFn that does the
// same for the backward. GradFns capture only Tensors, plain values and the Backend, never the
// output Var (no cycles); they read their inputs' values through `inputs`, so nothing is kept
// alive twice.
#include <algorithm>
#include <cmath>

#include "autograd/op_util.h"
#include "autograd/ops.h"

namespace zt {

using namespace detail;  // autograd/op_util.h: the ops' input checks, outputs, gradient slots

// =============================================================================================
// shape

Var reshape(const Var& x, const Shape& shape) {
  need_defined("reshape", "x", x);
  Tensor y;
  try {
    y = x.value().reshape(shape);
  } catch (const Error& e) {
    ZT_THROW("reshape: cannot reshape ", shape_str(x.shape()), " to ", shape_str(shape), " (", e.what(), ")");
  }
  const Shape in_shape = x.shape();
  return Var::make(y, {x}, [in_shape](std::vector<Var>& in, const Tensor& g) {
    in[0].add_grad(g.reshape(in_shape));
  }, "reshape");
}

Var transpose(const Var& x, int64_t d0, int64_t d1) {
  need_defined("transpose", "x", x);
  const int64_t n = x.dim();
  if (d0 < -n || d0 >= n || d1 < -n || d1 >= n)
    ZT_THROW("transpose: dims (", d0, ", ", d1, ") out of range for x ", shape_str(x.shape()), " with ", n, " dims");
  Tensor y = x.value().transpose(d0, d1).contiguous();
  if (y.storage() == x.value().storage()) y = y.clone(Category::activations);  // d0 == d1: still a fresh output
  return Var::make(y, {x}, [d0, d1](std::vector<Var>& in, const Tensor& g) {
    in[0].add_grad(g.transpose(d0, d1).contiguous());
  }, "transpose");
}

// =============================================================================================
// elementwise

namespace {

Var binary(const char* op, BinaryOp kind, const Var& a, const Var& b) {
  Backend& be = op_backend(op, {{"a", &a}, {"b", &b}});
  need_compute(op, "a", a, be);
  need_compute(op, "b", b, be);
  need_same_dtype(op, "b", b, "a", a);
  need_same_shape(op, "a", a, "b", b);
  Tensor A = a.value().contiguous(), B = b.value().contiguous();
  Tensor y = new_output(be, a.shape(), a.dtype());
  be.binary(kind, y, A, B);
  return Var::make(y, {a, b}, [kind, &be = be](std::vector<Var>& in, const Tensor& grad_out) {
    if (kind == BinaryOp::add) {  // both gradients are g itself (add_grad never writes into it)
      in[0].add_grad(grad_out);
      in[1].add_grad(grad_out);
      return;
    }
    Tensor g = grad_out.contiguous();
    if (kind == BinaryOp::sub) {
      in[0].add_grad(g);
      if (in[1].requires_grad()) {
        Tensor nb = new_output(be, g.shape(), g.dtype());
        be.scale(nb, g, -1.0);
        in[1].add_grad(nb);
      }
      return;
    }
    const bool ga = in[0].requires_grad(), gb = in[1].requires_grad();
    Tensor A = in[0].value().contiguous(), B = in[1].value().contiguous();
    Tensor da = ga ? new_output(be, g.shape(), g.dtype()) : Tensor();
    Tensor db = gb ? new_output(be, g.shape(), g.dtype()) : Tensor();
    be.mul_backward(da, db, g, A, B);
    if (ga) in[0].add_grad(da);
    if (gb) in[1].add_grad(db);
  }, op);
}

}  // namespace

Var add(const Var& a, const Var& b) { return binary("add", BinaryOp::add, a, b); }
Var sub(const Var& a, const Var& b) { return binary("sub", BinaryOp::sub, a, b); }
Var mul(const Var& a, const Var& b) { return binary("mul", BinaryOp::mul, a, b); }

Var scale(const Var& x, double s) {
  Backend& be = op_backend("scale", {{"x", &x}});
  need_compute("scale", "x", x, be);
  Tensor X = x.value().contiguous();
  Tensor y = new_output(be, x.shape(), x.dtype());
  be.scale(y, X, s);
  return Var::make(y, {x}, [s, &be = be](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous();
    Tensor dx = new_output(be, g.shape(), g.dtype());
    be.scale(dx, g, s);
    in[0].add_grad(dx);
  }, "scale");
}

// =============================================================================================
// reductions

namespace {
// sum (mean = false) or mean of all elements -> shape (); the backward fills factor * g on the
// device (g is never read on the host).
Var reduce_all(const char* op, const Var& x, bool mean) {
  Backend& be = op_backend(op, {{"x", &x}});
  need_compute(op, "x", x, be);
  Tensor X = x.value().contiguous();
  const int64_t n = X.numel();
  const double factor = mean ? 1.0 / static_cast<double>(n) : 1.0;
  Tensor y = new_output(be, {}, x.dtype());
  be.sum_all(y, X, factor);
  return Var::make(y, {x}, [factor, &be = be](std::vector<Var>& in, const Tensor& grad_out) {
    const Tensor& v = in[0].value();
    Tensor dx = new_output(be, v.shape(), v.dtype());
    be.fill_scaled(dx, grad_out, factor);
    in[0].add_grad(dx);
  }, op);
}
}  // namespace

Var sum(const Var& x) { return reduce_all("sum", x, false); }
Var mean(const Var& x) { return reduce_all("mean", x, true); }

Var sum_last(const Var& x) {
  Backend& be = op_backend("sum_last", {{"x", &x}});
  need_compute("sum_last", "x", x, be);
  if (x.dim() < 1) ZT_THROW("sum_last: x must have at least 1 dim, got shape ", shape_str(x.shape()));
  Tensor X = x.value().contiguous();
  const int64_t N = x.size(-1), R = shape_numel(drop_last(x.shape()));
  Tensor y = new_output(be, drop_last(x.shape()), x.dtype());
  be.sum_last(y.view({R}), X.view({R, N}));
  return Var::make(y, {x}, [R, N, &be = be](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous();
    const Tensor& v = in[0].value();
    Tensor dx = new_output(be, v.shape(), v.dtype());
    be.sum_last_backward(dx.view({R, N}), g.view({R}));
    in[0].add_grad(dx);
  }, "sum_last");
}

// =============================================================================================
// matrix products

Var matmul(const Var& a, const Var& b) {
  Backend& be = op_backend("matmul", {{"a", &a}, {"b", &b}});
  need_compute("matmul", "a", a, be);
  need_compute("matmul", "b", b, be);
  need_same_dtype("matmul", "b", b, "a", a);
  if (a.dim() < 2 || b.dim() < 2)
    ZT_THROW("matmul: a (..., M, K) and b (K, N) or (..., K, N) need at least 2 dims, got a ", shape_str(a.shape()),
             " and b ", shape_str(b.shape()));
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  if (b.size(-2) != K)
    ZT_THROW("matmul: a ", shape_str(a.shape()), " has K = ", K, " columns but b ", shape_str(b.shape()), " has ",
             b.size(-2), " rows");
  const bool batched = b.dim() > 2;
  if (batched && (a.dim() != b.dim() || !std::equal(a.shape().begin(), a.shape().end() - 2, b.shape().begin())))
    ZT_THROW("matmul: batched b ", shape_str(b.shape()), " must have the leading dims of a ", shape_str(a.shape()),
             " (or be 2-D (K, N))");
  const int64_t P = batched ? shape_numel(Shape(a.shape().begin(), a.shape().end() - 2)) : 1;  // batches
  Shape out_shape = a.shape();
  out_shape.back() = N;
  Tensor A = a.value().contiguous(), B = b.value().contiguous();
  Tensor y = new_output(be, out_shape, a.dtype());
  const int64_t rows = shape_numel(drop_last(a.shape()));  // 2-D b: every row of a in one GEMM
  // Batched: P products (M, K) @ (K, N); else (..., M, K) rows flattened: one (rows, K) @ (K, N).
  GemmShape f;
  if (batched) {
    f.M = M, f.N = N, f.K = K, f.batch = P;
    f.stride_a = M * K, f.stride_b = K * N, f.stride_c = M * N;
  } else {
    f.M = rows, f.N = N, f.K = K;
  }
  be.gemm(f, A, B, y);
  return Var::make(y, {a, b}, [M, K, N, P, rows, batched, &be = be](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous();
    const bool ga = in[0].requires_grad(), gb = in[1].requires_grad();
    Tensor A = in[0].value().contiguous(), B = in[1].value().contiguous();
    if (ga) {  // da = g @ b^T: (rows, N) @ (N, K)
      Tensor da = new_output(be, A.shape(), A.dtype());
      GemmShape s;
      s.trans_b = true;
      s.M = batched ? M : rows, s.N = K, s.K = N;
      if (batched) s.batch = P, s.stride_a = M * N, s.stride_b = K * N, s.stride_c = M * K;
      be.gemm(s, g, B, da);
      in[0].add_grad(da);
    }
    if (gb) {  // db = a^T @ g: (K, rows) @ (rows, N), into the grad buffer if we may
      Tensor* direct = batched ? nullptr : direct_grad(in[1], B.dtype());
      Tensor db = direct ? *direct : new_output(be, B.shape(), B.dtype());
      GemmShape s;
      s.trans_a = true;
      s.M = K, s.N = N, s.K = batched ? M : rows;
      s.beta = direct ? 1.0 : 0.0;
      if (batched) s.batch = P, s.stride_a = M * K, s.stride_b = M * N, s.stride_c = K * N;
      be.gemm(s, A, g, db);
      if (!direct) in[1].add_grad(db);
    }
  }, "matmul");
}

Var linear(const Var& x, const Var& w, const Var& b) {
  Backend& be = op_backend("linear", {{"x", &x}, {"w", &w}, {"b", &b}});
  need_compute("linear", "x", x, be);
  need_compute("linear", "w", w, be);
  need_same_dtype("linear", "w", w, "x", x);
  if (w.dim() != 2) ZT_THROW("linear: w must be 2-D (out, in), got ", shape_str(w.shape()));
  if (x.dim() < 1) ZT_THROW("linear: x must be (..., in), got a scalar");
  const int64_t out = w.size(0), in_f = w.size(1);
  if (x.size(-1) != in_f)
    ZT_THROW("linear: x ", shape_str(x.shape()), " has ", x.size(-1), " input features but w ", shape_str(w.shape()),
             " (out, in) expects ", in_f);
  const bool has_bias = b.defined();
  if (has_bias) {
    need_compute("linear", "b", b, be);
    need_same_dtype("linear", "b", b, "x", x);
    if (b.shape() != Shape{out})
      ZT_THROW("linear: bias must have shape ", shape_str(Shape{out}), " for w ", shape_str(w.shape()), ", got ",
               shape_str(b.shape()));
  }
  Tensor X = x.value().contiguous(), W = w.value().contiguous();
  Tensor Bc = has_bias ? b.value().contiguous() : Tensor();
  const int64_t M = shape_numel(drop_last(x.shape()));  // rows: every leading dim flattened
  Shape out_shape = x.shape();
  out_shape.back() = out;
  Tensor y = new_output(be, out_shape, x.dtype());
  be.linear(y.view({M, out}), X.view({M, in_f}), W, Bc);
  std::vector<Var> inputs{x, w};
  if (has_bias) inputs.push_back(b);
  auto backward = [M, out, in_f, has_bias, &be = be](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous().view({M, out});
    const DType dt = g.dtype();
    const bool want_x = in[0].requires_grad();
    // dw, db go straight into the parameters' gradient buffers when they may (accumulate).
    const GradSlot dw = grad_slot(be, in[1], {out, in_f}, dt);
    const GradSlot db = has_bias ? grad_slot(be, in[2], {out}, dt) : GradSlot{};
    Tensor dx = want_x ? new_output(be, in[0].shape(), dt) : Tensor();
    Tensor X = in[0].value().contiguous().view({M, in_f}), W = in[1].value().contiguous();
    linear_backward_slots(be, want_x ? dx.view({M, in_f}) : Tensor(), dw, db, g, X, W);
    if (want_x) in[0].add_grad(dx);
    add_grad_unless_direct(in[1], dw);
    if (has_bias) add_grad_unless_direct(in[2], db);
  };
  return Var::make(y, std::move(inputs), std::move(backward), "linear");
}

// =============================================================================================
// activations

namespace {
enum class Act { gelu, silu };

Var unary_act(const char* op, Act kind, const Var& x) {
  Backend& be = op_backend(op, {{"x", &x}});
  need_compute(op, "x", x, be);
  Tensor X = x.value().contiguous();
  Tensor y = new_output(be, x.shape(), x.dtype());
  if (kind == Act::gelu) be.gelu(y, X);
  else be.silu(y, X);
  return Var::make(y, {x}, [kind, &be = be](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous(), X = in[0].value().contiguous();
    Tensor dx = new_output(be, X.shape(), X.dtype());
    if (kind == Act::gelu) be.gelu_backward(dx, g, X);
    else be.silu_backward(dx, g, X);
    in[0].add_grad(dx);
  }, op);
}
}  // namespace

Var gelu(const Var& x) { return unary_act("gelu", Act::gelu, x); }
Var silu(const Var& x) { return unary_act("silu", Act::silu, x); }

Var bias_gelu(const Var& x, const Var& b) {
  const char* op = "bias_gelu";
  Backend& be = op_backend(op, {{"x", &x}, {"b", &b}});
  need_compute(op, "x", x, be);
  need_compute(op, "b", b, be);
  need_same_dtype(op, "b", b, "x", x);
  if (x.dim() < 1) ZT_THROW("bias_gelu: x must be (..., C), got a scalar");
  const int64_t C = x.size(-1), R = shape_numel(drop_last(x.shape()));
  if (b.shape() != Shape{C})
    ZT_THROW("bias_gelu: b: expected shape ", shape_str(Shape{C}), " to match the last dim of x ",
             shape_str(x.shape()), ", got ", shape_str(b.shape()));
  Tensor X = x.value().contiguous(), Bc = b.value().contiguous();
  Tensor y = new_output(be, x.shape(), x.dtype());
  be.bias_gelu(y.view({R, C}), X.view({R, C}), Bc);
  return Var::make(y, {x, b}, [R, C, &be = be](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous().view({R, C});
    const DType dt = g.dtype();
    const bool want_x = in[0].requires_grad(), want_b = in[1].requires_grad();
    // db goes straight into the bias's gradient buffer when it may (accumulate), as linear's does
    Tensor* direct_b = want_b ? direct_grad(in[1], dt) : nullptr;
    Tensor dx = want_x ? new_output(be, in[0].shape(), dt) : Tensor();
    Tensor db = want_b ? (direct_b ? *direct_b : new_output(be, {C}, dt)) : Tensor();
    Tensor X = in[0].value().contiguous().view({R, C}), Bc = in[1].value().contiguous();
    be.bias_gelu_backward(want_x ? dx.view({R, C}) : Tensor(), db, g, X, Bc, direct_b != nullptr);
    if (want_x) in[0].add_grad(dx);
    if (want_b && !direct_b) in[1].add_grad(db);
  }, op);
}

Var gelu_mlp(const Var& x, const Var& w_fc, const Var& b_fc, const Var& w_proj, const Var& b_proj) {
  const char* op = "gelu_mlp";
  Backend& be = op_backend(op, {{"x", &x}, {"w_fc", &w_fc}, {"b_fc", &b_fc}, {"w_proj", &w_proj}, {"b_proj", &b_proj}});
  need_compute(op, "x", x, be);
  for (const auto& [name, v] : {std::pair{"w_fc", &w_fc}, {"b_fc", &b_fc}, {"w_proj", &w_proj}}) {
    need_compute(op, name, *v, be);
    need_same_dtype(op, name, *v, "x", x);
  }
  if (x.dim() < 1) ZT_THROW("gelu_mlp: x must be (..., C), got a scalar");
  if (w_fc.dim() != 2 || w_proj.dim() != 2)
    ZT_THROW("gelu_mlp: w_fc ", shape_str(w_fc.shape()), " and w_proj ", shape_str(w_proj.shape()),
             " must be 2-D (out, in)");
  const int64_t C = x.size(-1), H = w_fc.size(0), out = w_proj.size(0);
  const int64_t M = shape_numel(drop_last(x.shape()));
  if (w_fc.size(1) != C || b_fc.shape() != Shape{H} || w_proj.size(1) != H)
    ZT_THROW("gelu_mlp: for x (..., ", C, ") expected w_fc (H, ", C, "), b_fc (H) and w_proj (out, H); got w_fc ",
             shape_str(w_fc.shape()), ", b_fc ", shape_str(b_fc.shape()), ", w_proj ", shape_str(w_proj.shape()));
  const bool has_b_proj = b_proj.defined();
  if (has_b_proj) {
    need_compute(op, "b_proj", b_proj, be);
    need_same_dtype(op, "b_proj", b_proj, "x", x);
    if (b_proj.shape() != Shape{out})
      ZT_THROW("gelu_mlp: b_proj must have shape ", shape_str(Shape{out}), ", got ", shape_str(b_proj.shape()));
  }
  const DType dt = x.dtype();
  const Tensor X = x.value().contiguous().view({M, C});
  Tensor pre = new_output(be, {M, H}, dt), a = new_output(be, {M, H}, dt);  // saved for the backward
  be.linear_gelu(a, pre, X, w_fc.value().contiguous(), b_fc.value().contiguous());
  Shape out_shape = x.shape();
  out_shape.back() = out;
  Tensor y = new_output(be, out_shape, dt);
  be.linear(y.view({M, out}), a, w_proj.value().contiguous(), has_b_proj ? b_proj.value().contiguous() : Tensor());
  std::vector<Var> inputs{x, w_fc, b_fc, w_proj};
  if (has_b_proj) inputs.push_back(b_proj);
  auto backward = [M, C, H, out, has_b_proj, pre, a, &be = be](std::vector<Var>& in, const Tensor& grad_out) {
    const Tensor g = grad_out.contiguous().view({M, out});
    const DType dt = g.dtype();
    // A parameter's gradient goes straight into its buffer when it may (accumulate), as linear's.
    const GradSlot dw_proj = grad_slot(be, in[3], {out, H}, dt);
    const GradSlot db_proj = has_b_proj ? grad_slot(be, in[4], {out}, dt) : GradSlot{};
    const GradSlot dw_fc = grad_slot(be, in[1], {H, C}, dt), db_fc = grad_slot(be, in[2], {H}, dt);
    const Tensor W_fc = in[1].value().contiguous(), W_proj = in[3].value().contiguous();
    // c_proj: dw_proj (out, H) (+)= g^T a, db_proj (out) (+)= column sums of g
    linear_backward_slots(be, Tensor(), dw_proj, db_proj, g, a, W_proj);
    // through the GELU: dpre (M, H) = (g W_proj) * gelu'(pre); db_fc (H) (+)= its column sums
    const bool want_x = in[0].requires_grad();
    if (want_x || dw_fc.t.defined() || db_fc.t.defined()) {
      const Tensor dpre = new_output(be, {M, H}, dt);
      be.linear_dgelu_backward(dpre, db_fc.t, g, W_proj, pre, db_fc.direct);
      // c_fc: dx (M, C) = dpre W_fc, dw_fc (H, C) (+)= dpre^T x
      Tensor dx = want_x ? new_output(be, in[0].shape(), dt) : Tensor();
      linear_backward_slots(be, want_x ? dx.view({M, C}) : Tensor(), dw_fc, GradSlot{}, dpre,
                            in[0].value().contiguous().view({M, C}), W_fc);
      if (want_x) in[0].add_grad(dx);
    }
    add_grad_unless_direct(in[1], dw_fc);
    add_grad_unless_direct(in[2], db_fc);
    add_grad_unless_direct(in[3], dw_proj);
    if (has_b_proj) add_grad_unless_direct(in[4], db_proj);
  };
  return Var::make(y, std::move(inputs), std::move(backward), op);
}

Var swiglu(const Var& gate, const Var& up) {
  Backend& be = op_backend("swiglu", {{"gate", &gate}, {"up", &up}});
  need_compute("swiglu", "gate", gate, be);
  need_compute("swiglu", "up", up, be);
  need_same_dtype("swiglu", "up", up, "gate", gate);
  need_same_shape("swiglu", "gate", gate, "up", up);
  Tensor G = gate.value().contiguous(), U = up.value().contiguous();
  Tensor y = new_output(be, gate.shape(), gate.dtype());
  be.swiglu(y, G, U);
  return Var::make(y, {gate, up}, [&be = be](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous(), G = in[0].value().contiguous(), U = in[1].value().contiguous();
    const bool gg = in[0].requires_grad(), gu = in[1].requires_grad();
    Tensor dg = gg ? new_output(be, G.shape(), G.dtype()) : Tensor();
    Tensor du = gu ? new_output(be, G.shape(), G.dtype()) : Tensor();
    be.swiglu_backward(dg, du, g, G, U);
    if (gg) in[0].add_grad(dg);
    if (gu) in[1].add_grad(du);
  }, "swiglu");
}

Var swiglu_packed(const Var& gu) {
  const char* op = "swiglu_packed";
  Backend& be = op_backend(op, {{"gu", &gu}});
  need_compute(op, "gu", gu, be);
  if (gu.dim() < 1 || gu.size(-1) % 2 != 0)
    ZT_THROW(op, ": gu: expected shape (..., 2F) (gate | up), got ", shape_str(gu.shape()));
  Shape ys = gu.shape();
  ys.back() /= 2;
  Tensor X = gu.value().contiguous();
  Tensor y = new_output(be, ys, gu.dtype());
  be.swiglu_packed(y, X);
  return Var::make(
      y, {gu},
      [X, &be = be](std::vector<Var>& in, const Tensor& grad_out) {
        Tensor dx = new_output(be, X.shape(), X.dtype());
        be.swiglu_packed_backward(dx, grad_out.contiguous(), X);
        in[0].add_grad(dx);
      },
      op);
}

Var softmax(const Var& x) {
  Backend& be = op_backend("softmax", {{"x", &x}});
  need_compute("softmax", "x", x, be);
  if (x.dim() < 1) ZT_THROW("softmax: x must have at least 1 dim (softmax is over the last), got a scalar");
  Tensor X = x.value().contiguous();
  const int64_t N = x.size(-1), R = shape_numel(drop_last(x.shape()));
  Tensor y = new_output(be, x.shape(), x.dtype());
  be.softmax(y.view({R, N}), X.view({R, N}));
  // The backward needs the output: capture its Tensor (shares the output's storage, no copy).
  return Var::make(y, {x}, [y, R, N, &be = be](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous();
    Tensor dx = new_output(be, y.shape(), y.dtype());
    be.softmax_backward(dx.view({R, N}), g.view({R, N}), y.view({R, N}));
    in[0].add_grad(dx);
  }, "softmax");
}

// =============================================================================================
// embedding and loss

Var embedding(const Tensor& ids, const Var& table) {
  if (!ids.defined()) ZT_THROW("embedding: ids is undefined");
  if (ids.dtype() != DType::i32)
    ZT_THROW("embedding: ids must be int32, got ", dtype_name(ids.dtype()), shape_str(ids.shape()));
  Backend& be = op_backend("embedding", {{"table", &table}});
  need_compute("embedding", "table", table, be);
  if (table.dim() != 2) ZT_THROW("embedding: table must be 2-D (V, C), got ", shape_str(table.shape()));
  const int64_t V = table.size(0), C = table.size(1), n = ids.numel();
  const Indices I = indices_for(ids, be.device());  // checked on the host, used on the device
  const int32_t* pid = I.host.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    if ((pid[i] < 0 && pid[i] != -1) || pid[i] >= V)
      ZT_THROW("embedding: id ", pid[i], " at position ", i, " is out of range for a vocabulary of size ", V,
               " (table ", shape_str(table.shape()), ")");
  Shape out_shape = ids.shape();
  out_shape.push_back(C);
  Tensor Tb = table.value().contiguous();
  Tensor y = new_output(be, out_shape, table.dtype());
  Tensor ids_dev = I.dev.view({n});
  be.embedding(y.view({n, C}), ids_dev, Tb);
  return Var::make(y, {table}, [ids_dev, n, V, C, &be = be](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous().view({n, C});
    const DType dt = g.dtype();
    Tensor* direct = direct_grad(in[0], dt);
    Tensor dtable = direct ? *direct : Tensor::zeros({V, C}, dt, Category::activations, be.allocator());
    be.embedding_backward(dtable, g, ids_dev);  // accumulates
    if (!direct) in[0].add_grad(dtable);
  }, "embedding");
}

}  // namespace zt
