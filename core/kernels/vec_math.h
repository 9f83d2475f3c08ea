// defines: vexp, vsigmoid, lane_sum (of an array or of f(j)), lane_dot, lane_max, lane_sum_exp
//          — scalar math written so that `#pragma omp simd` loops vectorize it (no libm call
//          in the float path).
//
// float: vexp is Cephes' expf (Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, then a degree-6
// minimax polynomial; relative error ~1-2 ulp), built only from +, *, compares and bit casts.
// Inputs <= -88 return 0 (flush instead of denormals); inputs above 88 are clamped to
// exp(88) ~ 1.65e38 (callers pass x - max <= 0 or bounded arguments); NaN stays NaN.
// double: std::exp (float64 is the gradient-check path, where accuracy matters, not speed).
//
// lane_sum / lane_max / lane_sum_exp reduce one row with kLanes independent partial results
// combined in a fixed order: the same bits on every run and every thread count, and no
// OpenMP reduction clause (whose combination order is unspecified).
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

namespace zt::vm {

inline float vexp(float x) {
  // Clamp to [-88, 88] with bit masks rather than `?:`: gcc would thread a branchy clamp into
  // constant-folded paths and then refuse to vectorize the loop. x = -88 gives n = -127 and a
  // scale of exactly +0, so every x <= -88 returns 0 (no denormals); x = 88 gives ~1.65e38.
  const int32_t lo = -static_cast<int32_t>(x < -88.0f), hi = -static_cast<int32_t>(x > 88.0f);
  int32_t xi = std::bit_cast<int32_t>(x);
  xi = (xi & ~lo) | (std::bit_cast<int32_t>(-88.0f) & lo);
  xi = (xi & ~hi) | (std::bit_cast<int32_t>(88.0f) & hi);
  x = std::bit_cast<float>(xi);
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer in the low bits
  const float t = x * 1.44269504088896341f + magic;
  const float n = t - magic;
  const int32_t ni = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(magic);
  float r = x - n * 0.693359375f;  // ln2 split in two (Cephes C1, C2)
  r = r - n * -2.12194440e-4f;
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  return p * std::bit_cast<float>((ni + 127) << 23);
}
inline double vexp(double x) { return std::exp(x); }

template <class T>
inline T vsigmoid(T x) {
  return T(1) / (T(1) + vexp(-x));
}

inline constexpr int kLanes = 16;

template <class T>
inline T lane_combine(T* acc) {  // fixed pairwise tree
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

// sum of f(0) + ... + f(n-1), f(j) -> T (e.g. a squared deviation computed on the fly); element
// j goes to lane j % kLanes, lanes combined by lane_combine.
template <class T, class F>
inline T lane_sum(int64_t n, F&& f) {
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) acc[l] += f(i + l);
  for (int l = 0; i + l < n; ++l) acc[l] += f(i + l);
  return lane_combine(acc);
}

// sum of x[0..n)
template <class T>
inline T lane_sum(const T* x, int64_t n) {
  return lane_sum<T>(n, [x](int64_t j) { return x[j]; });
}

// sum of x[j] * y[j]
template <class T>
inline T lane_dot(const T* x, const T* y, int64_t n) {
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) acc[l] += x[i + l] * y[i + l];
  for (int l = 0; i + l < n; ++l) acc[l] += x[i + l] * y[i + l];
  return lane_combine(acc);
}

// max of x[0..n), n >= 1 (NaN-propagation not guaranteed; max itself is exact in any order)
template <class T>
inline T lane_max(const T* x, int64_t n) {
  T acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = x[0];
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
  for (int l = 0; i + l < n; ++l) acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
  T m = acc[0];
  for (int l = 1; l < kLanes; ++l) m = acc[l] > m ? acc[l] : m;
  return m;
}

// sum of exp(x[j] - m)
template <class T>
inline T lane_sum_exp(const T* x, int64_t n, T m) {
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) acc[l] += vexp(x[i + l] - m);
  for (int l = 0; i + l < n; ++l) acc[l] += vexp(x[i + l] - m);
  return lane_combine(acc);
}

}  // namespace zt::vm
