// defines: scheduler_type_from_name, scheduler_type_name, warmup_type_from_name, warmup_type_name,
//          SchedulerConfig (defaults, uses, validate), scheduled_lr (optim/schedule.h)
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/check.h"

namespace zt {

namespace {

constexpr SchedulerType kTypes[] = {
    SchedulerType::none,     SchedulerType::warmup_lr, SchedulerType::warmup_decay_lr, SchedulerType::warmup_cosine_lr,
    SchedulerType::constant, SchedulerType::cosine};

bool is_deepspeed(SchedulerType t) {
  return t == SchedulerType::warmup_lr || t == SchedulerType::warmup_decay_lr || t == SchedulerType::warmup_cosine_lr;
}

// DeepSpeed's warmup progress at iteration it (0 <= it < W): inverse_log_warm_up * log(it + 1), or it / W.
double warmup_gamma(WarmupType type, int64_t it, int64_t W) {
  if (type == WarmupType::log) {
    const double inverse_log_warm_up = 1.0 / std::log(static_cast<double>(W));
    return inverse_log_warm_up * std::log(static_cast<double>(it + 1));
  }
  return static_cast<double>(it) / static_cast<double>(W);
}

// DeepSpeed's three, at iteration it = applied steps - 1.
double deepspeed_lr(const SchedulerConfig& s, double lr, int64_t it, int64_t T) {
  const int64_t W = std::max<int64_t>(2, s.warmup_num_steps);
  if (s.type == SchedulerType::warmup_cosine_lr) {
    if (it < 0) return 0.0;
    double ratio;
    if (it < W) {
      ratio = warmup_gamma(s.warmup_type, it, W);
      ratio = s.warmup_min_ratio + ratio * (1. - s.warmup_min_ratio);
    } else {
      const double real_last_step = static_cast<double>(it - W + 1);
      const double real_total_steps = static_cast<double>(T - W);
      ratio = (1 + std::cos(std::numbers::pi * real_last_step / real_total_steps)) / 2;
      ratio = std::max(0.0, s.cos_min_ratio + (1. - s.cos_min_ratio) * ratio);
    }
    return lr * ratio;
  }
  if (it < 0) return s.warmup_min_lr;
  double gamma;
  if (it < W) gamma = warmup_gamma(s.warmup_type, it, W);
  else if (s.type == SchedulerType::warmup_decay_lr)
    gamma = std::max(0.0, static_cast<double>(T - it) / std::max(1.0, static_cast<double>(T - W)));
  else gamma = 1.0;
  return s.warmup_min_lr + (s.warmup_max_lr - s.warmup_min_lr) * gamma;
}

// llm.c's two, at 0-based step `step`.
double llmc_lr(const SchedulerConfig& s, double lr, int64_t step, int64_t T) {
  const int64_t W = s.warmup_num_steps;
  if (step < W) return lr * static_cast<double>(step + 1) / static_cast<double>(W);
  if (s.type == SchedulerType::constant) return lr;
  const double min_lr = lr * s.cos_min_ratio;
  if (step >= T) return min_lr;  // also covers T == W; llm.c asserts r <= 1, a longer run keeps the floor
  const double r = static_cast<double>(step - W) / static_cast<double>(T - W);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * r));  // 1 -> 0
  return min_lr + coeff * (lr - min_lr);
}

}  // namespace

const char* scheduler_type_name(SchedulerType t) {
  switch (t) {
    case SchedulerType::none: return "none";
    case SchedulerType::warmup_lr: return "WarmupLR";
    case SchedulerType::warmup_decay_lr: return "WarmupDecayLR";
    case SchedulerType::warmup_cosine_lr: return "WarmupCosineLR";
    case SchedulerType::constant: return "constant";
    case SchedulerType::cosine: return "cosine";
  }
  ZT_THROW("scheduler_type_name: unknown SchedulerType ", static_cast<int>(t));
}

SchedulerType scheduler_type_from_name(const std::string& name) {
  for (SchedulerType t : kTypes)
    if (name == scheduler_type_name(t)) return t;
  ZT_THROW("learning-rate scheduler '", name,
           "' is unknown: expected \"WarmupLR\", \"WarmupDecayLR\", \"WarmupCosineLR\" (DeepSpeed's), \"constant\", "
           "\"cosine\" (llm.c's) or \"none\"");
}

const char* warmup_type_name(WarmupType t) { return t == WarmupType::log ? "log" : "linear"; }

WarmupType warmup_type_from_name(const std::string& name) {
  if (name == "log") return WarmupType::log;
  if (name == "linear") return WarmupType::linear;
  ZT_THROW("warmup_type '", name, "' is unknown: expected \"log\" or \"linear\"");
}

