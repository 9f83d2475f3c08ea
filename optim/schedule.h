// defines: LrKind, LrSchedule (the learning rate at a step), lr_kind_from_name.
//
// cosine (llm.c's get_learning_rate_cosine, train_gpt2.cu), with a 0-based step:
//   step <  warmup:            lr * (step + 1) / warmup        (linear warmup; step 0 is not 0)
//   warmup <= step <= max:     min_lr + 0.5 (1 + cos(pi r)) (lr - min_lr),
//                              r = (step - warmup) / (max_steps - warmup),  min_lr = lr * min_lr_frac
//   step >  max_steps:         min_lr (llm.c asserts r <= 1; a run that goes on keeps the floor)
// constant: the same linear warmup, then lr (DeepSpeed's WarmupLR; warmup 0 is llm.c's constant).
// Computed in double (llm.c uses float; the difference is below float rounding of the result).
#pragma once
#include <cstdint>
#include <string>

namespace zt {

enum class LrKind { constant, cosine };

LrKind lr_kind_from_name(const std::string& name);  // "constant" | "cosine"; throws on others

struct LrSchedule {
  LrKind kind = LrKind::cosine;
  double lr = 6e-4;            // peak learning rate
  int64_t warmup_steps = 0;    // linear warmup length
  int64_t max_steps = 0;       // cosine: the step at which min_lr is reached (ignored by constant)
  double min_lr_frac = 0.0;    // cosine: min_lr = lr * min_lr_frac
  // Throws a zt::Error naming the field: lr >= 0, warmup >= 0, 0 <= min_lr_frac <= 1, and for
  // cosine max_steps >= warmup_steps and max_steps > 0.
  void validate() const;
  double at(int64_t step) const;  // step is 0-based, >= 0
};

}  // namespace zt
