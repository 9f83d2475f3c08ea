// defines: 5 Catch2 test cases tagged [cudnn_attention]; helpers: gpu, ImplScope, host_randn_bf16,
//          host_empty, to_gpu_bf16, gpu_nan and 7 more
//
// cuDNN's scaled-dot-product attention behind CudaBackend::attention (cuda/cudnn_attention.h,
// cuda/backend_attention.cpp's rule): forced on with set_attention_impl(cudnn) and checked against
// cpu_backend() and against our own kernel (set_attention_impl(own)); GQA when cuDNN takes it; the
// `saved` statistics interchangeable between the two implementations; refusals with reasons.
// In a build without cuDNN the same file checks that the backend says so and that forcing cuDNN
// is a clear error.
//
// bfloat16 only (cuDNN has no float32 flash attention): inputs rounded to bf16 on the host, the
// CPU reference in float32 on those exact values. Tolerance: |got - ref| <= 1e-2 * max |ref| over
// the tensor (bf16 outputs carry 2^-9 relative rounding; cuDNN's P is rounded to bf16 before the
// second GEMM, like FlashAttention). Every output is poisoned with NaN first (NaN never passes).
// Saved statistics (float32): within 1e-4 * max(1, |lse|) of a float64 host computation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/cpu_backend.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "cuda/backend.h"
#include "tests/gpu/host_lse.h"  // defines: zt::test::host_lse
#if defined(ZT_HAVE_CUDNN)
#include "cuda/cudnn_attention.h"
#endif

using namespace zt;

namespace {

CudaBackend& gpu() {
  static const bool registered = (register_cuda_backend(), true);
  (void)registered;
  return static_cast<CudaBackend&>(backend(Device::cuda(0)));
}

// Restores the automatic choice when a test ends (pass or fail).
struct ImplScope {
  explicit ImplScope(CudaBackend::AttentionImpl i) { gpu().set_attention_impl(i); }
  ~ImplScope() { gpu().set_attention_impl(CudaBackend::AttentionImpl::automatic); }
};

Tensor host_randn_bf16(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = bf16_to_f32(f32_to_bf16(static_cast<float>(nd(rng))));
  return Tensor::from_vector(v, s, DType::f32, Category::activations);
}
Tensor host_empty(const Shape& s) { return Tensor::empty(s, DType::f32, Category::activations, cpu_allocator()); }
Tensor to_gpu_bf16(const Tensor& h) { return h.to(DType::bf16).to(Device::cuda(0), Category::activations); }
Tensor gpu_nan(const Shape& s, DType t) {
  Tensor g = Tensor::empty(s, t, Category::activations, gpu().allocator());
  g.fill_(std::nan(""));
  return g;
}

// |got - ref| <= tol * max |ref| everywhere (NaN fails)
void check_maxrel(const Tensor& got, const Tensor& ref, double tol, const std::string& what) {
  const auto g = got.to_vector(), r = ref.to_vector();
  REQUIRE(g.size() == r.size());
  double mx = 0;
  for (double x : r) mx = std::max(mx, std::fabs(x));
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double e = std::fabs(g[i] - r[i]);
    if (!(e <= tol * mx) && bad++ == 0) first = i;
    if (!(e <= worst)) worst = e;
  }
  INFO(what << ": " << bad << " of " << g.size() << " beyond " << tol << " * max|ref| = " << tol * mx << "; first at "
            << first << ": got " << (g.empty() ? 0 : g[first]) << ", want " << (r.empty() ? 0 : r[first])
            << "; worst |err| " << worst);
  CHECK(bad == 0);
}
bool same_bits(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector(), y = b.to_vector();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i])) return false;
  return true;
}

struct Case {
  int64_t B, T, Hq, Hkv, D;
  std::string str() const {
    return "B " + std::to_string(B) + " T " + std::to_string(T) + " Hq " + std::to_string(Hq) + " Hkv " +
           std::to_string(Hkv) + " D " + std::to_string(D);
  }
};

struct Outputs {
  Tensor out, saved, dq, dk, dv;
};
Outputs run_gpu(const Case& c, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout) {
  const Shape qs{c.B, c.T, c.Hq, c.D}, ks{c.B, c.T, c.Hkv, c.D};
  Outputs o;
  o.out = gpu_nan(qs, DType::bf16);
  o.saved = gpu().attention(o.out, q, k, v, true);
  o.dq = gpu_nan(qs, DType::bf16), o.dk = gpu_nan(ks, DType::bf16), o.dv = gpu_nan(ks, DType::bf16);
  gpu().attention_backward(o.dq, o.dk, o.dv, dout, q, k, v, o.out, o.saved);
  return o;
}

