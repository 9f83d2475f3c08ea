// defines: lr_kind_from_name, LrSchedule (validate, at) (optim/schedule.h)
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/check.h"

namespace zt {

LrKind lr_kind_from_name(const std::string& name) {
  if (name == "constant") return LrKind::constant;
  if (name == "cosine") return LrKind::cosine;
  ZT_THROW("learning-rate schedule '", name, "' is unknown; expected \"constant\" or \"cosine\"");
}


void LrSchedule::validate() const {
  if (!(lr >= 0)) ZT_THROW("lr schedule: lr = ", lr, ", expected >= 0");
  if (warmup_steps < 0) ZT_THROW("lr schedule: warmup_steps = ", warmup_steps, ", expected >= 0");
  if (!(min_lr_frac >= 0 && min_lr_frac <= 1))
    ZT_THROW("lr schedule: min_lr_frac = ", min_lr_frac, ", expected in [0, 1]");
  if (kind == LrKind::cosine) {
    if (max_steps <= 0) ZT_THROW("lr schedule: cosine needs max_steps > 0 (got ", max_steps, ")");
    if (max_steps < warmup_steps)
      ZT_THROW("lr schedule: cosine max_steps = ", max_steps, " is below warmup_steps = ", warmup_steps);
  }
}

double LrSchedule::at(int64_t step) const {
  ZT_CHECK(step >= 0, "LrSchedule::at: step = ", step, ", expected >= 0");
  if (step < warmup_steps) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (kind == LrKind::constant) return lr;
  const double min_lr = lr * min_lr_frac;
  if (step >= max_steps) return min_lr;  // also covers max_steps == warmup_steps
  const double r = static_cast<double>(step - warmup_steps) / static_cast<double>(max_steps - warmup_steps);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * r));  // 1 -> 0
  return min_lr + coeff * (lr - min_lr);
}

}  // namespace zt
