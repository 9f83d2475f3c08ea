// defines: 2 Catch2 test cases tagged [cuda_f32_matmul]; helpers: gpu, PrecisionScope, host_randn,
//          host_empty, host_abs, to_gpu and 2 more
//
// CudaBackend's float32 GEMM precision from the table (core/backend.h F32Matmul): highest (IEEE
// fp32, the default) matches the CPU within 1e-5, high (TF32) within 1e-3, of the size of the
// terms (|x| |w|^T, computed by the CPU too: cancellation is no relative-error trap), for linear,
// linear_backward and gemm; and high really changes the computation (other bits than highest).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/cpu_backend.h"
#include "core/tensor.h"
#include "cuda/backend.h"

using namespace zt;

namespace {

CudaBackend& gpu() {
  static const bool registered = (register_cuda_backend(), true);
  (void)registered;
  return static_cast<CudaBackend&>(backend(Device::cuda(0)));
}

// Restores IEEE fp32 when a test ends.
struct PrecisionScope {
  explicit PrecisionScope(F32Matmul p) { gpu().set_f32_matmul_precision(p); }
  ~PrecisionScope() { gpu().set_f32_matmul_precision(F32Matmul::highest); }
};

Tensor host_randn(const Shape& s, uint32_t seed, double sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd(0.0, sd);
  std::vector<double> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = static_cast<float>(nd(rng));
  return Tensor::from_vector(v, s, DType::f32, Category::activations);
}
Tensor host_empty(const Shape& s) { return Tensor::empty(s, DType::f32, Category::activations, cpu_allocator()); }
Tensor host_abs(const Tensor& t) {
  auto v = t.to_vector();
  for (auto& x : v) x = std::fabs(x);
  return Tensor::from_vector(v, t.shape(), DType::f32, Category::activations);
}
Tensor to_gpu(const Tensor& h) { return h.to(Device::cuda(0), Category::activations); }
Tensor gpu_nan(const Shape& s) {
  Tensor g = Tensor::empty(s, DType::f32, Category::activations, gpu().allocator());
  g.fill_(std::nan(""));
  return g;
}

void check_scaled(const Tensor& got, const Tensor& ref, const Tensor& scale, double tol, const std::string& what) {
  const auto g = got.to_vector(), r = ref.to_vector(), s = scale.to_vector();
  REQUIRE(g.size() == r.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::fabs(g[i] - r[i]) <= tol * s[i]) && bad++ == 0) first = i;
  INFO(what << ": " << bad << " of " << g.size() << " out of " << tol << " of scale; first at " << first << ": got "
            << (g.empty() ? 0 : g[first]) << ", want " << (r.empty() ? 0 : r[first]));
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("CudaBackend float32 linear: highest within 1e-5, high (tf32) within 1e-3 of the CPU",
          "[cuda_f32_matmul]") {
  const int64_t M = 65, K = 256, N = 40;
  const Tensor x = host_randn({M, K}, 1, 1.0), w = host_randn({N, K}, 2, 1.0 / 16), b = host_randn({N}, 3, 0.5);
  Tensor yr = host_empty({M, N}), ys = host_empty({M, N});
  cpu_backend().linear(yr, x, w, b);
  cpu_backend().linear(ys, host_abs(x), host_abs(w), host_abs(b));
  const Tensor xg = to_gpu(x), wg = to_gpu(w), bg = to_gpu(b);

  CHECK(gpu().f32_matmul_precision() == F32Matmul::highest);
  Tensor y_ieee = gpu_nan({M, N});
  gpu().linear(y_ieee, xg, wg, bg);
  check_scaled(y_ieee, yr, ys, 1e-5, "linear highest");

  Tensor y_tf32 = gpu_nan({M, N});
  {
    PrecisionScope scope(F32Matmul::high);
    CHECK(gpu().f32_matmul_precision() == F32Matmul::high);
    gpu().linear(y_tf32, xg, wg, bg);
    check_scaled(y_tf32, yr, ys, 1e-3, "linear high (tf32)");
  }
  // TF32 rounds the inputs to 10 mantissa bits: with K = 256 random terms some output differs
  const auto a = y_ieee.to_vector(), t = y_tf32.to_vector();
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) differs |= a[i] != t[i];
  CHECK(differs);
}

TEST_CASE("CudaBackend float32 linear_backward and gemm follow the precision", "[cuda_f32_matmul]") {
  const int64_t M = 48, K = 96, N = 33;
  const Tensor x = host_randn({M, K}, 11, 1.0), w = host_randn({N, K}, 12, 0.1), dy = host_randn({M, N}, 13, 1.0);
  Tensor dxr = host_empty({M, K}), dwr = host_empty({N, K}), dbr = host_empty({N});
  Tensor dxs = host_empty({M, K}), dws = host_empty({N, K}), dbs = host_empty({N});
  cpu_backend().linear_backward(dxr, dwr, dbr, dy, x, w, false);
  cpu_backend().linear_backward(dxs, dws, dbs, host_abs(dy), host_abs(x), host_abs(w), false);
  GemmShape g;
  g.M = M, g.N = N, g.K = K, g.trans_b = true;  // C (M, N) = x w^T
  Tensor cr = Tensor::zeros({M, N}, DType::f32, Category::activations, cpu_allocator()), cs = host_empty({M, N});
  cpu_backend().gemm(g, x, w, cr);
  cs.fill_(0.0);
  cpu_backend().gemm(g, host_abs(x), host_abs(w), cs);
  for (F32Matmul p : {F32Matmul::highest, F32Matmul::high}) {
    PrecisionScope scope(p);
    const double tol = p == F32Matmul::high ? 1e-3 : 1e-5;
    const std::string tag = std::string(" ") + f32_matmul_name(p);
    Tensor dx = gpu_nan({M, K}), dw = gpu_nan({N, K}), db = gpu_nan({N});
    gpu().linear_backward(dx, dw, db, to_gpu(dy), to_gpu(x), to_gpu(w), false);
    check_scaled(dx, dxr, dxs, tol, "linear_backward dx" + tag);
    check_scaled(dw, dwr, dws, tol, "linear_backward dw" + tag);
    check_scaled(db, dbr, dbs, tol, "linear_backward db" + tag);
    Tensor c = gpu_nan({M, N});
    gpu().gemm(g, to_gpu(x), to_gpu(w), c);
    check_scaled(c, cr, cs, tol, "gemm" + tag);
  }
}
