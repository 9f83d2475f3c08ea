// defines: stage_keeps, make_stage, ZeroStage, ParameterPolicy's constructor (zero/stage.h) —
//          the stage number read once and turned into its three choices, and what the stage
//          answers itself: the optimizer's range, the placement order, the gradient norm.
#include "zero/stage.h"

#include "core/kernels/shard_norm.h"  // defines: sum_of_squares

namespace zt {

StageKeeps stage_keeps(int stage) {
  if (stage < 0 || stage > 3) ZT_THROW("config: zero_optimization.stage must be 0, 1, 2 or 3, got ", stage);
  StageKeeps k;
  k.optimizer_sharded = stage >= 1;  // P_os
  k.grads_sharded = stage >= 2;      // P_os+g
  k.params_sharded = stage >= 3;     // P_os+g+p
  return k;
}

std::unique_ptr<ZeroStage> make_stage(ZeroContext& cx, PrecisionPolicy& precision, ParamTier& params,
                                      ShardOptimizer& opt, Units& units) {
  const StageKeeps k = stage_keeps(cx.cfg.zero.stage);
  // ZeRO++ changes the collectives of stages 2-3 (zero/zeropp.h); its keys were checked against
  // the world size when parsed, and again here for a config made in code.
  if (cx.cfg.zero.zeropp())
    if (const std::string bad = zeropp_problem(cx.cfg.zero, cx.N); !bad.empty()) ZT_THROW("config: ", bad);
  // The parameters first: hpZ's group is split before qgZ's (both collective over the world).
  std::unique_ptr<ParameterPolicy> p;
  if (k.params_sharded) p = std::make_unique<ShardedParameters>(cx, precision, params, opt, units);
  else p = std::make_unique<ReplicatedParameters>(cx, precision, params, opt, units, k.optimizer_sharded);
  std::unique_ptr<GradientPolicy> g;
  if (k.grads_sharded) g = std::make_unique<ShardedGradient>(cx, precision, opt, units);
  else g = std::make_unique<AccumulatedGradient>(cx, precision, opt, units, k.optimizer_sharded);
  return std::make_unique<ZeroStage>(k, cx, precision, std::move(p), std::move(g));
}

ZeroStage::ZeroStage(StageKeeps keeps, ZeroContext& cx, PrecisionPolicy& precision,
                     std::unique_ptr<ParameterPolicy> parameters, std::unique_ptr<GradientPolicy> gradients)
    : keeps_(keeps),
      cx_(cx),
      precision_(precision),
      parameters_(std::move(parameters)),
      gradients_(std::move(gradients)) {}

std::pair<int64_t, int64_t> ZeroStage::optimizer_range(const ShardedUnit& s) const {
  if (keeps_.optimizer_sharded) return {s.lo, s.lo + s.S};
  return {0, s.P};
}

void ZeroStage::place(ShardedUnit& s, const InitialValues& init) {
  parameters_->place(s, init);
  gradients_->place(s);
  parameters_->placed(s, init, precision_.release_compute_buffers(s));
}

double ZeroStage::global_sum_of_squares(const std::vector<Tensor>& grads) {
  // Whole: every rank holds the whole averaged gradient, no communication. Sharded: a sum over
  // the shards (the padding is zero and adds nothing), one double all-reduced.
  if (!keeps_.optimizer_sharded) return sum_of_squares(grads);
  return cx_.group.all_reduce_sum(sum_of_squares(grads));
}

void ZeroStage::abandon_in_flight() {
  parameters_->abandon_in_flight();
  gradients_->abandon_in_flight();
}

ParameterPolicy::ParameterPolicy(ZeroContext& cx, PrecisionPolicy& precision, ParamTier& params, ShardOptimizer& opt,
                                 Units& units, bool optimizer_sharded)
    : cx_(cx),
      precision_(precision),
      params_(params),
      opt_(opt),
      units_(units),
      optimizer_sharded_(optimizer_sharded) {}

}  // namespace zt
