// defines: StageKeeps, stage_keeps, GradientPolicy, AccumulatedGradient, ShardedGradient,
//          ParameterPolicy, ReplicatedParameters, ShardedParameters, ZeroStage, make_stage — a
//          ZeRO stage as three independent choices: where the optimizer's range is, how gradients
//          are kept and reduced, how parameters are kept and gathered (Rajbhandari et al. 2019,
//          "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", sections 5 and 7).
//
// With N ranks, rank r, a unit's flat buffers of P elements (padded so N | P) and S = P / N:
//
//              parameters (params)       gradients (grads)          optimizer state (optim)
//   stage 0    full P, all ranks          full P, all-reduced        full (m, v): 2P
//   stage 1    full P                     full P, reduce-scattered   shard: 2S
//   stage 2    full P                     shard S (+ the full P of   shard: 2S
//                                         one unit during its backward)
//   stage 3    shard S (+ the full P of   shard S (as stage 2)       shard: 2S
//              units between acquire and release)
//
// float32 counts 4 bytes each, so the model states per rank are 16Psi, 8Psi + 8Psi/N,
// 4Psi + 12Psi/N and 16Psi/N (the paper's fp32 counterpart of 2Psi+2Psi+K*Psi, K = 8 without a
// master copy). Mixed precision (zero/precision.h; section 3.1, Table 1 with K = 12) gives
// stage 0 2Psi+2Psi+12Psi, stage 1 2Psi+2Psi+12Psi/N, stage 2 2Psi+14Psi/N, stage 3 16Psi/N.
//
// Communication per step (ring convention, dist/process_group.h): stage 0 an all-reduce of the
// gradients (2Psi); stages 1-2 a reduce-scatter of the gradients and an all-gather of the updated
// parameters (Psi + Psi); stage 3 an all-gather per unit in forward and again in backward and a
// reduce-scatter of the gradients (3Psi), section 7.2.
//
// Each column of the table is one choice, made once by make_stage from zero_optimization.stage
// (stage_keeps: the one place that reads the stage number); nothing tests the number afterwards:
//
//   column       choice                                              file
//   optim        the optimizer's range: the whole unit (stage 0) or   zero/stage.cpp (ZeroStage)
//                this rank's shard (P_os, section 5.1)
//   grads        AccumulatedGradient: full, summed over micro-steps,  zero/accumulated_gradient.cpp
//                reduced once at the boundary (all-reduce when the
//                optimizer is whole, reduce-scatter when sharded)
//                ShardedGradient: a shard, reduce-scattered after     zero/sharded_gradient.cpp
//                every backward, the full gradient freed (P_os+g,
//                section 5.2); ZeRO++'s qgZ is its reduction
//   params       ReplicatedParameters: full on every rank, published  zero/replicated_parameters.cpp
//                by an all-gather after a sharded update
//                ShardedParameters: a shard (in a ParamTier), gathered zero/sharded_parameters.cpp
//                just in time around each use along the GatherSchedule
//                (P_os+g+p, sections 5.3 and 7.2); ZeRO++'s qwZ and
//                hpZ are its gathers
//
//   stage   optimizer range   gradients             parameters
//   0       whole             AccumulatedGradient   ReplicatedParameters
//   1       shard             AccumulatedGradient   ReplicatedParameters
//   2       shard             ShardedGradient       ReplicatedParameters
//   3       shard             ShardedGradient       ShardedParameters
//
// ZeRO++ (zero/zeropp.h) changes what the collectives are, not when they run, and each part
// belongs to the policy whose collective it changes: qwZ (int8 all-gather) and hpZ (the
// backward's all-gather inside the node) to ShardedParameters, qgZ (a quantized hierarchical
// all-to-all for the reduce-scatter) to ShardedGradient.
//
// A policy never tests the precision or the offload tier: the PrecisionPolicy converts (and owns
// the compute copies and the master), the ParamTier holds the parameter shard, the ShardOptimizer
// says where a reduced gradient shard lands. A reduction's follow-up work (free the full gradient,
// hand the shard to the offloaded optimizer) is queued behind its chunks (zero/pending.h).
#pragma once
#include <memory>
#include <utility>
#include <vector>

#include "zero/gather_schedule.h"
#include "zero/precision.h"
#include "zero/shard_optimizer.h"
#include "zero/sharded_unit.h"
#include "zero/tiers.h"
#include "zero/zeropp.h"

