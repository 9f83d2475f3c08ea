// defines: tp_copy, tp_reduce, row_parallel_output, add_bias, tp_share, column_slice, row_slice (parallel/tensor_parallel.h)
#include "parallel/tensor_parallel.h"

#include "autograd/ops.h"
#include "core/check.h"

namespace zt {

namespace {
// A contiguous copy of t (a gradient, which its owner may still read), summed over the group.
Tensor all_reduced(const Tensor& t, const TensorParallel& tp) {
  Tensor s = t.clone(Category::activations);
  tp.group->all_reduce(s.view({s.numel()}));
  return s;
}
}  // namespace

Var tp_copy(const Var& x, const TensorParallel& tp) {
  if (!tp.on()) return x;
  return Var::make(
      x.value(), {x}, [tp](std::vector<Var>& in, const Tensor& g) { in[0].add_grad(all_reduced(g, tp)); }, "tp_copy");
}

Var tp_reduce(const Var& x, const TensorParallel& tp) {
  if (!tp.on()) return x;
  // In place: the partial sum's buffer becomes the sum (nothing else reads the partial, and the
  // backward needs neither), so a block keeps one (B, T, C) per sub-layer, not two.
  Tensor s = x.value().contiguous();
  tp.group->all_reduce(s.view({s.numel()}));
  return Var::make(
      s, {x}, [](std::vector<Var>& in, const Tensor& g) { in[0].add_grad(g); }, "tp_reduce");
}

Var row_parallel_output(const Var& partial, const Var& bias, const TensorParallel& tp) {
  if (!tp.on()) return partial;
  const Var y = tp_reduce(partial, tp);
  return bias.defined() ? add_bias(y, bias) : y;
}

Var add_bias(const Var& y, const Var& b) {
  ZT_CHECK(y.dim() >= 1 && b.dim() == 1 && y.size(y.dim() - 1) == b.size(0), "add_bias: y ", shape_str(y.shape()),
           " and b ", shape_str(b.shape()), " (expected y (..., C), b (C))");
  Shape ones_shape = y.shape();
  ones_shape.back() = 1;
  const Var ones(Tensor::full(ones_shape, 1.0, y.dtype()));
  return add(y, linear(ones, reshape(b, {b.size(0), 1}), Var()));  // ones (..., 1) b^T
}

int64_t tp_share(int64_t n, const TensorParallel& tp, const char* what) {
  if (n % tp.size() != 0)
    ZT_THROW("tensor parallelism: ", what, " (", n, ") is not divisible by tensor_parallel_size ", tp.size());
  return n / tp.size();
}

TensorSlice column_slice(const TensorParallel& tp, int64_t groups) {
  if (!tp.on()) return {};
  return {.dim = 0, .groups = groups, .part = tp.rank(), .parts = tp.size()};
}

TensorSlice row_slice(const TensorParallel& tp) {
  if (!tp.on()) return {};
  return {.dim = 1, .groups = 1, .part = tp.rank(), .parts = tp.size()};
}

}  // namespace zt
