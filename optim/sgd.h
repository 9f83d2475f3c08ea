// defines: SgdHyper, sgd_args, Sgd (the optimizer over flat shards, owning the momentum buffers
// in Category::optim on the shards' device; each update is one Backend::sgd_step, core/backend.h).
//
// Semantics: torch.optim.SGD with dampening = 0 (PyTorch's _single_tensor_sgd):
//
//   d   = g + wd * p                (only where decay and wd > 0: L2, coupled to the gradient)
//   buf = mu * buf + d              (momentum > 0; buf starts at 0, so step 1 gives buf = d,
//                                    exactly PyTorch's buf = clone(d))
//   d   = d + mu * buf  (nesterov)  or  d = buf  (plain momentum)
//   p   = p - lr * d
//
// PyTorch applies weight_decay to every parameter of a group; here, as with AdamW, it applies to
// the parameters with FlatParam::decay (2-D weights), the usual "no decay on biases and norm
// gains" parameter grouping. The update runs wherever the shard lives, through the backend table:
// the cpu backend's kernel is core/kernels/sgd.h (float32, float64; OpenMP static + SIMD, bitwise
// identical for any thread count), the GPU's cuda/kernels/sgd.h (float32). Same flat-shard design
// as AdamW (optim/flat_shard.h).
#pragma once
#include <cstdint>
#include <vector>

#include "core/backend.h"  // SgdArgs
#include "optim/optimizer.h"

namespace zt {

struct SgdHyper {
  double lr = 1e-2;
  double momentum = 0;
  double weight_decay = 0;
  bool nesterov = false;
  // Throws a zt::Error naming the field: lr, momentum, wd >= 0; nesterov needs momentum > 0.
  void validate() const;
};

// The backend's arguments of one update (core/backend.h's SgdArgs) from the hyperparameters;
// `decay`: weight decay applies to the elements of that update.
SgdArgs sgd_args(const SgdHyper& h, bool decay);

class Sgd final : public Optimizer {
 public:
  // The given ranges: every element of a model's units (zero/param_layout.h's full_shards), or
  // ZeRO's shard of each unit on this rank. Momentum buffers (momentum > 0): zeros, shard-sized,
  // the shard's dtype, Category::optim, on the shard's device.
  Sgd(std::vector<FlatShard> shards, const SgdHyper& h);

  double lr() const override { return h_.lr; }
  void set_lr(double lr) override;
  const SgdHyper& hyper() const { return h_; }

  // ---- state (also by name through Optimizer::state: "<shard>/momentum") ----
  // Momentum buffer of shard i, (hi - lo); undefined when momentum == 0 (no state).
  const Tensor& momentum_buffer(int i) const { return buf_.at(i); }
  // Restores a saved state (one buffer per shard when momentum > 0, none otherwise).
  void load_state(int64_t step_count, const std::vector<Tensor>& momentum_buffers);
  using Optimizer::load_state;

 private:
  void update(int i, const DecaySegment& seg) override;
  std::vector<std::pair<const char*, Tensor>> shard_state(int i) const override;

  SgdHyper h_;
  std::vector<Tensor> buf_;
};

}  // namespace zt
