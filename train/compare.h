// defines: ZeroChoice, zero_choices, ChoiceResult, compare_choices, TrainingCost, training_cost —
//          every ZeRO choice for one model on one cluster, side by side: what each holds per rank,
//          whether it fits, and how fast its step is (zt-estimate --compare).
//
// "Stage 3 saved memory, but throughput got much worse" is the most common surprise of a ZeRO
// user: the choice between stages is usually made by habit, before anyone knows what it costs on
// the cluster at hand. Here each choice is the same request (model, batch, precision, ranks,
// nodes, bucket sizes) with only the ZeRO choice changed, and its step simulated on the profile
// (train/step_time.h) for rank 0 and the last rank: the memory it needs (the dry run's peaks,
// train/dry_run.h) and the time it takes come from the same run of the real engine, not from a
// rule of thumb. It fits when every simulated rank's device and host peaks are within the
// capacities (train/fit.h's Capacity; 0: no limit).
//
// The choices, as a DeepSpeed user names them:
//   stage 0 (plain data parallelism), stage 1, stage 2, stage 3;
//   stage 2 with the optimizer offloaded to the CPU (ZeRO-Offload);
//   stage 3 with the optimizer offloaded, and with the optimizer and the parameters offloaded
//   (ZeRO-Infinity's CPU tier);
//   stage 3 with ZeRO++ (qwZ, hpZ over each node's ranks, qgZ), when the job spans nodes and a node
//   holds several ranks (what ZeRO++ is for: the inter-node link).
// NVMe offload is not among them: its buffers (offload_param.buffer_size, buffer_count) must be sized
// to the model's units by the user; a config with them is timed by zt-estimate --config --time.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/device_profile.h"
#include "train/dry_run.h"
#include "train/fit.h"
#include "train/step_time.h"

namespace zt {

struct ZeroChoice {
  std::string name;  // "stage 3, optimizer offloaded to cpu"
  int stage = 0;
  bool offload_optimizer = false, offload_param = false;  // to the CPU
  bool zeropp = false;                                    // qwZ, hpZ (a node's ranks), qgZ
  // The request with this choice (overlap_comm at DeepSpeed's default for the stage).
  DryRunRequest apply(const DryRunRequest& base) const;
};

// The choices for this job (ZeRO++ only when it spans nodes with several ranks each).
std::vector<ZeroChoice> zero_choices(const DryRunRequest& base);

struct ChoiceResult {
  ZeroChoice choice;
  int64_t device_peak = 0, host_peak = 0;  // the largest of the simulated ranks'
  bool fits = false;
  std::string overflow;  // when it does not fit: "device" or "host", the first past its capacity
  StepTime time;         // the slowest simulated rank's step (shown only when it fits)
};

// Every choice, fastest first among those that fit, then those that do not (the least device
// memory first).
std::vector<ChoiceResult> compare_choices(const DryRunRequest& base, const DeviceProfile& p, const Capacity& cap);

// What training `tokens` tokens costs at `tokens_per_s` (the job's) on `gpus` GPUs at
// `price_per_gpu_hour`: the wall-clock hours and the price (GPU-hours x price).
struct TrainingCost {
  double hours = 0, gpu_hours = 0, price = 0;
};
TrainingCost training_cost(double tokens, double tokens_per_s, int gpus, double price_per_gpu_hour);

}  // namespace zt