namespace zt {

using Units = std::vector<std::unique_ptr<ShardedUnit>>;

// What a stage shards: the three choices above as zero/footprint.h's question, read by the
// memory report and the estimator instead of the stage number.
struct StageKeeps {
  bool optimizer_sharded = false;  // the optimizer updates this rank's shard (P_os)
  bool grads_sharded = false;      // the gradient is kept as a shard, reduced after every backward (P_os+g)
  bool params_sharded = false;     // the parameters are a shard, gathered around each use (P_os+g+p)
};

// The stage zero_optimization.stage names (0-3) as its three choices; the estimator, which has a
// stage number and no engine, asks here too.
StageKeeps stage_keeps(int stage);

// ---------------------------------------------------------------------------------------------
// Gradients: what a unit keeps of its gradient, and its reduction over the ranks.
//
// The unit's compute gradient (ps->flat_grad()) receives its backward. grad_shard (S elements,
// working dtype) is this rank's reduced gradient, the one the optimizer reads when its range is
// the shard.
class GradientPolicy {
 public:
  GradientPolicy(ZeroContext& cx, PrecisionPolicy& precision, ShardOptimizer& opt, Units& units,
                 bool optimizer_sharded);
  virtual ~GradientPolicy() = default;

  // Setup: lays out what the policy keeps of the unit.
  virtual void place(ShardedUnit& s) = 0;
  // The working gradient over the optimizer's range (the whole unit, or this rank's shard).
  virtual Tensor for_update(const ShardedUnit& s) const = 0;
  // Before the unit's backward, after its acquire: the compute gradient ready to receive it.
  virtual void open(ShardedUnit& s) = 0;
  // The unit's backward ended: its compute gradient is complete for this micro-step.
  virtual void ready(ShardedUnit& s, bool boundary, int64_t micro) = 0;
  virtual void zero(ShardedUnit& s) = 0;  // after the step

  // Before the unit's backward: its reduction of the previous micro-step has finished (overlap_comm
  // with accumulation: it may still be reading the buffer this backward refills).
  void finish_reduction(const ShardedUnit& s) { drain(reductions(s)); }
  void finish_reductions();  // every unit's reduction landed
  void abandon_in_flight();  // waits for every reduction without its follow-up (the engine's destructor)

 protected:
  // Starts (overlap_comm) or runs the reduction of `grad` (P elements): issue_reduction's chunks.
  void reduce(ShardedUnit& s, const Tensor& grad, int64_t micro);
  virtual void issue_reduction(ShardedUnit& s, const Tensor& grad, int64_t micro) = 0;
  // Reduce-scatter of `grad` (P) into `shard` (S: this rank's part), averaged, in chunks of
  // reduce_bucket_size; accumulated into it or written.
  void reduce_scatter(ShardedUnit& s, const Tensor& grad, const Tensor& shard, bool accumulate);
  std::deque<Pending>& reductions(const ShardedUnit& s);  // by unit: chunks, then their follow-up work

  ZeroContext& cx_;
  PrecisionPolicy& precision_;
  ShardOptimizer& opt_;
  Units& units_;
  const bool optimizer_sharded_;

 private:
  std::vector<std::deque<Pending>> reductions_;  // by ShardedUnit::index
};

// Stages 0-1: zero/accumulated_gradient.cpp. grads_full (P, working) sums the unit's gradient
// over the micro-steps; grad_shard is its view [lo, lo + S).
class AccumulatedGradient final : public GradientPolicy {
 public:
  using GradientPolicy::GradientPolicy;
  void place(ShardedUnit& s) override;
  Tensor for_update(const ShardedUnit& s) const override;
  void open(ShardedUnit& s) override { precision_.open_gradient(s); }
  void ready(ShardedUnit& s, bool boundary, int64_t micro) override;
  void zero(ShardedUnit& s) override { grads_full_.at(s.index).zero_(); }

 private:
  void issue_reduction(ShardedUnit& s, const Tensor& grad, int64_t micro) override;
  std::vector<Tensor> grads_full_, grad_shard_;  // by unit index
};

// Stages 2-3: zero/sharded_gradient.cpp. grad_shard (S) is its own buffer, where the optimizer
// wants it; the full compute gradient exists only from open() until its reduction has left it.
class ShardedGradient final : public GradientPolicy {
 public:
  // With qgZ configured, makes its node groups: collective over the world.
  ShardedGradient(ZeroContext& cx, PrecisionPolicy& precision, ShardOptimizer& opt, Units& units);
  void place(ShardedUnit& s) override;
  Tensor for_update(const ShardedUnit& s) const override { return grad_shard_.at(s.index); }
  void open(ShardedUnit& s) override { s.ps->fresh_grad(); }
  void ready(ShardedUnit& s, bool boundary, int64_t micro) override;
  void zero(ShardedUnit& s) override { grad_shard_.at(s.index).zero_(); }

