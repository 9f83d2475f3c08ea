// The basic differentiable ops of ops.h: shape, elementwise, reductions, matmul/linear,
// activations, softmax, embedding, cross-entropy. (Norms, RoPE and attention: ops_nn.cpp.)
//
// Pattern of every op: check the inputs (messages name the op, the argument, what was expected
// and what came), make them contiguous, run a raw-pointer kernel from core/kernels, and record a
// GradFn. GradFns capture only Tensors and plain values, never the output Var (no cycles); they
// read their inputs' values through `inputs`, so nothing is kept alive twice.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "core/kernels/activation.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/embedding.h"
#include "core/kernels/gemm.h"
#include "core/kernels/softmax.h"
#include "core/parallel.h"

namespace zt {

namespace {

using detail::dispatch;
using detail::need_defined;
using detail::need_float;
using detail::need_same_dtype;
using detail::need_same_shape;

Tensor new_tensor(const Shape& s, DType dt) { return Tensor::empty(s, dt, Category::activations); }

// The gradient buffer a GradFn may accumulate into directly, with exactly the effect of
// v.add_grad(g) (which, for a leaf whose gradient already exists and is owned, does grad += g):
// a parameter's pre-bound view into its unit's flat gradient buffer, for instance. Returns null
// when add_grad must be used (intermediate Var, first gradient of a plain leaf, odd layout).
// Saves a temporary the size of a weight (e.g. the 50257 x 768 token embedding) per backward.
Tensor* direct_grad(const Var& v, DType dt) {
  VarImpl* p = v.impl();
  if (!p || !p->requires_grad || p->grad_fn || !p->grad_owned || !p->grad.defined()) return nullptr;
  if (!p->grad.is_contiguous() || p->grad.dtype() != dt || p->grad.shape() != p->value.shape()) return nullptr;
  return &p->grad;
}

Shape drop_last(const Shape& s) { return Shape(s.begin(), s.end() - 1); }

}  // namespace

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
enum class Bin { add, sub, mul };

Var binary(const char* op, Bin kind, const Var& a, const Var& b) {
  need_float(op, "a", a);
  need_float(op, "b", b);
  need_same_dtype(op, "b", b, "a", a);
  need_same_shape(op, "a", a, "b", b);
  Tensor A = a.value().contiguous(), B = b.value().contiguous();
  Tensor y = new_tensor(a.shape(), a.dtype());
  const int64_t n = y.numel();
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (kind == Bin::add) add_forward(y.data<T>(), A.data<T>(), B.data<T>(), n);
    else if (kind == Bin::sub) sub_forward(y.data<T>(), A.data<T>(), B.data<T>(), n);
    else mul_forward(y.data<T>(), A.data<T>(), B.data<T>(), n);
  });
  return Var::make(y, {a, b}, [kind](std::vector<Var>& in, const Tensor& grad_out) {
    if (kind == Bin::add) {  // both gradients are g itself (add_grad never writes into it)
      in[0].add_grad(grad_out);
      in[1].add_grad(grad_out);
      return;
    }
    Tensor g = grad_out.contiguous();
    const int64_t n = g.numel();
    if (kind == Bin::sub) {
      in[0].add_grad(g);
      if (in[1].requires_grad()) {
        Tensor nb = new_tensor(g.shape(), g.dtype());
        dispatch(g.dtype(), [&](auto tag) {
          using T = decltype(tag);
          scale_forward(nb.data<T>(), g.data<T>(), T(-1), n);
        });
        in[1].add_grad(nb);
      }
      return;
    }
    const bool ga = in[0].requires_grad(), gb = in[1].requires_grad();
    Tensor A = in[0].value().contiguous(), B = in[1].value().contiguous();
    Tensor da = ga ? new_tensor(g.shape(), g.dtype()) : Tensor(), db = gb ? new_tensor(g.shape(), g.dtype()) : Tensor();
    dispatch(g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      mul_backward(ga ? da.data<T>() : nullptr, gb ? db.data<T>() : nullptr, g.data<T>(), A.data<T>(), B.data<T>(), n);
    });
    if (ga) in[0].add_grad(da);
    if (gb) in[1].add_grad(db);
  }, op);
}
}  // namespace

Var add(const Var& a, const Var& b) { return binary("add", Bin::add, a, b); }
Var sub(const Var& a, const Var& b) { return binary("sub", Bin::sub, a, b); }
Var mul(const Var& a, const Var& b) { return binary("mul", Bin::mul, a, b); }

