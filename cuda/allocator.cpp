// defines: CudaAllocator (round_size, constructor, destructor, set_stream, stream and 13 more),
//          cuda_allocator, PinnedHostAllocator (allocate, deallocate, cached_bytes, empty_cache),
//          pinned_allocator (cuda/allocator.h); file-local: require_device, stream_key, i64,
//          pinned_block, free_pinned
#include "cuda/allocator.h"

#include <cstdio>
#include <utility>

#include "cuda/check.h"
#include "cuda/device.h"

namespace zt {

namespace {

// Requests above this are refused before rounding (no device holds 2^56 bytes, and rounding up
// near SIZE_MAX would overflow).
constexpr size_t kMaxRequest = size_t(1) << 56;


// Throws zt::Error saying why `device` cannot be used by `who`.
void require_device(int device, const char* who) {
  std::string reason;
  const std::vector<CudaDevice>& devs = cuda_devices(&reason);
  if (devs.empty()) ZT_THROW(who, "(", device, "): no CUDA device is available: ", reason);
  if (device < 0 || device >= static_cast<int>(devs.size()))
    ZT_THROW(who, "(", device, "): no such device; this process sees ", devs.size(),
             " CUDA device(s), numbered 0..", devs.size() - 1, " (CUDA_VISIBLE_DEVICES applies)");
}

uintptr_t stream_key(cudaStream_t s) { return reinterpret_cast<uintptr_t>(s); }

int64_t i64(size_t v) { return static_cast<int64_t>(v); }

}  // namespace

// Why the second cudaMalloc failed, for the OutOfMemory message (built outside the lock).
struct CudaAllocator::MallocFailure {
  cudaError_t error = cudaSuccess;
  size_t cached_before = 0;   // cache size when the first cudaMalloc failed
  size_t released = 0;        // what emptying the cache gave back to the driver
  size_t reserved_after = 0;  // reserved bytes after the flush
};

// ---------------------------------------------------------------------------------------------
// CudaAllocator

size_t CudaAllocator::round_size(size_t bytes) {
  ZT_CHECK(bytes <= kMaxRequest, "CudaAllocator::round_size: ", bytes, " bytes is beyond any device");
  if (bytes <= kSmallSize) return (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
  return (bytes + kLargeRound - 1) / kLargeRound * kLargeRound;
}

CudaAllocator::CudaAllocator(int device)
    : device_((require_device(device, "CudaAllocator"), device)), name_("cuda:" + std::to_string(device)) {}

CudaAllocator::~CudaAllocator() {
  try {
    DeviceGuard guard(device_);
    std::lock_guard<std::mutex> lock(mu_);
    release_cached_locked();
  } catch (...) {
    // At process exit the runtime may be unloaded (cudaErrorCudartUnloading): nothing to do.
  }
}

void CudaAllocator::set_stream(cudaStream_t s) {
  std::lock_guard<std::mutex> lock(mu_);
  stream_ = s;
}

cudaStream_t CudaAllocator::stream() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stream_;
}

void* CudaAllocator::allocate(size_t bytes, Category c) { return allocate(bytes, c, stream()); }

void* CudaAllocator::allocate(size_t bytes, Category c, cudaStream_t stream) {
  if (bytes == 0) return nullptr;
  if (bytes > kMaxRequest)
    throw OutOfMemory(detail::concat("out of memory on ", name_, ": a request of ", bytes, " bytes for category '",
                                     category_name(c), "' is larger than any device"));
  const size_t size = round_size(bytes);
  account_alloc(size, c);  // the cap: throws OutOfMemory (counting nothing) past it
  MallocFailure fail;
  void* p = nullptr;
  try {
    DeviceGuard guard(device_);
    std::lock_guard<std::mutex> lock(mu_);
    p = allocate_locked(size, c, stream, &fail);
  } catch (...) {
    account_free(size, c);
    throw;
  }
  if (p) return p;
  account_free(size, c);
  throw OutOfMemory(detail::concat(
      "out of memory on ", name_, ": cudaMalloc of ", format_bytes(i64(size)), " (", bytes,
      " bytes requested, rounded up to the size class) for category '", category_name(c), "' failed with ",
      cuda_error_message(fail.error), ", also after emptying the cache, which held ", format_bytes(i64(fail.cached_before)),
      " (released ", format_bytes(i64(fail.released)), "); reserved now ", format_bytes(i64(fail.reserved_after)),
      ". Held now: ", stats().to_string()));
}

// Returns nullptr (with *fail filled) only when cudaMalloc ran out of memory twice.
void* CudaAllocator::allocate_locked(size_t size, Category c, cudaStream_t stream, MallocFailure* fail) {
  // 1. A cached block of this stream and size class (blocks whose events completed join first).
  process_events_locked();
  auto it = free_.find(FreeKey{stream_key(stream), size});
  if (it != free_.end()) {
    void* p = it->second.back();
    it->second.pop_back();
    if (it->second.empty()) free_.erase(it);
    cached_bytes_ -= size;
    in_use_.emplace(p, Block{p, size, stream, c, {}});
    return p;
  }
  // 2. A new block from the driver. Under a cap, the device footprint stays near it too: a
  //    cudaMalloc that would pass it returns the cache to the driver first.
  if (limit() > 0 && reserved_bytes_ + size > static_cast<size_t>(limit()) && cached_bytes_ > 0)
    release_cached_locked();
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, size);
  if (e == cudaErrorMemoryAllocation) {
    // 3. Out of memory: give every cached block back and try once more (PyTorch does the same,
    //    after first trying to free only what would suffice).
    (void)cudaGetLastError();  // clear it, so the next ZT_CUDA_CHECK does not see it
    fail->cached_before = cached_bytes_;
    fail->released = release_cached_locked();
    e = cudaMalloc(&p, size);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      fail->error = e;
      fail->reserved_after = reserved_bytes_;
      return nullptr;
    }
  }
  if (e != cudaSuccess)
    ZT_THROW("cudaMalloc(", size, " bytes) on ", name_, " for category '", category_name(c),
             "' failed: ", cuda_error_message(e));
  reserved_bytes_ += size;
  ++malloc_count_;
  in_use_.emplace(p, Block{p, size, stream, c, {}});
  return p;
}

