// defines: parse_fit_axis, fit, with_size (train/fit.h); file-local: largest, MetaCaps, trial
#include "train/fit.h"

#include <algorithm>

#include "core/meta_backend.h"

namespace zt {

FitAxis parse_fit_axis(const std::string& s) {
  if (s == "layers") return FitAxis::layers;
  if (s == "batch") return FitAxis::batch;
  if (s == "seq") return FitAxis::seq;
  ZT_THROW("--fit '", s, "': expected layers (the model's depth), batch (the micro-batch per rank) or seq (the ",
           "sequence length)");
}

namespace {

// The swap-file category with the most reserved bytes (the NVMe tier is reserved, not allocated
// through a capped allocator, so it is checked after the run).
Category largest(const MemoryStats& m) {
  Category best = Category::params;
  for (Category c : kAllCategories)
    if (m.cur(c) > m.cur(best)) best = c;
  return best;
}

// The capacities as the meta allocators' caps for one dry run (a size past them stops at the first
// allocation that does not fit, as a real run under --memory-limit-mib does), lifted after.
class MetaCaps {
 public:
  explicit MetaCaps(const Capacity& cap) {
    meta_backend().allocator().set_limit(cap.device);
    meta_backend().host_allocator(false).set_limit(cap.host);
  }
  ~MetaCaps() {
    meta_backend().allocator().set_limit(0);
    meta_backend().host_allocator(false).set_limit(0);
  }
  MetaCaps(const MetaCaps&) = delete;
  MetaCaps& operator=(const MetaCaps&) = delete;
};

}  // namespace

DryRunRequest with_size(const DryRunRequest& base, FitAxis axis, int64_t size) {
  DryRunRequest r = base;
  if (axis == FitAxis::layers) r.model.n_layer = size;
  if (axis == FitAxis::batch) r.run.engine.train_micro_batch_size_per_gpu = size;
  if (axis == FitAxis::seq) {
    r.run.seq_len = size;
    r.model.max_seq_len = std::max(r.model.max_seq_len, size);
  }
  return r;
}

namespace {

FitTrial trial(const DryRunRequest& base, FitAxis axis, int64_t size, const Capacity& cap) {
  DryRunRequest r = with_size(base, axis, size);
  for (int rank : dry_run_ranks(base.world_size)) {
    r.rank = rank;
    try {
      MetaCaps caps(cap);  // device and host: a size past them throws at the allocation that passes
      const DryRun d = dry_run(r);
      if (cap.nvme > 0 && d.nvme.total() > cap.nvme)
        return FitTrial{size, false, "nvme", largest(d.nvme), d.nvme.total(), cap.nvme};
    } catch (const OutOfMemory& e) {
      MetaBackend& meta = meta_backend();
      const bool host = e.allocator == &meta.host_allocator(false);
      if (!host && e.allocator != &meta.allocator()) throw;  // not a cap of ours
      return FitTrial{size, false, host ? "host" : "device", e.category, e.total, e.limit};
    }
  }
  return FitTrial{size, true, "", Category::params, 0, 0};
}

}  // namespace

FitResult fit(const DryRunRequest& base, FitAxis axis, const Capacity& cap, int64_t limit) {
  ZT_CHECK(limit >= 1, "fit: the largest size to try is ", limit, " (--fit-limit: expected >= 1)");
  ZT_CHECK(axis != FitAxis::layers || !base.build,
           "fit: --fit layers grows a GPT-2 or Llama config, not a model "
           "of your own");
  FitResult out;
  // Sizes are counted in units: a sequence length must split evenly over the sequence group.
  const int64_t unit = axis == FitAxis::seq ? std::max<int64_t>(1, base.run.sequence_parallel_size) : 1;
  auto run = [&](int64_t k) {
    out.trials.push_back(trial(base, axis, k * unit, cap));
    return out.trials.back();
  };
  // Doubling until a size does not fit (or the limit), then bisection between the last that fits
  // and the first that does not.
  const int64_t kmax = std::max<int64_t>(1, limit / unit);
  FitTrial lo{0, true, "", Category::params, 0, 0}, hi{0, false, "", Category::params, 0, 0};
  int64_t lo_k = 0, hi_k = 0;
  for (int64_t k = 1;; k = k > kmax / 2 ? kmax : 2 * k) {
    const FitTrial t = run(k);
    if (!t.fits) {
      hi = t, hi_k = k;
      break;
    }
    lo = t, lo_k = k;
    if (k == kmax) break;
  }
  while (hi_k > 0 && hi_k - lo_k > 1) {
    const int64_t k = lo_k + (hi_k - lo_k) / 2;
    const FitTrial t = run(k);
    if (t.fits) lo = t, lo_k = k;
    else hi = t, hi_k = k;
  }
  out.best = lo;
  out.next = hi;
  return out;
}

}  // namespace zt
