// defines: CapStart, kDeviceCapStart, kHostCapStart, host_tier_allocators, MemoryCaps — when the
//          run's memory caps start to hold, and the scope that applies and lifts them.
//
// Two caps, one mechanism (core/memory.h's Allocator::set_limit: an allocation past the cap is an
// OutOfMemory naming the allocator, the category that asked, the bytes and what each category
// held):
//
//   cap                      allocators                                  starts
//   --memory-limit-mib       the device's (default_allocator())          kDeviceCapStart
//   --host-memory-limit-mib  the host tier's: backend(device).host_allocator(false) and (true)
//   host_memory_limit_mib    (one "host" allocator on a CPU backend; pageable and pinned,
//                            each capped, beside a GPU)                   kHostCapStart
//
// The host tier holds the offloaded optimizer state and gradient shards, offloaded parameter
// shards, the NVMe tier's O_DIRECT staging buffers (zero/offload.cpp, zero/tiers.cpp), offloaded
// activation checkpoints (zero/activation_offload.h) and the MPI process group's pinned staging
// of device buffers: all of it is allocated from these allocators, so all of it counts.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/memory.h"  // defines: MemoryStats
#include "train/run_config.h"

namespace zt {

enum class CapStart { process_start, end_of_setup };

// The device cap holds from the first byte: construction is partitioned (DeepSpeed's zero.Init:
// each rank creates only what its stage keeps, zero/engine.cpp), so the build fits under it too.
// (end_of_setup is where it held while every rank built the whole model before sharding it.)
inline constexpr CapStart kDeviceCapStart = CapStart::process_start;
// The host tier's cap holds from the start as well, so the offload tier's setup is under it.
inline constexpr CapStart kHostCapStart = CapStart::process_start;

// The host tier's allocators beside `device`, each once.
std::vector<Allocator*> host_tier_allocators(const Device& device);

// The caps of one run. apply(now) sets every cap whose start is `now`; the destructor gives every
// allocator it capped its previous limit back (tests build several runs in one process).
class MemoryCaps {
 public:
  MemoryCaps(const RunConfig& c, const Device& device) : cfg_(c), device_(device) {}
  ~MemoryCaps();
  MemoryCaps(const MemoryCaps&) = delete;
  MemoryCaps& operator=(const MemoryCaps&) = delete;

  // At end_of_setup the device cap is checked against what the engine holds already (an
  // OutOfMemory naming both if it is over).
  void apply(CapStart now);
  // Before the engine's setup: the host tier's peak over this rank's run (`need`: its dry run's
  // host tier, train/dry_run.h — the offloaded model states, the staging buffers, the offloaded
  // checkpoints, setup and steps) must fit the host cap; a zt::Error naming the key, the cap and
  // the bytes needed otherwise. The cap holds each host-tier allocator apart; the need is their sum
  // (on a GPU the pinned and the pageable allocator split it), so this errs on the safe side.
  void check_host_need(const MemoryStats& need) const;
  // An OutOfMemory of a host-tier allocator thrown by the engine's setup, rethrown as a zt::Error
  // naming the key, the cap and the bytes the run needs there (`need`), with the original message.
  // Anything else: rethrown as it is.
  [[noreturn]] void rethrow_setup_failure(const OutOfMemory& e, const MemoryStats& need) const;

 private:
  void cap(Allocator& a, int64_t bytes);
  const RunConfig& cfg_;
  Device device_;
  std::vector<std::pair<Allocator*, int64_t>> previous_;  // (allocator, its limit before)
};

}  // namespace zt
