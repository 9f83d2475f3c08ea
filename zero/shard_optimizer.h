// defines: ShardOptimizer, make_shard_optimizer — where this rank's optimizer step runs: on the
//          device (the optimizer of optim/ over the working shards, through the precision policy),
//          or offloaded to the host (ZeRO-Offload, Ren et al. 2021, section 4: master, m and v in
//          host memory or, ZeRO-Infinity, in the NVMe swap file; zero/offload.h's OffloadedAdamW).
//
// The engine hands it, per unit, the optimizer's slice of the unit (the whole flat space at stage
// 0, this rank's shard otherwise: zero/stage.h) and, at each step, the working gradients of those
// slices. An offloaded optimizer's new parameters go back through the ParamTier (zero/tiers.h).
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zero/footprint.h"
#include "zero/precision.h"
#include "zero/sharded_unit.h"

namespace zt {

class ParamTier;
class StorageTiers;

class ShardOptimizer {
 public:
  virtual ~ShardOptimizer() = default;
  // ---- setup, unit by unit in order ----
  // The optimizer's slice of unit s is flat elements [lo, hi). begin_unit: before the stage
  // places the unit, the optimizer takes its float32 copy of the slice from the initial values
  // `init` (mixed precision's master; the offloaded master). add_unit: after, with the
  // working tensors over the slice.
  virtual void begin_unit(const ShardedUnit& s, const InitialValues& init, int64_t lo, int64_t hi) = 0;
  virtual void add_unit(const ShardedUnit& s, int64_t lo, int64_t hi, const Tensor& param, const Tensor& grad) = 0;
  virtual void finish_setup() {}
  virtual bool offloaded() const = 0;

  // ---- where a reduced gradient shard lands ----
  // Stages 2-3 reduce straight into this S-element shard of the working dtype: a new zeroed
  // device buffer, or (offload) the optimizer's own host buffer, ZeRO-Offload's gradients in
  // host memory.
  virtual Tensor grad_shard(const ShardedUnit& s, DType working) = 0;
  // Stage 1 reduces into a view of the full gradient (`shard`): once the reduction queued in q
  // has landed, the optimizer takes the shard from there (offload: a copy to the host, queued
  // behind the reduction; on the device: nothing, the view is the optimizer's gradient).
  virtual void gradient_reduced(const ShardedUnit&, const Tensor& /*shard*/, std::deque<Pending>& /*q*/) {}

  // ---- the update ----
  // One step at `lr` of every unit's slice: grads[i] / params[i] are unit i's working tensors
  // over its slice; the gradients are multiplied by clip * unscale (clip: the clipping
  // coefficient, unscale: 1 / the fp16 loss scale).
  virtual void step(double lr, double clip, double unscale, const std::vector<Tensor>& grads,
                    const std::vector<Tensor>& params) = 0;

  // ---- state ----
  // Unit s's state as a checkpoint names it ("param" (float32), "exp_avg", ...): this rank's S
  // elements each (views where the state lives in memory).
  virtual std::vector<std::pair<std::string, Tensor>> state(const ShardedUnit& s) = 0;
  // Every state tensor the device optimizer keeps whole (stage 0 all-gathers them after a load).
  virtual std::vector<std::pair<std::string, Tensor>> whole_state() const { return {}; }
  // After the tensors of state() were written in place: the offloaded optimizer stores them (nvme)
  // and publishes the working parameters from the master.
  virtual void loaded(const std::vector<std::vector<std::pair<std::string, Tensor>>>&) {}
  virtual int64_t step_count() const = 0;
  virtual void set_step_count(int64_t n) = 0;
};

// zero/footprint.h's answers for the optimizer placement the config chooses (make_shard_optimizer
// makes the same choice). optimizer_keeps: the state over a slice of slice_x_n elements x N
// (device: the optimizer's state (AdamW m, v; SGD its momentum) plus the precision's master;
// offloaded: AdamW's master, m, v on the host or in the swap file, and its host gradient shard of
// shard_x_n x elem). grad_shard_keeps: the buffer stages 2-3 reduce into (device: a new one;
// offloaded: the host gradient shard counted above).
bool optimizer_offloaded(const ZeroOptimization& z);
void optimizer_keeps(const OptimizerConfig& o, const ZeroOptimization& z, Precision p, int64_t slice_x_n,
                     int64_t shard_x_n, int64_t elem, Footprint& f);
void grad_shard_keeps(const ZeroOptimization& z, int64_t bytes_x_n, Footprint& f);

// offload_optimizer.device none: the device optimizer; cpu / nvme: the offloaded AdamW (its
// swap-file regions are reserved and the files allocated here).
std::unique_ptr<ShardOptimizer> make_shard_optimizer(ZeroContext& cx, PrecisionPolicy& precision, StorageTiers& tiers,
                                                     ParamTier& params,
                                                     const std::vector<std::unique_ptr<ShardedUnit>>& units,
                                                     const std::vector<Unit*>& model_units);

}  // namespace zt
