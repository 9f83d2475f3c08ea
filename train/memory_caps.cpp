// defines: host_tier_allocators, MemoryCaps (destructor, cap, apply, check_host_need,
//          rethrow_setup_failure) (train/memory_caps.h); file-local: peaks_by_category, mib
//
// The run's memory caps (train/memory_caps.h): when they start, what the host tier must hold.
#include "train/memory_caps.h"

#include <algorithm>

#include "core/backend.h"  // defines: backend (host_allocator)

namespace zt {

namespace {

const char* const kHostKey = "--host-memory-limit-mib / host_memory_limit_mib";

// "optim 12.00 MiB, grads 4.00 MiB, ...": the categories the host tier peaks in, largest first.
std::string peaks_by_category(const MemoryStats& need) {
  std::vector<Category> cats(kAllCategories.begin(), kAllCategories.end());
  std::stable_sort(cats.begin(), cats.end(), [&](Category a, Category b) { return need.max(a) > need.max(b); });
  std::string out;
  for (Category c : cats)
    if (need.max(c) > 0)
      out += std::string(out.empty() ? "" : ", ") + category_name(c) + " " + format_bytes(need.max(c));
  return out;
}

std::string mib(int64_t bytes) {
  return std::to_string((bytes + (int64_t(1) << 20) - 1) >> 20) + " MiB";  // rounded up
}

}  // namespace

std::vector<Allocator*> host_tier_allocators(const Device& device) {
  std::vector<Allocator*> out;
  for (bool pinned : {false, true}) {
    Allocator* a = &backend(device).host_allocator(pinned);
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  return out;
}

MemoryCaps::~MemoryCaps() {
  for (auto it = previous_.rbegin(); it != previous_.rend(); ++it) it->first->set_limit(it->second);
}

void MemoryCaps::cap(Allocator& a, int64_t bytes) {
  previous_.push_back({&a, a.limit()});
  a.set_limit(bytes);
}

void MemoryCaps::apply(CapStart now) {
  if (cfg_.host_memory_limit > 0 && now == kHostCapStart)
    for (Allocator* a : host_tier_allocators(device_)) cap(*a, cfg_.host_memory_limit);
  if (cfg_.memory_limit > 0 && now == kDeviceCapStart) {
    Allocator& dev = default_allocator();
    const int64_t held = dev.stats().total();
    if (now == CapStart::end_of_setup && held > cfg_.memory_limit)
      throw OutOfMemory(detail::concat("out of memory on ", dev.name(), ": the engine holds ", format_bytes(held),
                                       " after setup, over the limit of ", format_bytes(cfg_.memory_limit),
                                       ". Held now: ", dev.stats().to_string()));
    cap(dev, cfg_.memory_limit);
  }
}

void MemoryCaps::check_host_need(const MemoryStats& need) const {
  const int64_t bytes = need.peak_total;
  if (cfg_.host_memory_limit <= 0 || bytes <= cfg_.host_memory_limit) return;
  const std::string cap = format_bytes(cfg_.host_memory_limit), by_category = peaks_by_category(need);
  ZT_THROW(kHostKey, " = ", cap, " is too small: this rank's dry run (train/dry_run.h) peaks at ", bytes, " bytes (",
           format_bytes(bytes), ") in the host tier (the peaks by category: ", by_category, "); raise it to at least ",
           mib(bytes));
}

void MemoryCaps::rethrow_setup_failure(const OutOfMemory& e, const MemoryStats& need) const {
  bool host = false;
  for (Allocator* a : host_tier_allocators(device_))
    host = host || std::string(e.what()).find(std::string("out of memory on ") + a->name() + ":") != std::string::npos;
  if (!host || cfg_.host_memory_limit <= 0) throw e;
  const int64_t bytes = need.peak_total;
  const std::string cap = format_bytes(cfg_.host_memory_limit), by_category = peaks_by_category(need);
  ZT_THROW(kHostKey, " = ", cap, " is too small for the engine's setup: this rank's dry run peaks at ", bytes,
           " bytes (", format_bytes(bytes), ") in the host tier (", by_category,
           "), and the setup's buffers did not fit; raise it above ", mib(bytes),
           ". The allocation that failed: ", e.what());
}

}  // namespace zt
