// What every ZeRO stage shares (zero/stage.h): the reduction's overlap rule, the compute copy's
// gather and free, the acquire / release scopes without prefetch, and the choice of the stage.
//
// The acquire / release rules: each open scope (a forward between acquire and release, a unit's
// backward between before_backward and after_backward) holds one reference (ShardedUnit::refs);
// the compute copy is freed when the last reference goes, unless the unit is persistent (or, at
// stage 3, used again soon). A gather issued ahead (a prefetch) that nobody used lands before its
// buffer is freed.
#include "zero/stage.h"

namespace zt {

ZeroStage::ZeroStage(ZeroContext& cx, const PrecisionPolicy& precision, ParamTier& params, ShardOptimizer& opt,
                     Units& units)
    : cx_(cx), precision_(precision), params_(params), opt_(opt), units_(units),
      compute_copy_(precision.separate_compute_copy()) {}

void ZeroStage::reduce(ShardedUnit& s, const Tensor& grad, int64_t micro) {
  // overlap_comm: the previous unit's reduction may still run while this unit's backward ran;
  // finish it now, so at most two units' reductions (and full gradients) are alive.
  if (cx_.cfg.zero.overlap_comm) {
    for (auto& u : units_)
      if (u.get() != &s) drain(u->reduces);
  }
  CommLabel label(cx_.group, s.unit->name());
  issue_reduction(s, grad, micro);
  if (!cx_.cfg.zero.overlap_comm) drain(s.reduces);
}

// Stages 0-2 with a separate compute copy (mixed precision, float32 compute): the conversion of
// the 2-byte parameters, on the spot (no communication).
void ZeroStage::fill_compute_copy(ShardedUnit& s, std::deque<Pending>&) {
  precision_.fill_compute(s.ps->flat(), s.params_full);
}

void ZeroStage::gather(ShardedUnit& s, bool wait) {
  if (!s.gathered) {
    s.ps->flat().storage()->materialize();
    s.gathered = true;
    if (!s.persistent) live_elements_ += s.P;  // persistent units stay for the run: not "live" ones
    if (Tracer* t = cx_.active_tracer())
      t->instant(TraceTrack::compute, "gather " + s.unit->name(), "gather",
                 {{"unit", s.unit->name()}, {"elements", s.P}, {"prefetch", !wait}});
    CommLabel label(cx_.group, s.unit->name());
    fill_compute_copy(s, s.gathers);
    if (!cx_.cfg.zero.overlap_comm) wait = true;
  }
  if (wait) drain(s.gathers);
}

void ZeroStage::free_compute_copy(ShardedUnit& s) {
  if (!compute_copy_ || s.persistent || !s.gathered || s.refs > 0) return;
  drain(s.gathers);  // a prefetch nobody used: let it land before freeing its buffer
  s.ps->flat().storage()->release();
  s.gathered = false;
  live_elements_ -= s.P;
  if (Tracer* t = cx_.active_tracer())
    t->instant(TraceTrack::compute, "release " + s.unit->name(), "gather", {{"unit", s.unit->name()}});
}

void ZeroStage::acquire(ShardedUnit& s, bool) {
  if (!compute_copy_) return;
  ++s.refs;
  gather(s, /*wait=*/true);
}

void ZeroStage::release(ShardedUnit& s, bool) {
  if (!compute_copy_) return;
  ZT_CHECK(s.refs > 0, "release of unit '", s.unit->name(), "' without an acquire");
  --s.refs;
  free_compute_copy(s);
}

std::unique_ptr<ZeroStage> make_stage(ZeroContext& cx, const PrecisionPolicy& precision, ParamTier& params,
                                      ShardOptimizer& opt, Units& units) {
  switch (cx.cfg.zero.stage) {
    case 0: return std::make_unique<Replicated>(cx, precision, params, opt, units);
    case 1: return std::make_unique<OptimizerSharded>(cx, precision, params, opt, units);
    case 2: return std::make_unique<GradientSharded>(cx, precision, params, opt, units);
    case 3: return std::make_unique<ParameterSharded>(cx, precision, params, opt, units);
  }
  ZT_THROW("config: zero_optimization.stage must be 0, 1, 2 or 3, got ", cx.cfg.zero.stage);
}

}  // namespace zt
