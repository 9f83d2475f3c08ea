#include "core/kernels/activation.h"

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

constexpr int64_t kBiasGradCols = 64;  // columns per strip of bias_gelu_backward (col_sum's width)

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
  // Strips of kBiasGradCols columns, one thread each, sweeping the rows in order: dx is written as
  // it is summed (one pass over x and dout), and db's sums have col_sum's order.
  const int64_t nt = (C + kBiasGradCols - 1) / kBiasGradCols;
#pragma omp parallel for schedule(static) if (R * C > kActParallelMin && nt > 1)
  for (int64_t t = 0; t < nt; ++t) {
    const int64_t c0 = t * kBiasGradCols, c1 = c0 + kBiasGradCols < C ? c0 + kBiasGradCols : C;
    T acc[kBiasGradCols];
    for (int64_t c = c0; c < c1; ++c) acc[c - c0] = db && accumulate ? db[c] : T(0);
    for (int64_t r = 0; r < R; ++r) {
      const T* xr = x + r * C;
      const T* gr = dout + r * C;
      if (dx) {
        T* dxr = dx + r * C;
#pragma omp simd
        for (int64_t c = c0; c < c1; ++c) {
          const T d = gr[c] * gelu_slope(xr[c] + b[c]);
          dxr[c] = d;
          acc[c - c0] += d;
        }
      } else {
#pragma omp simd
        for (int64_t c = c0; c < c1; ++c) acc[c - c0] += gr[c] * gelu_slope(xr[c] + b[c]);
      }
    }
    if (db)
      for (int64_t c = c0; c < c1; ++c) db[c] = acc[c - c0];
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
