// defines: cross_entropy_forward, cross_entropy_backward (core/kernels/cross_entropy.h)
#include "core/kernels/cross_entropy.h"

#include <cmath>
#include <vector>

#include "core/kernels/vec_math.h"
#include "core/parallel.h"

namespace zt {

template <class T>
double cross_entropy_forward(T* lse, const T* logits, const int32_t* targets, int64_t N, int64_t V, int64_t Vv,
                             int64_t v0) {
  std::vector<double> loss(static_cast<size_t>(N), 0.0);
#pragma omp parallel for schedule(static) if (N * Vv > kParallelMinElements / 4)
  for (int64_t i = 0; i < N; ++i) {
    const int32_t t = targets[i];
    if (t < 0) {
      lse[i] = T(0);
      continue;
    }
    const T* x = logits + i * V;
    const T m = vm::lane_max(x, Vv);
    const T l = m + std::log(vm::lane_sum_exp(x, Vv, m));
    lse[i] = l;
    const int64_t tl = t - v0;  // the target's column here (elsewhere: another rank's)
    if (tl >= 0 && tl < Vv) loss[i] = static_cast<double>(l) - static_cast<double>(x[tl]);
  }
  double s = 0;
  for (double v : loss) s += v;
  return s;
}

template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets, T scale, int64_t N,
                            int64_t V, int64_t Vv, int64_t v0) {
#pragma omp parallel for schedule(static) if (N * V > kParallelMinElements / 4)
  for (int64_t i = 0; i < N; ++i) {
    T* d = dlogits + i * V;
    const int32_t t = targets[i];
    if (t < 0) {
#pragma omp simd
      for (int64_t j = 0; j < V; ++j) d[j] = T(0);
      continue;
    }
    const T* x = logits + i * V;
    const T l = lse[i];
#pragma omp simd
    for (int64_t j = 0; j < Vv; ++j) d[j] = scale * vm::vexp(x[j] - l);
    if (t - v0 >= 0 && t - v0 < Vv) d[t - v0] -= scale;
#pragma omp simd
    for (int64_t j = Vv; j < V; ++j) d[j] = T(0);
  }
}

template double cross_entropy_forward<float>(float*, const float*, const int32_t*, int64_t, int64_t, int64_t, int64_t);
template double cross_entropy_forward<double>(double*, const double*, const int32_t*, int64_t, int64_t, int64_t,
                                              int64_t);
template void cross_entropy_backward<float>(float*, const float*, const float*, const int32_t*, float, int64_t, int64_t,
                                            int64_t, int64_t);
template void cross_entropy_backward<double>(double*, const double*, const double*, const int32_t*, double, int64_t,
                                             int64_t, int64_t, int64_t);

}  // namespace zt