Var scale(const Var& x, double s) {
  need_float("scale", "x", x);
  Tensor X = x.value().contiguous();
  Tensor y = new_tensor(x.shape(), x.dtype());
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    scale_forward(y.data<T>(), X.data<T>(), static_cast<T>(s), y.numel());
  });
  return Var::make(y, {x}, [s](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous();
    Tensor dx = new_tensor(g.shape(), g.dtype());
    dispatch(g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      scale_forward(dx.data<T>(), g.data<T>(), static_cast<T>(s), g.numel());
    });
    in[0].add_grad(dx);
  }, "scale");
}

// =============================================================================================
// reductions

namespace {
// sum (mean = false) or mean of all elements -> shape ()
Var reduce_all(const char* op, const Var& x, bool mean) {
  need_float(op, "x", x);
  Tensor X = x.value().contiguous();
  const int64_t n = X.numel();
  Tensor y = new_tensor({}, x.dtype());
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const double s = sum_all(X.data<T>(), n);
    y.data<T>()[0] = static_cast<T>(mean ? s / static_cast<double>(n) : s);
  });
  return Var::make(y, {x}, [mean, n](std::vector<Var>& in, const Tensor& grad_out) {
    const Tensor& v = in[0].value();
    Tensor dx = new_tensor(v.shape(), v.dtype());
    dispatch(v.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const double g = grad_out.item();
      fill(dx.data<T>(), static_cast<T>(mean ? g / static_cast<double>(n) : g), n);
    });
    in[0].add_grad(dx);
  }, op);
}
}  // namespace

Var sum(const Var& x) { return reduce_all("sum", x, false); }
Var mean(const Var& x) { return reduce_all("mean", x, true); }

Var sum_last(const Var& x) {
  need_float("sum_last", "x", x);
  if (x.dim() < 1) ZT_THROW("sum_last: x must have at least 1 dim, got shape ", shape_str(x.shape()));
  Tensor X = x.value().contiguous();
  const int64_t N = x.size(-1), R = N == 0 ? shape_numel(drop_last(x.shape())) : X.numel() / N;
  Tensor y = new_tensor(drop_last(x.shape()), x.dtype());
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    sum_last_forward(y.data<T>(), X.data<T>(), R, N);
  });
  return Var::make(y, {x}, [R, N](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous();
    const Tensor& v = in[0].value();
    Tensor dx = new_tensor(v.shape(), v.dtype());
    dispatch(v.dtype(), [&](auto tag) {
      using T = decltype(tag);
      sum_last_backward(dx.data<T>(), g.data<T>(), R, N);
    });
    in[0].add_grad(dx);
  }, "sum_last");
}

// =============================================================================================
// matrix products

Var matmul(const Var& a, const Var& b) {
  need_float("matmul", "a", a);
  need_float("matmul", "b", b);
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
  Tensor y = new_tensor(out_shape, a.dtype());
  // Batched: one GEMM per batch, the batches split across threads (each GEMM single-threaded
  // inside the parallel region) when there are enough of them; else in turn, GEMMs threaded.
  const bool par = P > 1 && P >= omp_get_max_threads();
  const int64_t rows = shape_numel(drop_last(a.shape()));  // 2-D b: every row of a in one GEMM
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *pa = A.data<T>(), *pb = B.data<T>();
    T* py = y.data<T>();
    if (!batched) {  // (..., M, K) rows flattened: one GEMM (prod(...) * M, K) @ (K, N)
      gemm<T>(false, false, rows, N, K, T(1), pa, K, pb, N, T(0), py, N);
      return;
    }
#pragma omp parallel for schedule(static) if (par)
    for (int64_t p = 0; p < P; ++p)
      gemm<T>(false, false, M, N, K, T(1), pa + p * M * K, K, pb + p * K * N, N, T(0), py + p * M * N, N);
  });
  return Var::make(y, {a, b}, [M, K, N, P, rows, batched, par](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous();
    const bool ga = in[0].requires_grad(), gb = in[1].requires_grad();
    Tensor A = in[0].value().contiguous(), B = in[1].value().contiguous();
    dispatch(g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T *pa = A.data<T>(), *pb = B.data<T>(), *pg = g.data<T>();
      if (ga) {  // da = g @ b^T: (rows, N) @ (N, K)
        Tensor da = new_tensor(A.shape(), A.dtype());
        T* pda = da.data<T>();
        if (!batched) {
          gemm<T>(false, true, rows, K, N, T(1), pg, N, pb, N, T(0), pda, K);
        } else {
#pragma omp parallel for schedule(static) if (par)
          for (int64_t p = 0; p < P; ++p)
            gemm<T>(false, true, M, K, N, T(1), pg + p * M * N, N, pb + p * K * N, N, T(0), pda + p * M * K, K);
        }
        in[0].add_grad(da);
      }
      if (gb) {  // db = a^T @ g: (K, rows) @ (rows, N)
        Tensor* direct = batched ? nullptr : direct_grad(in[1], B.dtype());
        Tensor db = direct ? Tensor() : new_tensor(B.shape(), B.dtype());
        T* pdb = direct ? direct->data<T>() : db.data<T>();
        if (!batched) {
          gemm<T>(true, false, K, N, rows, T(1), pa, K, pg, N, direct ? T(1) : T(0), pdb, N);
        } else {
#pragma omp parallel for schedule(static) if (par)
          for (int64_t p = 0; p < P; ++p)
            gemm<T>(true, false, K, N, M, T(1), pa + p * M * K, K, pg + p * M * N, N, T(0), pdb + p * K * N, N);
        }
        if (!direct) in[1].add_grad(db);
      }
    });
  }, "matmul");
}

