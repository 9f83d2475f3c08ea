// defines: OptimizerSharded (stage 1) — the optimizer state sharded: reduce-scatter, update the
//          shard, all-gather the parameters.
//
// Stage 1, OptimizerSharded (zero/stage.h; the paper's P_os, section 5.1): stage 0, except that
// each rank updates only its shard of the optimizer state. So the full gradient, still summed
// over micro-steps, is reduce-scattered at the boundary (each rank receives the average of its
// shard: Psi), the optimizer updates the shard, and the updated parameters are all-gathered back
// into every rank's full parameters (Psi). The gradient norm is a sum over shards: one double
// all-reduced.
#include "zero/stage.h"

#include "core/kernels/shard_norm.h"  // defines: sum_of_squares
#include "zero/gradient_landing.h"    // defines: land_after, HowToLand

namespace zt {

void OptimizerSharded::issue_reduction(ShardedUnit& s, const Tensor& grad, int64_t) {
  reduce_scatter(s, grad, /*accumulate=*/false);
  // The shard is a view of the full gradient: the optimizer takes it from there once the chunks
  // landed (offload: a copy to the host; stages 2-3 reduce into the optimizer's shard directly).
  opt_.gradient_reduced(s, state(s).grad_shard, state(s).reduces);
}

// This rank's averaged shard into grad_shard, in chunks of reduce_bucket_size: chunk [a, a + n)
// of the shard needs rank q's part [q*S + a, q*S + a + n) of `grad` for every q, packed into a
// comm buffer when a chunk is smaller than the shard. Each chunk lands by zero/gradient_landing.h
// (offload, stages 2-3: the shard is in host memory, and the chunk crosses to it).
void OptimizerSharded::reduce_scatter(ShardedUnit& s, const Tensor& grad, bool accumulate) {
  const int64_t S = s.S, N = cx_.N, chunk = std::max<int64_t>(1, cx_.cfg.zero.reduce_bucket_size);
  const HowToLand how{&precision_, accumulate, precision_.reduction_scale(cx_.N)};
  const Tensor shard = state(s).grad_shard;
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
    state(s).reduces.push_back(std::move(p));
  }
}

double OptimizerSharded::global_sum_of_squares(const std::vector<Tensor>& grads) {
  // The padding is zero and adds nothing.
  return cx_.group.all_reduce_sum(sum_of_squares(grads));
}

void OptimizerSharded::publish_unit(ShardedUnit& s, std::deque<Pending>& q) {
  all_gather_chunked(cx_.group, params_.shard(s), state(s).params_full, cx_.cfg.zero.allgather_bucket_size, q);
}

void OptimizerSharded::publish() {
  std::deque<Pending> pending;
  for (auto& s : units_) {
    CommLabel label(cx_.group, s->unit->name());
    publish_unit(*s, pending);
  }
  drain(pending);
}

// Each rank loaded its own shard: round it (mixed) and publish it.
void OptimizerSharded::loaded(bool round_master) {
  std::deque<Pending> pending;
  for (auto& s : units_) {
    if (round_master) precision_.round_master(*s, params_.shard(*s));
    publish_unit(*s, pending);
  }
  drain(pending);
}

}  // namespace zt
