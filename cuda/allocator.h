// defines: CudaAllocator (caching device allocator, stream-aware), cuda_allocator(),
//          PinnedHostAllocator (page-locked host memory), pinned_allocator().
//
// CudaAllocator follows the design of PyTorch's CUDACachingAllocator
// (c10/cuda/CUDACachingAllocator.cpp), simplified so it can be read in one sitting:
//
//  - cudaMalloc and cudaFree are slow and cudaFree synchronizes the device, so freed blocks are
//    kept in a cache and handed out again instead of going back to the driver.
//  - Size classes (PyTorch's kMinBlockSize / kSmallSize / kRoundLarge): a request of n bytes is
//    rounded up to a multiple of 512 B when n <= 1 MiB ("small"), else to a multiple of 2 MiB
//    ("large"). One block = one cudaMalloc of exactly its size class. Unlike PyTorch, blocks are
//    never split or merged and a request only takes a cached block of exactly its class: less
//    reuse, no fragmentation bookkeeping.
//  - Blocks belong to the stream they were allocated on. The cache is a set of free lists keyed
//    by (stream, size class); a freed block goes back to its own stream's list and that stream
//    may take it at once: the stream's later work is ordered after its earlier uses (stream
//    semantics), so there is no hazard and no synchronization.
//  - A block also used on other streams must be declared with record_stream(ptr, s) (as
//    torch's Tensor.record_stream). When it is freed, an event is recorded on each of those
//    streams; the block waits in a pending list and joins its free list only once all those
//    events have completed (cudaEventQuery, polled at each allocation). So a block is never
//    handed out while another stream may still read or write it.
//  - When cudaMalloc fails, the cache is emptied (every cached block cudaFree'd) and the call is
//    retried once; if it fails again, OutOfMemory names the category, the bytes, and what the
//    cache and every category held.
//
// Accounting (the Allocator base: per-category current/peak, the cap of set_limit): the bytes
// counted for an allocation are its SIZE CLASS (the requested bytes rounded up as above), i.e.
// the device memory the allocation really holds; cached blocks are counted by no category (see
// cached_bytes()). The cap applies to those counted bytes: an allocation that would bring their
// total past it throws OutOfMemory before touching the device, as CpuAllocator does. To keep the
// device's footprint near the cap as well, a cudaMalloc that would bring reserved_bytes() past
// the cap first empties the cache.
//
// Invariants (under the allocator's mutex):
//   reserved_bytes() = in-use bytes (= stats().total()) + cached_bytes()
//   cached_bytes()   = bytes in the free lists + bytes of pending blocks
//   every block is in exactly one of: in use, a free list, the pending list.
// Streams: every stream passed in must belong to the allocator's device, and must outlive the
// blocks cached under it: a destroyed stream's handle may be reused by a new stream, which would
// then take those blocks while the old stream's work might still run. Before destroying a
// stream, synchronize it (or call empty_cache()). PyTorch sidesteps this by never destroying
// streams (a pool); ZeroTensor's streams live as long as the trainer.
// Thread safety: every public member may be called from any thread (the MPI communication
// thread frees buffers); one mutex guards the maps. Device: every CUDA call is made with the
// allocator's device current, the caller's current device restored afterwards.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/memory.h"

namespace zt {

class CudaAllocator final : public Allocator {
 public:
  static constexpr size_t kMinBlock = 512;              // small granularity (PyTorch kMinBlockSize)
  static constexpr size_t kSmallSize = size_t(1) << 20;  // <= 1 MiB is small (kSmallSize)
  static constexpr size_t kLargeRound = size_t(2) << 20;  // large granularity (kRoundLarge)
  // The size class of a request: what is cudaMalloc'd and what is counted. 0 stays 0.
  static size_t round_size(size_t bytes);

  explicit CudaAllocator(int device = 0);
  // Frees the cached blocks (waiting for their pending events). Blocks still in use are left
  // to the driver (their owners hold the pointers); errors are ignored (a destructor may run at
  // process exit, after the CUDA runtime is gone).
  ~CudaAllocator() override;
  CudaAllocator(const CudaAllocator&) = delete;
  CudaAllocator& operator=(const CudaAllocator&) = delete;

  // The Allocator interface: allocates on the current stream (stream()). bytes == 0 returns
  // nullptr and counts nothing.
  void* allocate(size_t bytes, Category c) override;
  void* allocate(size_t bytes, Category c, cudaStream_t stream);
  // `bytes` and `c` must be what the block was allocated with (checked: the size class and the
  // category must match). nullptr is ignored. Never blocks: a block used on other streams goes
  // to the pending list.
  void deallocate(void* p, size_t bytes, Category c) override;
  const char* name() const override { return name_.c_str(); }  // "cuda:0"
  Device device() const override { return Device::cuda(device_); }

  // The stream allocate(bytes, c) uses; initially the legacy default stream (nullptr).
  void set_stream(cudaStream_t s);
  cudaStream_t stream() const;

