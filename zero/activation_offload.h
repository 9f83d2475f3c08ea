// defines: ActivationOffload — activation checkpoints in the host tier (DeepSpeed's
//          activation_checkpointing.cpu_checkpointing; ZeRO-R, Rajbhandari et al. 2019, section
//          6.1: "Pa + cpu", partitioned activation checkpoints offloaded to CPU memory).
//
// With activation checkpointing each checkpointed unit (a transformer block) keeps one tensor
// from its forward to its recompute: its input x, (B, T, C) in the compute dtype. This store
// (autograd/recompute.h's CheckpointStore, handed to recompute() through the engine's
// Residency::checkpoint_store()) moves it to the host tier and back:
//
//   forward of unit i     stash: a host buffer of x's bytes (Category::activations, the host
//                         tier's allocator: a cap on it fails here, naming the category), the
//                         copy device -> host queued, x's device Storage released once it landed
//   unit i's backward     prefetch(): the copy back of the checkpoint whose recompute comes next
//   begins (engine hook)  (the most recent one still on the host), its device Storage
//                         materialized again (Category::activations)
//   recompute of unit i   restore(): wait for its copy back (traced "wait checkpoint <unit>" on
//                         the compute track), free its host buffer, prefetch the next one
//
// So while unit i recomputes, unit i-1's checkpoint is on its way back (one ahead, as
// DeepSpeed's cpu_checkpointing fetches before the recompute). The device's `activations` fall
// by the checkpoints' bytes between forward and backward; the host tier's `activations` hold them.
//
// The copies run in order on one worker thread (FIFO), each a span on the trace's io track
// ("checkpoint to host <unit>", "checkpoint to device <unit>", with its bytes); each prefetch is
// also an instant there when it is requested ("fetch checkpoint <unit>"). On a GPU with the
// host tier page-locked (pin_memory) the worker's copies go through Backend::copy_to_host_async
// and copy_from_host_async: on the device's transfer streams, each after the kernels queued when
// it starts (the checkpoint's producer; a materialized block's earlier users), so they overlap
// the kernels queued after them; the worker waits for each copy's event, not for the device.
// From pageable memory they are the synchronous copies, in the compute stream's order.
// On the meta device (a dry run, train/dry_run.h) each copy runs at once on the caller's thread:
// the dry run's peaks are those of copies that keep pace with compute, the same from run to run.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "autograd/recompute.h"  // defines: CheckpointStore
#include "zero/sharded_unit.h"   // defines: ZeroContext

namespace zt {

class ActivationOffload final : public CheckpointStore {
 public:
  // Its answer to zero/footprint.h's question, per checkpointed unit: the host tier holds one
  // checkpoint, the unit's input (B, T, C) of `elem` bytes each, between its forward and its
  // recompute; the device at most two at a time (the one recomputing and the one coming back).
  static int64_t host_bytes_per_unit(int64_t B, int64_t T, int64_t C, int64_t elem) { return B * T * C * elem; }
  static constexpr int64_t kDeviceCheckpoints = 2;
  // host: the host tier's allocator (zero/tiers.h's StorageTiers::activation_host()).
  ActivationOffload(ZeroContext& cx, Allocator& host);
  ~ActivationOffload() override;  // waits for every copy in flight, then stops the worker
  ActivationOffload(const ActivationOffload&) = delete;
  ActivationOffload& operator=(const ActivationOffload&) = delete;

  std::shared_ptr<Stashed> stash(const Tensor& x, const std::string& name) override;
  // Starts bringing back the checkpoint whose recompute comes next, unless it is on its way.
  void prefetch();
  // Waits until every copy queued so far has landed (a memory report reads settled counters).
  void wait_idle();

 private:
  struct Entry;
  class Worker;
  void restore(Entry& e);
  void fetch(Entry& e);  // queues e's copy back
  void prune();          // drops the entries restored or freed from live_

  ZeroContext& cx_;
  Allocator& host_;
  std::unique_ptr<Worker> worker_;
  // Stashed and not yet restored, in stash order: the recompute order is the reverse. Weak: a
  // graph freed without backward frees its checkpoints.
  std::vector<std::weak_ptr<Entry>> live_;
};

}  // namespace zt
