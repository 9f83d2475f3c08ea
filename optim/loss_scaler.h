// defines: LossScalerOptions, LossScaler — float16 loss scaling (static or dynamic) and the
// skip-the-step verdict on a gradient overflow.
//
// Semantics: exactly DeepSpeed's DynamicLossScaler.update_scale (deepspeed/runtime/fp16/
// loss_scaler.py, "Taken and modified for DeepSpeed from Megatron-LM fp16/loss_scaler.py") with
// scale_factor = 2 and consecutive_hysteresis = False (DeepSpeed's defaults); `hysteresis` is its
// delayed_shift, `raise_error_at_min_scale` its flag of the same name (True there by default, and
// DeepSpeed's config never passes it, so its engines raise). Initially cur_iter = 0,
// last_overflow_iter = -1, cur_scale = 2^initial_scale_power, cur_hysteresis = hysteresis.
//
//   update(overflow):
//     if overflow:
//        if hysteresis == 1 or cur_hysteresis == 1:
//           if cur_scale == min_scale and raise_error_at_min_scale: error (nothing changes)
//           cur_scale = max(cur_scale / 2, min_scale)
//        else: cur_hysteresis -= 1
//        last_overflow_iter = cur_iter
//     else:
//        if (cur_iter - last_overflow_iter) % scale_window == 0:
//           cur_hysteresis = hysteresis; cur_scale *= 2
//     cur_iter += 1
//
// So: the first `hysteresis - 1` overflows since the last growth only use up hysteresis, each
// further one halves the scale; the scale doubles after every scale_window consecutive
// overflow-free steps (counting from the last overflow, or from the start), which also restores
// the hysteresis. A static scaler (dynamic = false; DeepSpeed's LossScaler) keeps static_scale
// forever (it still counts iterations, the last overflow and skipped steps). Either way update()
// returns the overflow verdict: the caller skips that step.
//
// Use (zero/engine.cpp, fp16): loss * scale() before backward; the all-reduced sum of squares of
// the gradient shards is non-finite exactly when some rank's shard holds an inf or NaN, so every
// rank calls update() with the same verdict and their scalers stay identical; if update()
// returns false the gradients are unscaled (factor 1 / scale() read *before* update()) and the
// optimizer steps.
#pragma once
#include <cstdint>

namespace zt {

struct LossScalerOptions {
  bool dynamic = true;
  double static_scale = 1;       // the scale when !dynamic
  int initial_scale_power = 16;  // dynamic: first scale = 2^power (DeepSpeed's default 16)
  int64_t scale_window = 1000;   // overflow-free steps before the scale doubles
  int hysteresis = 2;            // DeepSpeed's delayed_shift (its default is 2)
  double min_scale = 1;          // the scale never drops below this
  bool raise_error_at_min_scale = true;  // an overflow that would halve a scale already at min_scale throws
  // Throws a zt::Error naming the field unless scale_window >= 1, hysteresis >= 1, min_scale > 0
  // (finite), static_scale > 0 (finite), 0 <= initial_scale_power <= 64 and, when dynamic,
  // 2^initial_scale_power >= min_scale.
  void validate() const;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerOptions& o);  // validates o

  double scale() const { return scale_; }
  bool dynamic() const { return opts_.dynamic; }
  const LossScalerOptions& options() const { return opts_; }

  // One optimizer step's verdict: `overflow` = some gradient is inf/NaN on some rank (the caller
  // all-reduces it). Returns true when the step must be skipped (== overflow). Updates the scale
  // as above. With raise_error_at_min_scale, an overflow at min_scale throws a zt::Error and
  // leaves the state unchanged.
  bool update(bool overflow);

  // Everything update() reads or writes, for checkpoints.
  struct State {
    double scale = 1;
    int64_t iter = 0;                 // update() calls so far
    int64_t last_overflow_iter = -1;  // iteration of the last overflow, -1 if none
    int hysteresis_left = 1;          // DeepSpeed's cur_hysteresis
    int64_t skipped = 0;              // overflows (skipped steps) so far
    bool operator==(const State&) const = default;
  };
  State state() const;
  // Throws a zt::Error naming the field unless the state is one this scaler's options can reach:
  // scale finite and > 0 (dynamic: >= min_scale; static: == static_scale), iter >= 0,
  // -1 <= last_overflow_iter < iter, 1 <= hysteresis_left <= hysteresis, 0 <= skipped <= iter and
  // skipped >= 1 when last_overflow_iter >= 0. On error nothing changes.
  void load_state(const State& s);

  int64_t skipped_steps() const { return skipped_; }
  int64_t iteration() const { return iter_; }

 private:
  LossScalerOptions opts_;
  double scale_;
  int64_t iter_ = 0;
  int64_t last_overflow_iter_ = -1;
  int hysteresis_left_;
  int64_t skipped_ = 0;
};

}  // namespace zt
