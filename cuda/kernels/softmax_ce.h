// defines: cuda_kernels::softmax_forward, softmax_backward (over the last dimension) and
//          cross_entropy_forward, cross_entropy_backward (fused softmax + negative log-likelihood
//          over a padded vocabulary), cross_entropy_and_grad (both in one pass, in place) on the
//          GPU, float32 or bfloat16 storage, float32 math.
//
// Semantics: those of core/kernels/softmax.h and core/kernels/cross_entropy.h (+ the mean of
// autograd's cross_entropy op, autograd/ops_basic.cpp):
//   softmax, per row (max subtracted): y_j = exp(x_j - m) / sum_k exp(x_k - m), m = max_k x_k
//   backward (y saved): dx_j = y_j (dy_j - sum_k dy_k y_k)
//   cross entropy, logits (N, V) with only the columns [0, Vv) real (llm.c pads V), targets (N)
//   int32 in [0, Vv) or -1 (ignored):
//     lse_i = m_i + log(sum_{j<Vv} exp(x_ij - m_i)),  loss_i = lse_i - x_{i,t_i}
//     mean = sum_i loss_i / count (count = rows with t_i != -1; 0/0 = NaN when every row is
//     ignored, as PyTorch and the CPU op)
//     dlogits_ij = scale (exp(x_ij - lse_i) - [j == t_i]) for j < Vv, t_i != -1; 0 for j >= Vv
//     and for ignored rows; scale = dloss / count (1 / count for the mean loss).
// exp / log are CUDA's expf / logf (<= 2 ulp; the CPU uses a Cephes polynomial): results agree
// with the CPU to ~1e-6 relative, not bit for bit. bfloat16: inputs read exactly into float32,
// outputs rounded to nearest even once. The statistics lse and loss are ALWAYS float32.
// Targets outside [0, Vv) other than -1 are the caller's error (the CPU op throws before it runs
// the kernel): the GPU does not read out of bounds, it gives that row loss NaN (so the mean is
// NaN) and a NaN dlogits row.
//
// GPU mapping: one 256-thread block per row (rows strided by the grid). Thread g walks the
// elements g, g + 256, ... (8-element 128-bit packs when the row starts are 16-byte aligned:
// aligned buffers and V % 8 == 0, then the tail); its partials combine through __shfl_xor_sync in
// each warp and the 8 warp results in warp order. The order depends only on the sizes and the
// alignment: bitwise the same on every run. The mean: one block, thread g adds (in double) the
// rows g, g + 256, ... in order; thread 0 adds the 256 partials in order.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace zt::cuda_kernels {

// out (R, N) = softmax over rows of in (R, N); out may be in.
void softmax_forward(DType t, void* out, const void* in, int64_t R, int64_t N, cudaStream_t s);
// dx (R, N) from dout, out (R, N) (the forward's output); dx may be dout.
void softmax_backward(DType t, void* dx, const void* dout, const void* out, int64_t R, int64_t N, cudaStream_t s);

// Writes lse (N) and loss (N) (float32, 0 for ignored rows) and *mean_loss (one device float) from
// logits (N, V) of dtype t and targets (N) int32. 1 <= Vv <= V.
void cross_entropy_forward(DType t, float* mean_loss, float* loss, float* lse, const void* logits,
                           const int32_t* targets, int64_t N, int64_t V, int64_t Vv, cudaStream_t s);
// dlogits (N, V) of dtype t (every element written; must not overlap logits) from logits (N, V),
// lse (N) float32 (the forward's), targets (N).
void cross_entropy_backward(DType t, void* dlogits, const void* logits, const float* lse, const int32_t* targets,
                            float scale, int64_t N, int64_t V, int64_t Vv, cudaStream_t s);

// The backend table's forms (core/backend.h), with the caller's `count` (>= 0) of non-ignored rows:
// *mean_loss = float(sum_i loss_i / count) (the sum as above, in double; count 0 gives NaN), and the
// backward's scale read on the device: scale = float(double(*dloss) / count) (0 when count is 0),
// dloss one device float (the loss gradient, which stays on the device). v0: the columns are
// [v0, v0 + V) of a larger vocabulary (core/backend_ops.def's rows: a target outside
// [v0, v0 + Vv) adds 0 to the loss and no -1 to the gradient). Otherwise as above.
void cross_entropy_forward(DType t, float* mean_loss, float* loss, float* lse, const void* logits,
                           const int32_t* targets, int64_t N, int64_t V, int64_t Vv, int64_t count, int64_t v0,
                           cudaStream_t s);
void cross_entropy_backward(DType t, void* dlogits, const void* logits, const float* lse, const int32_t* targets,
                            const float* dloss, int64_t count, int64_t N, int64_t V, int64_t Vv, int64_t v0,
                            cudaStream_t s);

// Both at once, in place (llm.c's fused classifier): *mean_loss and loss (N) as the forward's
// table form, and logits (N, V) overwritten by the backward's dlogits for dloss = 1 (scale =
// float(1.0 / count), 0 when count is 0): the same bits as cross_entropy_forward followed by
// cross_entropy_backward with a dloss of 1. A row that fits in shared memory (as the forward's) is
// read from memory once and written once; no lse is kept.
void cross_entropy_and_grad(DType t, float* mean_loss, float* loss, void* logits, const int32_t* targets, int64_t N,
                            int64_t V, int64_t Vv, int64_t count, cudaStream_t s);

}  // namespace zt::cuda_kernels