[[maybe_unused]] void run_case(const Case& c, uint32_t seed) {
  const std::string what = "cudnn attention " + c.str();
  const Shape qs{c.B, c.T, c.Hq, c.D}, ks{c.B, c.T, c.Hkv, c.D};
  const Tensor q = host_randn_bf16(qs, seed), k = host_randn_bf16(ks, seed + 1), v = host_randn_bf16(ks, seed + 2),
               dout = host_randn_bf16(qs, seed + 3);
  const Tensor qg = to_gpu_bf16(q), kg = to_gpu_bf16(k), vg = to_gpu_bf16(v), dg = to_gpu_bf16(dout);
  const double tol = 1e-2;

  Outputs dnn;
  {
    ImplScope scope(CudaBackend::AttentionImpl::cudnn);
    REQUIRE(gpu().attention_impl_name(DType::bf16, c.B, c.T, c.Hq, c.Hkv, c.D).rfind("cudnn", 0) == 0);
    dnn = run_gpu(c, qg, kg, vg, dg);
  }
  // against the CPU (float32 on the same bf16 values)
  Tensor orf = host_empty(qs);
  const Tensor cpu_lse = cpu_backend().attention(orf, q, k, v, true);
  Tensor dqr = host_empty(qs), dkr = host_empty(ks), dvr = host_empty(ks);
  cpu_backend().attention_backward(dqr, dkr, dvr, dout, q, k, v, orf, cpu_lse);
  check_maxrel(dnn.out, orf, tol, what + " (out vs cpu)");
  check_maxrel(dnn.dq, dqr, tol, what + " (dq vs cpu)");
  check_maxrel(dnn.dk, dkr, tol, what + " (dk vs cpu)");
  check_maxrel(dnn.dv, dvr, tol, what + " (dv vs cpu)");
  REQUIRE(dnn.saved.defined());
  CHECK(dnn.saved.dtype() == DType::f32);
  CHECK(dnn.saved.shape() == Shape{c.B, c.Hq, c.T});
  {
    const auto got = dnn.saved.to_vector(), ref = zt::test::host_lse(c.B, c.T, c.Hq, c.Hkv, c.D, q, k);
    size_t bad = 0;
    for (size_t i = 0; i < ref.size(); ++i)
      if (!(std::fabs(got[i] - ref[i]) <= 1e-4 * std::max(1.0, std::fabs(ref[i])))) ++bad;
    INFO(what << " (saved statistics = natural-log row log-sum-exp): " << bad << " of " << ref.size() << " off");
    CHECK(bad == 0);
  }

  // against our kernel
  Outputs own;
  {
    ImplScope scope(CudaBackend::AttentionImpl::own);
    own = run_gpu(c, qg, kg, vg, dg);
    // our backward from cuDNN's forward (out and saved statistics): the formats are one
    Tensor dq2 = gpu_nan(qs, DType::bf16), dk2 = gpu_nan(ks, DType::bf16), dv2 = gpu_nan(ks, DType::bf16);
    gpu().attention_backward(dq2, dk2, dv2, dg, qg, kg, vg, dnn.out, dnn.saved);
    check_maxrel(dq2, dqr, tol, what + " (our dq from cuDNN's saved)");
    check_maxrel(dk2, dkr, tol, what + " (our dk from cuDNN's saved)");
    check_maxrel(dv2, dvr, tol, what + " (our dv from cuDNN's saved)");
  }
  check_maxrel(dnn.out, own.out, tol, what + " (out: cudnn vs own)");
  check_maxrel(dnn.saved, own.saved, 1e-4, what + " (saved: cudnn vs own)");
  check_maxrel(dnn.dq, own.dq, tol, what + " (dq: cudnn vs own)");
  check_maxrel(dnn.dk, own.dk, tol, what + " (dk: cudnn vs own)");
  check_maxrel(dnn.dv, own.dv, tol, what + " (dv: cudnn vs own)");

  // determinism: the deterministic plans give the same bits again
  {
    ImplScope scope(CudaBackend::AttentionImpl::cudnn);
    const Outputs again = run_gpu(c, qg, kg, vg, dg);
    CHECK(same_bits(dnn.out, again.out));
    CHECK(same_bits(dnn.dq, again.dq));
    CHECK(same_bits(dnn.dk, again.dk));
    CHECK(same_bits(dnn.dv, again.dv));
  }
}

