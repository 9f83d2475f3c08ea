// defines: step_time_json, print_step_time, cost_json, print_cost, compare_json, print_compare
//          (train/step_time_report.h); file-local: cost_of
#include "train/step_time_report.h"

#include <cstdio>

#include "core/memory.h"  // defines: format_bytes

namespace zt {

nlohmann::json step_time_json(const StepTime& t, const DeviceProfile& p, int world) {
  nlohmann::json j = {{"step_s", t.step_s},
                      {"forward_s", t.forward_s},
                      {"backward_s", t.backward_s},
                      {"optimizer_s", t.optimizer_s},
                      {"tokens_per_s", t.tokens_per_s(world)},
                      {"flops_per_s", t.step_s > 0 ? t.flops / t.step_s : 0},
                      {"exposed_intra_node_s", t.exposed_s[0]},
                      {"exposed_inter_node_s", t.exposed_s[1]},
                      {"nvme_read_s", t.nvme_s[0]},
                      {"nvme_write_s", t.nvme_s[1]},
                      {"exposed_nvme_s", t.exposed_nvme_s},
                      {"first_touch_s", t.first_touch_s},
                      {"ops", t.ops},
                      {"untimed_ops", t.untimed_ops},
                      {"untimed_s", t.untimed_s},
                      {"profile", p.name},
                      {"profile_source", p.source}};
  for (int c = 0; c < kNumOpClasses; ++c) j["compute_s"][op_class_name(static_cast<OpClass>(c))] = t.compute_s[c];
  for (int k = 0; k < kNumCollectives; ++k) {
    j["comm_s"][collective_name(static_cast<Collective>(k))] = t.comm_s[k];
    j["wait_s"][collective_name(static_cast<Collective>(k))] = t.wait_s[k];
  }
  if (p.peak_flops_per_s > 0 && t.step_s > 0) j["mfu"] = t.flops / t.step_s / p.peak_flops_per_s;
  if (t.tokens > 0) j["flops_per_token"] = t.flops / t.tokens;
  if (p.peak_flops_per_s > 0 && t.flops > 0)
    j["tokens_per_s_per_rank_at_peak"] = t.tokens * p.peak_flops_per_s / t.flops;
  return j;
}

void print_step_time(const StepTime& t, const DeviceProfile& p, int world) {
  auto ms = [](double s) { return s * 1e3; };
  std::printf("step time, simulated on the profile '%s'\n  (%s)\n", p.name.c_str(), p.source.c_str());
  std::printf("  %-34s %10.2f ms   %.0f tokens/s over %d rank%s\n", "step", ms(t.step_s), t.tokens_per_s(world), world,
              world == 1 ? "" : "s");
  std::printf("  %-34s %10.2f ms\n  %-34s %10.2f ms\n  %-34s %10.2f ms\n", "forward (waits included)", ms(t.forward_s),
              "backward (waits included)", ms(t.backward_s), "optimizer step (waits included)", ms(t.optimizer_s));
  std::printf("  %-34s %10.2f ms:", "compute (the ops)", ms(t.compute_total()));
  for (int c = 0; c < kNumOpClasses; ++c)
    if (t.compute_s[c] > 0) std::printf(" %s %.2f", op_class_name(static_cast<OpClass>(c)), ms(t.compute_s[c]));
  std::printf("\n  %-34s %10.2f ms:", "communication (busy)", ms(t.comm_total()));
  for (int k = 0; k < kNumCollectives; ++k)
    if (t.comm_s[k] > 0) std::printf(" %s %.2f", collective_name(static_cast<Collective>(k)), ms(t.comm_s[k]));
  std::printf("\n  %-34s %10.2f ms: intra-node %.2f, inter-node %.2f\n", "exposed (compute waited)",
              ms(t.exposed_total()), ms(t.exposed_s[0]), ms(t.exposed_s[1]));
  if (t.nvme_s[0] + t.nvme_s[1] > 0)
    std::printf("  %-34s %10.2f ms: reads %.2f, writes %.2f; compute waited %.2f\n", "nvme (busy)",
                ms(t.nvme_s[0] + t.nvme_s[1]), ms(t.nvme_s[0]), ms(t.nvme_s[1]), ms(t.exposed_nvme_s));
  if (t.first_touch_s > 0) std::printf("  %-34s %10.2f ms\n", "fresh mappings (first touch)", ms(t.first_touch_s));
  if (t.untimed_ops > 0)
    std::printf("  %-34s %10.2f ms: %d of the step's %d ops, not timed in the profile\n", "ops at their class's rate",
                ms(t.untimed_s), t.untimed_ops, t.ops);
  std::printf("  %-34s %10.3f TFLOP/s per rank", "arithmetic", t.step_s > 0 ? t.flops / t.step_s / 1e12 : 0.0);
  if (p.peak_flops_per_s > 0 && t.step_s > 0)
    std::printf(" (MFU %.1f%%)", 100 * t.flops / t.step_s / p.peak_flops_per_s);
  // The bound no schedule beats: every flop of the step (recomputation included) at the peak.
  if (p.peak_flops_per_s > 0 && t.flops > 0 && t.tokens > 0)
    std::printf("\n  %-34s %10.0f tokens/s per rank (%.3g FLOP per token, at %.0f TFLOP/s)",
                "ceiling (at the device's peak)", t.tokens * p.peak_flops_per_s / t.flops, t.flops / t.tokens,
                p.peak_flops_per_s / 1e12);
  std::printf("\n\n");
}

namespace {

TrainingCost cost_of(const Pricing& pr, const StepTime& t, int world) {
  return training_cost(pr.tokens, t.tokens_per_s(world), world, pr.price_per_gpu_hour);
}

}  // namespace

nlohmann::json cost_json(const Pricing& pr, const StepTime& t, int world) {
  const TrainingCost c = cost_of(pr, t, world);
  return {{"tokens", pr.tokens},
          {"price_per_gpu_hour", pr.price_per_gpu_hour},
          {"hours", c.hours},
          {"gpu_hours", c.gpu_hours},
          {"price", c.price}};
}

void print_cost(const Pricing& pr, const StepTime& t, int world) {
  const TrainingCost c = cost_of(pr, t, world);
  std::printf("  %-34s %10.1f hours on %d GPU%s (%.0f GPU-hours)", "training on the tokens asked", c.hours, world,
              world == 1 ? "" : "s", c.gpu_hours);
  if (pr.price_per_gpu_hour > 0) std::printf(", %.0f at %.2f a GPU-hour", c.price, pr.price_per_gpu_hour);
  std::printf(" (%.3g tokens)\n\n", pr.tokens);
}

nlohmann::json compare_json(const std::vector<ChoiceResult>& rs, const DeviceProfile& p, const Capacity& cap, int world,
                            const Pricing& pr) {
  nlohmann::json j = {{"profile", p.name}, {"profile_source", p.source}, {"world_size", world}};
  j["capacity"] = {{"device", cap.device}, {"host", cap.host}};
  j["choices"] = nlohmann::json::array();
  for (const ChoiceResult& r : rs) {
    nlohmann::json c = {{"name", r.choice.name},
                        {"stage", r.choice.stage},
                        {"offload_optimizer", r.choice.offload_optimizer},
                        {"offload_param", r.choice.offload_param},
                        {"zeropp", r.choice.zeropp},
                        {"device_peak", r.device_peak},
                        {"host_peak", r.host_peak},
                        {"fits", r.fits}};
    if (!r.fits) c["overflow"] = r.overflow;
    c["time"] = step_time_json(r.time, p, world);  // for a choice that does not fit: what it would take
    if (r.fits && pr.asked()) c["cost"] = cost_json(pr, r.time, world);
    j["choices"].push_back(c);
  }
  return j;
}

void print_compare(const std::string& what, const std::vector<ChoiceResult>& rs, const DeviceProfile& p,
                   const Capacity& cap, int world, int nodes, const Pricing& pr) {
  auto cap_str = [](int64_t b) { return b > 0 ? format_bytes(b) : std::string("no limit"); };
  std::printf("zt-estimate --compare: %s on %d rank%s (%d node%s), simulated on the profile '%s'\n", what.c_str(),
              world, world == 1 ? "" : "s", nodes, nodes == 1 ? "" : "s", p.name.c_str());
  std::printf("capacity per rank: device %s, host %s\n\n", cap_str(cap.device).c_str(), cap_str(cap.host).c_str());
  std::printf("%-46s %12s %12s %10s %13s %6s %12s", "choice (fastest first)", "device peak", "host peak", "step ms",
              "tokens/s/GPU", "MFU", "exposed ms");
  if (pr.asked()) std::printf(" %10s %12s", "hours", pr.price_per_gpu_hour > 0 ? "price" : "GPU-hours");
  std::printf("\n");
  for (const ChoiceResult& r : rs) {
    std::printf("%-46s %12s %12s", r.choice.name.c_str(), format_bytes(r.device_peak).c_str(),
                format_bytes(r.host_peak).c_str());
    if (!r.fits) {
      std::printf("   does not fit: the %s peak passes its %s\n", r.overflow.c_str(),
                  format_bytes(r.overflow == "device" ? cap.device : cap.host).c_str());
      continue;
    }
    const double mfu = p.peak_flops_per_s > 0 ? r.time.flops / r.time.step_s / p.peak_flops_per_s : 0;
    std::printf(" %10.1f %13.0f %5.1f%% %12.1f", r.time.step_s * 1e3, r.time.tokens_per_s(world) / world, 100 * mfu,
                r.time.exposed_total() * 1e3);
    if (pr.asked()) {
      const TrainingCost c = cost_of(pr, r.time, world);
      std::printf(" %10.1f %12.0f", c.hours, pr.price_per_gpu_hour > 0 ? c.price : c.gpu_hours);
    }
    std::printf("\n");
  }
  std::printf(
      "\n(each choice dry-run for rank 0 and the last rank, its step simulated on the profile: "
      "train/compare.h; offload to nvme is not among the choices: its buffer sizes depend on the model, time it "
      "with --config)\n");
  if (pr.asked())
    std::printf("(hours and %s to train %.3g tokens)\n", pr.price_per_gpu_hour > 0 ? "price" : "GPU-hours", pr.tokens);
}

}  // namespace zt
