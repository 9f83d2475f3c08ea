// defines: ParameterSharded (stage 3) — the parameters sharded too: gathered just in time,
//          prefetched, freed; its GatherSchedule's actions.
//
// Stage 3, ParameterSharded (zero/stage.h; the paper's P_os+g+p, section 5.3 and 7.2): stage 2,
// except that each rank keeps only its shard of the parameters, in a ParamTier (the device, or
// with offload_param the host or the NVMe swap file). A unit's full parameters exist only while
// it computes:
//
//   acquire(unit)    the shard all-gathered into the unit's flat buffer (or wait for a prefetch)
//   ... forward, or backward (acquired again from before_backward) ...
//   release(unit)    the flat buffer freed with Storage::release(), so the views autograd saved
//                    stay valid and see the next gather (PyTorch FSDP's storage resize)
//
// Units below stage3_param_persistence_threshold stay gathered. When to gather and free is the
// GatherSchedule's (zero/gather_schedule.h: the recorded order, prefetch, reuse distance); this
// file says what a gather is.
//
// ZeRO++ (zero/zeropp.h) changes what a gather is, not when: with qwZ the world all-gather is
// quantized; with hpZ a training forward's release keeps this rank's secondary shard of the
// gathered parameters (1/H of them, Category::secondary) before freeing the rest, and every
// gather of that unit until its backward opens its gradient (a recompute's, the backward's) is an
// all-gather of the secondary shards inside the node; then the secondary is freed.
#include "zero/stage.h"

#include "core/kernels/cast.h"  // defines: cast_

namespace zt {

ParameterSharded::ParameterSharded(ZeroContext& cx, PrecisionPolicy& precision, ParamTier& params, ShardOptimizer& opt,
                                   Units& units)
    : GradientSharded(cx, precision, params, opt, units), schedule_(cx.cfg.zero, *this) {}

// The shard in its tier, from the initial values; the model's buffer is the compute copy: kept
// for a persistent unit whose buffer still holds its current compute parameters, otherwise freed
// until the first acquire (or never created: partitioned construction, where the initial values
// are the shard alone).
void ParameterSharded::place_params(ShardedUnit& s, const UnitInit& init) {
  const Tensor shard = params_.new_shard(s, precision_.working());
  precision_.to_working(shard, init.slice(s.lo, s.S));
  params_.park(s);
  if (!kept_whole(s, init)) s.ps->flat().storage()->release();
}

// After the precision: it frees the model's buffer where it is a float32 copy of 2-byte
// parameters, to be gathered (and converted) before use.
void ParameterSharded::placed(ShardedUnit& s, const UnitInit& init, bool compute_released) {
  schedule_.add_unit(s.index, s.P, GatherSchedule::persistent(s.ps->numel(), cx_.cfg.zero),
                     kept_whole(s, init) && !compute_released);
}

bool ParameterSharded::kept_whole(const ShardedUnit& s, const UnitInit& init) const {
  return GatherSchedule::persistent(s.ps->numel(), cx_.cfg.zero) && init.in_model_buffer;
}

void ParameterSharded::setup_done() {
  secondary_.resize(units_.size());  // hpZ: none yet
  for (auto& s : units_)  // a persistent unit freed at placement is gathered once, for the run
    if (schedule_.persistent(s->index) && !schedule_.gathered(s->index)) schedule_.gather(s->index, /*wait=*/true);
}

void ParameterSharded::start(int i, bool prefetch) {
  ShardedUnit& s = *units_[i];
  s.ps->flat().storage()->materialize();
  const bool secondary = secondary_[i].defined();
  if (Tracer* t = cx_.active_tracer())
    t->instant(TraceTrack::compute, "gather " + s.unit->name(), "gather",
               {{"unit", s.unit->name()}, {"elements", s.P}, {"prefetch", prefetch}, {"from_secondary", secondary}});
  CommLabel label(cx_.group, s.unit->name());
  if (secondary) fill_from_secondary(s, state(s).gathers);
  else fill(s, state(s).gathers);
}

void ParameterSharded::release(ShardedUnit& s, bool evaluating) {
  keep_secondary_ = zeropp_ && zeropp_->hpz() && !evaluating && !backward_;
  schedule_.release(s.index, evaluating);
  keep_secondary_ = false;
}

void ParameterSharded::drop(int i) {
  ShardedUnit& s = *units_[i];
  drain(state(s).gathers);  // a prefetch nobody used: let it land before freeing its buffer
  if (keep_secondary_ && !secondary_[i].defined()) {  // hpZ: this rank's 1/H of what the forward used
    const int64_t m = s.P / zeropp_->hpz_size();
    Tensor sec = Tensor::empty({m}, precision_.working(), Category::secondary);
    cast_(sec, range(s.ps->flat(), zeropp_->secondary_offset(s.P), m));  // exact: the values came from `working`
    secondary_[i] = sec;
  }
  s.ps->flat().storage()->release();
  if (Tracer* t = cx_.active_tracer())
    t->instant(TraceTrack::compute, "release " + s.unit->name(), "gather", {{"unit", s.unit->name()}});
}

// A tier with a limit (offload_param nvme: buffer_count reads) counts the units with a fetch in
// flight; the others are never counted.
bool ParameterSharded::may_prefetch() const {
  const int64_t limit = params_.fetch_limit();
  if (limit < 0) return true;
  int64_t in_flight = 0;
  for (const auto& s : units_) in_flight += !state(*s).gathers.empty();
  return in_flight < limit;
}

// The shard reaches the device from its tier (ParamTier::fetch), is all-gathered, and lands in
// the unit's compute parameters as the precision receives them (directly, or converted from a
// transient 2-byte buffer).
void ParameterSharded::fill(ShardedUnit& s, std::deque<Pending>& q) {
  const int64_t bucket = cx_.cfg.zero.allgather_bucket_size;
  params_.fetch(s, q, [this, bucket](ShardedUnit& u, const Tensor& src, std::deque<Pending>& out) {
    precision_.receive_gathered(u, out, [&](const Tensor& dst) {
      if (zeropp_) zeropp_->gather(src, dst, out);
      else all_gather_chunked(cx_.group, src, dst, bucket, out);
    });
  });
}

void ParameterSharded::fill_from_secondary(ShardedUnit& s, std::deque<Pending>& q) {
  const Tensor sec = secondary_[s.index];
  precision_.receive_gathered(s, q, [&](const Tensor& dst) { zeropp_->gather_secondary(sec, dst, q); });
}

// The unit's backward begins (its acquire has landed): its secondary shard has served.
void ParameterSharded::open_gradient(ShardedUnit& s) {
  secondary_[s.index] = Tensor();
  GradientSharded::open_gradient(s);
}

// The update changed the shards: the gathered copies are stale. Persistent units are refreshed,
// the others freed (their next acquire gathers the new parameters).
void ParameterSharded::publish_unit(ShardedUnit& s, std::deque<Pending>& q) {
  secondary_[s.index] = Tensor();  // stale (hpZ)
  if (schedule_.persistent(s.index)) fill(s, q);
  else schedule_.free_unit(s.index);
}

}  // namespace zt
