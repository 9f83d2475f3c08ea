// defines: Replicated (stage 0) — plain data parallelism.
//
// Stage 0, Replicated (zero/stage.h): plain data parallelism. Every rank keeps the full
// parameters, the full gradient (summed over micro-steps) and the full optimizer state; at the
// accumulation boundary the gradient is all-reduced (2Psi per step) and averaged, and every rank
// runs the same update on the same numbers.
#include "zero/stage.h"

#include "core/kernels/shard_norm.h"  // defines: sum_of_squares, scale_

namespace zt {

void Replicated::place_params(ShardedUnit& s, const UnitInit&) {
  StageUnit& u = state(s);
  u.params_full = precision_.full_params(s);
  params_.hold(s, range(u.params_full, s.lo, s.S));
}

void Replicated::place_grads(ShardedUnit& s) {
  StageUnit& u = state(s);
  u.grads_full = precision_.full_grads(s);
  u.grad_shard = range(u.grads_full, s.lo, s.S);
}

// The unit's gradient is folded into the full gradient every micro-step and reduced once, at
// the boundary.
void Replicated::gradient_ready(ShardedUnit& s, bool boundary, int64_t micro) {
  const Tensor full = precision_.fold_gradient(s, state(s).grads_full, cx_.N);
  if (boundary) reduce(s, full, micro);
}

// All-reduce the full gradient in place, then average, in chunks of reduce_bucket_size.
void Replicated::issue_reduction(ShardedUnit& s, const Tensor& grad, int64_t) {
  const int64_t chunk = std::max<int64_t>(1, cx_.cfg.zero.reduce_bucket_size), N = cx_.N;
  const double scale = precision_.reduction_scale(cx_.N);
  for (int64_t a = 0; a < s.P; a += chunk) {
    const Tensor part = range(grad, a, std::min(chunk, s.P - a));
    state(s).reduces.push_back({cx_.group.all_reduce_async(part), [part, scale, N] {
                                  if (N > 1 && scale != 1.0) scale_(part, scale);
                                }});
  }
}

// Every rank holds the whole averaged gradient: no communication.
double Replicated::global_sum_of_squares(const std::vector<Tensor>& grads) { return sum_of_squares(grads); }

void Replicated::zero_grad(ShardedUnit& s) { state(s).grads_full.zero_(); }

// Each rank loaded its shard of every tensor, which stage 0 holds whole: all-gather each (the
// parameters, or the mixed master, and every optimizer state tensor), then round the master.
void Replicated::loaded(bool round_master) {
  std::deque<Pending> pending;
  const int64_t bucket = cx_.cfg.zero.allgather_bucket_size;
  for (auto& s : units_) {
    const Tensor whole = precision_.updated(*s, state(*s).params_full);
    all_gather_chunked(cx_.group, range(whole, s->lo, s->S), whole, bucket, pending);
  }
  for (auto& [name, t] : opt_.whole_state()) {
    const int64_t S = t.numel() / cx_.N;
    all_gather_chunked(cx_.group, range(t, cx_.r * S, S), t, bucket, pending);
  }
  drain(pending);
  if (round_master)
    for (auto& s : units_) precision_.round_master(*s, state(*s).params_full);
}

}  // namespace zt
