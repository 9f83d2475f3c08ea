// defines: AccumulatedGradient (zero/stage.h) — stages 0-1: the full gradient summed over the
//          micro-steps and reduced once, at the accumulation boundary.
//
// Every rank keeps the unit's full gradient grads_full (P), into which the precision folds each
// micro-step's compute gradient. At the boundary it is reduced by what the optimizer's range
// needs (Rajbhandari et al. 2019, section 5.1):
//   optimizer whole (stage 0, plain data parallelism)  all-reduced in place and averaged (2Psi):
//                                                      every rank runs the same update
//   optimizer sharded (stage 1, P_os)                  reduce-scattered (Psi): each rank receives
//                                                      the average of its shard, grad_shard, a
//                                                      view [lo, lo + S) of grads_full
#include "core/kernels/shard_norm.h"  // defines: scale_
#include "zero/stage.h"

namespace zt {

void AccumulatedGradient::place(ShardedUnit& s) {
  if (grads_full_.size() <= static_cast<size_t>(s.index)) {
    grads_full_.resize(s.index + 1);
    grad_shard_.resize(s.index + 1);
  }
  grads_full_[s.index] = precision_.full_grads(s);
  grad_shard_[s.index] = range(grads_full_[s.index], s.lo, s.S);
}

Tensor AccumulatedGradient::for_update(const ShardedUnit& s) const {
  return optimizer_sharded_ ? grad_shard_.at(s.index) : grads_full_.at(s.index);
}

// The unit's gradient is folded into the full gradient every micro-step and reduced once, at
// the boundary.
void AccumulatedGradient::ready(ShardedUnit& s, bool boundary, int64_t micro) {
  const Tensor full = precision_.fold_gradient(s, grads_full_.at(s.index), cx_.N);
  if (boundary) reduce(s, full, micro);
}

void AccumulatedGradient::issue_reduction(ShardedUnit& s, const Tensor& grad, int64_t) {
  if (optimizer_sharded_) {
    const Tensor shard = grad_shard_.at(s.index);
    reduce_scatter(s, grad, shard, /*accumulate=*/false);
    // The shard is a view of the full gradient: the optimizer takes it from there once the
    // chunks landed (offload: a copy to the host).
    opt_.gradient_reduced(s, shard, reductions(s));
    return;
  }
  // All-reduce the full gradient in place, then average, in chunks of reduce_bucket_size.
  const int64_t chunk = std::max<int64_t>(1, cx_.cfg.zero.reduce_bucket_size), N = cx_.N;
  const double scale = precision_.reduction_scale(cx_.N);
  for (int64_t a = 0; a < s.P; a += chunk) {
    const Tensor part = range(grad, a, std::min(chunk, s.P - a));
    reductions(s).push_back({cx_.group.all_reduce_async(part), [part, scale, N] {
                               if (N > 1 && scale != 1.0) scale_(part, scale);
                             }});
  }
}

}  // namespace zt
