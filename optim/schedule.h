// defines: SchedulerType, WarmupType, SchedulerConfig, scheduler_type_from_name, scheduler_type_name,
//          warmup_type_from_name, warmup_type_name, scheduled_lr — the learning rate at each step.
//
// The config's "scheduler" section (zero/engine_config.h) and zt-train's --schedule. Two families:
//
// DeepSpeed's three (deepspeed/runtime/lr_schedules.py), with DeepSpeed's parameter names, defaults
// and meaning. Their iteration `it` counts the optimizer steps applied before this one, minus one
// (DeepSpeed steps the scheduler after each applied step, starting from last_batch_iteration -1;
// an fp16 step skipped on overflow does not advance it). With W = max(2, warmup_num_steps),
// T = total_num_steps and gamma the warmup's progress, log(it + 1) / log(W) ("log", the default)
// or it / W ("linear"):
//   WarmupLR        it < 0: warmup_min_lr; it < W: min + (max - min) gamma; then warmup_max_lr
//   WarmupDecayLR   as WarmupLR while it < W; then min + (max - min) max(0, (T - it) / max(1, T - W))
//   WarmupCosineLR  it < 0: 0; it < W: lr (warmup_min_ratio + gamma (1 - warmup_min_ratio));
//                   then lr max(0, cos_min_ratio + (1 - cos_min_ratio) (1 + cos(pi (it - W + 1) / (T - W))) / 2)
// where lr is the optimizer's. So DeepSpeed's first step runs at warmup_min_lr (WarmupLR) or 0
// (WarmupCosineLR), and a warmup of 0 or 1 steps is 2: its meaning, kept.
//
// llm.c's two (train_gpt2.cu's get_learning_rate), ZeroTensor's own names, counting every step
// (0-based `step`, skipped ones included), warmup W = warmup_num_steps, T = total_num_steps:
//   constant        step < W: lr (step + 1) / W (step 0 already learns); then lr
//   cosine          step < W as constant; then min + (lr - min) (1 + cos(pi r)) / 2,
//                   r = (step - W) / (T - W), min = lr cos_min_ratio; past T: min
// and "none" (DeepSpeed's "no scheduler"): lr at every step.
//
// total_num_steps 0 means the run's steps (DeepSpeed needs it given; "auto" reads the same).
// Computed in double, in DeepSpeed's order of operations (its Python floats are doubles).
#pragma once
#include <cstdint>
#include <string>

namespace zt {

enum class SchedulerType { none, warmup_lr, warmup_decay_lr, warmup_cosine_lr, constant, cosine };
enum class WarmupType { log, linear };

// "none" | "WarmupLR" | "WarmupDecayLR" | "WarmupCosineLR" | "constant" | "cosine"; an unknown name
// throws naming it and the choices.
SchedulerType scheduler_type_from_name(const std::string& name);
const char* scheduler_type_name(SchedulerType t);
WarmupType warmup_type_from_name(const std::string& name);  // "log" | "linear"
const char* warmup_type_name(WarmupType t);

struct SchedulerConfig {
  SchedulerType type = SchedulerType::none;
  int64_t warmup_num_steps = 0;
  WarmupType warmup_type = WarmupType::log;  // DeepSpeed's three
  double warmup_min_lr = 0;                  // WarmupLR, WarmupDecayLR
  double warmup_max_lr = 1e-3;               // WarmupLR, WarmupDecayLR: the peak (not the optimizer's lr)
  int64_t total_num_steps = 0;               // WarmupDecayLR, WarmupCosineLR, cosine; 0: the run's steps
  double warmup_min_ratio = 0;               // WarmupCosineLR: warmup starts at lr * this
  double cos_min_ratio = 1e-4;               // WarmupCosineLR, cosine: the floor, lr * this

  // The defaults of a type: DeepSpeed's for its three (warmup_num_steps 1000, log warmup,
  // warmup_max_lr 0.001, cos_min_ratio 0.0001); for llm.c's, no warmup and a floor of 0.1.
  static SchedulerConfig defaults(SchedulerType t);
  // The parameters that mean something for this type, in the config's spelling (its JSON keys).
  bool uses(const std::string& param) const;
  // Throws naming the parameter: ranges, and a total that leaves room after the warmup where the
  // formula divides by T - W. `run_steps` stands in for total_num_steps 0 (0: not known yet).
  void validate(int64_t run_steps = 0) const;
  bool operator==(const SchedulerConfig&) const = default;
};

// The learning rate of optimizer step `step` (0-based, every step counted) of a run of `run_steps`
// steps, `applied` of the earlier steps having been applied, `lr` the optimizer's.
double scheduled_lr(const SchedulerConfig& s, double lr, int64_t step, int64_t applied, int64_t run_steps);

}  // namespace zt