Var linear(const Var& x, const Var& w, const Var& b) {
  need_float("linear", "x", x);
  need_float("linear", "w", w);
  need_same_dtype("linear", "w", w, "x", x);
  if (w.dim() != 2) ZT_THROW("linear: w must be 2-D (out, in), got ", shape_str(w.shape()));
  if (x.dim() < 1) ZT_THROW("linear: x must be (..., in), got a scalar");
  const int64_t out = w.size(0), in_f = w.size(1);
  if (x.size(-1) != in_f)
    ZT_THROW("linear: x ", shape_str(x.shape()), " has ", x.size(-1), " input features but w ", shape_str(w.shape()),
             " (out, in) expects ", in_f);
  const bool has_bias = b.defined();
  if (has_bias) {
    need_float("linear", "b", b);
    need_same_dtype("linear", "b", b, "x", x);
    if (b.shape() != Shape{out})
      ZT_THROW("linear: bias must have shape ", shape_str(Shape{out}), " for w ", shape_str(w.shape()), ", got ",
               shape_str(b.shape()));
  }
  Tensor X = x.value().contiguous(), W = w.value().contiguous();
  const int64_t M = shape_numel(drop_last(x.shape()));  // rows: every leading dim flattened
  Shape out_shape = x.shape();
  out_shape.back() = out;
  Tensor y = new_tensor(out_shape, x.dtype());
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* py = y.data<T>();
    if (has_bias) {  // y rows start as the bias; the GEMM adds x w^T on top (beta = 1)
      Tensor B = b.value().contiguous();
      const T* pb = B.data<T>();
#pragma omp parallel for schedule(static) if (M * out > kParallelMinElements)
      for (int64_t r = 0; r < M; ++r) std::copy(pb, pb + out, py + r * out);
    }
    // y (M, out) = X (M, in) @ W^T, W stored (out, in): no transposed copy, BLAS reads it as is
    gemm<T>(false, true, M, out, in_f, T(1), X.data<T>(), in_f, W.data<T>(), in_f, has_bias ? T(1) : T(0), py, out);
  });
  std::vector<Var> inputs{x, w};
  if (has_bias) inputs.push_back(b);
  return Var::make(y, std::move(inputs), [M, out, in_f, has_bias](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous();  // (M, out)
    const DType dt = g.dtype();
    dispatch(dt, [&](auto tag) {
      using T = decltype(tag);
      const T* pg = g.data<T>();
      if (in[0].requires_grad()) {  // dx (M, in) = g (M, out) @ W (out, in)
        Tensor W = in[1].value().contiguous();
        Tensor dx = new_tensor(in[0].shape(), dt);
        gemm<T>(false, false, M, in_f, out, T(1), pg, out, W.data<T>(), in_f, T(0), dx.data<T>(), in_f);
        in[0].add_grad(dx);
      }
      if (in[1].requires_grad()) {  // dw (out, in) = g^T (out, M) @ x (M, in), into the grad buffer if we may
        Tensor X = in[0].value().contiguous();
        Tensor* direct = direct_grad(in[1], dt);
        Tensor dw = direct ? Tensor() : new_tensor({out, in_f}, dt);
        gemm<T>(true, false, out, in_f, M, T(1), pg, out, X.data<T>(), in_f, direct ? T(1) : T(0),
                direct ? direct->data<T>() : dw.data<T>(), in_f);
        if (!direct) in[1].add_grad(dw);
      }
      if (has_bias && in[2].requires_grad()) {  // db (out) = column sums of g, rows in order
        Tensor* direct = direct_grad(in[2], dt);
        Tensor db = direct ? Tensor() : new_tensor({out}, dt);
        col_sum(direct ? direct->data<T>() : db.data<T>(), pg, M, out, direct != nullptr);
        if (!direct) in[2].add_grad(db);
      }
    });
  }, "linear");
}

