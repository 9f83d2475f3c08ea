// defines: ZeroChoice::apply, zero_choices, compare_choices, training_cost (train/compare.h)
#include "train/compare.h"

#include <algorithm>

#include "zero/engine_config.h"

namespace zt {

DryRunRequest ZeroChoice::apply(const DryRunRequest& base) const {
  DryRunRequest r = base;
  ZeroOptimization& z = r.run.engine.zero;
  z.stage = stage;
  z.overlap_comm = base.run.engine.zero.overlap_comm || default_overlap_comm(stage);
  z.offload_optimizer.device = offload_optimizer ? OffloadDevice::cpu : OffloadDevice::none;
  z.offload_param.device = offload_param ? OffloadDevice::cpu : OffloadDevice::none;
  z.zero_quantized_weights = zeropp;
  z.zero_quantized_gradients = zeropp;
  z.zero_hpz_partition_size = zeropp ? base.world_size / base.nodes : 1;
  return r;
}

std::vector<ZeroChoice> zero_choices(const DryRunRequest& base) {
  std::vector<ZeroChoice> v = {
      {"stage 0 (data parallel)", 0},
      {"stage 1", 1},
      {"stage 2", 2},
      {"stage 3", 3},
      {"stage 2, optimizer on the cpu", 2, true},
      {"stage 3, optimizer on the cpu", 3, true},
      {"stage 3, optimizer and parameters on the cpu", 3, true, true},
  };
  if (base.nodes > 1 && base.world_size / base.nodes > 1)
    v.push_back({"stage 3 + ZeRO++ (qwZ, hpZ, qgZ)", 3, false, false, true});
  return v;
}

std::vector<ChoiceResult> compare_choices(const DryRunRequest& base, const DeviceProfile& p, const Capacity& cap) {
  std::vector<ChoiceResult> out;
  for (const ZeroChoice& c : zero_choices(base)) {
    ChoiceResult r;
    r.choice = c;
    const DryRunRequest req = c.apply(base);
    for (int rank : dry_run_ranks(req.world_size)) {
      DryRunRequest q = req;
      q.rank = rank;
      DryRun d;
      const StepTime t = simulate_step_time(q, p, &d);
      r.device_peak = std::max(r.device_peak, d.device.peak_total);
      r.host_peak = std::max(r.host_peak, d.host.peak_total);
      if (t.step_s > r.time.step_s) r.time = t;
    }
    r.time.spans.clear();  // the trace is not asked for here
    if (cap.device > 0 && r.device_peak > cap.device) r.overflow = "device";
    else if (cap.host > 0 && r.host_peak > cap.host) r.overflow = "host";
    r.fits = r.overflow.empty();
    out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(), [](const ChoiceResult& a, const ChoiceResult& b) {
    if (a.fits != b.fits) return a.fits;
    return a.fits ? a.time.step_s < b.time.step_s : a.device_peak < b.device_peak;
  });
  return out;
}

TrainingCost training_cost(double tokens, double tokens_per_s, int gpus, double price_per_gpu_hour) {
  ZT_CHECK(tokens_per_s > 0, "training_cost: no throughput (", tokens_per_s, " tokens/s)");
  TrainingCost c;
  c.hours = tokens / tokens_per_s / 3600;
  c.gpu_hours = c.hours * gpus;
  c.price = c.gpu_hours * price_per_gpu_hour;
  return c;
}

}  // namespace zt
