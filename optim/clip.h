// defines: sum_of_squares, scale_, global_norm, clip_coefficient, clip_grad_norm — gradient
// clipping by global L2 norm, in pieces a ZeRO engine can put a collective between.
//
// Semantics: torch.nn.utils.clip_grad_norm_ (norm_type 2): total = ||concat(grads)||_2,
// coef = min(1, max_norm / (total + 1e-6)), grads *= coef, the pre-clip total is returned.
// Note coef < 1 as soon as total > max_norm - 1e-6 (PyTorch's own behaviour).
// Differences from PyTorch, on purpose: the sum of squares accumulates in double (PyTorch in the
// gradients' dtype), and a non-finite total leaves the gradients untouched (PyTorch would scale
// them by NaN or 0); the returned total says so and the caller skips the step (loss scaling).
//
// Determinism: the sum is split into fixed chunks of kSumChunk elements (independent of the
// thread count), each summed in a fixed 8-lane order, and the partials added in chunk order,
// then tensors in list order: bitwise identical for any number of threads. bfloat16 / float16
// tensors take the same path: each element is converted exactly to float32 (then double) before
// squaring, so the sum equals the float32 path's on the converted values, bit for bit.
//
// ZeRO (stage 2): each rank calls sum_of_squares on its gradient shard, all-reduces the one
// double, takes sqrt, and calls scale_(shard, clip_coefficient(norm, max_norm)).
#pragma once
#include <cstdint>
#include <vector>

#include "core/kernels/reduce.h"  // kSumChunk, sum_of_squares<T>(const T*, n): the CPU kernel
#include "core/tensor.h"

namespace zt {

// The tensor-level functions run on the tensor's device (core/backend.h's sum_of_squares, scale_).
double sum_of_squares(const Tensor& t);                // contiguous float32/float64/bfloat16/float16
double sum_of_squares(const std::vector<Tensor>& ts);  // sum over tensors, in order

// x *= factor, in place (contiguous float32/float64; the factor is rounded once to the dtype).
void scale_(const Tensor& t, double factor);
void scale_(const std::vector<Tensor>& ts, double factor);

double global_norm(const std::vector<Tensor>& grads);  // sqrt(sum_of_squares(grads))
// min(1, max_norm / (norm + 1e-6)); 1 when norm is not finite (see above).
double clip_coefficient(double norm, double max_norm);
// Clips in place; returns the pre-clip global norm. max_norm > 0, else a zt::Error.
double clip_grad_norm(const std::vector<Tensor>& grads, double max_norm);

}  // namespace zt