// =============================================================================================
// activations

namespace {
enum class Act { gelu, silu };

Var unary_act(const char* op, Act kind, const Var& x) {
  need_float(op, "x", x);
  Tensor X = x.value().contiguous();
  Tensor y = new_tensor(x.shape(), x.dtype());
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (kind == Act::gelu) gelu_forward(y.data<T>(), X.data<T>(), y.numel());
    else silu_forward(y.data<T>(), X.data<T>(), y.numel());
  });
  return Var::make(y, {x}, [kind](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous(), X = in[0].value().contiguous();
    Tensor dx = new_tensor(X.shape(), X.dtype());
    dispatch(X.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if (kind == Act::gelu) gelu_backward(dx.data<T>(), g.data<T>(), X.data<T>(), X.numel());
      else silu_backward(dx.data<T>(), g.data<T>(), X.data<T>(), X.numel());
    });
    in[0].add_grad(dx);
  }, op);
}
}  // namespace

Var gelu(const Var& x) { return unary_act("gelu", Act::gelu, x); }
Var silu(const Var& x) { return unary_act("silu", Act::silu, x); }

Var swiglu(const Var& gate, const Var& up) {
  need_float("swiglu", "gate", gate);
  need_float("swiglu", "up", up);
  need_same_dtype("swiglu", "up", up, "gate", gate);
  need_same_shape("swiglu", "gate", gate, "up", up);
  Tensor G = gate.value().contiguous(), U = up.value().contiguous();
  Tensor y = new_tensor(gate.shape(), gate.dtype());
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    swiglu_forward(y.data<T>(), G.data<T>(), U.data<T>(), y.numel());
  });
  return Var::make(y, {gate, up}, [](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous(), G = in[0].value().contiguous(), U = in[1].value().contiguous();
    const bool gg = in[0].requires_grad(), gu = in[1].requires_grad();
    Tensor dg = gg ? new_tensor(G.shape(), G.dtype()) : Tensor(), du = gu ? new_tensor(G.shape(), G.dtype()) : Tensor();
    dispatch(G.dtype(), [&](auto tag) {
      using T = decltype(tag);
      swiglu_backward(gg ? dg.data<T>() : nullptr, gu ? du.data<T>() : nullptr, g.data<T>(), G.data<T>(),
                      U.data<T>(), G.numel());
    });
    if (gg) in[0].add_grad(dg);
    if (gu) in[1].add_grad(du);
  }, "swiglu");
}

Var softmax(const Var& x) {
  need_float("softmax", "x", x);
  if (x.dim() < 1) ZT_THROW("softmax: x must have at least 1 dim (softmax is over the last), got a scalar");
  Tensor X = x.value().contiguous();
  const int64_t N = x.size(-1), R = shape_numel(drop_last(x.shape()));
  Tensor y = new_tensor(x.shape(), x.dtype());
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    softmax_forward(y.data<T>(), X.data<T>(), R, N);
  });
  // The backward needs the output: capture its Tensor (shares the output's storage, no copy).
  return Var::make(y, {x}, [y, R, N](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous();
    Tensor dx = new_tensor(y.shape(), y.dtype());
    dispatch(y.dtype(), [&](auto tag) {
      using T = decltype(tag);
      softmax_backward(dx.data<T>(), g.data<T>(), y.data<T>(), R, N);
    });
    in[0].add_grad(dx);
  }, "softmax");
}

// =============================================================================================
// embedding and loss