void CudaAllocator::record_stream(void* p, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_use_.find(p);
  if (it == in_use_.end())
    ZT_THROW("CudaAllocator::record_stream on ", name_, ": ", p,
             " is not a block in use (not from this allocator, already freed, or not the start of a block)");
  Block& b = it->second;
  if (stream == b.stream) return;
  for (cudaStream_t s : b.used_on)
    if (s == stream) return;
  b.used_on.push_back(stream);
}

void CudaAllocator::deallocate(void* p, size_t bytes, Category c) {
  if (!p) return;
  size_t size = 0;
  {
    DeviceGuard guard(device_);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_use_.find(p);
    if (it == in_use_.end())
      ZT_THROW("CudaAllocator::deallocate on ", name_, ": ", p, " (", bytes, " bytes, category '", category_name(c),
               "') is not a block in use (freed twice, or from another allocator)");
    const Block& b = it->second;
    ZT_CHECK(b.size == round_size(bytes) && b.category == c, "CudaAllocator::deallocate on ", name_, ": ", p,
             " was allocated as ", b.size, " bytes (size class) of category '", category_name(b.category),
             "', freed as ", bytes, " bytes of category '", category_name(c), "'");
    size = b.size;
    if (b.used_on.empty()) {
      // Only its own stream used it: that stream's later work is ordered after this use.
      free_[FreeKey{stream_key(b.stream), size}].push_back(p);
    } else {
      // Other streams may still be using it: mark where they are now, reuse once they pass.
      Pending pd;
      try {
        for (cudaStream_t s : b.used_on) {
          pd.events.push_back(get_event_locked());
          ZT_CUDA_CHECK(cudaEventRecord(pd.events.back(), s));
        }
      } catch (...) {
        for (cudaEvent_t ev : pd.events) spare_events_.push_back(ev);
        throw;  // the block stays in use
      }
      pd.block = std::move(it->second);
      pending_.push_back(std::move(pd));
    }
    in_use_.erase(it);
    cached_bytes_ += size;
  }
  account_free(size, c);
}

