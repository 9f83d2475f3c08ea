#include "core/kernels/activation.h"

#include "core/kernels/vec_math.h"

namespace zt {

namespace {
constexpr int64_t kActParallelMin = 8192;  // exp per element: worth threads sooner than an add
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluC = 0.044715;
}  // namespace

template <class T>
void gelu_forward(T* out, const T* x, int64_t n) {
  const T a = static_cast<T>(kSqrt2OverPi), c = static_cast<T>(kGeluC);
#pragma omp parallel for simd schedule(static) if (n > kActParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T u = a * (v + c * v * v * v);
    out[i] = v * vm::vsigmoid(T(2) * u);
  }
}

template <class T>
void gelu_backward(T* dx, const T* dout, const T* x, int64_t n) {
  const T a = static_cast<T>(kSqrt2OverPi), c = static_cast<T>(kGeluC);
#pragma omp parallel for simd schedule(static) if (n > kActParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T u = a * (v + c * v * v * v);
    const T s = vm::vsigmoid(T(2) * u);
    const T du = a * (T(1) + T(3) * c * v * v);
    dx[i] = dout[i] * (s + v * T(2) * s * (T(1) - s) * du);
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
  template void silu_forward<T>(T*, const T*, int64_t);                            \
  template void silu_backward<T>(T*, const T*, const T*, int64_t);                 \
  template void swiglu_forward<T>(T*, const T*, const T*, int64_t);                \
  template void swiglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t);
ZT_INSTANTIATE(float)
ZT_INSTANTIATE(double)
#undef ZT_INSTANTIATE

}  // namespace zt