SchedulerConfig SchedulerConfig::defaults(SchedulerType t) {
  SchedulerConfig s;
  s.type = t;
  if (is_deepspeed(t)) {
    s.warmup_num_steps = 1000;
    s.warmup_type = WarmupType::log;
    s.warmup_min_lr = 0;
    s.warmup_max_lr = 1e-3;
    s.warmup_min_ratio = 0;
    s.cos_min_ratio = 1e-4;
  } else {
    s.warmup_num_steps = 0;
    s.cos_min_ratio = 0.1;
  }
  return s;
}

bool SchedulerConfig::uses(const std::string& p) const {
  switch (type) {
    case SchedulerType::none: return false;
    case SchedulerType::warmup_lr:
      return p == "warmup_num_steps" || p == "warmup_type" || p == "warmup_min_lr" || p == "warmup_max_lr";
    case SchedulerType::warmup_decay_lr:
      return p == "warmup_num_steps" || p == "warmup_type" || p == "warmup_min_lr" || p == "warmup_max_lr" ||
             p == "total_num_steps";
    case SchedulerType::warmup_cosine_lr:
      return p == "warmup_num_steps" || p == "warmup_type" || p == "total_num_steps" || p == "warmup_min_ratio" ||
             p == "cos_min_ratio";
    case SchedulerType::constant: return p == "warmup_num_steps";
    case SchedulerType::cosine: return p == "warmup_num_steps" || p == "total_num_steps" || p == "cos_min_ratio";
  }
  return false;
}

void SchedulerConfig::validate(int64_t run_steps) const {
  const char* t = scheduler_type_name(type);
  auto need = [&](bool ok, const char* param, double value, const char* expected) {
    if (!ok) ZT_THROW("scheduler.params.", param, " = ", value, " is invalid for ", t, ": expected ", expected);
  };
  need(warmup_num_steps >= 0, "warmup_num_steps", static_cast<double>(warmup_num_steps), ">= 0");
  need(total_num_steps >= 0, "total_num_steps", static_cast<double>(total_num_steps), ">= 0 (0: the run's steps)");
  need(warmup_min_lr >= 0, "warmup_min_lr", warmup_min_lr, ">= 0");
  need(warmup_max_lr >= 0, "warmup_max_lr", warmup_max_lr, ">= 0");
  need(warmup_min_ratio >= 0 && warmup_min_ratio <= 1, "warmup_min_ratio", warmup_min_ratio, "a number in [0, 1]");
  need(cos_min_ratio >= 0 && cos_min_ratio <= 1, "cos_min_ratio", cos_min_ratio, "a number in [0, 1]");
  const int64_t T = total_num_steps > 0 ? total_num_steps : run_steps;
  if (T <= 0) return;  // the run's steps, not known yet
  // WarmupCosineLR divides by T - W once the warmup ends (DeepSpeed: a ZeroDivisionError at T == W).
  if (type == SchedulerType::warmup_cosine_lr && T <= std::max<int64_t>(2, warmup_num_steps))
    ZT_THROW("scheduler.params.total_num_steps = ", T, total_num_steps > 0 ? "" : " (the run's steps)",
             " is invalid for WarmupCosineLR: expected more than its warmup, max(2, warmup_num_steps) = ",
             std::max<int64_t>(2, warmup_num_steps));
  // llm.c's cosine: a run shorter than its warmup never reaches the decay (scheduled_lr holds the
  // end at the warmup's); only a total given explicitly inside the warmup is a contradiction.
  if (type == SchedulerType::cosine && total_num_steps > 0 && total_num_steps < warmup_num_steps)
    ZT_THROW("scheduler.params.total_num_steps = ", total_num_steps,
             " is invalid for cosine: expected >= warmup_num_steps = ", warmup_num_steps);
}

double scheduled_lr(const SchedulerConfig& s, double lr, int64_t step, int64_t applied, int64_t run_steps) {
  ZT_CHECK(step >= 0 && applied >= 0 && applied <= step, "scheduled_lr: step ", step, ", applied ", applied);
  const int64_t T = s.total_num_steps > 0 ? s.total_num_steps : run_steps;
  if (is_deepspeed(s.type)) return deepspeed_lr(s, lr, applied - 1, T);
  if (s.type == SchedulerType::none) return lr;
  return llmc_lr(s, lr, step, std::max<int64_t>(T, std::max<int64_t>(s.warmup_num_steps, 1)));
}

}  // namespace zt
