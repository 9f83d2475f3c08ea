// defines: ShardedGradient (zero/stage.h) — stages 2-3: the gradient kept as a shard, reduced
//          after every backward, the full gradient freed.
//
// Rajbhandari et al. 2019, section 5.2 (P_os+g): each rank keeps only its shard of the gradient.
// A unit's backward fills a fresh full gradient (open, before the backward); when the backward
// ends it is reduce-scattered at once, every micro-step, and the chunks accumulate into the
// shard; the full buffer is freed as soon as the last chunk has left it. At most two units' full
// gradients exist at a time (overlap_comm: this one and the one still being reduced).
//
// ZeRO++'s qgZ (zero/zeropp.h's QuantizedReduceScatter) replaces the reduce-scatter with a
// quantized hierarchical all-to-all that gives each rank the same shard; the unit's 1-D and
// odd-sized tensors stay exact (qgz_layout, as DeepSpeed's).
#include "zero/gradient_landing.h"  // defines: land_now, HowToLand
#include "zero/stage.h"

namespace zt {

ShardedGradient::ShardedGradient(ZeroContext& cx, PrecisionPolicy& precision, ShardOptimizer& opt, Units& units)
    : GradientPolicy(cx, precision, opt, units, /*optimizer_sharded=*/true) {
  if (qgz_runs(cx.cfg.zero, cx.group.topology().num_nodes()))
    qgz_ = std::make_unique<QuantizedReduceScatter>(cx.cfg.zero, cx.group);
}

// The gradient shard is its own buffer, where the optimizer wants it (offload: the host's,
// ZeRO-Offload's gradients in host memory: the reduction lands and accumulates there, and the
// device keeps no gradient at rest). The unit's compute gradient exists only during its backward.
void ShardedGradient::place(ShardedUnit& s) {
  if (grad_shard_.size() <= static_cast<size_t>(s.index)) grad_shard_.resize(s.index + 1);
  grad_shard_[s.index] = opt_.grad_shard(s, precision_.working());
  s.ps->flat_grad().storage()->release();
}

void ShardedGradient::ready(ShardedUnit& s, bool, int64_t micro) {
  reduce(s, precision_.gradient_for_reduction(s, cx_.N), micro);
}

void ShardedGradient::issue_reduction(ShardedUnit& s, const Tensor& grad, int64_t micro) {
  const bool accumulate = micro > 0;
  const Tensor shard = grad_shard_.at(s.index);
  if (qgz_ && cx_.N > 1) {  // one rank: nothing travels, nothing to quantize
    const HowToLand how{&precision_, accumulate, precision_.reduction_scale(cx_.N)};
    ZeroContext* cx = &cx_;
    qgz_->reduce_scatter(
        grad, s.S, std::max<int64_t>(1, cx_.cfg.zero.reduce_bucket_size), qgz_layout(s.ps->infos(), cx_.N),
        [cx, shard, how, unit = s.unit->name()](int64_t a, const Tensor& sum) {
          land_now(*cx, range(shard, a, sum.numel()), sum, how, unit);
        },
        reductions(s));
  } else {
    reduce_scatter(s, grad, shard, accumulate);
  }
  // the full gradient goes once every chunk has left it
  reductions(s).push_back({completed_work(), [grad] { grad.storage()->release(); }});
}

}  // namespace zt
