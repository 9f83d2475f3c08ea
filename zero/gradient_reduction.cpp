// defines: GradientPolicy's shared part (zero/stage.h): the reductions in flight per unit, the
//          overlap rule, and the chunked reduce-scatter into a shard that both gradient policies
//          use (stage 1 at the boundary, stages 2-3 after every backward).
#include "zero/gradient_landing.h"  // defines: land_after, HowToLand
#include "zero/stage.h"

namespace zt {

GradientPolicy::GradientPolicy(ZeroContext& cx, PrecisionPolicy& precision, ShardOptimizer& opt, Units& units,
                               bool optimizer_sharded)
    : cx_(cx), precision_(precision), opt_(opt), units_(units), optimizer_sharded_(optimizer_sharded) {}

std::deque<Pending>& GradientPolicy::reductions(const ShardedUnit& s) {
  if (reductions_.size() <= static_cast<size_t>(s.index)) reductions_.resize(s.index + 1);
  return reductions_[s.index];
}

void GradientPolicy::reduce(ShardedUnit& s, const Tensor& grad, int64_t micro) {
  // overlap_comm: the previous unit's reduction may still run while this unit's backward ran;
  // finish it now, so at most two units' reductions (and full gradients) are alive.
  if (cx_.cfg.zero.overlap_comm) {
    for (auto& u : units_)
      if (u.get() != &s) drain(reductions(*u));
  }
  CommLabel label(cx_.group, s.unit->name());
  issue_reduction(s, grad, micro);
  if (!cx_.cfg.zero.overlap_comm) drain(reductions(s));
}

void GradientPolicy::finish_reductions() {
  for (std::deque<Pending>& q : reductions_) drain(q);
}

void GradientPolicy::abandon_in_flight() {
  for (std::deque<Pending>& q : reductions_)
    for (Pending& p : q) p.work->wait();
}

// This rank's averaged shard into `shard`, in chunks of reduce_bucket_size: chunk [a, a + n) of
// the shard needs rank q's part [q*S + a, q*S + a + n) of `grad` for every q, packed into a comm
// buffer when a chunk is smaller than the shard. Each chunk lands by zero/gradient_landing.h
// (offload, stages 2-3: the shard is in host memory, and the chunk crosses to it).
void GradientPolicy::reduce_scatter(ShardedUnit& s, const Tensor& grad, const Tensor& shard, bool accumulate) {
  const int64_t S = s.S, N = cx_.N, chunk = std::max<int64_t>(1, cx_.cfg.zero.reduce_bucket_size);
  const HowToLand how{&precision_, accumulate, precision_.reduction_scale(cx_.N)};
  for (int64_t a = 0; a < S; a += chunk) {
    const int64_t n = std::min(chunk, S - a);
    Tensor in = grad;
    if (n < S) {
      in = Tensor::empty({N * n}, grad.dtype(), Category::comm);
      for (int64_t q = 0; q < N; ++q) range(in, q * n, n).copy_(range(grad, q * S + a, n));
    }
    Tensor out = Tensor::empty({n}, grad.dtype(), Category::comm);
    Pending p = land_after(cx_, cx_.group.reduce_scatter_async(in, out), range(shard, a, n), out, how, s.unit->name());
    p.then = [in, land = std::move(p.then)] {  // the packed input lives until the chunk landed
      if (land) land();
    };
    reductions(s).push_back(std::move(p));
  }
}

}  // namespace zt