// The packed projection qkv (B, T, (Hq + 2 Hkv) D), GPT-2's c_attn: attention_packed and its
// backward on cuda:0 with cuDNN forced — q, k, v read in place and dq, dk, dv written into dqkv's
// blocks through strides — against the CPU's (blocks copied out, float32 kernel), block by block,
// and against our kernel on the GPU (set_attention_impl(own): the copies); the same bits again.
[[maybe_unused]] void run_packed_case(const Case& c, uint32_t seed) {
  const std::string what = "cudnn packed attention " + c.str();
  const int64_t nq = c.Hq * c.D, nkv = c.Hkv * c.D, W = nq + 2 * nkv;
  const Shape ps{c.B, c.T, W}, qs{c.B, c.T, c.Hq, c.D};
  const Tensor x = host_randn_bf16(ps, seed), dout = host_randn_bf16(qs, seed + 3);
  const Tensor xg = to_gpu_bf16(x), dg = to_gpu_bf16(dout);
  Tensor orf = host_empty(qs), dxr = host_empty(ps);
  const Tensor lse = cpu_backend().attention_packed(orf, x, c.Hq, c.Hkv, true);
  cpu_backend().attention_packed_backward(dxr, dout, x, orf, lse, c.Hq, c.Hkv);
  auto run = [&](CudaBackend::AttentionImpl impl) {
    ImplScope scope(impl);
    Outputs o;
    o.out = gpu_nan(qs, DType::bf16);
    o.dq = gpu_nan(ps, DType::bf16);  // dqkv: every element must be written
    o.saved = gpu().attention_packed(o.out, xg, c.Hq, c.Hkv, true);
    gpu().attention_packed_backward(o.dq, dg, xg, o.out, o.saved, c.Hq, c.Hkv);
    return o;
  };
  const double tol = 1e-2;
  auto check_blocks = [&](const Tensor& got, const Tensor& ref, const std::string& vs) {
    const char* names[] = {"dq", "dk", "dv"};
    const int64_t at[] = {0, nq, nq + nkv, W};
    for (int b = 0; b < 3; ++b)
      check_maxrel(got.slice(2, at[b], at[b + 1]).contiguous(), ref.slice(2, at[b], at[b + 1]).contiguous(), tol,
                   what + " (" + names[b] + " " + vs + ")");
  };
  const Outputs dnn = run(CudaBackend::AttentionImpl::cudnn);
  check_maxrel(dnn.out, orf, tol, what + " (out vs cpu)");
  check_maxrel(dnn.saved, lse, 1e-4, what + " (saved vs cpu)");
  check_blocks(dnn.dq, dxr, "vs cpu");
  const Outputs own = run(CudaBackend::AttentionImpl::own);
  check_maxrel(dnn.out, own.out, tol, what + " (out: cudnn vs own)");
  check_blocks(dnn.dq, own.dq, "cudnn vs own");
  const Outputs again = run(CudaBackend::AttentionImpl::cudnn);
  CHECK(same_bits(dnn.out, again.out));
  CHECK(same_bits(dnn.dq, again.dq));
}

}  // namespace

#if defined(ZT_HAVE_CUDNN)

TEST_CASE("cuDNN attention on a packed projection: q, k, v read in place, dqkv written in place", "[cudnn_attention]") {
  // MHA as GPT-2 (T not a multiple of 64 too); GQA where cuDNN takes it
  const Case cases[] = {{2, 64, 4, 4, 64}, {1, 100, 2, 2, 128}, {2, 64, 8, 2, 64}};
  CudnnAttention probe(gpu().cuda_alloc());
  uint32_t seed = 9000;
  for (const auto& c : cases) {
    std::string why;
    const CudnnAttnShape shape{c.B, c.T, c.Hq, c.Hkv, c.D, DType::bf16, (c.Hq + 2 * c.Hkv) * c.D};
    if (!probe.supported(shape, &why)) {
      WARN("cuDNN " << CudnnAttention::version_string() << " does not take " << shape.str() << ": " << why);
      CHECK(c.Hq != c.Hkv);  // MHA on packed rows must run (GPT-2's path)
      continue;
    }
    run_packed_case(c, seed += 13);
  }
}