Var embedding(const Tensor& ids, const Var& table) {
  if (!ids.defined()) ZT_THROW("embedding: ids is undefined");
  if (ids.dtype() != DType::i32)
    ZT_THROW("embedding: ids must be int32, got ", dtype_name(ids.dtype()), shape_str(ids.shape()));
  need_float("embedding", "table", table);
  if (table.dim() != 2) ZT_THROW("embedding: table must be 2-D (V, C), got ", shape_str(table.shape()));
  const int64_t V = table.size(0), C = table.size(1), n = ids.numel();
  Tensor I = ids.contiguous();
  const int32_t* pid = I.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    if (pid[i] < 0 || pid[i] >= V)
      ZT_THROW("embedding: id ", pid[i], " at position ", i, " is out of range for a vocabulary of size ", V,
               " (table ", shape_str(table.shape()), ")");
  Shape out_shape = ids.shape();
  out_shape.push_back(C);
  Tensor Tb = table.value().contiguous();
  Tensor y = new_tensor(out_shape, table.dtype());
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    embedding_forward(y.data<T>(), pid, Tb.data<T>(), n, C);
  });
  return Var::make(y, {table}, [I, n, V, C](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor g = grad_out.contiguous();
    const DType dt = g.dtype();
    Tensor* direct = direct_grad(in[0], dt);
    Tensor dt_tmp = direct ? Tensor() : Tensor::zeros({V, C}, dt, Category::activations);
    dispatch(dt, [&](auto tag) {
      using T = decltype(tag);
      embedding_backward(direct ? direct->data<T>() : dt_tmp.data<T>(), g.data<T>(), I.data<int32_t>(), n, C);
    });
    if (!direct) in[0].add_grad(dt_tmp);
  }, "embedding");
}

Var cross_entropy(const Var& logits, const Tensor& targets, int64_t valid_vocab) {
  need_float("cross_entropy", "logits", logits);
  if (logits.dim() < 1) ZT_THROW("cross_entropy: logits must be (..., V), got a scalar");
  if (!targets.defined()) ZT_THROW("cross_entropy: targets is undefined");
  if (targets.dtype() != DType::i32)
    ZT_THROW("cross_entropy: targets must be int32, got ", dtype_name(targets.dtype()), shape_str(targets.shape()));
  const Shape lead = drop_last(logits.shape());
  if (targets.shape() != lead)
    ZT_THROW("cross_entropy: targets must have shape ", shape_str(lead), " for logits ", shape_str(logits.shape()),
             ", got ", shape_str(targets.shape()));
  const int64_t V = logits.size(-1), N = shape_numel(lead);
  const int64_t Vv = valid_vocab < 0 ? V : valid_vocab;
  if (valid_vocab < -1 || Vv < 1 || Vv > V)
    ZT_THROW("cross_entropy: valid_vocab must be -1 (all) or in [1, ", V, "] for logits ", shape_str(logits.shape()),
             ", got ", valid_vocab);
  Tensor tg = targets.contiguous();
  const int32_t* pt = tg.data<int32_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (pt[i] == -1) continue;
    if (pt[i] < 0 || pt[i] >= Vv)
      ZT_THROW("cross_entropy: target ", pt[i], " at position ", i, " is outside [0, ", Vv,
               ") (valid_vocab) and is not -1 (ignored)");
    ++count;
  }
  Tensor L = logits.value().contiguous();
  Tensor lse = new_tensor({N}, logits.dtype());  // per-row log-sum-exp, kept for the backward
  Tensor y = new_tensor({}, logits.dtype());
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const double total = cross_entropy_forward(lse.data<T>(), L.data<T>(), pt, N, V, Vv);
    // mean over non-ignored rows; with every row ignored the mean is 0/0 = NaN, as in PyTorch
    y.data<T>()[0] = static_cast<T>(count ? total / static_cast<double>(count) : std::nan(""));
  });
  return Var::make(y, {logits}, [lse, tg, count, N, V, Vv](std::vector<Var>& in, const Tensor& grad_out) {
    Tensor L = in[0].value().contiguous();
    Tensor dl = new_tensor(L.shape(), L.dtype());
    const double scale = count ? grad_out.item() / static_cast<double>(count) : 0.0;
    dispatch(L.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cross_entropy_backward(dl.data<T>(), L.data<T>(), lse.data<T>(), tg.data<int32_t>(), static_cast<T>(scale), N, V,
                             Vv);
    });
    in[0].add_grad(dl);
  }, "cross_entropy");
}

}  // namespace zt
