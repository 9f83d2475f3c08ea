// defines: Engine::UnitState — what the ZeRO engine keeps per unit (zero/engine.h's table).
// Private to zero/engine*.cpp.
#pragma once
#include <deque>

#include "zero/engine.h"
#include "zero/pending.h"

namespace zt {

struct Engine::UnitState {
  int index = 0;
  Unit* unit = nullptr;
  ParamSet* ps = nullptr;
  int64_t P = 0, S = 0;     // padded flat size, shard size (P = N * S)
  // The parameters this rank publishes, S elements of the working dtype: stage 3 its own buffer,
  // else a view of the full parameters' [r*S, (r+1)*S) (fp32: ps->flat(); mixed: `half`).
  Tensor param_shard;
  // This rank's gradient shard, S elements of the working dtype: stages 2-3 its own buffer,
  // stage 1 a view of the full gradient (fp32: ps->flat_grad(); mixed: `half_grad`).
  Tensor grad_shard;
  // Mixed precision only. half: the full 2-byte parameters (P, params; stages 0-2). half_grad:
  // the full 2-byte gradient, summed over micro-steps (P, grads; stages 0-1). master: the float32
  // master weights (optim; stage 0 P, else S) that the optimizer updates.
  Tensor half, half_grad, master;
  bool persistent = false;  // stage 3: small enough to stay gathered (param_persistence_threshold)
  int refs = 0;             // open acquire scopes (forward) and backward spans
  bool gathered = true;     // the full parameters are resident (and current, or being gathered)
  std::deque<Pending> gathers;  // stage 3: all-gather chunks in flight
  std::deque<Pending> reduces;  // gradient reduction chunks in flight
  // offload_param: param_shard lives on the host (cpu); on nvme it is undefined between uses and
  // the shard's bytes live at [param_offset, param_offset + param_bytes) of the swap file.
  int64_t param_offset = 0, param_bytes = 0;
  Tensor param_staging;   // nvme: the new parameters being assembled (step) or written (host)
  WorkPtr param_write;    // nvme: the write of param_staging in flight
  // Tracing: when the unit's forward (acquire) and backward (before_backward) began; a forward
  // that began inside a backward is the activation-checkpointing recompute.
  Tracer::Clock::time_point fwd_t0, bwd_t0;
  bool fwd_open = false, fwd_in_backward = false;
};

}  // namespace zt
