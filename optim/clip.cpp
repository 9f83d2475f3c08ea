#include "optim/clip.h"

#include <cmath>

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

void check_flat(const Tensor& t, const char* who) {
  if (!t.defined()) ZT_THROW(who, ": undefined tensor");
  if (!t.is_contiguous()) ZT_THROW(who, ": tensor ", t.str(), " is not contiguous (expected a flat buffer)");
  check_float(t, who);
}

}  // namespace

template <class T>
double sum_of_squares(const T* x, int64_t n) {
  return chunked_sum_of_squares(x, n, [](T v) { return static_cast<double>(v); });
}

template double sum_of_squares<float>(const float*, int64_t);
template double sum_of_squares<double>(const double*, int64_t);

double sum_of_squares(const Tensor& t) {
  if (!t.defined()) ZT_THROW("sum_of_squares: undefined tensor");
  if (!t.is_contiguous()) ZT_THROW("sum_of_squares: tensor ", t.str(), " is not contiguous (expected a flat buffer)");
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::f32: return sum_of_squares(t.data<float>(), n);
    case DType::f64: return sum_of_squares(t.data<double>(), n);
    case DType::bf16:
      return chunked_sum_of_squares(static_cast<const uint16_t*>(t.raw()), n,
                                    [](uint16_t h) { return static_cast<double>(cvt::bf16_to_f32(h)); });
    case DType::f16:
      return chunked_sum_of_squares(static_cast<const uint16_t*>(t.raw()), n,
                                    [](uint16_t h) { return static_cast<double>(cvt::f16_to_f32(h)); });
    default:
      ZT_THROW("sum_of_squares: tensor ", t.str(), " has dtype ", dtype_name(t.dtype()),
               ", expected float32, float64, bfloat16 or float16");
  }
}

double sum_of_squares(const std::vector<Tensor>& ts) {
  double s = 0;
  for (const Tensor& t : ts) s += sum_of_squares(t);
  return s;
}

void scale_(const Tensor& t, double factor) {
  check_flat(t, "scale_");
  const int64_t n = t.numel();
  if (t.dtype() == DType::f32) {
    float* x = t.data<float>();
    const float f = static_cast<float>(factor);
#pragma omp parallel for simd schedule(static) if (n >= (int64_t(1) << 15))
    for (int64_t i = 0; i < n; ++i) x[i] *= f;
  } else {
    double* x = t.data<double>();
#pragma omp parallel for simd schedule(static) if (n >= (int64_t(1) << 15))
    for (int64_t i = 0; i < n; ++i) x[i] *= factor;
  }
}

void scale_(const std::vector<Tensor>& ts, double factor) {
  for (const Tensor& t : ts) scale_(t, factor);
}

double global_norm(const std::vector<Tensor>& grads) { return std::sqrt(sum_of_squares(grads)); }

double clip_coefficient(double norm, double max_norm) {
  if (!std::isfinite(norm)) return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

double clip_grad_norm(const std::vector<Tensor>& grads, double max_norm) {
  if (!(max_norm > 0)) ZT_THROW("clip_grad_norm: max_norm = ", max_norm, ", expected > 0");
  const double norm = global_norm(grads);
  const double coef = clip_coefficient(norm, max_norm);
  if (coef < 1.0) scale_(grads, coef);
  return norm;
}

}  // namespace zt
