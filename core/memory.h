// defines: Category, MemoryStats, Allocator (interface), CpuAllocator, OutOfMemory, cpu_allocator(),
//          host_allocator(), default_allocator().
//
// Every byte the framework allocates has an owner you can name: an allocator and a category.
// Each allocator keeps current and peak bytes per category. An optional cap (in bytes, over all
// categories) makes the CPU behave like a smaller device: an allocation that would pass it
// throws OutOfMemory naming the category that asked and what every category held.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "core/check.h"
#include "core/device.h"

namespace zt {

// secondary: ZeRO++ hpZ's secondary parameter shards (zero/zeropp.h), kept between a unit's
// forward and its backward.
enum class Category : uint8_t { params, grads, optim, activations, comm, workspace, secondary };
inline constexpr int kNumCategories = 7;
const char* category_name(Category c);  // "params", "grads", ...
inline constexpr std::array<Category, kNumCategories> kAllCategories = {
    Category::params, Category::grads,     Category::optim,    Category::activations,
    Category::comm,   Category::workspace, Category::secondary};

// Byte counts of one allocator, per category. `peak` is the high-water mark of `current` of
// that category alone; `peak_total` the high-water mark of the sum (not the sum of peaks).
struct MemoryStats {
  std::array<int64_t, kNumCategories> current{};
  std::array<int64_t, kNumCategories> peak{};
  int64_t peak_total = 0;
  int64_t total() const;
  int64_t cur(Category c) const { return current[static_cast<int>(c)]; }
  int64_t max(Category c) const { return peak[static_cast<int>(c)]; }
  std::string to_string() const;  // one line: "params 1.2 MiB (peak 1.2 MiB), grads ..."
};

class Allocator;
struct OutOfMemory : Error {
  using Error::Error;
  const Allocator* allocator = nullptr;  // the allocator whose cap refused (null: the system refused)
  // Set when an allocator's cap (set_limit) refused: the category that asked, the total the
  // allocation would have brought the allocator to, and the cap. limit 0: the system refused.
  Category category = Category::params;
  int64_t total = 0, limit = 0;
};

// The backend table for memory (ggml's "backend buffer" idea): allocate, free, account.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes, Category c) = 0;
  virtual void deallocate(void* p, size_t bytes, Category c) = 0;
  virtual const char* name() const = 0;
  // Where the bytes live: cpu unless overridden (CudaAllocator: cuda:N; pinned host memory is cpu).
  virtual Device device() const { return Device::cpu(); }

  MemoryStats stats() const;
  void reset_peaks();              // peaks := current
  void set_limit(int64_t bytes);   // 0 = no cap
  int64_t limit() const { return limit_; }

 protected:
  // Called by implementations; throws OutOfMemory (and records nothing) if the cap would pass.
  void account_alloc(size_t bytes, Category c);
  void account_free(size_t bytes, Category c);

 private:
  mutable std::mutex mu_;
  MemoryStats stats_;
  int64_t limit_ = 0;
};

// Aligned host memory: 64 bytes by default (a cache line, and the widest SIMD load).
//
// Two paths, chosen by category and size (the same at allocate and deallocate, so no header is
// needed):
//   - model states and their collectives (params, grads, optim, comm) of kMapBytes and more: the
//     operating system directly (mmap / munmap, asking for transparent huge pages with
//     madvise(MADV_HUGEPAGE)). These are unit-sized and ZeRO frees them a unit at a time (stage
//     3's gathered parameters and full gradients, every step); returned at once, the process's
//     resident memory follows this allocator's count instead of the C library's high-water mark.
//     Measured on gpt2-124m, 4 ranks, stage 3 (bench/results/rss.md): glibc kept ~300 MiB per
//     rank of such freed blocks (its mmap threshold rises with every freed mapping, up to 32 MiB,
//     after which they come from its heap and stay).
//   - everything else (activations, workspace: per-op churn) and small blocks: the C library
//     (aligned_alloc / free), whose reuse costs no page fault. A fresh mapping is zero-filled at
//     first touch (0.1-0.2 ms per MiB with huge pages on the 2-core VM, 1.3 with 4 KiB pages):
//     mapping every activation made a gpt-mini training step ~7% slower (measured, A/B).
//
// So that the second path's reuse really costs no page fault, the first CpuAllocator made tells
// glibc (mallopt) to keep what is freed: blocks under 32 MiB (its largest heap threshold) come from
// its heap from the first step on, and the heap's free top is never given back (M_TRIM_THRESHOLD
// -1). Left to its defaults, glibc trimmed the top after each step's activations were freed and
// the next step faulted them in again: ~6k page faults a gpt-mini step, ~2% of its time (1 rank,
// 2-core VM, A/B). The cost is PyTorch's CUDA caching allocator's: the process keeps the
// activations' high-water mark resident between steps, which every step reaches again anyway.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kMapBytes = size_t{4} << 20;  // 4 MiB

  explicit CpuAllocator(const char* name = "cpu", size_t alignment = 64);
  void* allocate(size_t bytes, Category c) override;
  void deallocate(void* p, size_t bytes, Category c) override;
  const char* name() const override { return name_; }

 private:
  const char* name_;
  size_t alignment_;
};

// Whether CpuAllocator gives a block of `bytes` (rounded to its alignment) of category `c` a mapping
// of its own (the first path above): a fresh one at every allocation, zero-filled by the kernel at
// first touch. The step simulator charges that fill (train/step_time.h).
bool cpu_maps(size_t bytes, Category c);

// The process-wide CPU allocator (one of the two kinds of global state the architecture allows).
CpuAllocator& cpu_allocator();
// The offload tier's host memory (ZeRO-Offload, zero/offload.h): a second CPU allocator, named
// "host", 4096-byte aligned (O_DIRECT buffers of the NVMe tier), with its own counters and no cap.
// On a machine without a GPU, --memory-limit-mib caps cpu_allocator() — the small "device" — and
// host_allocator() is the rest of RAM, so every tier shows in its own counters. On a GPU the
// backend's host_allocator(pinned) gives page-locked memory instead when asked (core/backend.h).
CpuAllocator& host_allocator();
// The allocator of the default device (core/backend.h's default_device()): what Tensor's
// factories use when no allocator is named. cpu_allocator() unless a device was set.
Allocator& default_allocator();

std::string format_bytes(int64_t bytes);  // "1.50 MiB"

}  // namespace zt
