// defines: gelu_forward, gelu_backward, bias_gelu_forward, bias_gelu_backward, silu_forward, silu_backward,
//          swiglu_forward, swiglu_backward (core/kernels/activation.h); file-local: gelu_value, gelu_slope
#include "core/kernels/activation.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/kernels/vec_math.h"

namespace zt {

namespace {
constexpr int64_t kActParallelMin = 8192;  // exp per element: worth threads sooner than an add
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluC = 0.044715;

// gelu(v) and gelu'(v), the one place their arithmetic is written (gelu and bias_gelu share it).
template <class T>
inline T gelu_value(T v) {
  const T a = static_cast<T>(kSqrt2OverPi), c = static_cast<T>(kGeluC);
  const T u = a * (v + c * v * v * v);
  return v * vm::vsigmoid(T(2) * u);
}
template <class T>
inline T gelu_slope(T v) {
  const T a = static_cast<T>(kSqrt2OverPi), c = static_cast<T>(kGeluC);
  const T u = a * (v + c * v * v * v);
  const T s = vm::vsigmoid(T(2) * u);
  const T du = a * (T(1) + T(3) * c * v * v);
  return s + v * T(2) * s * (T(1) - s) * du;
}


}  // namespace

template <class T>
void gelu_forward(T* out, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kActParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_value(x[i]);
}

template <class T>
void gelu_backward(T* dx, const T* dout, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kActParallelMin)
  for (int64_t i = 0; i < n; ++i) dx[i] = dout[i] * gelu_slope(x[i]);
}

template <class T>
void bias_gelu_forward(T* out, const T* x, const T* b, int64_t R, int64_t C) {
  // rows split across threads; within a row one simd loop: each element's arithmetic is fixed
#pragma omp parallel for schedule(static) if (R * C > kActParallelMin)
  for (int64_t r = 0; r < R; ++r) {
    const T* xr = x + r * C;
    T* outr = out + r * C;
#pragma omp simd
    for (int64_t i = 0; i < C; ++i) outr[i] = gelu_value(xr[i] + b[i]);
  }
}

template <class T>
void bias_gelu_backward(T* dx, T* db, const T* dout, const T* x, const T* b, int64_t R, int64_t C, bool accumulate) {
  // Each thread owns one contiguous range of columns and sweeps all rows in order: dx is written
  // as it is summed (one pass over x and dout), and every column's db is a sum over the rows in
  // order — col_sum's order, so the bits do not depend on the thread count. (Narrow strips of a
  // few columns per task ran 1.8x slower: their short strided row pieces defeat the prefetcher.)
#pragma omp parallel if (R * C > kActParallelMin)
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t per = ((C + nt - 1) / nt + 15) / 16 * 16;  // whole 64-byte lines per thread
    const int64_t c0 = std::min(C, t * per), w = std::min(C, c0 + per) - c0;
    std::vector<T> acc(static_cast<size_t>(w));
    for (int64_t j = 0; j < w; ++j) acc[j] = db && accumulate ? db[c0 + j] : T(0);
    T* __restrict as = acc.data();
    const T* bs = b + c0;
    for (int64_t r = 0; r < R && w > 0; ++r) {
      const T* __restrict xs = x + r * C + c0;
      const T* __restrict gs = dout + r * C + c0;
      if (dx) {
        T* __restrict ds = dx + r * C + c0;
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) {
          const T d = gs[j] * gelu_slope(xs[j] + bs[j]);
          ds[j] = d;
          as[j] += d;
        }
      } else {
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) as[j] += gs[j] * gelu_slope(xs[j] + bs[j]);
      }
    }
    if (db)
      for (int64_t j = 0; j < w; ++j) db[c0 + j] = acc[j];
  }
}

template <class T>
void silu_forward(T* out, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kActParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * vm::vsigmoid(x[i]);
}

template <class T>
void silu_backward(T* dx, const T* dout, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kActParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T s = vm::vsigmoid(x[i]);
    dx[i] = dout[i] * s * (T(1) + x[i] * (T(1) - s));
  }
}

template <class T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kActParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] * vm::vsigmoid(gate[i]) * up[i];
}

template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n) {
  if (dgate && dup) {
#pragma omp parallel for simd schedule(static) if (n > kActParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      const T g = gate[i], s = vm::vsigmoid(g);
      dup[i] = dout[i] * g * s;
      dgate[i] = dout[i] * up[i] * s * (T(1) + g * (T(1) - s));
    }
  } else if (dgate) {
#pragma omp parallel for simd schedule(static) if (n > kActParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      const T g = gate[i], s = vm::vsigmoid(g);
      dgate[i] = dout[i] * up[i] * s * (T(1) + g * (T(1) - s));
    }
  } else if (dup) {
#pragma omp parallel for simd schedule(static) if (n > kActParallelMin)
    for (int64_t i = 0; i < n; ++i) dup[i] = dout[i] * gate[i] * vm::vsigmoid(gate[i]);
  }
}

#define ZT_INSTANTIATE(T)                                                          \
  template void gelu_forward<T>(T*, const T*, int64_t);                            \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t);                 \
  template void bias_gelu_forward<T>(T*, const T*, const T*, int64_t, int64_t);    \
  template void bias_gelu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t, bool); \
  template void silu_forward<T>(T*, const T*, int64_t);                            \
  template void silu_backward<T>(T*, const T*, const T*, int64_t);                 \
  template void swiglu_forward<T>(T*, const T*, const T*, int64_t);                \
  template void swiglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t);
ZT_INSTANTIATE(float)
ZT_INSTANTIATE(double)
#undef ZT_INSTANTIATE

}  // namespace zt
