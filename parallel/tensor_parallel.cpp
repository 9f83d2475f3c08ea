// defines: tp_copy, tp_reduce, tp_gather_tokens, tp_scatter_tokens, column_parallel_input,
//          ParallelSubLayer, partial_grad_read, add_bias, tp_share, column_slice, row_slice,
//          kv_heads_per_rank, kv_slice, shared_kv_read, split_tokens, join_tokens, free_bytes
//          (parallel/tensor_parallel.h); file-local: all_reduced,
//          gathered, scattered, scatter_op
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

// x (B, Tl, n), this rank's tokens -> (B, tp Tl, n), every rank's in rank order: written into
// `into` when given (contiguous, that shape), else into a new tensor.
Tensor gathered(const Tensor& x, const TensorParallel& tp, Tensor into = Tensor()) {
  Shape blocks = x.shape();
  blocks.insert(blocks.begin(), tp.size());
  Tensor all = Tensor::empty(blocks, x.dtype(), Category::comm);
  const Tensor mine = x.contiguous();
  tp.group->all_gather(mine.view({mine.numel()}), all.view({all.numel()}));
  return join_tokens(all, Category::activations, into);
}

// y (B, T, n), a partial sum -> (B, T / tp, n), this rank's tokens of the sum over the group.
Tensor scattered(const Tensor& y, const TensorParallel& tp) {
  if (y.dim() < 2 || y.size(1) % tp.size() != 0)
    ZT_THROW("Megatron's sequence parallelism: ", shape_str(y.shape()), " has ", y.dim() < 2 ? 0 : y.size(1),
             " tokens per sequence, not divisible by tensor_parallel_size ", tp.size(),
             " (each rank of the tensor group keeps T / tp of them between the sub-layers)");
  const Tensor blocks = split_tokens(y, tp.size());
  Shape mine = y.shape();
  mine[1] /= tp.size();
  Tensor out = Tensor::empty(mine, y.dtype(), Category::activations);
  tp.group->reduce_scatter(blocks.view({blocks.numel()}), out.view({out.numel()}));
  return out;
}

