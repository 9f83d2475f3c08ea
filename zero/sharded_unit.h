// defines: ShardedUnit, EngineTimes, ZeroContext — what the ZeRO engine keeps per unit, and what
//          every policy of the engine (zero/stage.h, zero/precision.h, zero/tiers.h,
//          zero/shard_optimizer.h) shares: the group, the config, the rank, the tracer.
//
// One ShardedUnit per unit of the model (nn/unit.h). With N ranks, rank r and the unit's flat
// buffers of P elements (P = N * S), this rank owns flat elements [lo, lo + S), lo = r * S
// (docs/architecture.md, "The life of one parameter"). Which of the tensors below exist depends on
// the stage (zero/stage.h's table) and the precision (zero/precision.h):
//
//   tensor        elements  dtype     exists
//   params_full   P         working   stages 0-2: the full parameters every rank keeps
//   grads_full    P         working   stages 0-1: the full gradient, summed over micro-steps
//   param_shard   S         working   always: this rank's parameters (a view of params_full at
//                                     stages 0-2; its own buffer, in its tier, at stage 3)
//   grad_shard    S         working   always: this rank's gradient (a view of grads_full at
//                                     stages 0-1; its own buffer at stages 2-3, on the host with
//                                     offload_optimizer)
//   master        S (st. 0: P)  f32   mixed precision without offload: the float32 master
//
// "working" is float32 (fp32) or the 2-byte dtype (bf16 / fp16). The model's own buffers
// ps->flat() / ps->flat_grad() are the *compute* parameters and gradient: what the unit's
// kernels read and write between acquire and release and during its backward.
#pragma once
#include <deque>

#include "core/trace.h"
#include "dist/process_group.h"
#include "nn/model.h"
#include "zero/engine_config.h"
#include "zero/pending.h"

namespace zt {

struct ShardedUnit {
  int index = 0;
  Unit* unit = nullptr;
  ParamSet* ps = nullptr;
  int64_t P = 0, S = 0, lo = 0;  // padded flat size, shard size (P = N * S), this rank's offset r * S
  Tensor params_full, grads_full, param_shard, grad_shard, master;  // the table above
  // Setup only: the unit's initial values over [initial_lo, initial_lo + initial.numel()) of its
  // flat space, in the model's dtype: the whole unit in the model's buffer (stages 0-2 keep it),
  // or this rank's shard alone (stage 3; freed once the unit is placed). zero/engine.cpp.
  Tensor initial;
  int64_t initial_lo = 0;
  Tensor initial_slice(int64_t a, int64_t n) const { return initial.flat_view(a - initial_lo, {n}); }
  bool persistent = false;  // stage 3: small enough to stay gathered (param_persistence_threshold)
  int refs = 0;             // open acquire scopes (forward) and backward spans
  bool gathered = true;     // the full compute parameters are resident (and current, or being gathered)
  std::deque<Pending> gathers;  // compute parameters being filled (stage 3: all-gather chunks in flight)
  std::deque<Pending> reduces;  // gradient reduction chunks in flight
  // offload_param nvme (zero/tiers.cpp): param_shard is undefined between uses and the shard's
  // bytes live at [param_offset, param_offset + param_bytes) of the swap file.
  int64_t param_offset = 0, param_bytes = 0;
  Tensor param_staging;   // nvme: the new parameters being assembled (step) or written (host)
  WorkPtr param_write;    // nvme: the write of param_staging in flight
  // Tracing: when the unit's forward (acquire) and backward (before_backward) began; a forward
  // that began inside a backward is the activation-checkpointing recompute.
  Tracer::Clock::time_point fwd_t0, bwd_t0;
  bool fwd_open = false, fwd_in_backward = false;
};

// Seconds the training thread spent in the engine's offload work: the CPU optimizer's step (with
// its swap-file reads and writes) and bringing offloaded parameter shards in (waiting for their
// reads, copying them to the device).
struct EngineTimes {
  double offload_step_s = 0;
  double offload_fetch_s = 0;
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
