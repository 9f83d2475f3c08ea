// defines: sum_of_squares (a tensor, a list), scale_ (a tensor, a list) — the squared L2 norm of
//          flat buffers and their in-place scaling, on each tensor's device: the arithmetic of
//          the gradient's path after backward (unscaling, averaging, clipping by global norm).
//
// Each runs on the tensor's device (core/backend.h's sum_of_squares, scale_); the cpu backend's
// kernels are core/kernels/reduce.h's. Only the policy built on them lives above core: the
// clipping coefficient (optim/clip.h) and when to all-reduce the sum (the ZeRO engine).
//
// Determinism: the sum is split into fixed chunks of kSumChunk elements (independent of the
// thread count), each summed in a fixed 8-lane order, and the partials added in chunk order,
// then tensors in list order: bitwise identical for any number of threads. bfloat16 / float16
// tensors take the same path: each element is converted exactly to float32 (then double) before
// squaring, so the sum equals the float32 path's on the converted values, bit for bit. The sum
// accumulates in double whatever the tensors' dtype.
#pragma once
#include <vector>

#include "core/kernels/reduce.h"  // kSumChunk, sum_of_squares<T>(const T*, n): the CPU kernel
#include "core/tensor.h"

namespace zt {

double sum_of_squares(const Tensor& t);                // contiguous float32/float64/bfloat16/float16
double sum_of_squares(const std::vector<Tensor>& ts);  // sum over tensors, in order

// x *= factor, in place (contiguous float32/float64 on the cpu, a compute dtype of the device
// elsewhere; the factor is rounded once to the dtype).
void scale_(const Tensor& t, double factor);
void scale_(const std::vector<Tensor>& ts, double factor);

}  // namespace zt