  // Declares that the in-use block at `p` (exactly a pointer allocate returned) is used on
  // `stream`, so its reuse waits for the work queued there up to the moment it is freed.
  // Recording the block's own stream is a no-op.
  void record_stream(void* p, cudaStream_t stream);

  // cudaFree every cached block, after waiting (cudaEventSynchronize) for the events of the
  // pending ones. Blocks in use are untouched. Returns the bytes released.
  size_t empty_cache();

  size_t cached_bytes() const;    // free lists + pending (held from the driver, used by nobody)
  size_t reserved_bytes() const;  // everything cudaMalloc'd and not yet cudaFree'd
  size_t pending_blocks() const;  // blocks waiting for events of other streams
  int64_t malloc_count() const;   // cudaMalloc calls that succeeded (a cache hit makes none)
  // One line for memory reports: "cuda:0: reserved 6.00 MiB = in use 4.00 MiB + cached
  // 2.00 MiB (3 free blocks, 1 pending); 5 cudaMalloc, 1 cache flush".
  std::string memory_report() const;

 private:
  struct Block {
    void* ptr = nullptr;
    size_t size = 0;                       // size class (bytes)
    cudaStream_t stream = nullptr;         // the stream it was allocated on (its free list)
    Category category = Category::workspace;
    std::vector<cudaStream_t> used_on;     // other streams, from record_stream
  };
  struct Pending {
    Block block;
    std::vector<cudaEvent_t> events;       // one per stream in block.used_on, recorded at free
  };
  struct FreeKey {
    uintptr_t stream;
    size_t size;
    auto operator<=>(const FreeKey&) const = default;
  };

  struct MallocFailure;  // why cudaMalloc failed twice (allocator.cpp)

  // All *_locked members require mu_ held; they make CUDA calls on device_ (the caller guards).
  void* allocate_locked(size_t size, Category c, cudaStream_t stream, MallocFailure* fail);
  void process_events_locked();    // pending -> free lists, for the blocks whose events completed
  size_t release_cached_locked();  // wait for pending events, cudaFree every cached block
  cudaEvent_t get_event_locked();  // a spare event, or a new cudaEventDisableTiming one

  const int device_;
  const std::string name_;
  mutable std::mutex mu_;
  cudaStream_t stream_ = nullptr;
  std::unordered_map<void*, Block> in_use_;
  std::map<FreeKey, std::vector<void*>> free_;  // LIFO per (stream, size): the warmest block first
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> spare_events_;       // recycled cudaEventDisableTiming events
  size_t cached_bytes_ = 0;
  size_t reserved_bytes_ = 0;
  int64_t malloc_count_ = 0;
  int64_t flush_count_ = 0;
};

// The process-wide caching allocator of `device` (lazily created on first use, never destroyed:
// at exit the CUDA runtime may already be unloaded, and the driver reclaims the memory, as with
// PyTorch's allocator). Throws zt::Error naming the reason when the device does not exist or no
// CUDA device is usable.
CudaAllocator& cuda_allocator(int device = 0);

// Page-locked (pinned) host memory from cudaHostAlloc, for host<->device staging (async copies
// need it) and for offloading optimizer state or parameters to the host. Every pointer is
// 4096-byte aligned (the NVMe tier's O_DIRECT buffers), from a block 4096 bytes larger than
// asked; counts those blocks per category (in use only), honours the cap.
//
// A cache, as PyTorch's CachingHostAllocator: a freed block is kept and handed out again for the
// next request of the same rounded size, because cudaFreeHost waits for the whole device and
// cudaHostAlloc is slow — and the offload tiers free a staging buffer per sub-group and a
// checkpoint buffer per block, in the middle of a step whose copies run beside the compute.
// A block is freed only once no copy uses it any more: a Transfer's wait() returns after its
// copy landed, and one dropped unwaited waits for its copy first (cuda/backend.cpp). The cache
// is emptied (the blocks returned to the driver) when a new block would not fit beside the cached
// ones under the cap, when cudaHostAlloc fails, and by empty_cache().
class PinnedHostAllocator final : public Allocator {
 public:
  PinnedHostAllocator() = default;
  ~PinnedHostAllocator() override { empty_cache(); }
  PinnedHostAllocator(const PinnedHostAllocator&) = delete;
  PinnedHostAllocator& operator=(const PinnedHostAllocator&) = delete;
  void* allocate(size_t bytes, Category c) override;  // bytes == 0 returns nullptr
  void deallocate(void* p, size_t bytes, Category c) override;
  const char* name() const override { return "pinned"; }
  int64_t cached_bytes() const;  // held in the cache, not in use (not in stats())
  void empty_cache();            // cudaFreeHost every cached block

 private:
  mutable std::mutex mu_;
  std::multimap<size_t, void*> cached_;  // rounded block size -> the pointer handed out
  size_t cached_total_ = 0;
  void empty_cache_locked();
};

// The process-wide pinned allocator (lazily created, never destroyed). Throws zt::Error naming
// the reason when no CUDA device is usable (pinning needs the driver).
PinnedHostAllocator& pinned_allocator();

}  // namespace zt
