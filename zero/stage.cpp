// defines: what every ZeRO stage shares (zero/stage.h): ZeroStage's placement, the reduction's
//          overlap rule, the compute copy's scopes at stages 0-2, and make_stage.
//
// Stages 0-2 keep the full parameters; their acquire / release scopes matter only where the
// precision keeps a separate compute copy (mixed precision computing in float32), and that copy
// is the precision's (PrecisionPolicy::acquire_compute). Stage 3 replaces both with its
// GatherSchedule (zero/gather_schedule.h).
#include "zero/stage.h"

namespace zt {

ZeroStage::ZeroStage(ZeroContext& cx, PrecisionPolicy& precision, ParamTier& params, ShardOptimizer& opt, Units& units)
    : cx_(cx), precision_(precision), params_(params), opt_(opt), units_(units) {}

void ZeroStage::place(ShardedUnit& s, const UnitInit& init) {
  if (units_state_.size() <= static_cast<size_t>(s.index)) units_state_.resize(s.index + 1);
  place_params(s, init);
  place_grads(s);
  placed(s, init, precision_.release_compute_buffers(s));
}

Tensor ZeroStage::update_params(const ShardedUnit& s) const { return params_.shard(s); }

void ZeroStage::reduce(ShardedUnit& s, const Tensor& grad, int64_t micro) {
  // overlap_comm: the previous unit's reduction may still run while this unit's backward ran;
  // finish it now, so at most two units' reductions (and full gradients) are alive.
  if (cx_.cfg.zero.overlap_comm) {
    for (auto& u : units_)
      if (u.get() != &s) drain(state(*u).reduces);
  }
  CommLabel label(cx_.group, s.unit->name());
  issue_reduction(s, grad, micro);
  if (!cx_.cfg.zero.overlap_comm) drain(state(s).reduces);
}

void ZeroStage::finish_reductions() {
  for (StageUnit& u : units_state_) drain(u.reduces);
}

void ZeroStage::abandon_in_flight() {
  for (StageUnit& u : units_state_) {
    for (Pending& p : u.gathers) p.work->wait();
    for (Pending& p : u.reduces) p.work->wait();
  }
}

void ZeroStage::acquire(ShardedUnit& s, bool) { precision_.acquire_compute(s, state(s).params_full); }

void ZeroStage::release(ShardedUnit& s, bool) { precision_.release_compute(s); }

void ZeroStage::open_gradient(ShardedUnit& s) { precision_.open_gradient(s); }

StageKeeps stage_keeps(int stage) {
  switch (stage) {
    case 0: return Replicated::keeps();
    case 1: return OptimizerSharded::keeps();
    case 2: return GradientSharded::keeps();
    case 3: return ParameterSharded::keeps();
  }
  ZT_THROW("config: zero_optimization.stage must be 0, 1, 2 or 3, got ", stage);
}

std::unique_ptr<ZeroStage> make_stage(ZeroContext& cx, PrecisionPolicy& precision, ParamTier& params,
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