void CudaAllocator::process_events_locked() {
  for (size_t i = 0; i < pending_.size();) {
    Pending& pd = pending_[i];
    bool done = true;
    for (cudaEvent_t ev : pd.events) {
      const cudaError_t e = cudaEventQuery(ev);
      if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();  // a status, not an error (PyTorch clears it the same way)
        done = false;
        break;
      }
      if (e != cudaSuccess)
        ZT_THROW("cudaEventQuery on ", name_, " (the event of a freed block used on another stream) failed: ",
                 cuda_error_message(e));
    }
    if (!done) {
      ++i;
      continue;
    }
    for (cudaEvent_t ev : pd.events) spare_events_.push_back(ev);
    free_[FreeKey{stream_key(pd.block.stream), pd.block.size}].push_back(pd.block.ptr);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));  // keeps the free order
  }
}

size_t CudaAllocator::release_cached_locked() {
  // Pending blocks: wait until the other streams are past them, then they are free blocks.
  for (const Pending& pd : pending_)
    for (cudaEvent_t ev : pd.events) ZT_CUDA_CHECK(cudaEventSynchronize(ev));
  for (Pending& pd : pending_) {
    for (cudaEvent_t ev : pd.events) spare_events_.push_back(ev);
    free_[FreeKey{stream_key(pd.block.stream), pd.block.size}].push_back(pd.block.ptr);
  }
  pending_.clear();
  size_t released = 0;
  for (auto it = free_.begin(); it != free_.end(); it = free_.erase(it)) {
    std::vector<void*>& list = it->second;
    while (!list.empty()) {
      ZT_CUDA_CHECK(cudaFree(list.back()));  // on a throw, the block stays cached: state consistent
      list.pop_back();
      released += it->first.size;
      cached_bytes_ -= it->first.size;
      reserved_bytes_ -= it->first.size;
    }
  }
  for (cudaEvent_t ev : spare_events_) (void)cudaEventDestroy(ev);
  spare_events_.clear();
  if (released > 0) ++flush_count_;
  return released;
}

cudaEvent_t CudaAllocator::get_event_locked() {
  if (!spare_events_.empty()) {
    cudaEvent_t ev = spare_events_.back();
    spare_events_.pop_back();
    return ev;
  }
  cudaEvent_t ev = nullptr;
  ZT_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  return ev;
}

size_t CudaAllocator::empty_cache() {
  DeviceGuard guard(device_);
  std::lock_guard<std::mutex> lock(mu_);
  return release_cached_locked();
}

size_t CudaAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_bytes_;
}

size_t CudaAllocator::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_bytes_;
}

size_t CudaAllocator::pending_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

int64_t CudaAllocator::malloc_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return malloc_count_;
}

std::string CudaAllocator::memory_report() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t free_blocks = 0;
  for (const auto& [key, list] : free_) free_blocks += list.size();
  return detail::concat(name_, ": reserved ", format_bytes(i64(reserved_bytes_)), " = in use ",
                        format_bytes(i64(reserved_bytes_ - cached_bytes_)), " + cached ",
                        format_bytes(i64(cached_bytes_)), " (", free_blocks, " free blocks, ", pending_.size(),
                        " pending); ", malloc_count_, " cudaMalloc, ", flush_count_, " cache flushes");
}

CudaAllocator& cuda_allocator(int device) {
  require_device(device, "cuda_allocator");
  // Never destroyed (see the header): the map's destructor leaves the allocators alone.
  static std::mutex mu;
  static std::map<int, CudaAllocator*> allocators;
  std::lock_guard<std::mutex> lock(mu);
  CudaAllocator*& a = allocators[device];
  if (!a) a = new CudaAllocator(device);
  return *a;
}

// ---------------------------------------------------------------------------------------------
// PinnedHostAllocator

