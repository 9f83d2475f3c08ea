// defines: vocab_parallel_embedding, vocab_parallel_cross_entropy (parallel/vocab_parallel.h);
//          file-local: on_host
#include "parallel/vocab_parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/ops.h"
#include "core/backend.h"
#include "core/check.h"

namespace zt {

namespace {
// An int32 index tensor as the host reads it (a dry run's meta tensor is copied as the autograd
// ops copy theirs: shapes only).
Tensor on_host(const Tensor& ids) {
  return ids.device().is_cpu() ? ids.contiguous() : ids.to(Device::cpu(), Category::workspace);
}
}  // namespace

Var vocab_parallel_embedding(const Tensor& ids, const Var& table, const TensorParallel& tp) {
  if (!tp.on()) return embedding(ids, table);
  ZT_CHECK(ids.defined() && ids.dtype() == DType::i32, "vocab_parallel_embedding: ids must be int32");
  const int64_t Vl = table.size(0), v0 = tp.rank() * Vl;
  // This rank's rows: id - v0; another rank's: -1, which the embedding rows leave zero (and skip in
  // the backward). Built on the host, as the model's position ids are.
  const Tensor host = on_host(ids);
  Tensor local = Tensor::empty(ids.shape(), DType::i32, Category::activations, cpu_allocator());
  int32_t* out = local.data<int32_t>();
  if (ids.device().is_meta()) {  // a dry run's ids hold no values: any valid ones
    std::fill(out, out + ids.numel(), 0);
  } else {
    const int32_t* in = host.data<int32_t>();
    for (int64_t i = 0; i < ids.numel(); ++i)
      out[i] = in[i] >= v0 && in[i] < v0 + Vl ? static_cast<int32_t>(in[i] - v0) : -1;
  }
  const Var partial = embedding(local, table);  // (B, T, C)
  return tp.splits_sequence() ? tp_scatter_tokens(partial, tp) : tp_reduce(partial, tp);
}

Var vocab_parallel_cross_entropy(const Var& x, const Var& w, const Tensor& targets, int64_t vocab,
                                 const TensorParallel& tp) {
  if (!tp.on()) return linear_cross_entropy(x, w, targets, vocab);
  const char* op = "vocab_parallel_cross_entropy";
  const int64_t Vl = w.size(0), v0 = tp.rank() * Vl, T = tp.size();
  const int64_t valid = std::clamp<int64_t>(vocab - v0, 0, Vl);  // this rank's real (unpadded) columns
  if (valid < 1)
    ZT_THROW(op, ": rank ", tp.rank(), " of the tensor group holds columns [", v0, ", ", v0 + Vl,
             ") of the vocabulary, all past its ", vocab, " real ids: tensor_parallel_size ", T,
             " is too large for this padded vocabulary");
  const Var logits = linear(column_parallel_input(x, tp), w, Var());  // (B, T, Vl), this rank's columns
  const int64_t N = targets.numel();
  ZT_CHECK(targets.dtype() == DType::i32 && logits.value().numel() == N * Vl, op, ": targets ", targets.str(),
           " for logits ", shape_str(logits.shape()));
  Backend& be = backend(logits.value().device());
  const bool meta = logits.value().device().is_meta();  // a dry run: shapes and bytes, no values
  const Tensor host = on_host(targets);
  const int32_t* t = meta ? nullptr : host.data<int32_t>();
  int64_t count = N;
  if (t) {
    count = 0;
    for (int64_t i = 0; i < N; ++i) {
      if (t[i] == -1) continue;
      if (t[i] < 0 || t[i] >= vocab)
        ZT_THROW(op, ": target ", t[i], " at position ", i, " is outside [0, ", vocab, ") and is not -1 (ignored)");
      ++count;
    }
  }
  const Tensor t_dev = targets.device() == be.device() ? targets.contiguous().view({N})
                                                       : host.to(be.device(), Category::activations).view({N});
  const DType st = be.stats_dtype(logits.dtype());
  const Tensor L = logits.value().contiguous().view({N, Vl});
  Tensor lse = Tensor::empty({N}, st, Category::activations);
  Tensor part = Tensor::empty({}, st, Category::activations);  // this rank's sum over its targets / count
  be.cross_entropy(part, lse, L, t_dev, valid, count, v0);
  Tensor all = Tensor::empty({T * N}, st, Category::comm);
  tp.group->all_gather(lse, all);  // every rank's lse per position
  // The whole vocabulary's log-sum-exp per position, and the loss: the ranks' parts summed, plus
  // each position's (LSE - lse of the rank holding its target) / count.
  Tensor LSE = Tensor::empty({N}, st, Category::activations);
  Tensor loss = Tensor::empty({}, st, Category::activations);
  if (!meta) {
    const std::vector<double> a = all.to_vector();
    std::vector<double> whole(static_cast<size_t>(N));
    double correction = 0;
    for (int64_t i = 0; i < N; ++i) {
      double m = -std::numeric_limits<double>::infinity(), s = 0;
      for (int64_t r = 0; r < T; ++r) m = std::max(m, a[static_cast<size_t>(r * N + i)]);
      for (int64_t r = 0; r < T; ++r) s += std::exp(a[static_cast<size_t>(r * N + i)] - m);
      whole[static_cast<size_t>(i)] = m + std::log(s);
      if (t[i] != -1) correction += whole[static_cast<size_t>(i)] - a[static_cast<size_t>(t[i] / Vl * N + i)];
    }
    LSE.copy_(Tensor::borrow(whole.data(), {N}, DType::f64));  // converted to st, moved to the device
    const double parts = tp.group->all_reduce_sum(part.item());
    loss.fill_(parts + (count ? correction / static_cast<double>(count) : std::nan("")));
  } else {
    tp.group->all_reduce_sum(0.0);
  }
  return Var::make(
      loss, {logits},
      [L, LSE, t_dev, count, N, Vl, valid, v0, &be = be](std::vector<Var>& in, const Tensor& grad_out) {
        Tensor dl = Tensor::empty({N, Vl}, L.dtype(), Category::activations);
        be.cross_entropy_backward(dl, L, LSE, t_dev, grad_out, valid, count, v0);
        in[0].add_grad(dl.view(in[0].shape()));
      },
      op);
}

}  // namespace zt
