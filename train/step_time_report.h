// defines: step_time_json, print_step_time, Pricing, print_cost, cost_json, compare_json, print_compare
//          — the simulated step (train/step_time.h) and the choices compared (train/compare.h) as
//          zt-estimate prints them: text for a reader, JSON for a script.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/compare.h"         // defines: ChoiceResult, TrainingCost
#include "train/device_profile.h"  // defines: DeviceProfile
#include "train/fit.h"             // defines: Capacity
#include "train/step_time.h"       // defines: StepTime

namespace zt {

// DeepSpeed's wall_clock_breakdown's parts, predicted, and where communication was not hidden;
// tokens/s are the job's (world ranks); with the profile's peak, MFU and the ceiling (every flop of
// the step at the peak).
nlohmann::json step_time_json(const StepTime& t, const DeviceProfile& p, int world);
void print_step_time(const StepTime& t, const DeviceProfile& p, int world);

// --tokens N --price-per-gpu-hour P: what training N tokens costs at the step's throughput on
// `world` GPUs (nothing asked when tokens is 0).
struct Pricing {
  double tokens = 0, price_per_gpu_hour = 0;
  bool asked() const { return tokens > 0; }
};
nlohmann::json cost_json(const Pricing& pr, const StepTime& t, int world);
void print_cost(const Pricing& pr, const StepTime& t, int world);

// --compare: the table of choices, fastest first (train/compare.h), with the capacities they were
// held against and, when asked, each one's hours and price.
nlohmann::json compare_json(const std::vector<ChoiceResult>& rs, const DeviceProfile& p, const Capacity& cap, int world,
                            const Pricing& pr);
void print_compare(const std::string& what, const std::vector<ChoiceResult>& rs, const DeviceProfile& p,
                   const Capacity& cap, int world, int nodes, const Pricing& pr);

}  // namespace zt
