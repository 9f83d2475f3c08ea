// defines: global_norm, clip_coefficient, clip_grad_norm — gradient clipping by global L2 norm,
// in pieces a ZeRO engine can put a collective between. The tensor arithmetic under it (the sum
// of squares, the in-place scale) is core's: core/kernels/shard_norm.h.
//
// Semantics: torch.nn.utils.clip_grad_norm_ (norm_type 2): total = ||concat(grads)||_2,
// coef = min(1, max_norm / (total + 1e-6)), grads *= coef, the pre-clip total is returned.
// Note coef < 1 as soon as total > max_norm - 1e-6 (PyTorch's own behaviour).
// Differences from PyTorch, on purpose: the sum of squares accumulates in double (PyTorch in the
// gradients' dtype), and a non-finite total leaves the gradients untouched (PyTorch would scale
// them by NaN or 0); the returned total says so and the caller skips the step (loss scaling).
// Determinism: that of core/kernels/shard_norm.h's sum_of_squares (bitwise the same for any
// thread count).
//
// ZeRO (stage 2): each rank calls sum_of_squares on its gradient shard, all-reduces the one
// double, takes sqrt, and calls scale_(shard, clip_coefficient(norm, max_norm)).
#pragma once
#include <vector>

#include "core/tensor.h"

namespace zt {

double global_norm(const std::vector<Tensor>& grads);  // sqrt(sum_of_squares(grads))
// min(1, max_norm / (norm + 1e-6)); 1 when norm is not finite (see above).
double clip_coefficient(double norm, double max_norm);
// Clips in place; returns the pre-clip global norm. max_norm > 0, else a zt::Error.
double clip_grad_norm(const std::vector<Tensor>& grads, double max_norm);

}  // namespace zt
