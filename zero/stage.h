// defines: ZeroStage, Replicated, OptimizerSharded, GradientSharded, ParameterSharded,
//          make_stage — what each ZeRO stage keeps of a unit and how its gradients and
//          parameters travel (Rajbhandari et al. 2019, "ZeRO: Memory Optimizations Toward Training
//          Trillion Parameter Models", sections 5 and 7).
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
// reduce-scatter of the gradients (3Psi), section 7.2. ZeRO++ (zero/zeropp.h) changes what those
// collectives are, not when they run: stage 3's gathers (qwZ: int8 blocks; hpZ: the backward's
// inside the node) and the reduction of stages 2-3 (qgZ: a quantized hierarchical all-to-all).
//
// Each stage is the one before it plus what it shards, as in the paper (P_os, P_os+g, P_os+g+p):
// the classes below derive from each other and each overrides only what changes, in its own file:
//   stage0_replicated.cpp          Replicated: full everything; the gradient all-reduced at the
//                                  accumulation boundary
//   stage1_optimizer_sharded.cpp   + the optimizer updates this rank's shard: reduce-scatter
//                                  instead of all-reduce, all-gather of the updated parameters
//   stage2_gradient_sharded.cpp    + the gradient is a shard: reduced after every micro-step's
//                                  backward, the unit's full gradient freed as soon as it left
//   stage3_parameter_sharded.cpp   + the parameters are a shard (in a ParamTier): gathered just in
//                                  time around each unit's forward and backward, prefetched along
//                                  the order recorded in the first step, and freed
// A stage never tests the precision or the offload tier: the PrecisionPolicy converts (and owns
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

// What a stage shards: its answer to zero/footprint.h's question, given by each class below
// (keeps(), next to the placement it describes) and read by the memory report and the estimator
// instead of the stage number.
struct StageKeeps {
  bool optimizer_sharded = false;  // the optimizer updates this rank's shard (P_os)
  bool grads_sharded = false;      // the gradient is kept as a shard, reduced after every backward (P_os+g)
  bool params_sharded = false;     // the parameters are a shard, gathered around each use (P_os+g+p)
};

// What a stage keeps of one unit (the table above; which tensors exist depends on the stage and
// the precision). "working" is float32 (fp32) or the 2-byte dtype (bf16 / fp16).
//
//   tensor        elements  dtype     exists
//   params_full   P         working   stages 0-2: the full parameters every rank keeps
//   grads_full    P         working   stages 0-1: the full gradient, summed over micro-steps
//   grad_shard    S         working   always: this rank's gradient (a view of grads_full at
//                                     stages 0-1; at stages 2-3 where the ShardOptimizer puts
//                                     it: the device, or the host with offload_optimizer)
// This rank's parameter shard is the ParamTier's (a view of params_full at stages 0-2).
struct StageUnit {
  Tensor params_full, grads_full, grad_shard;
  std::deque<Pending> gathers;  // compute parameters being filled (stage 3: all-gather chunks in flight)
  std::deque<Pending> reduces;  // the gradient's reduction in flight: chunks, then its follow-up work
};

class ZeroStage {
 public:
  ZeroStage(ZeroContext& cx, PrecisionPolicy& precision, ParamTier& params, ShardOptimizer& opt, Units& units);
  virtual ~ZeroStage() = default;

  // ---- setup, unit by unit ----
  // The optimizer's slice of the unit: [lo, hi) of its flat space (this rank's shard; stage 0: all).
  virtual std::pair<int64_t, int64_t> optimizer_range(const ShardedUnit& s) const { return {s.lo, s.lo + s.S}; }
  // The part of the unit's flat space whose initial values this stage needs: the whole unit
  // (stages 0-2, whose parameters are replicated: the model's buffer) or this rank's shard
  // (stage 3: nothing else of the unit is ever created at setup).
  virtual std::pair<int64_t, int64_t> initial_range(const ShardedUnit& s) const { return {0, s.P}; }
  // Lays out what this stage keeps of the unit (the table above) from its initial parameters,
  // then lets the precision turn the model's buffers that are not working state into workspaces
  // (PrecisionPolicy::release_compute_buffers) and tells placed() what it did.
  void place(ShardedUnit& s, const UnitInit& init);
  // The working tensors over the optimizer's slice.
  virtual Tensor update_params(const ShardedUnit& s) const;
  virtual Tensor update_grads(const ShardedUnit& s) const { return state(s).grad_shard; }
  virtual void setup_done() {}  // every unit placed and the optimizer built
  // What this stage shards (its class's keeps(): zero/footprint.h's question).
  virtual StageKeeps kept() const = 0;

