// defines: CheckpointShard, StepResult, MemoryReport, Engine, initialize — the ZeRO engine: a step
//          scheduler over one ShardedUnit per unit of the model (Rajbhandari et al. 2019, "ZeRO:
//          Memory Optimizations Toward Training Trillion Parameter Models").
//
// The engine decides WHEN things happen; four policies, each chosen once from the config,
// decide WHAT happens:
//
//   the stage       zero/stage.h          what is sharded (0: nothing, 1: optimizer state, 2: +
//                                         gradients, 3: + parameters): the optimizer's range, a
//                                         gradient policy (how gradients are kept and reduced)
//                                         and a parameter policy (how parameters are kept,
//                                         gathered and published), one file per policy
//   the precision   zero/precision.h      fp32, or bf16 / fp16 with a float32 master (float32 or
//                                         bf16 compute), fp16's loss scale
//   the tiers       zero/tiers.h          where bytes live (device, host, NVMe swap file) and
//                                         where stage 3's parameter shards live
//   the optimizer   zero/shard_optimizer.h  the step on the device, or offloaded to the host
//
// The schedule of one training step (gradient_accumulation_steps micro-steps, then step()):
//
//   forward         the model opens a scope per unit: acquire(unit) ... release(unit)
//                   (nn/unit.h's Residency; stage 3 gathers and frees there)
//   backward        autograd calls before_backward(unit) (acquire again, a fresh compute
//                   gradient) and after_backward(unit) (the gradient policy reduces or folds it,
//                   overlapped with the next unit's backward when overlap_comm)
//   step(lr)        finish the reductions; the global gradient norm; fp16: skip on overflow;
//                   clip; the optimizer's update of this rank's slice; publish the parameters;
//                   zero the gradients
//
// A unit's layout, and which policy keeps which of its state, are in zero/sharded_unit.h.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dist/process_group.h"
#include "nn/model.h"
#include "nn/param_source.h"
#include "zero/engine_config.h"
#include "zero/footprint.h"
#include "zero/sharded_unit.h"

namespace zt {

// What this rank holds of one unit, in the checkpoint's terms: each tensor is elements
// [rank*S, (rank+1)*S) of the unit's flat space (P = padded_numel, numel real elements).
struct CheckpointShard {
  std::string unit;
  int64_t numel = 0, padded_numel = 0;
  std::vector<std::pair<std::string, Tensor>> tensors;  // "param", "exp_avg", ... -> S elements
  // The unit's parameters as this rank lays them out (ParamSet::infos: a tensor-parallel slice's
  // shapes and cut); empty: as the checkpoint's. A load places every element by it.
  std::vector<ParamInfo> params;
};

struct StepResult {
  double loss = 0;       // mean over the global batch (all ranks, all micro-steps)
  double grad_norm = 0;  // global L2 norm before clipping
  bool skipped = false;  // fp16: overflow, step skipped
  double loss_scale = 1;  // fp16: the scale this step's gradients were computed with
};

// Per-rank bytes by category: now, the peak since the last reset, and the engine's model-state
// accounting (what the ZeRO formulas predict).
struct MemoryReport {
  MemoryStats measured;      // the device's allocator: current and peak per category
  MemoryStats host;          // offload or cpu_checkpointing: the host tier's allocator
                             // (zero/offload.h, zero/activation_offload.h); zeros otherwise
  MemoryStats nvme;          // offload to nvme: bytes reserved in this rank's swap files
  std::string host_name;     // that allocator's name ("host", "pinned"); empty without a host tier
  int64_t psi = 0;           // parameters (no padding)
  int64_t psi_padded = 0;    // sum of the units' padded flat sizes
  // What the policies say they keep at rest (zero/footprint.h), summed over the units: between
  // steps, measured params / grads / optim on each tier equal these (tests/mpi/test_zero.cpp,
  // tests/mpi/test_offload.cpp), except for stage 3's persistent units, whose gathered full
  // parameters stay resident beside their shards, and the NVMe tier, whose regions are rounded
  // up to the O_DIRECT alignment. model_state.bytes(tier, category, N) gives bytes per rank.
  Footprint model_state;
  int64_t world_size = 1;  // N, for model_state.bytes
};

class ActivationOffload;
class ParamTier;
class PrecisionPolicy;
class ShardOptimizer;
class StorageTiers;
class ZeroStage;

class Engine final : public Residency {
 public:
  // `initial`: where the initial parameter values come from when the model was built without
  // bytes (ModelOptions{materialize = false}: partitioned construction, load_initial in
  // zero/engine.cpp); null when the model was built and filled in memory. Given a source, the
  // engine takes the values from it, whatever the model's buffers hold.
  // `tensor_parallel`: the group the model's blocks are split over (parallel/tensor_parallel.h;
  // null: none). `group` is then the replica group of dist/process_grid.h (the ranks that hold the
  // same slices), over which the engine shards and averages as always; the tensor group enters
  // only the gradient norm (tensor_parallel_sum_of_squares).
  Engine(Model& model, const EngineConfig& cfg, ProcessGroup& group, ParamSource* initial = nullptr,
         ProcessGroup* tensor_parallel = nullptr);
  ~Engine() override;