 private:
  void issue_reduction(ShardedUnit& s, const Tensor& grad, int64_t micro) override;
  std::vector<Tensor> grad_shard_;               // by unit index
  std::unique_ptr<QuantizedReduceScatter> qgz_;  // ZeRO++ qgZ; null: the plain reduce-scatter
};

// ---------------------------------------------------------------------------------------------
// Parameters: what a unit keeps of its parameters, and how they become the compute parameters
// (ps->flat(), resident and current between acquire and release).
class ParameterPolicy {
 public:
  ParameterPolicy(ZeroContext& cx, PrecisionPolicy& precision, ParamTier& params, ShardOptimizer& opt, Units& units,
                  bool optimizer_sharded);
  virtual ~ParameterPolicy() = default;

  // ---- setup ----
  // The part of the unit's flat space whose initial values this policy needs: [lo, hi).
  virtual std::pair<int64_t, int64_t> initial_range(const ShardedUnit& s) const = 0;
  // Lays out what the policy keeps of the unit from its initial parameters.
  virtual void place(ShardedUnit& s, const InitialValues& init) = 0;
  // After the precision turned the model's buffers into workspaces (compute_released: it freed
  // the model's parameter buffer, a float32 compute copy).
  virtual void placed(ShardedUnit&, const InitialValues&, bool /*compute_released*/) {}
  // The working parameters over the optimizer's range (the whole unit, or this rank's shard).
  virtual Tensor for_update(const ShardedUnit& s) const = 0;
  virtual void setup_done() {}  // every unit placed and the optimizer built

  // ---- residency: the unit scopes the model opens, and the backward's ----
  virtual void forward_begins() {}
  virtual void backward_begins() {}  // the training backward starts (recomputes inside it included)
  virtual void acquire(ShardedUnit& s, bool evaluating) = 0;
  virtual void release(ShardedUnit& s, bool evaluating) = 0;
  virtual void backward_opens(ShardedUnit&) {}  // after the backward's acquire, before its gradient opens
  virtual void micro_step_done() {}

  // ---- the step ----
  virtual void publish() = 0;  // the updated parameters to where forward reads them
  // After a checkpoint load filled the optimizer's slices: rebuild what the policy holds beyond
  // them (round_master: mixed precision's master -> the working parameters, unless the offloaded
  // optimizer published them already).
  virtual void loaded(bool round_master) = 0;
  virtual void abandon_in_flight() {}  // waits for every gather without its follow-up

 protected:
  ZeroContext& cx_;
  PrecisionPolicy& precision_;
  ParamTier& params_;
  ShardOptimizer& opt_;
  Units& units_;
  const bool optimizer_sharded_;
};

// Stages 0-2: zero/replicated_parameters.cpp. params_full (P, working) on every rank; this rank's
// shard in the ParamTier is its view [lo, lo + S).
class ReplicatedParameters final : public ParameterPolicy {
 public:
  using ParameterPolicy::ParameterPolicy;
  std::pair<int64_t, int64_t> initial_range(const ShardedUnit& s) const override { return {0, s.P}; }
  void place(ShardedUnit& s, const InitialValues& init) override;
  Tensor for_update(const ShardedUnit& s) const override;
  void acquire(ShardedUnit& s, bool) override { precision_.acquire_compute(s, params_full_.at(s.index)); }
  void release(ShardedUnit& s, bool) override { precision_.release_compute(s); }
  void publish() override;
  void loaded(bool round_master) override;

 private:
  void all_gather_shard(ShardedUnit& s, std::deque<Pending>& q);  // this rank's shard into params_full
  std::vector<Tensor> params_full_;                               // by unit index
};

// Stage 3: zero/sharded_parameters.cpp. Only this rank's shard is kept (in the ParamTier); the
// full parameters are gathered into the model's buffer when the GatherSchedule says.
class ShardedParameters final : public ParameterPolicy, private GatherSchedule::Actions {
 public:
  // With hpZ configured, makes the secondary group: collective over the world.
  ShardedParameters(ZeroContext& cx, PrecisionPolicy& precision, ParamTier& params, ShardOptimizer& opt, Units& units);
  std::pair<int64_t, int64_t> initial_range(const ShardedUnit& s) const override { return {s.lo, s.lo + s.S}; }
  void place(ShardedUnit& s, const InitialValues& init) override;
  void placed(ShardedUnit& s, const InitialValues& init, bool compute_released) override;
  Tensor for_update(const ShardedUnit& s) const override { return params_.shard(s); }
  void setup_done() override;
  void forward_begins() override;
  void backward_begins() override { backward_ = true; }
  void acquire(ShardedUnit& s, bool evaluating) override;
  void release(ShardedUnit& s, bool evaluating) override;
  void backward_opens(ShardedUnit& s) override;
  void micro_step_done() override { schedule_.micro_step_done(); }
  void publish() override;
  void loaded(bool round_master) override;
  void abandon_in_flight() override;

