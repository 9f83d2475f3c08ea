// defines: AdamWHyper, adamw_args, adamw_update (the fused kernel on raw arrays, with AdamWHyper: forwards to
// core/kernels/adamw.h), AdamW (the optimizer over flat shards, owning m and v in Category::optim
// on the shards' device; each update is one Backend::adamw_step, core/backend.h).
//
// Semantics: exactly torch.optim.AdamW (Loshchilov & Hutter 2019, "Decoupled Weight Decay
// Regularization", Algorithm 2; PyTorch's _single_tensor_adamw, amsgrad=False, maximize=False).
// With t the 1-based step:
//
//   p  = p * (1 - lr * wd)                       (only where decay; decoupled from the gradient)
//   m  = b1 * m + (1 - b1) * g
//   v  = b2 * v + (1 - b2) * g^2
//   denom = sqrt(v) / sqrt(1 - b2^t) + eps
//   p  = p - (lr / (1 - b1^t)) * m / denom
//
// The bias corrections 1 - b^t are computed in double (b2^t for b2 = 0.999 loses digits in
// float), the per-element arithmetic in T. One pass over memory: p, g, m, v are each read once
// and p, m, v written once; the loop is OpenMP-parallel (static split) and SIMD (float: AVX
// intrinsics, 8 lanes, the tail through the same vector code). Every element takes the same
// instructions wherever it lies, so the result is bitwise the same for any thread count and for
// any shard boundaries (a rank's shard update equals the full update restricted to it).
//
// Layout: the optimizer sees FlatShards (optim/flat_shard.h): contiguous ranges [lo, hi) of each
// unit's flat buffer. m and v have exactly the shard's size, so a ZeRO rank that owns 1/N of
// every flat buffer holds 1/N of the optimizer state (ZeRO stage 1, Rajbhandari et al. 2019,
// section 5.1).
#pragma once
#include <cstdint>
#include <vector>

#include "core/backend.h"  // AdamWArgs
#include "optim/optimizer.h"

namespace zt {

struct AdamWHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;  // PyTorch's AdamW default
  // Throws a zt::Error naming the field unless lr >= 0, 0 <= beta < 1, eps >= 0, wd >= 0
  // (PyTorch's checks).
  void validate() const;
};

// One AdamW update of n contiguous elements at 1-based step `step` (step >= 1). `decay` says
// whether weight decay applies to all n elements. T is float or double. param, grad, m, v must
// not overlap.
template <class T>
void adamw_update(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWHyper& h, int64_t step, bool decay);

extern template void adamw_update<float>(float*, const float*, float*, float*, int64_t, const AdamWHyper&, int64_t,
                                         bool);
extern template void adamw_update<double>(double*, const double*, double*, double*, int64_t, const AdamWHyper&,
                                          int64_t, bool);

// The backend's arguments of one update (core/backend.h's AdamWArgs) from the hyperparameters.
AdamWArgs adamw_args(const AdamWHyper& h, int64_t step, bool decay);

// One AdamW update of elements [o, o + n) of param, grad, m, v (1-D, one device) that share one
// weight-decay flag, at 1-based step `step`: the backend's fused adamw_step. The one place an
// AdamW update is issued: AdamW below (a shard's decay segments) and ZeRO-Offload's optimizer
// (zero/offload.cpp: a sub-group's) both call it.
void adamw_apply(Backend& be, const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, int64_t o,
                 int64_t n, const AdamWHyper& h, int64_t step, bool decay);

class AdamW final : public Optimizer {
 public:
  // The given ranges: every element of a model's units (zero/param_layout.h's full_shards), or
  // ZeRO's shard of each unit on this rank. m, v: zeros, shard-sized, same dtype as the shard's
  // param, Category::optim.
  AdamW(std::vector<FlatShard> shards, const AdamWHyper& h);

  double lr() const override { return h_.lr; }
  void set_lr(double lr) override;
  const AdamWHyper& hyper() const { return h_; }

  // ---- state (also by name through Optimizer::state: "<shard>/exp_avg", "<shard>/exp_avg_sq") ----
  const Tensor& exp_avg(int i) const { return m_.at(i); }     // m of shard i, (hi - lo)
  const Tensor& exp_avg_sq(int i) const { return v_.at(i); }  // v of shard i, (hi - lo)
  // Restores a saved state: one m and one v per shard, each of that shard's size (any float
  // dtype; converted). Throws a zt::Error naming the shard on a count or shape mismatch.
  void load_state(int64_t step_count, const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq);
  using Optimizer::load_state;
  int64_t state_bytes() const;  // bytes of m and v together

 private:
  void update(int i, const DecaySegment& seg) override;
  std::vector<std::pair<const char*, Tensor>> shard_state(int i) const override;

  AdamWHyper h_;
  std::vector<Tensor> m_, v_;
};

}  // namespace zt