  // Micro-step: the loss of this rank's micro-batch (mean over its B*T tokens), graph attached.
  Var forward(const Tensor& idx, const Tensor& targets);
  // Backpropagates loss / gradient_accumulation_steps; reductions start as units finish.
  void backward(const Var& loss);
  // After gradient_accumulation_steps forward/backward pairs: finish the reductions, clip by the
  // global norm, one optimizer update of this rank's shards at `lr`, publish the parameters.
  StepResult step(double lr);

  // Evaluation forward (no graph): the loss of one batch on this rank.
  double eval_loss(const Tensor& idx, const Tensor& targets);

  // ---- Residency: the unit scopes the model opens (stage 3 gathers and frees) ----
  void acquire(Unit& u) override;
  void release(Unit& u) override;
  // activation_checkpointing.cpu_checkpointing: the checkpoints go to the host tier
  // (zero/activation_offload.h); null otherwise (they stay on the device).
  CheckpointStore* checkpoint_store() override;

  // ---- state ----
  std::vector<CheckpointShard> shards();  // this rank's shards (views), for checkpoints
  // After the tensors of shards() were written in place (a checkpoint load), given them back:
  // rebuild what the stage holds beyond this rank's shard (stage 0: every tensor whole; stages
  // 1-2: the full parameters; offload: the working parameters, and the swap file on nvme).
  void shards_loaded(const std::vector<CheckpointShard>& filled);
  int64_t optimizer_steps() const;
  void set_optimizer_steps(int64_t n);
  // What a checkpoint's meta.json keeps of the engine beyond the shards: the fp16 loss scaler's
  // state ({} otherwise). load_state_meta restores it (a missing entry keeps the initial scale).
  nlohmann::json state_meta() const;
  void load_state_meta(const nlohmann::json& j);
  double loss_scale() const;  // 1 unless fp16
  MemoryReport memory_report() const;  // waits for checkpoint copies in flight (settled counters)
  EngineTimes times() const { return cx_.times; }

  // Tracing (core/trace.h; null: off): each unit's forward / recompute / backward on the compute
  // track, "gather <unit>" / "release <unit>" instants where a unit's full parameters are issued
  // and freed, the optimizer step and the offload work, memory counters of the device allocator
  // (and of the host tier and the swap file with offload) after every unit and step. Hands the
  // tracer to the group and the swap files too.
  void set_tracer(Tracer* t);
  Tracer* tracer() const { return cx_.active_tracer(); }  // null unless set and recording
  const EngineConfig& config() const { return cfg_; }
  ProcessGroup& group() { return cx_.group; }
  Model& model() { return model_; }

 private:
  ShardedUnit& state_of(Unit& u);
  InitialValues load_initial(const ShardedUnit& s, ParamSource* source);
  void before_backward(ShardedUnit& s);
  void after_backward(ShardedUnit& s);
  void finish_reductions();  // wait for every pending reduction
  void zero_gradients();
  StepResult step_inner(double lr);
  // The squared norm of the whole model's gradient when each rank holds a tensor-parallel slice:
  // the sliced parameters' squares summed over the tensor group as well, the whole ones (the same
  // on every rank of the tensor group) counted once. grads: for_update of every unit.
  double tensor_parallel_sum_of_squares(const std::vector<Tensor>& grads);
  void trace_memory();  // one sample of each tier's memory counters

  Model& model_;
  EngineConfig cfg_;
  ZeroContext cx_;  // cfg_, the group, N, r, the tracer, the times: what the policies share
  ProcessGroup* tensor_parallel_ = nullptr;  // null: the model is whole on every rank
  std::vector<std::unique_ptr<ShardedUnit>> units_;
  std::unique_ptr<PrecisionPolicy> precision_;
  std::unique_ptr<StorageTiers> tiers_;
  std::unique_ptr<ParamTier> param_tier_;
  std::unique_ptr<ShardOptimizer> optimizer_;
  std::unique_ptr<ZeroStage> stage_;
  std::unique_ptr<ActivationOffload> checkpoints_;  // cpu_checkpointing only
  // Tracing, per unit: when its forward (acquire) and backward (before_backward) began; a forward
  // that began inside a backward is the activation-checkpointing recompute.
  struct UnitTrace {
    Tracer::Clock::time_point fwd_t0, bwd_t0;
    bool fwd_open = false, fwd_in_backward = false;
  };
  std::vector<UnitTrace> trace_;  // by unit index
  Footprint model_state_;         // the policies' answers summed over the units, at setup (memory_report)
  int64_t micro_ = 0;         // micro-steps since the last step()
  double loss_sum_ = 0;       // this rank's micro-batch losses since the last step()
  bool in_backward_ = false;
  bool backward_scope_ = false;  // acquire/release called by before/after_backward (not a forward)
  bool evaluating_ = false;
};

// DeepSpeed's entry point: model + config + group -> engine. The model must have been built with
// ModelOptions{world_size = group.size()} so its flat buffers shard evenly; with materialize =
// false (partitioned construction) `initial` supplies the values (models/init.h's ModelInit).
std::unique_ptr<Engine> initialize(Model& model, const EngineConfig& cfg, ProcessGroup& group,
                                   ParamSource* initial = nullptr, ProcessGroup* tensor_parallel = nullptr);

}  // namespace zt
