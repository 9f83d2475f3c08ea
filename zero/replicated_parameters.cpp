// defines: ReplicatedParameters (zero/stage.h) — stages 0-2: every rank keeps the unit's full
//          parameters; after a sharded update they are published by an all-gather.
//
// params_full (P, working dtype) is the precision's (PrecisionPolicy::full_params): the model's
// buffer, or a 2-byte buffer beside a float32 compute copy. This rank's shard in the ParamTier is
// its view [lo, lo + S). The acquire / release scopes matter only where the precision keeps that
// separate compute copy (mixed precision computing in float32: PrecisionPolicy::acquire_compute).
//
// After the step: with the optimizer whole (stage 0) every rank ran the same update and there is
// nothing to publish; with it sharded (stages 1-2, Rajbhandari et al. 2019 section 5.1) each rank
// updated its shard and the shards are all-gathered back into every rank's params_full (Psi).
#include "zero/stage.h"

namespace zt {

void ReplicatedParameters::place(ShardedUnit& s, const InitialValues&) {
  if (params_full_.size() <= static_cast<size_t>(s.index)) params_full_.resize(s.index + 1);
  params_full_[s.index] = precision_.full_params(s);
  params_.hold(s, range(params_full_[s.index], s.lo, s.S));
}

Tensor ReplicatedParameters::for_update(const ShardedUnit& s) const {
  return optimizer_sharded_ ? params_.shard(s) : params_full_.at(s.index);
}

void ReplicatedParameters::all_gather_shard(ShardedUnit& s, std::deque<Pending>& q) {
  all_gather_chunked(cx_.group, params_.shard(s), params_full_.at(s.index), cx_.cfg.zero.allgather_bucket_size, q);
}

void ReplicatedParameters::publish() {
  if (!optimizer_sharded_) return;  // every rank updated the whole unit
  std::deque<Pending> pending;
  for (auto& s : units_) {
    CommLabel label(cx_.group, s->unit->name());
    all_gather_shard(*s, pending);
  }
  drain(pending);
}

void ReplicatedParameters::loaded(bool round_master) {
  std::deque<Pending> pending;
  if (optimizer_sharded_) {  // each rank loaded its own shard: round it (mixed) and publish it
    for (auto& s : units_) {
      if (round_master) precision_.round_master(*s, params_.shard(*s));
      all_gather_shard(*s, pending);
    }
    drain(pending);
    return;
  }
  // Each rank loaded its shard of every tensor, which a whole optimizer holds whole: all-gather
  // each (the parameters, or the mixed master, and every optimizer state tensor), then round the
  // master.
  const int64_t bucket = cx_.cfg.zero.allgather_bucket_size;
  for (auto& s : units_) {
    const Tensor whole = precision_.updated(*s, params_full_.at(s->index));
    all_gather_chunked(cx_.group, range(whole, s->lo, s->S), whole, bucket, pending);
  }
  for (auto& [name, t] : opt_.whole_state()) {
    const int64_t S = t.numel() / cx_.N;
    all_gather_chunked(cx_.group, range(t, cx_.r * S, S), t, bucket, pending);
  }
  drain(pending);
  if (round_master)
    for (auto& s : units_) precision_.round_master(*s, params_full_.at(s->index));
}

}  // namespace zt
