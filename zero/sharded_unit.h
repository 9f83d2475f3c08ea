// defines: ShardedUnit, InitialValues, EngineTimes, ZeroContext — the layout of one unit as the ZeRO
//          engine shards it, its initial values during setup, and what every policy of the engine
//          (zero/stage.h, zero/precision.h, zero/tiers.h, zero/shard_optimizer.h) shares: the
//          group, the config, the rank, the tracer.
//
// One ShardedUnit per unit of the model (nn/unit.h). With N ranks, rank r and the unit's flat
// buffers of P elements (P = N * S), this rank owns flat elements [lo, lo + S), lo = r * S
// (docs/architecture.md, "The life of one parameter"). A ShardedUnit is the layout alone, set
// once at setup and read by everyone; each policy keeps its own per-unit state, indexed by
// ShardedUnit::index:
//
//   state                                   owner
//   full parameters (stages 0-2),           the stage's parameter policy (zero/stage.h's
//   gathers in flight, hpZ's secondary      ReplicatedParameters, ShardedParameters)
//   full gradient, gradient shard,          the stage's gradient policy (zero/stage.h's
//   reductions in flight                    AccumulatedGradient, ShardedGradient)
//   gathered / in use / persistent          stage 3's GatherSchedule (zero/gather_schedule.h)
//   parameter shard                         the ParamTier (zero/tiers.h): device, host or NVMe
//   float32 master, compute copies          the PrecisionPolicy (zero/precision.h)
//   optimizer state, offloaded gradients    the ShardOptimizer (zero/shard_optimizer.h)
//   trace times of forward / backward       the Engine (zero/engine.h)
//
// The model's own buffers ps->flat() / ps->flat_grad() are the *compute* parameters and gradient:
// what the unit's kernels read and write between acquire and release and during its backward.
#pragma once
#include "core/trace.h"
#include "dist/process_group.h"
#include "nn/model.h"
#include "zero/engine_config.h"
#include "zero/pending.h"

namespace zt {

struct ShardedUnit {
  int index = 0;  // position in the model's units (forward order)
  Unit* unit = nullptr;
  ParamSet* ps = nullptr;
  // padded flat size, shard size (P = N * S), this rank's offset r * S. Short on purpose: they are
  // the P and S of zero/stage.h's table and formulas, which the policies' code reads like.
  int64_t P = 0, S = 0, lo = 0;
};

// Setup only: a unit's initial values over [lo, lo + values.numel()) of its flat space, in the
// model's dtype: the whole unit in the model's own buffer (in_model_buffer; stages 0-2 keep it),
// or this rank's shard alone in a setup buffer (stage 3 with partitioned construction; freed once
// the unit is placed). Made by zero/engine.cpp's load_initial, handed to the policies that place
// the unit.
struct InitialValues {
  Tensor values;
  int64_t lo = 0;
  bool in_model_buffer = false;
  Tensor slice(int64_t a, int64_t n) const { return values.flat_view(a - lo, {n}); }
};

// Seconds the training thread spent in the engine's offload work: the CPU optimizer's step (with
// its swap-file reads and writes), bringing offloaded parameter shards in (waiting for their
// reads, copying them to the device) and taking reduced gradients out to host memory.
struct EngineTimes {
  double offload_step_s = 0;
  double offload_fetch_s = 0;
  double offload_grads_s = 0;    // the host landing gradients: waiting for their copies (zero/gradient_landing.h)
  double checkpoint_wait_s = 0;  // cpu_checkpointing: waits for checkpoints coming back (zero/activation_offload.h)
};

// What every policy object of one engine shares. Owned by the Engine; the policies hold a reference.
struct ZeroContext {
  ZeroContext(const EngineConfig& c, ProcessGroup& g) : cfg(c), group(g), N(g.size()), r(g.rank()) {}
  const EngineConfig& cfg;
  ProcessGroup& group;
  int N = 1, r = 0;
  Tracer* tracer = nullptr;  // set_tracer; null: off
  EngineTimes times;
  Tracer* active_tracer() const { return tracer && tracer->recording() ? tracer : nullptr; }
};

}  // namespace zt