TEST_CASE("cuDNN attention (bf16, MHA) against the CPU and our kernel", "[cudnn_attention]") {
  INFO("cuDNN " << CudnnAttention::version_string());
  // T = 64 (a tile), 100 and 37 (not multiples of 64), D = 64, 128, 32
  const Case cases[] = {{2, 64, 4, 4, 64}, {1, 100, 2, 2, 128}, {2, 37, 3, 3, 32}};
  uint32_t seed = 7000;
  for (const auto& c : cases) run_case(c, seed += 13);
}

TEST_CASE("cuDNN attention with grouped-query heads (if cuDNN takes them)", "[cudnn_attention]") {
  const Case cases[] = {{2, 64, 8, 2, 64}, {1, 50, 4, 1, 64}};
  CudnnAttention probe(gpu().cuda_alloc());
  uint32_t seed = 8000;
  for (const auto& c : cases) {
    std::string why;
    if (!probe.supported({c.B, c.T, c.Hq, c.Hkv, c.D, DType::bf16}, &why)) {
      WARN("cuDNN " << CudnnAttention::version_string() << " does not take GQA " << c.str() << ": " << why);
      const std::string name = gpu().attention_impl_name(DType::bf16, c.B, c.T, c.Hq, c.Hkv, c.D);
      CHECK(name.rfind("own: ", 0) == 0);  // automatic falls back, visibly
      continue;
    }
    run_case(c, seed += 13);
  }
}

TEST_CASE("cuDNN attention: supported() refuses what cuDNN cannot do, with the reason", "[cudnn_attention]") {
  CudnnAttention dnn(gpu().cuda_alloc());
  std::string why;
  CHECK_FALSE(dnn.supported({1, 16, 2, 2, 64, DType::f32}, &why));
  CHECK_THAT(why, Catch::Contains("float32") && Catch::Contains("bfloat16"));
  CHECK_FALSE(dnn.supported({1, 16, 2, 2, 12, DType::bf16}, &why));
  CHECK_THAT(why, Catch::Contains("D % 8 == 0"));
  CHECK_FALSE(dnn.supported({1, 16, 2, 2, 136, DType::bf16}, &why));
  CHECK_THAT(why, Catch::Contains("D <= 128"));
  CHECK(dnn.supported({1, 16, 2, 2, 64, DType::bf16}, &why));

  // the backend: automatic runs ours for float32 and says why; forcing cuDNN there is an error
  CHECK_THAT(gpu().attention_impl_name(DType::f32, 1, 16, 2, 2, 64), Catch::StartsWith("own: ") &&
                                                                         Catch::Contains("float32"));
  CHECK_THAT(gpu().attention_impl_name(DType::bf16, 1, 16, 2, 2, 64), Catch::StartsWith("cudnn "));
  const Shape s{1, 16, 2, 64};
  const Tensor q = Tensor::zeros(s, DType::f32, Category::activations, gpu().allocator());
  Tensor o = gpu_nan(s, DType::f32);
  {
    ImplScope scope(CudaBackend::AttentionImpl::cudnn);
    CHECK_THROWS_WITH(gpu().attention(o, q, q, q, true),
                      Catch::Contains("set_attention_impl(cudnn)") && Catch::Contains("float32"));
  }
  {
    ImplScope scope(CudaBackend::AttentionImpl::own);
    CHECK_THAT(gpu().attention_impl_name(DType::bf16, 1, 16, 2, 2, 64), Catch::Contains("forced"));
  }
}

#else  // a build without cuDNN

TEST_CASE("without cuDNN the backend runs our kernel and says so", "[cudnn_attention]") {
  CHECK_FALSE(CudaBackend::cudnn_built());
  CHECK_THAT(gpu().attention_impl_name(DType::bf16, 1, 16, 2, 2, 64),
             Catch::StartsWith("own: ") && Catch::Contains("no cuDNN"));
  const Shape s{1, 16, 2, 64};
  const Tensor q = to_gpu_bf16(host_randn_bf16(s, 1));
  Tensor o = gpu_nan(s, DType::bf16);
  ImplScope scope(CudaBackend::AttentionImpl::cudnn);
  CHECK_THROWS_WITH(gpu().attention(o, q, q, q, true), Catch::Contains("no cuDNN"));
}

#endif
