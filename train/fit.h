// defines: FitAxis, parse_fit_axis, Capacity, FitTrial, FitResult, fit, with_size — the planner on top of the
//          dry run: the largest model depth, micro-batch or sequence length that fits a rank's
//          device, host and NVMe capacities, found by bisection over dry runs (train/dry_run.h).
//
// "What is the largest model this cluster fits?" asked the way a user sizes a job: keep the
// configuration (stage, precision, offload, ZeRO++, ranks and nodes) and grow one axis —
//   layers   the model's depth (n_layer; width and heads stay: a deeper member of the family)
//   batch    the micro-batch per rank
//   seq      the sequence length (the model's context grows with it where it is shorter)
// A size fits when every simulated rank (rank 0 and the last rank: they differ by padding) stays
// within each capacity over the whole dry run, construction included: the device's total peak,
// the host tier's, and the swap files' reserved bytes. The answer is the largest size that fits
// and the first that does not, with the tier and the category that grew most past it — the size
// a real run under the same caps (zt-train --memory-limit-mib, --host-memory-limit-mib) trains and
// the size it refuses.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/dry_run.h"

namespace zt {

enum class FitAxis { layers, batch, seq };
FitAxis parse_fit_axis(const std::string& s);  // "layers" | "batch" | "seq"; a zt::Error names the others

// Bytes per rank; 0 = no limit on that tier.
struct Capacity {
  int64_t device = 0, host = 0, nvme = 0;
};

// One dry run of the search: the size, whether it fits, and (when not) what overflowed.
struct FitTrial {
  int64_t size = 0;
  bool fits = false;
  std::string tier;                      // "device" | "host" | "nvme": the first capacity passed ("" when it fits)
  Category category = Category::params;  // of that tier, the category holding the most at its peak
  int64_t need = 0, capacity = 0;        // that tier's peak and its capacity
};

struct FitResult {
  FitTrial best;                 // the largest size that fits (size 0: not even the smallest)
  FitTrial next;                 // the smallest size that does not (size 0: none up to `limit`)
  std::vector<FitTrial> trials;  // every dry run, in the order run
};

// Grows `axis` of `base` from 1 up to `limit` (doubling, then bisection), a dry run per size.
FitResult fit(const DryRunRequest& base, FitAxis axis, const Capacity& cap, int64_t limit);

// The request with `axis` at `size` (a deeper model, a larger micro-batch, a longer sequence).
DryRunRequest with_size(const DryRunRequest& base, FitAxis axis, int64_t size);

}  // namespace zt
