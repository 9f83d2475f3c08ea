// defines: recompute — activation checkpointing (DeepSpeed's and PyTorch's name) of one function
//          (a unit's forward): its activations are recomputed in backward, not saved. Autograd
//          layer; not a saved checkpoint of training state (zero/checkpoint.h).
//
// Forward runs `fn` under no_grad, so none of its intermediate activations are kept; only the
// input and the output are. Backward runs `fn` again with grad on (the recompute), then
// backpropagates the output gradient through the recomputed graph: parameter gradients land in
// their flat buffers as usual and the input's gradient flows on to the previous unit.
// Cost: one extra forward of the unit; saving: every activation inside it (Chen et al. 2016).
#pragma once
#include <functional>

#include "autograd/var.h"

namespace zt {

// `params`: the parameter leaves fn reads. They become inputs of the recompute node, so the
// backward fires their groups' hooks around the recompute (a ZeRO-3 unit is re-gathered before
// it) and the node is recorded even when `input` needs no gradient (the first unit).
Var recompute(const std::function<Var(const Var&)>& fn, const Var& input, const std::vector<Var>& params);

}  // namespace zt
