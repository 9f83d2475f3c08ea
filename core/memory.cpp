// defines: category_name, format_bytes, MemoryStats (total, to_string), Allocator (stats, reset_peaks,
//          set_limit, account_alloc, account_free), CpuAllocator (CpuAllocator, allocate, deallocate),
//          cpu_maps, cpu_allocator, host_allocator (core/memory.h); file-local: keep_freed_heap
#include "core/memory.h"

#include <malloc.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <new>

namespace zt {

const char* category_name(Category c) {
  switch (c) {
    case Category::params: return "params";
    case Category::grads: return "grads";
    case Category::optim: return "optim";
    case Category::activations: return "activations";
    case Category::comm: return "comm";
    case Category::secondary: return "secondary";
    case Category::workspace: return "workspace";
  }
  return "unknown";
}

std::string format_bytes(int64_t bytes) {
  char buf[64];
  double b = static_cast<double>(bytes);
  if (bytes < 1024) std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else if (b < 1024.0 * 1024) std::snprintf(buf, sizeof buf, "%.2f KiB", b / 1024);
  else if (b < 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1024.0 * 1024));
  else std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  return buf;
}

int64_t MemoryStats::total() const {
  int64_t t = 0;
  for (int64_t v : current) t += v;
  return t;
}

std::string MemoryStats::to_string() const {
  std::string s;
  for (Category c : kAllCategories) {
    if (!s.empty()) s += ", ";
    s += std::string(category_name(c)) + " " + format_bytes(cur(c)) + " (peak " + format_bytes(max(c)) + ")";
  }
  return s;
}

MemoryStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Allocator::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak = stats_.current;
  stats_.peak_total = stats_.total();
}

void Allocator::set_limit(int64_t bytes) {
  ZT_CHECK(bytes >= 0, "memory limit must be >= 0, got ", bytes);
  std::lock_guard<std::mutex> lock(mu_);
  limit_ = bytes;
}

void Allocator::account_alloc(size_t bytes, Category c) {
  std::lock_guard<std::mutex> lock(mu_);
  const int i = static_cast<int>(c);
  const int64_t total = stats_.total() + static_cast<int64_t>(bytes);
  if (limit_ > 0 && total > limit_) {
    OutOfMemory e(detail::concat("out of memory on ", name(), ": allocating ",
                                 format_bytes(static_cast<int64_t>(bytes)), " for category '", category_name(c),
                                 "' would bring the total to ", format_bytes(total), ", over the limit of ",
                                 format_bytes(limit_), ". Held now: ", stats_.to_string()));
    e.allocator = this;
    e.category = c;
    e.total = total;
    e.limit = limit_;
    throw e;
  }
  stats_.current[i] += static_cast<int64_t>(bytes);
  if (stats_.current[i] > stats_.peak[i]) stats_.peak[i] = stats_.current[i];
  if (total > stats_.peak_total) stats_.peak_total = total;
}

void Allocator::account_free(size_t bytes, Category c) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.current[static_cast<int>(c)] -= static_cast<int64_t>(bytes);
}

// CpuAllocator's rule (core/memory.h): model states and collectives of kMapBytes and more are mapped.
bool cpu_maps(size_t bytes, Category c) {
  return bytes >= CpuAllocator::kMapBytes && c != Category::activations && c != Category::workspace;
}

namespace {

// glibc's heap keeps what is freed (core/memory.h says why). Once per process, before the first
// CpuAllocator hands out a block. Elsewhere than glibc the C library's own policy stays.
bool keep_freed_heap() {
#ifdef __GLIBC__
  (void)mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest (HEAP_MAX_SIZE / 2 on 64 bits)
  (void)mallopt(M_TRIM_THRESHOLD, -1);        // never give the heap's free top back
#endif
  return true;
}
}  // namespace

CpuAllocator::CpuAllocator(const char* name, size_t alignment) : name_(name), alignment_(alignment) {
  ZT_CHECK(alignment > 0 && alignment <= 4096 && (alignment & (alignment - 1)) == 0, "CpuAllocator ", name,
           ": alignment ", alignment, " must be a power of two <= 4096 (the page size mmap guarantees)");
  [[maybe_unused]] static const bool kept = keep_freed_heap();
}

void* CpuAllocator::allocate(size_t bytes, Category c) {
  account_alloc(bytes, c);
  if (bytes == 0) return nullptr;
  const size_t rounded = (bytes + alignment_ - 1) / alignment_ * alignment_;
  void* p = nullptr;
  if (cpu_maps(rounded, c)) {  // page-aligned, which covers any alignment_ up to 4096
    p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) p = nullptr;
    else (void)madvise(p, rounded, MADV_HUGEPAGE);  // a hint: refused where THP is off, harmless
  } else {
    p = std::aligned_alloc(alignment_, rounded);
  }
  if (!p) {
    account_free(bytes, c);
    throw OutOfMemory(detail::concat("out of memory on ", name_, ": the system refused ", format_bytes(static_cast<int64_t>(bytes)),
                                     " for category '", category_name(c), "'. Held now: ", stats().to_string()));
  }
  return p;
}

void CpuAllocator::deallocate(void* p, size_t bytes, Category c) {
  const size_t rounded = (bytes + alignment_ - 1) / alignment_ * alignment_;
  if (p && cpu_maps(rounded, c)) munmap(p, rounded);
  else std::free(p);
  account_free(bytes, c);
}

CpuAllocator& cpu_allocator() {
  static CpuAllocator a;
  return a;
}

CpuAllocator& host_allocator() {
  static CpuAllocator a("host", 4096);
  return a;
}

}  // namespace zt