// The reduce-scatter of a partial sum x (B, T, n) that nothing else reads: its bytes are freed once
// scattered, when a backward will follow (the graph would keep them until then). The backward
// runs `first` (if any), then all-gathers the gradient.
Var scatter_op(const Var& x, const TensorParallel& tp, std::function<void()> first) {
  Var y = Var::make(
      scattered(x.value(), tp), {x},
      [tp, first](std::vector<Var>& in, const Tensor& g) {
        if (first) first();
        in[0].add_grad(gathered(g, tp));
      },
      "tp_scatter_tokens");
  if (y.requires_grad()) free_bytes(x.value());
  return y;
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

Var tp_gather_tokens(const Var& x, const TensorParallel& tp) {
  if (!tp.on()) return x;
  return Var::make(
      gathered(x.value(), tp), {x},
      [tp](std::vector<Var>& in, const Tensor& g) { in[0].add_grad(scattered(g.contiguous(), tp)); },
      "tp_gather_tokens");
}

Var tp_scatter_tokens(const Var& x, const TensorParallel& tp) {
  if (!tp.on()) return x;
  return scatter_op(x, tp, nullptr);
}

Var column_parallel_input(const Var& x, const TensorParallel& tp) {
  return tp.splits_sequence() ? tp_gather_tokens(x, tp) : tp_copy(x, tp);
}

Var ParallelSubLayer::enter(const Var& x) {
  if (!tp_.splits_sequence()) return tp_copy(x, tp_);
  local_ = x;
  gathered_ = tp_gather_tokens(x, tp_);
  return gathered_;
}

Var ParallelSubLayer::exit(const Var& partial, const Var& bias) {
  if (!tp_.on()) return partial;
  if (!tp_.splits_sequence()) {
    const Var y = tp_reduce(partial, tp_);
    return bias.defined() ? add_bias(y, bias) : y;
  }
  ZT_CHECK(gathered_.defined(), "ParallelSubLayer::exit before enter");
  // The layer's backward reads its input (the weight's gradient needs it) after this op's backward:
  // free the gathered bytes now, gather them again into the same storage then.
  const Tensor kept = gathered_.value(), local = local_.value();
  const TensorParallel tp = tp_;
  const Var y = scatter_op(partial, tp, [tp, kept, local] {
    kept.storage()->materialize();
    gathered(local, tp, kept);  // straight into the input's own bytes
  });
  if (y.requires_grad()) free_bytes(kept);  // else nothing reads it again, and it goes with gathered_
  gathered_ = local_ = Var();
  return bias.defined() ? add_bias(y, tp_copy(bias, tp)) : y;  // the bias's gradient from this rank's tokens, summed
}

std::function<Var(const Var&)> partial_grad_read(const TensorParallel& tp) {
  if (!tp.splits_sequence()) return {};
  return [tp](const Var& p) { return tp_copy(p, tp); };
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

int64_t kv_heads_per_rank(int64_t Hkv, const TensorParallel& tp) {
  if (Hkv % tp.size() == 0) return Hkv / tp.size();
  if (tp.size() % Hkv == 0) return 1;
  ZT_THROW("tensor parallelism: n_kv_head (", Hkv, ") is not divisible by tensor_parallel_size ", tp.size(),
           ", nor a divisor of it (with fewer kv heads than ranks, tensor_parallel_size / n_kv_head ranks share each)");
}

TensorSlice kv_slice(int64_t Hkv, const TensorParallel& tp) {
  if (!tp.on() || Hkv % tp.size() == 0) return column_slice(tp);
  kv_heads_per_rank(Hkv, tp);  // throws unless Hkv divides tp
  const int64_t replicas = tp.size() / Hkv;
  return {.dim = 0, .groups = 1, .part = tp.rank() / replicas, .parts = Hkv, .replicas = replicas};
}

std::function<Var(const Var&)> shared_kv_read(int64_t Hkv, int64_t q_rows, int64_t kv_rows, const TensorParallel& tp) {
  if (!tp.on() || Hkv % tp.size() == 0) return {};
  const int64_t head = kv_slice(Hkv, tp).part;
  return [Hkv, q_rows, kv_rows, head, tp](const Var& w) {
    return Var::make(
        w.value(), {w},
        [Hkv, q_rows, kv_rows, head, tp](std::vector<Var>& in, const Tensor& g) {
          Tensor dw = g.clone(Category::activations);  // (q_rows + 2 kv_rows, C)
          const int64_t C = dw.size(1), n = 2 * kv_rows * C;
          const Tensor kv = dw.flat_view(q_rows * C, {n});  // k's rows, then v's
          Tensor all = Tensor::zeros({Hkv * n}, dw.dtype(), Category::comm);
          all.flat_view(head * n, {n}).copy_(kv);
          tp.group->all_reduce(all);
          Tensor(kv).copy_(all.flat_view(head * n, {n}));
          in[0].add_grad(dw);
        },
        "shared_kv");
  };
}

Tensor split_tokens(const Tensor& y, int64_t P) {
  const int64_t B = y.size(0), Tl = y.size(1) / P, n = y.size(2);
  Tensor blocks = Tensor::empty({P, B, Tl, n}, y.dtype(), Category::comm);
  for (int64_t j = 0; j < P; ++j) blocks.slice(0, j, j + 1).view({B, Tl, n}).copy_(y.slice(1, j * Tl, (j + 1) * Tl));
  return blocks;
}

void free_bytes(const Tensor& t) {
  const std::shared_ptr<Storage>& s = t.storage();
  if (s && s->owned() && s->resident() && s->bytes() == t.nbytes()) s->release();
}

Tensor join_tokens(const Tensor& blocks, Category category, Tensor into) {
  const int64_t P = blocks.size(0), B = blocks.size(1), Tl = blocks.size(2), n = blocks.size(3);
  Tensor y = into.defined() ? into : Tensor::empty({B, P * Tl, n}, blocks.dtype(), category);
  for (int64_t j = 0; j < P; ++j) y.slice(1, j * Tl, (j + 1) * Tl).copy_(blocks.slice(0, j, j + 1).view({B, Tl, n}));
  return y;
}

}  // namespace zt
