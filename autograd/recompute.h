// defines: recompute — activation checkpointing (DeepSpeed's and PyTorch's name) of one function
//          (a unit's forward): its activations are recomputed in backward, not saved. Autograd
//          layer; not a saved checkpoint of training state (zero/checkpoint.h).
//          CheckpointStore — where the one tensor a recompute keeps (its input) waits for backward.
//
// Forward runs `fn` under no_grad, so none of its intermediate activations are kept; only the
// input and the output are. Backward runs `fn` again with grad on (the recompute), then
// backpropagates the output gradient through the recomputed graph: parameter gradients land in
// their flat buffers as usual and the input's gradient flows on to the previous unit.
// Cost: one extra forward of the unit; saving: every activation inside it (Chen et al. 2016).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "autograd/var.h"

namespace zt {

// The checkpoint a recompute keeps is its input x. Without a store it stays where it is (on the
// device) until backward. A store may move it away in between (DeepSpeed's
// activation_checkpointing.cpu_checkpointing: to host memory) — autograd only defines the
// interface; zero/activation_offload.h implements it with the storage tiers, as nn's Residency
// is implemented by the engine.
//
// Contract: stash(x, name) is called right after the unit's forward, with x defined, contiguous
// and the only user of its whole Storage (a unit's input is the previous unit's fresh output).
// The store may release x's Storage (core/tensor.h: every view keeps pointing at it) and returns
// a handle; handle->restore() is called at the start of the recompute and returns once x's bytes
// are back in that same Storage. Dropping the handle without restore() (a graph freed unused)
// frees whatever the store held for it.
class CheckpointStore {
 public:
  class Stashed {
   public:
    virtual ~Stashed() = default;
    virtual void restore() = 0;
  };
  virtual ~CheckpointStore() = default;
  // `name`: the unit's, for the trace and messages.
  virtual std::shared_ptr<Stashed> stash(const Tensor& x, const std::string& name) = 0;
};

// `params`: the parameter leaves fn reads. They become inputs of the recompute node, so the
// backward fires their groups' hooks around the recompute (a ZeRO-3 unit is re-gathered before
// it) and the node is recorded even when `input` needs no gradient (the first unit).
// `store` (optional): where the input waits for the backward (above); `name` names it there.
Var recompute(const std::function<Var(const Var&)>& fn, const Var& input, const std::vector<Var>& params,
              CheckpointStore* store = nullptr, const std::string& name = "");

}  // namespace zt
