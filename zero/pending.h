// defines: Pending, drain, timed_wait, transfer_work, range, all_gather_chunked — collectives
//          (and host <-> device copies) in flight with what to do once they are done, the way
//          the ZeRO stages issue them (zero/stage*.cpp).
//
// The engine issues a unit's gathers and reductions asynchronously (overlap_comm) and finishes
// them later, in issue order: each Pending pairs a Work with its completion step (unpack a
// chunk, scale, accumulate into a shard, free a buffer). A queue of them is drained front to back.
#pragma once
#include <deque>
#include <functional>

#include "core/backend.h"  // defines: Transfer, TransferPtr
#include "core/trace.h"
#include "dist/process_group.h"

namespace zt {

struct Pending {
  WorkPtr work;
  std::function<void()> then;  // runs on the caller's thread after the collective completed
  void finish();
};

// A Work whose wait() adds the seconds it blocked to *seconds and, with a recording tracer, is a
// span `name` on the compute track (the waits on the NVMe tier's reads: zero/tiers.cpp).
WorkPtr timed_wait(WorkPtr w, double* seconds, Tracer* t, std::string name);

// A host <-> device copy in flight (core/backend.h's Transfer) as a Work: wait() waits for it.
WorkPtr transfer_work(TransferPtr t);

// Finishes every collective of a queue, in issue order.
void drain(std::deque<Pending>& q);

// Elements [lo, lo + n) of a contiguous tensor, as a 1-D view.
inline Tensor range(const Tensor& flat, int64_t lo, int64_t n) { return flat.flat_view(lo, {n}); }

// All-gather of shards into a full buffer in chunks of at most `chunk` elements per rank.
// src (S), dst (P = N * S): rank q's src lands at dst[q*S, (q+1)*S). When one call covers the
// shard, dst is the output directly; smaller chunks go through a comm buffer (N * chunk) each and
// are unpacked when they complete. Appends the chunks to `out`.
void all_gather_chunked(ProcessGroup& g, const Tensor& src, const Tensor& dst, int64_t chunk, std::deque<Pending>& out);

}  // namespace zt
