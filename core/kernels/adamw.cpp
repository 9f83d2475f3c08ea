// The fused AdamW kernel (core/kernels/adamw.h), moved from optim/adamw.cpp unchanged.
#include "core/kernels/adamw.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/parallel.h"  // kParallelMinElements

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace zt {

namespace {

template <class T>
struct AdamWScalars {
  T step_size, bc2_sqrt, keep, b1, b2, c1, c2, eps;
};

// One element, in the order of the header's formula.
template <class T>
inline void adamw_one(T& p, T g, T& m, T& v, const AdamWScalars<T>& s) {
  const T mi = s.b1 * m + s.c1 * g;
  const T vi = s.b2 * v + s.c2 * (g * g);
  m = mi;
  v = vi;
  const T denom = std::sqrt(vi) / s.bc2_sqrt + s.eps;
  p = p * s.keep - s.step_size * mi / denom;
}

#if defined(__AVX__)
// 8 float elements. Written with intrinsics because GCC keeps a scalar errno path for std::sqrt
// (no -fno-math-errno in the build) and then vectorizes nothing.
inline void adamw8(float* p, const float* g, float* m, float* v, const AdamWScalars<float>& s) {
  const __m256 gi = _mm256_loadu_ps(g);
  const __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(s.b1), _mm256_loadu_ps(m)),
                                  _mm256_mul_ps(_mm256_set1_ps(s.c1), gi));
  const __m256 vi = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(s.b2), _mm256_loadu_ps(v)),
                                  _mm256_mul_ps(_mm256_set1_ps(s.c2), _mm256_mul_ps(gi, gi)));
  _mm256_storeu_ps(m, mi);
  _mm256_storeu_ps(v, vi);
  const __m256 denom =
      _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), _mm256_set1_ps(s.bc2_sqrt)), _mm256_set1_ps(s.eps));
  const __m256 upd = _mm256_div_ps(_mm256_mul_ps(_mm256_set1_ps(s.step_size), mi), denom);
  _mm256_storeu_ps(p, _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(p), _mm256_set1_ps(s.keep)), upd));
}
#endif

// Elements [b, e). float with AVX: 8 at a time, and the tail (< 8) through the same vector code
// on a zero-padded copy, so every element sees the identical instruction sequence whatever its
// position (a shard's update equals the full update bitwise). Otherwise a plain loop.
template <class T>
void adamw_range(T* __restrict param, const T* __restrict grad, T* __restrict m, T* __restrict v, int64_t b,
                 int64_t e, const AdamWScalars<T>& s) {
#if defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) {
    int64_t i = b;
    for (; i + 8 <= e; i += 8) adamw8(param + i, grad + i, m + i, v + i, s);
    if (i < e) {
      const size_t k = static_cast<size_t>(e - i);
      float tp[8] = {}, tg[8] = {}, tm[8] = {}, tv[8] = {};
      std::memcpy(tp, param + i, k * sizeof(float));
      std::memcpy(tg, grad + i, k * sizeof(float));
      std::memcpy(tm, m + i, k * sizeof(float));
      std::memcpy(tv, v + i, k * sizeof(float));
      adamw8(tp, tg, tm, tv, s);
      std::memcpy(param + i, tp, k * sizeof(float));
      std::memcpy(m + i, tm, k * sizeof(float));
      std::memcpy(v + i, tv, k * sizeof(float));
    }
    return;
  }
#endif
  for (int64_t i = b; i < e; ++i) adamw_one(param[i], grad[i], m[i], v[i], s);
}

}  // namespace

template <class T>
void adamw_update(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWArgs& h) {
  ZT_CHECK(h.step >= 1, "adamw_update: step is 1-based, got ", h.step);
  ZT_CHECK(n >= 0, "adamw_update: n = ", n);
  // Scalars in double, as PyTorch computes them in Python floats, then rounded once to T.
  const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  AdamWScalars<T> s;
  s.step_size = static_cast<T>(h.lr / bc1);
  s.bc2_sqrt = static_cast<T>(std::sqrt(bc2));
  s.keep = h.decay ? static_cast<T>(1.0 - h.lr * h.weight_decay) : T(1);
  s.b1 = static_cast<T>(h.beta1);
  s.b2 = static_cast<T>(h.beta2);
  s.c1 = static_cast<T>(1.0 - h.beta1);
  s.c2 = static_cast<T>(1.0 - h.beta2);
  s.eps = static_cast<T>(h.eps);
  if (n < kParallelMinElements) return adamw_range(param, grad, m, v, 0, n, s);
  // Static split into equal contiguous blocks starting at multiples of 16 elements; every element
  // takes the same instructions wherever it lands, so the result does not depend on the split.
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t per = ((n + nt - 1) / nt + 15) / 16 * 16;
    const int64_t b = std::min(n, t * per), e = std::min(n, b + per);
    adamw_range(param, grad, m, v, b, e, s);
  }
}

template void adamw_update<float>(float*, const float*, float*, float*, int64_t, const AdamWArgs&);
template void adamw_update<double>(double*, const double*, double*, double*, int64_t, const AdamWArgs&);

}  // namespace zt