  // ---- residency: the unit scopes the model opens, and the backward's ----
  // Between acquire and release the unit's compute parameters (ps->flat()) are resident and
  // current. Stages 0-2: the precision's compute copy, if it keeps one.
  virtual void forward_begins() {}
  virtual void backward_begins() {}  // the training backward starts (recomputes inside it included)
  virtual void acquire(ShardedUnit& s, bool evaluating);
  virtual void release(ShardedUnit& s, bool evaluating);

  // ---- backward ----
  // Before the unit's backward: its reduction of the previous micro-step has finished (overlap_comm
  // with accumulation: it may still be reading the buffer this backward refills).
  void finish_reduction(ShardedUnit& s) { drain(state(s).reduces); }
  // Before the unit's backward, after its acquire: the compute gradient (ps->flat_grad()) ready
  // to receive it: stages 0-1 keep it across micro-steps where the precision accumulates in it;
  // otherwise a fresh zeroed buffer (freed again once folded or reduced).
  virtual void open_gradient(ShardedUnit& s);
  // The unit's backward ended: its compute gradient (ps->flat_grad()) is complete for this micro-step.
  virtual void gradient_ready(ShardedUnit& s, bool boundary, int64_t micro) = 0;
  virtual void micro_step_done() {}

  // ---- the step ----
  void finish_reductions();  // every unit's reduction landed
  // The squared L2 norm of the whole gradient, from update_grads of every unit.
  virtual double global_sum_of_squares(const std::vector<Tensor>& grads) = 0;
  virtual void publish() = 0;  // the updated parameters to where forward reads them
  virtual void zero_grad(ShardedUnit& s) = 0;
  // After a checkpoint load filled the optimizer's slices: rebuild what the stage holds beyond
  // them (round_master: mixed precision's master -> the working parameters, unless the offloaded
  // optimizer published them already).
  virtual void loaded(bool round_master) = 0;
  // Waits for every collective in flight without running its follow-up (the engine's destructor).
  void abandon_in_flight();

 protected:
  StageUnit& state(const ShardedUnit& s) { return units_state_.at(s.index); }
  const StageUnit& state(const ShardedUnit& s) const { return units_state_.at(s.index); }
  virtual void place_params(ShardedUnit& s, const UnitInit& init) = 0;
  virtual void place_grads(ShardedUnit& s) = 0;
  // compute_released: the precision freed the model's parameter buffer (a float32 compute copy).
  virtual void placed(ShardedUnit&, const UnitInit&, bool /*compute_released*/) {}
  // Starts (overlap_comm) or runs the reduction of `grad` (P elements): issue_reduction's chunks.
  void reduce(ShardedUnit& s, const Tensor& grad, int64_t micro);
  virtual void issue_reduction(ShardedUnit& s, const Tensor& grad, int64_t micro) = 0;

  ZeroContext& cx_;
  PrecisionPolicy& precision_;
  ParamTier& params_;
  ShardOptimizer& opt_;
  Units& units_;

 private:
  std::vector<StageUnit> units_state_;  // by ShardedUnit::index
};

class Replicated : public ZeroStage {  // stage 0: zero/stage0_replicated.cpp
 public:
  using ZeroStage::ZeroStage;
  static StageKeeps keeps() { return {}; }  // everything whole on every rank
  StageKeeps kept() const override { return keeps(); }
  std::pair<int64_t, int64_t> optimizer_range(const ShardedUnit& s) const override { return {0, s.P}; }
  Tensor update_params(const ShardedUnit& s) const override { return state(s).params_full; }
  Tensor update_grads(const ShardedUnit& s) const override { return state(s).grads_full; }
  void gradient_ready(ShardedUnit& s, bool boundary, int64_t micro) override;
  double global_sum_of_squares(const std::vector<Tensor>& grads) override;
  void publish() override {}
  void zero_grad(ShardedUnit& s) override;
  void loaded(bool round_master) override;

 protected:
  void place_params(ShardedUnit& s, const UnitInit& init) override;
  void place_grads(ShardedUnit& s) override;
  void issue_reduction(ShardedUnit& s, const Tensor& grad, int64_t micro) override;
};

class OptimizerSharded : public Replicated {  // stage 1: zero/stage1_optimizer_sharded.cpp
 public:
  using Replicated::Replicated;
  static StageKeeps keeps() {
    StageKeeps k = Replicated::keeps();
    k.optimizer_sharded = true;
    return k;
  }
  StageKeeps kept() const override { return keeps(); }
  std::pair<int64_t, int64_t> optimizer_range(const ShardedUnit& s) const override { return {s.lo, s.lo + s.S}; }
  Tensor update_params(const ShardedUnit& s) const override { return ZeroStage::update_params(s); }
  Tensor update_grads(const ShardedUnit& s) const override { return ZeroStage::update_grads(s); }
  double global_sum_of_squares(const std::vector<Tensor>& grads) override;
  void publish() override;
  void loaded(bool round_master) override;

