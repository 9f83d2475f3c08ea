// defines: add_forward, sub_forward, mul_forward, scale_forward, mul_backward, fill, sum_all,
//          sum_last_forward, sum_last_backward, col_sum (core/kernels/elementwise.h)
#include "core/kernels/elementwise.h"

#include <vector>

#include "core/kernels/vec_math.h"
#include "core/parallel.h"

namespace zt {

template <class T>
void add_forward(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <class T>
void sub_forward(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] - b[i];
}

template <class T>
void mul_forward(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

template <class T>
void scale_forward(T* out, const T* x, T s, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) out[i] = s * x[i];
}

template <class T>
void mul_backward(T* da, T* db, const T* dout, const T* a, const T* b, int64_t n) {
  if (da && db) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) {
      da[i] = dout[i] * b[i];
      db[i] = dout[i] * a[i];
    }
  } else if (da) {
    mul_forward(da, dout, b, n);
  } else if (db) {
    mul_forward(db, dout, a, n);
  }
}

template <class T>
void fill(T* out, T v, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) out[i] = v;
}

template <class T>
double sum_all(const T* x, int64_t n) {
  const int64_t nb = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> part(static_cast<size_t>(nb));
#pragma omp parallel for schedule(static) if (nb > 4)
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t lo = b * kSumBlock, hi = lo + kSumBlock < n ? lo + kSumBlock : n;
    double acc[vm::kLanes] = {};
    int64_t i = lo;
    for (; i + vm::kLanes <= hi; i += vm::kLanes)
#pragma omp simd
      for (int l = 0; l < vm::kLanes; ++l) acc[l] += static_cast<double>(x[i + l]);
    for (int l = 0; i + l < hi; ++l) acc[l] += static_cast<double>(x[i + l]);
    part[b] = vm::lane_combine(acc);
  }
  double s = 0;
  for (double p : part) s += p;
  return s;
}

template <class T>
void sum_last_forward(T* out, const T* in, int64_t R, int64_t N) {
#pragma omp parallel for schedule(static) if (R * N > kParallelMinElements)
  for (int64_t r = 0; r < R; ++r) out[r] = vm::lane_sum(in + r * N, N);
}

template <class T>
void sum_last_backward(T* dx, const T* dout, int64_t R, int64_t N) {
#pragma omp parallel for schedule(static) if (R * N > kParallelMinElements)
  for (int64_t r = 0; r < R; ++r) {
    const T g = dout[r];
    T* d = dx + r * N;
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) d[j] = g;
  }
}

template <class T>
void col_sum(T* out, const T* in, int64_t R, int64_t N, bool accumulate) {
  constexpr int64_t kCols = 64;  // columns per task: a strip each thread sweeps down all rows
  const int64_t nt = (N + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (R * N > kParallelMinElements && nt > 1)
  for (int64_t t = 0; t < nt; ++t) {
    const int64_t c0 = t * kCols, c1 = c0 + kCols < N ? c0 + kCols : N;
    T acc[kCols];
    for (int64_t c = c0; c < c1; ++c) acc[c - c0] = accumulate ? out[c] : T(0);
    for (int64_t r = 0; r < R; ++r) {
      const T* row = in + r * N;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) acc[c - c0] += row[c];
    }
    for (int64_t c = c0; c < c1; ++c) out[c] = acc[c - c0];
  }
}

#define ZT_INSTANTIATE(T)                                                                  \
  template void add_forward<T>(T*, const T*, const T*, int64_t);                           \
  template void sub_forward<T>(T*, const T*, const T*, int64_t);                           \
  template void mul_forward<T>(T*, const T*, const T*, int64_t);                           \
  template void scale_forward<T>(T*, const T*, T, int64_t);                                \
  template void mul_backward<T>(T*, T*, const T*, const T*, const T*, int64_t);            \
  template void fill<T>(T*, T, int64_t);                                                   \
  template double sum_all<T>(const T*, int64_t);                                           \
  template void sum_last_forward<T>(T*, const T*, int64_t, int64_t);                       \
  template void sum_last_backward<T>(T*, const T*, int64_t, int64_t);                      \
  template void col_sum<T>(T*, const T*, int64_t, int64_t, bool);
ZT_INSTANTIATE(float)
ZT_INSTANTIATE(double)
#undef ZT_INSTANTIATE

}  // namespace zt
