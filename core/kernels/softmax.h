// defines: softmax_row (one row, inline), softmax_forward / softmax_backward over the last
//          dimension, on raw buffers.
//
// in, out (R, N) contiguous. Forward, per row: m = max, e_j = exp(x_j - m), y_j = e_j / sum e
// (max-subtracted, so exp never overflows). Backward (y saved from the forward):
//   dx_j = y_j (dy_j - sum_k dy_k y_k).
// Rows are split across threads (static); each row's arithmetic is fixed, so results do not
// depend on the thread count.
#pragma once
#include <cstdint>

#include "core/kernels/vec_math.h"

namespace zt {

// One row of n elements: y = softmax(x) (y may be x). Shared with attention's causal rows.
template <class T>
inline void softmax_row(T* y, const T* x, int64_t n) {
  const T m = vm::lane_max(x, n);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] = vm::vexp(x[j] - m);
  const T inv = T(1) / vm::lane_sum(y, n);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}

template <class T> void softmax_forward(T* out, const T* in, int64_t R, int64_t N);
template <class T> void softmax_backward(T* dx, const T* dout, const T* out, int64_t R, int64_t N);

}  // namespace zt