 protected:
  void issue_reduction(ShardedUnit& s, const Tensor& grad, int64_t micro) override;
  // Reduce-scatter of `grad` (P) into this rank's grad_shard, averaged; accumulated into it
  // (stages 2-3, after the first micro-step) or written.
  void reduce_scatter(ShardedUnit& s, const Tensor& grad, bool accumulate);
  // The updated shard to where forward reads it (stages 1-2: all-gathered into params_full).
  virtual void publish_unit(ShardedUnit& s, std::deque<Pending>& q);
};

class GradientSharded : public OptimizerSharded {  // stage 2: zero/stage2_gradient_sharded.cpp
 public:
  // With ZeRO++ configured (zero/zeropp.h), makes its groups: collective over the world.
  GradientSharded(ZeroContext& cx, PrecisionPolicy& precision, ParamTier& params, ShardOptimizer& opt, Units& units);
  static StageKeeps keeps() {
    StageKeeps k = OptimizerSharded::keeps();
    k.grads_sharded = true;
    return k;
  }
  StageKeeps kept() const override { return keeps(); }
  void open_gradient(ShardedUnit& s) override;
  void gradient_ready(ShardedUnit& s, bool boundary, int64_t micro) override;
  void zero_grad(ShardedUnit& s) override;

 protected:
  void place_grads(ShardedUnit& s) override;
  void issue_reduction(ShardedUnit& s, const Tensor& grad, int64_t micro) override;
  std::unique_ptr<ZeroPlusPlus> zeropp_;  // null without ZeRO++; qgZ here, qwZ and hpZ in stage 3
};

class ParameterSharded : public GradientSharded,
                         private GatherSchedule::Actions {  // stage 3: zero/stage3_parameter_sharded.cpp
 public:
  ParameterSharded(ZeroContext& cx, PrecisionPolicy& precision, ParamTier& params, ShardOptimizer& opt, Units& units);
  static StageKeeps keeps() {
    StageKeeps k = GradientSharded::keeps();
    k.params_sharded = true;
    return k;
  }
  std::pair<int64_t, int64_t> initial_range(const ShardedUnit& s) const override { return {s.lo, s.lo + s.S}; }
  void setup_done() override;
  StageKeeps kept() const override { return keeps(); }
  void forward_begins() override {
    backward_ = false;
    schedule_.forward_begins();
  }
  void backward_begins() override { backward_ = true; }
  void acquire(ShardedUnit& s, bool evaluating) override { schedule_.acquire(s.index, evaluating); }
  void release(ShardedUnit& s, bool evaluating) override;
  void micro_step_done() override { schedule_.micro_step_done(); }
  void open_gradient(ShardedUnit& s) override;

 protected:
  void place_params(ShardedUnit& s, const UnitInit& init) override;
  void placed(ShardedUnit& s, const UnitInit& init, bool compute_released) override;
  void publish_unit(ShardedUnit& s, std::deque<Pending>& q) override;

 private:
  // GatherSchedule::Actions: the real all-gathers.
  void start(int i, bool prefetch) override;
  void finish(int i) override { drain(state(*units_[i]).gathers); }
  void drop(int i) override;
  bool may_prefetch() const override;
  // A persistent unit whose model buffer holds its initial values keeps it (stays gathered).
  bool kept_whole(const ShardedUnit& s, const UnitInit& init) const;
  // Issues what makes the unit's compute parameters current: the shard fetched from its tier,
  // all-gathered (qwZ: quantized), and converted by the precision where it keeps a compute copy.
  void fill(ShardedUnit& s, std::deque<Pending>& q);
  // hpZ: the same from the unit's secondary shard, inside its node (kept until open_gradient).
  void fill_from_secondary(ShardedUnit& s, std::deque<Pending>& q);
  GatherSchedule schedule_;
  bool backward_ = false;          // between backward_begins and the next forward_begins
  bool keep_secondary_ = false;    // hpZ: the scope being released is a training forward's
  std::vector<Tensor> secondary_;  // hpZ: by unit index, from a forward's release to its backward's start
};

// The stage zero_optimization.stage names (0-3), and what it keeps (the same choice).
std::unique_ptr<ZeroStage> make_stage(ZeroContext& cx, PrecisionPolicy& precision, ParamTier& params,
                                      ShardOptimizer& opt, Units& units);
// The estimator, which has a stage number and no engine, asks the class the same way.
StageKeeps stage_keeps(int stage);

}  // namespace zt
