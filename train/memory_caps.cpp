// defines: host_tier_allocators, MemoryCaps (destructor, cap, apply, check_host_need,
//          rethrow_setup_failure) (train/memory_caps.h); file-local: host_need_bytes, mib
//
// The run's memory caps (train/memory_caps.h): when they start, what the host tier must hold.
#include "train/memory_caps.h"

#include <algorithm>

#include "core/backend.h"  // defines: backend (host_allocator)

namespace zt {

namespace {

const char* const kHostKey = "--host-memory-limit-mib / host_memory_limit_mib";

int64_t host_need_bytes(const Footprint& need, int64_t N) {
  int64_t n = 0;
  for (Category c : kAllCategories) n += need.bytes(MemoryTier::host, c, N);
  return n;
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

void MemoryCaps::check_host_need(const Footprint& need, int64_t N) const {
  const int64_t bytes = host_need_bytes(need, N);
  auto host = [&](Category c) { return format_bytes(need.bytes(MemoryTier::host, c, N)); };
  if (cfg_.host_memory_limit <= 0 || bytes <= cfg_.host_memory_limit) return;
  ZT_THROW(kHostKey, " = ", format_bytes(cfg_.host_memory_limit),
           " is too small: this rank's offloaded model states "
           "need at least ",
           bytes, " bytes (", format_bytes(bytes), ") in the host tier (optimizer state ", host(Category::optim),
           ", gradient shards ", host(Category::grads), ", parameter shards ", host(Category::params),
           "); raise it to at least ", mib(bytes), " (plus room for staging buffers and offloaded activations)");
}

void MemoryCaps::rethrow_setup_failure(const OutOfMemory& e, const Footprint& need, int64_t N) const {
  bool host = false;
  for (Allocator* a : host_tier_allocators(device_))
    host = host || std::string(e.what()).find(std::string("out of memory on ") + a->name() + ":") != std::string::npos;
  if (!host || cfg_.host_memory_limit <= 0) throw e;
  const int64_t bytes = host_need_bytes(need, N);
  ZT_THROW(kHostKey, " = ", format_bytes(cfg_.host_memory_limit), " is too small for the engine's setup: this rank's "
           "offloaded model states need at least ", bytes, " bytes (", format_bytes(bytes),
           ") in the host tier, and the setup's buffers beside them did not fit; raise it above ", mib(bytes),
           ". The allocation that failed: ", e.what());
}

}  // namespace zt