// cudaHostAlloc's pointers are not always page-aligned (seen on an H100 machine: a 120 KiB
// allocation at 1024 mod 4096), and the NVMe tier's O_DIRECT transfers need 4096-byte aligned
// buffers (zero/aio.h, kAioAlignment), as host_allocator() gives on the CPU. So every block is
// kPinnedAlign bytes larger than asked, the pointer handed out is the first 4096-byte boundary past
// room for one pointer, and the pointer cudaHostAlloc returned sits just below it. The counters
// hold the whole block (the padding is memory this allocator holds); the cache is described in
// the header.
namespace {
constexpr size_t kPinnedAlign = 4096;
// The block behind a request of `bytes`: the alignment's room, rounded up to whole pages (the
// cache's key, so requests a few bytes apart share blocks).
size_t pinned_block(size_t bytes) { return (bytes + 2 * kPinnedAlign - 1) / kPinnedAlign * kPinnedAlign; }
void free_pinned(void* p, size_t block) {
  // From destructors and from empty_cache: a failure is reported, not thrown. cudaFreeHost fails
  // only when the CUDA context is already broken (a sticky error from a kernel), which the next
  // CUDA call that can throw names.
  const cudaError_t e = cudaFreeHost(static_cast<void**>(p)[-1]);
  if (e != cudaSuccess)
    std::fprintf(stderr, "PinnedHostAllocator: cudaFreeHost of a %zu-byte block failed: %s\n", block,
                 cuda_error_message(e).c_str());
}
}  // namespace

void* PinnedHostAllocator::allocate(size_t bytes, Category c) {
  if (bytes == 0) return nullptr;
  const size_t block = pinned_block(bytes);
  account_alloc(block, c);  // the cap: throws OutOfMemory (counting nothing) past it
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = cached_.find(block); it != cached_.end()) {
    void* p = it->second;
    cached_.erase(it);
    cached_total_ -= block;
    return p;
  }
  // Under a cap, the cached blocks and the new one together must fit: return the cache first.
  if (limit() > 0 && stats().total() + static_cast<int64_t>(cached_total_) > limit()) empty_cache_locked();
  void* raw = nullptr;
  // cudaHostAllocDefault: page-locked; under unified addressing (64-bit, sm_80+) it is portable
  // to every device of the process anyway.
  cudaError_t e = cudaHostAlloc(&raw, block, cudaHostAllocDefault);
  if (e == cudaErrorMemoryAllocation && !cached_.empty()) {  // the cache's blocks back to the driver, once
    (void)cudaGetLastError();
    empty_cache_locked();
    e = cudaHostAlloc(&raw, block, cudaHostAllocDefault);
  }
  if (e == cudaSuccess) {
    const uintptr_t r = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (r + sizeof(void*) + kPinnedAlign - 1) / kPinnedAlign * kPinnedAlign;
    reinterpret_cast<void**>(aligned)[-1] = raw;
    return reinterpret_cast<void*>(aligned);
  }
  (void)cudaGetLastError();
  account_free(block, c);
  if (e == cudaErrorMemoryAllocation)
    throw OutOfMemory(detail::concat("out of memory on pinned: cudaHostAlloc of ", format_bytes(i64(block)),
                                     " for category '", category_name(c), "' failed with ", cuda_error_message(e),
                                     ". Held now: ", stats().to_string()));
  ZT_THROW("cudaHostAlloc(", block, " bytes) for category '", category_name(c), "' failed: ", cuda_error_message(e));
}

void PinnedHostAllocator::deallocate(void* p, size_t bytes, Category c) {
  if (!p) return;
  const size_t block = pinned_block(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    cached_.emplace(block, p);
    cached_total_ += block;
  }
  account_free(block, c);
}

int64_t PinnedHostAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(cached_total_);
}

void PinnedHostAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  empty_cache_locked();
}

void PinnedHostAllocator::empty_cache_locked() {
  for (auto& [block, p] : cached_) free_pinned(p, block);
  cached_.clear();
  cached_total_ = 0;
}

PinnedHostAllocator& pinned_allocator() {
  std::string reason;
  if (cuda_devices(&reason).empty())
    ZT_THROW("pinned_allocator(): page-locked host memory needs a CUDA device, and none is available: ", reason);
  static PinnedHostAllocator* a = new PinnedHostAllocator();  // never destroyed, as cuda_allocator
  return *a;
}

}  // namespace zt
