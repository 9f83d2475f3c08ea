// defines: LossScalerOptions (validate), LossScaler (constructor, update, state, load_state)
//          (optim/loss_scaler.h)
#include "optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace zt {

void LossScalerOptions::validate() const {
  if (scale_window < 1) ZT_THROW("loss scaler: scale_window = ", scale_window, ", expected >= 1");
  if (hysteresis < 1) ZT_THROW("loss scaler: hysteresis = ", hysteresis, ", expected >= 1");
  if (!(min_scale > 0) || !std::isfinite(min_scale))
    ZT_THROW("loss scaler: min_scale = ", min_scale, ", expected a finite value > 0");
  if (!(static_scale > 0) || !std::isfinite(static_scale))
    ZT_THROW("loss scaler: static_scale = ", static_scale, ", expected a finite value > 0");
  if (initial_scale_power < 0 || initial_scale_power > 64)
    ZT_THROW("loss scaler: initial_scale_power = ", initial_scale_power, ", expected 0 <= power <= 64");
  if (dynamic && std::ldexp(1.0, initial_scale_power) < min_scale)
    ZT_THROW("loss scaler: initial_scale_power = ", initial_scale_power, " gives a first scale 2^",
             initial_scale_power, " below min_scale = ", min_scale, ", expected 2^initial_scale_power >= min_scale");
}

LossScaler::LossScaler(const LossScalerOptions& o) : opts_(o) {
  opts_.validate();
  scale_ = opts_.dynamic ? std::ldexp(1.0, opts_.initial_scale_power) : opts_.static_scale;
  hysteresis_left_ = opts_.hysteresis;
}

bool LossScaler::update(bool overflow) {
  if (opts_.dynamic) {
    if (overflow) {
      if (opts_.hysteresis == 1 || hysteresis_left_ == 1) {
        if (scale_ == opts_.min_scale && opts_.raise_error_at_min_scale)
          ZT_THROW("loss scaler: gradient overflow at iteration ", iter_, " with the loss scale already at min_scale = ",
                   opts_.min_scale, ": cannot decrease it any further (the model overflows float16 even unscaled; "
                   "lower fp16.min_loss_scale or train in bf16)");
        scale_ = std::max(scale_ / 2, opts_.min_scale);
      } else {
        hysteresis_left_ -= 1;
      }
      last_overflow_iter_ = iter_;
    } else if ((iter_ - last_overflow_iter_) % opts_.scale_window == 0) {
      hysteresis_left_ = opts_.hysteresis;
      scale_ *= 2;
    }
  }
  if (overflow) ++skipped_;
  if (!opts_.dynamic && overflow) last_overflow_iter_ = iter_;
  ++iter_;
  return overflow;
}

LossScaler::State LossScaler::state() const {
  return State{scale_, iter_, last_overflow_iter_, hysteresis_left_, skipped_};
}

void LossScaler::load_state(const State& s) {
  if (!(s.scale > 0) || !std::isfinite(s.scale))
    ZT_THROW("loss scaler state: scale = ", s.scale, ", expected a finite value > 0");
  if (opts_.dynamic && s.scale < opts_.min_scale)
    ZT_THROW("loss scaler state: scale = ", s.scale, " is below min_scale = ", opts_.min_scale);
  if (!opts_.dynamic && s.scale != opts_.static_scale)
    ZT_THROW("loss scaler state: scale = ", s.scale, " but this scaler is static with static_scale = ",
             opts_.static_scale, " (expected the same value)");
  if (s.iter < 0) ZT_THROW("loss scaler state: iter = ", s.iter, ", expected >= 0");
  if (s.last_overflow_iter < -1 || s.last_overflow_iter >= s.iter)
    ZT_THROW("loss scaler state: last_overflow_iter = ", s.last_overflow_iter, " with iter = ", s.iter,
             ", expected -1 <= last_overflow_iter < iter");
  if (s.hysteresis_left < 1 || s.hysteresis_left > opts_.hysteresis)
    ZT_THROW("loss scaler state: hysteresis_left = ", s.hysteresis_left, ", expected 1 <= hysteresis_left <= ",
             opts_.hysteresis, " (the hysteresis option)");
  if (s.skipped < 0 || s.skipped > s.iter || (s.last_overflow_iter >= 0 && s.skipped < 1) ||
      (s.last_overflow_iter < 0 && s.skipped > 0))
    ZT_THROW("loss scaler state: skipped = ", s.skipped, " with iter = ", s.iter, " and last_overflow_iter = ",
             s.last_overflow_iter, ", expected 0 <= skipped <= iter, and skipped >= 1 exactly when an overflow was seen");
  scale_ = s.scale;
  iter_ = s.iter;
  last_overflow_iter_ = s.last_overflow_iter;
  hysteresis_left_ = s.hysteresis_left;
  skipped_ = s.skipped;
}

}  // namespace zt
