// defines: sum_of_squares, sum_of_squares_bf16, sum_of_squares_f16, scale_inplace (core/kernels/reduce.h);
//          file-local: chunk_sum, chunked_sum_of_squares
//
// Shard norms and in-place scaling (core/kernels/reduce.h), moved from optim/clip.cpp unchanged.
#include "core/kernels/reduce.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/kernels/cast.h"  // cvt::bf16_to_f32, cvt::f16_to_f32

namespace zt {

namespace {

// sum to_double(x_i)^2 over one chunk in a fixed order: 8 lanes over i mod 8, then a fixed
// pairwise tree. ToDouble: float/double -> static_cast; bf16/f16 -> the exact float32 value.
template <class T, class ToDouble>
double chunk_sum(const T* __restrict x, int64_t n, ToDouble to_double) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) {
      const double v = to_double(x[i + l]);
      acc[l] += v * v;
    }
  for (int l = 0; i < n; ++i, ++l) {
    const double v = to_double(x[i]);
    acc[l] += v * v;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Fixed chunks of kSumChunk (independent of the thread count), partials added in chunk order.
template <class T, class ToDouble>
double chunked_sum_of_squares(const T* x, int64_t n, ToDouble to_double) {
  ZT_CHECK(n >= 0, "sum_of_squares: n = ", n);
  const int64_t chunks = (n + kSumChunk - 1) / kSumChunk;
  if (chunks <= 1) return chunk_sum(x, n, to_double);
  std::vector<double> partial(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kSumChunk;
    partial[c] = chunk_sum(x + b, std::min(kSumChunk, n - b), to_double);
  }
  double s = 0;
  for (double p : partial) s += p;  // fixed order
  return s;
}

}  // namespace

template <class T>
double sum_of_squares(const T* x, int64_t n) {
  return chunked_sum_of_squares(x, n, [](T v) { return static_cast<double>(v); });
}

template double sum_of_squares<float>(const float*, int64_t);
template double sum_of_squares<double>(const double*, int64_t);

double sum_of_squares_bf16(const uint16_t* x, int64_t n) {
  return chunked_sum_of_squares(x, n, [](uint16_t h) { return static_cast<double>(cvt::bf16_to_f32(h)); });
}

double sum_of_squares_f16(const uint16_t* x, int64_t n) {
  return chunked_sum_of_squares(x, n, [](uint16_t h) { return static_cast<double>(cvt::f16_to_f32(h)); });
}

template <class T>
void scale_inplace(T* x, int64_t n, T factor) {
#pragma omp parallel for simd schedule(static) if (n >= (int64_t(1) << 15))
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

template void scale_inplace<float>(float*, int64_t, float);
template void scale_inplace<double>(double*, int64_t, double);

}  // namespace zt
