// defines: HowToLand, land_now, land_after — a reduced gradient chunk into the shard that keeps
//          it: on the device, or over to host memory under offload_optimizer.
//
// A reduction's chunk (the collective's output `got`: the sum over ranks of shard elements
// [a, a + n)) joins dst, its place in the shard, by the precision's rule (PrecisionPolicy::land:
// written, scaled or accumulated). With offload_optimizer on a GPU, dst is in host memory and the
// chunk first crosses PCIe (ZeRO-Offload, Ren et al. 2021, section 4.2: the gradients go to the
// CPU as they are reduced, overlapped with the backward of the units before them):
//
//   - a chunk whose collective's outputs the device can order a copy after (Work::outputs_queued:
//     one rank, a copy on the compute stream; Work::done_event: NCCL's event on its stream),
//     landing as a plain copy (the first micro-step, no averaging scale) into page-locked memory
//     (Backend::copies_to_host_async): the copy starts at once on the device's to-host transfer
//     stream, into dst itself, and the reduction's Pending waits for it when it is drained (with
//     overlap_comm: once the next unit's backward is queued, so the copy runs beside it);
//   - otherwise it lands when its Pending is drained, after the collective's wait(): a copy to
//     the host on the compute stream, waited for, then the precision's arithmetic on the host.
//     So accumulation's later micro-steps (adding into dst) and fp32's averaging over ranks still
//     copy synchronously (an asynchronous form needs a page-locked staging buffer per chunk in
//     flight), as do MPI's collectives (written by wait()) and pageable host memory (pin_memory
//     false).
//
// Both forms are timed into EngineTimes::offload_grads_s and traced: "wait gradient to host U"
// (the host waiting for an asynchronous copy) or "gradient to host U" (the synchronous form).
#pragma once
#include <string>

#include "zero/pending.h"
#include "zero/precision.h"
#include "zero/sharded_unit.h"

namespace zt {

// precision.land's arguments; precision null: a plain copy (the offloaded optimizer's host copy
// of stage 1's reduced shard).
struct HowToLand {
  const PrecisionPolicy* precision = nullptr;
  bool accumulate = false;
  double scale = 1.0;
  bool plain_copy() const { return !accumulate && scale == 1.0; }
  void into(const Tensor& dst, const Tensor& got) const;  // both on one device
};

// got into dst now (the host waits for any copy between devices); `unit` names it in the trace.
void land_now(ZeroContext& cx, const Tensor& dst, const Tensor& got, const HowToLand& how, const std::string& unit);

// The Pending that lands got (the output of w) into dst: the copy started now where it can be
// (the comment above), else land_now once w is done. Drained in issue order, like every Pending.
Pending land_after(ZeroContext& cx, WorkPtr w, const Tensor& dst, const Tensor& got, const HowToLand& how,
                   const std::string& unit);

}  // namespace zt
