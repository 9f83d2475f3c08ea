// defines: test::gpu, cpu, kNaN, bf16_round, values, host, host_empty, device_empty, device_from,
//          rms, count_bad — the GPU tests' comparison of a CudaBackend entry with the cpu backend's
//          (tests/gpu/test_cuda_backend_ops.cpp, test_cuda_fused_ops.cpp): random inputs rounded to
//          what the GPU sees, GPU outputs poisoned with NaN first, a tolerance relative to the
//          reference's magnitude (count_bad).
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/backend.h"
#include "core/cpu_backend.h"
#include "core/tensor.h"
#include "cuda/backend.h"
#include "cuda/device.h"

namespace zt::test {

inline const double kNaN = std::numeric_limits<double>::quiet_NaN();

// The same skip rule as tests/gpu/main.cpp (which exits 77 without a usable device).
inline Backend& gpu() {
  REQUIRE(cuda_available());
  register_cuda_backend();
  return backend(Device::cuda(0));
}
inline CpuBackend& cpu() { return cpu_backend(); }

inline double bf16_round(double v) { return bf16_to_f32(f32_to_bf16(static_cast<float>(v))); }

// n values of N(mean, sd), none near zero, rounded to bf16 when t is bf16 (what the GPU sees).
inline std::vector<double> values(int64_t n, uint32_t seed, DType t, double mean = 0.0, double sd = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd(mean, sd);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) {
    x = nd(rng);
    if (std::fabs(x) < 1e-2) x = 0.5;
    x = t == DType::bf16 ? bf16_round(x) : static_cast<double>(static_cast<float>(x));
  }
  return v;
}

// A cpu float32 tensor (the reference's input).
inline Tensor host(const std::vector<double>& v, const Shape& s) {
  DefaultDeviceScope cpu_scope(Device::cpu());
  return Tensor::from_vector(v, s, DType::f32, Category::activations);
}

// An uninitialized GPU tensor of shape s and dtype t, at element offset `off` of its buffer
// (off = 1 breaks 16-byte alignment), poisoned with NaN.
inline Tensor device_empty(const Shape& s, DType t, int64_t off = 0) {
  Backend& g = gpu();
  Tensor buf = Tensor::empty({shape_numel(s) + off}, t, Category::activations, g.allocator());
  Tensor v = buf.flat_view(off, s);
  g.fill(buf, t == DType::i32 || t == DType::i64 ? -7.0 : kNaN);
  return v;
}

// The GPU copy (dtype t, offset off) of cpu tensor h.
inline Tensor device_from(const Tensor& h, DType t, int64_t off = 0) {
  Tensor d = device_empty(h.shape(), t, off);
  d.copy_(h);
  return d;
}

inline Tensor host_empty(const Shape& s, DType t = DType::f32) { return Tensor::empty(s, t, Category::activations, cpu_allocator()); }

inline double rms(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return v.empty() ? 0.0 : std::sqrt(s / static_cast<double>(v.size()));
}

// Elements of the GPU tensor d outside the tolerance around the cpu float32 reference ref (see the
// file comment); rtol 0 means bit-equal values.
inline int64_t count_bad(const Tensor& d, const Tensor& ref, DType t, double rtol) {
  const std::vector<double> got = d.to_vector(), want0 = ref.to_vector();
  REQUIRE(got.size() == want0.size());
  const double floor = rms(want0);
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = t == DType::bf16 ? bf16_round(want0[i]) : want0[i];
    double tol = rtol * std::max(std::fabs(w), floor);
    if (rtol > 0 && t == DType::bf16) tol += std::ldexp(std::fabs(w), -7);
    if (!(std::fabs(got[i] - w) <= tol)) {
      if (bad == 0) UNSCOPED_INFO("first mismatch at " << i << ": gpu " << got[i] << ", ref " << w << ", tol " << tol);
      ++bad;
    }
  }
  return bad;
}

}  // namespace zt::test
