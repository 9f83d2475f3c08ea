// defines: softmax_forward, softmax_backward (core/kernels/softmax.h)
#include "core/kernels/softmax.h"

#include "core/kernels/vec_math.h"
#include "core/parallel.h"

namespace zt {

template <class T>
void softmax_forward(T* out, const T* in, int64_t R, int64_t N) {
  if (N == 0) return;
#pragma omp parallel for schedule(static) if (R * N > kParallelMinElements / 4)
  for (int64_t r = 0; r < R; ++r) softmax_row(out + r * N, in + r * N, N);
}

template <class T>
void softmax_backward(T* dx, const T* dout, const T* out, int64_t R, int64_t N) {
#pragma omp parallel for schedule(static) if (R * N > kParallelMinElements)
  for (int64_t r = 0; r < R; ++r) {
    const T* dy = dout + r * N;
    const T* y = out + r * N;
    T* d = dx + r * N;
    const T dot = vm::lane_dot(dy, y, N);
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) d[j] = y[j] * (dy[j] - dot);
  }
}

template void softmax_forward<float>(float*, const float*, int64_t, int64_t);
template void softmax_forward<double>(double*, const double*, int64_t, int64_t);
template void softmax_backward<float>(float*, const float*, const float*, int64_t, int64_t);
template void softmax_backward<double>(double*, const double*, const double*, int64_t, int64_t);

}  // namespace zt
