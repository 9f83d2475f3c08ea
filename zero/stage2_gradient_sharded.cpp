// defines: GradientSharded (stage 2) — the gradient sharded too: reduced after every backward,
//          the full gradient freed.
//
// Stage 2, GradientSharded (zero/stage.h; the paper's P_os+g, section 5.2): stage 1, except that
// each rank keeps only its shard of the gradient. A unit's backward fills a fresh full gradient
// (open_gradient, before the backward); when the backward ends it is reduce-scattered
// at once, every micro-step, and the chunks accumulate into the shard; the full buffer is freed
// as soon as the last chunk has left it. At most two units' full gradients exist at a time
// (overlap_comm: this one and the one still being reduced).
#include "zero/stage.h"

#include "zero/gradient_landing.h"  // defines: land_now, HowToLand

namespace zt {

// The gradient shard is its own buffer, where the optimizer wants it (offload: the host's,
// ZeRO-Offload's gradients in host memory: the reduction lands and accumulates there, and the
// device keeps no gradient at rest). The unit's compute gradient exists only during its backward.
void GradientSharded::place_grads(ShardedUnit& s) {
  state(s).grad_shard = opt_.grad_shard(s, precision_.working());
  s.ps->flat_grad().storage()->release();
}

// A fresh compute gradient for every backward (the last one was freed once it was reduced).
void GradientSharded::open_gradient(ShardedUnit& s) { s.ps->fresh_grad(); }

void GradientSharded::gradient_ready(ShardedUnit& s, bool, int64_t micro) {
  reduce(s, precision_.gradient_for_reduction(s, cx_.N), micro);
}

GradientSharded::GradientSharded(ZeroContext& cx, PrecisionPolicy& precision, ParamTier& params, ShardOptimizer& opt,
                                 Units& units)
    : OptimizerSharded(cx, precision, params, opt, units) {
  if (cx.cfg.zero.zeropp()) zeropp_ = std::make_unique<ZeroPlusPlus>(cx.cfg.zero, cx.group);
}

// The reduce-scatter, or ZeRO++'s quantized hierarchical all-to-all (qgZ, zero/zeropp.h) that
// gives each rank the same shard.
void GradientSharded::issue_reduction(ShardedUnit& s, const Tensor& grad, int64_t micro) {
  const bool accumulate = micro > 0;
  if (zeropp_ && zeropp_->quantized_gradients() && cx_.N > 1) {  // one rank: nothing travels, nothing to quantize
    const Tensor shard = state(s).grad_shard;
    const HowToLand how{&precision_, accumulate, precision_.reduction_scale(cx_.N)};
    ZeroContext* cx = &cx_;
    zeropp_->reduce_scatter(
        grad, s.S, std::max<int64_t>(1, cx_.cfg.zero.reduce_bucket_size),
        [cx, shard, how, unit = s.unit->name()](int64_t a, const Tensor& sum) {
          land_now(*cx, range(shard, a, sum.numel()), sum, how, unit);
        },
        state(s).reduces);
  } else {
    reduce_scatter(s, grad, accumulate);
  }
  // the full gradient goes once every chunk has left it
  state(s).reduces.push_back({completed_work(), [grad] { grad.storage()->release(); }});
}

void GradientSharded::zero_grad(ShardedUnit& s) { state(s).grad_shard.zero_(); }

}  // namespace zt