 private:
  // GatherSchedule::Actions: the real all-gathers.
  void start(int i, bool prefetch) override;
  void finish(int i) override { drain(gathers_.at(i)); }
  void drop(int i) override;
  bool may_prefetch() const override;
  // A persistent unit whose model buffer holds its initial values keeps it (stays gathered).
  bool kept_whole(const ShardedUnit& s, const InitialValues& init) const;
  // The update changed the shard: a persistent unit gathered again, the others freed.
  void refresh(ShardedUnit& s, std::deque<Pending>& q);
  // Issues what makes the unit's compute parameters current: the shard brought to the device
  // from its tier where it is offloaded, then gather().
  void fill(ShardedUnit& s, std::deque<Pending>& q, bool exact = false);
  // The all-gather of `src` (this rank's shard on the device) into the unit's compute parameters
  // (qwZ: quantized, unless `exact`: a persistent unit's refresh after the step, as DeepSpeed's),
  // converted by the precision where it keeps a compute copy.
  void gather(ShardedUnit& s, const Tensor& src, std::deque<Pending>& q, bool exact = false);
  // hpZ: the same from the unit's secondary shard, inside its node (kept until backward_opens);
  // with qwZ quantized too, as DeepSpeed's (zero_hpz_secondary_exact, ours: not).
  void gather_from_secondary(ShardedUnit& s, std::deque<Pending>& q);

  GatherSchedule schedule_;
  std::vector<std::deque<Pending>> gathers_;  // by unit index: the compute parameters being filled
  // ZeRO++, the gathers it changes.
  bool quantized_weights_ = false;           // qwZ: the world all-gather sends int8 blocks
  std::unique_ptr<ProcessGroup> hpz_group_;  // hpZ: H ranks of this node; null: off
  std::vector<Tensor> secondary_;            // hpZ: by unit index, from a forward's release to its backward's start
  bool backward_ = false;                    // between backward_begins and the next forward_begins
  bool keep_secondary_ = false;              // hpZ: the scope being released is a training forward's
};

// ---------------------------------------------------------------------------------------------
// The stage: the optimizer's range and the two policies, chosen together by make_stage.
class ZeroStage {
 public:
  ZeroStage(StageKeeps keeps, ZeroContext& cx, PrecisionPolicy& precision, std::unique_ptr<ParameterPolicy> parameters,
            std::unique_ptr<GradientPolicy> gradients);
  const StageKeeps& kept() const { return keeps_; }
  ParameterPolicy& parameters() { return *parameters_; }
  GradientPolicy& gradients() { return *gradients_; }

  // The optimizer's slice of the unit: [lo, hi) of its flat space (this rank's shard, or all).
  std::pair<int64_t, int64_t> optimizer_range(const ShardedUnit& s) const;
  // Lays out what the stage keeps of the unit (parameters, then gradients), then lets the
  // precision turn the model's buffers that are not working state into workspaces
  // (PrecisionPolicy::release_compute_buffers) and tells the parameters what it did.
  void place(ShardedUnit& s, const InitialValues& init);
  // The squared L2 norm of the whole gradient, from the gradients over the optimizer's range of
  // every unit: summed here (whole), or over the shards by one all-reduce (sharded).
  double global_sum_of_squares(const std::vector<Tensor>& grads);
  void abandon_in_flight();  // every collective in flight waited for (the engine's destructor)

 private:
  StageKeeps keeps_;
  ZeroContext& cx_;
  PrecisionPolicy& precision_;
  std::unique_ptr<ParameterPolicy> parameters_;
  std::unique_ptr<GradientPolicy> gradients_;
};

// The stage zero_optimization.stage names: its three choices (stage_keeps), made once.
std::unique_ptr<ZeroStage> make_stage(ZeroContext& cx, PrecisionPolicy& precision, ParamTier& params,
                                      ShardOptimizer& opt, Units& units);

}  // namespace zt
