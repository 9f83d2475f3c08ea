// defines: 5 Catch2 test cases tagged [attention], [tiled], [determinism], [memory], [bf16]; helpers: Case,
//          Naive, naive, check_rms, Result, run_op and 1 more
//
// The tiled (FlashAttention-2) CPU attention behind cpu_backend().attention / attention_backward
// (core/kernels/attention.h) against a naive float64 implementation written here: forward output,
// the saved row log-sum-exp, and the three gradients, at T below, at and across the 64-row tiles
// (1, 7, 64, 65, 200, 257), for grouped-query (Hq 6 / Hkv 2, 4 / 1) and plain multi-head heads.
// Also: the saved tensor is (B, Hq, T) — O(T), measured on the allocator — and results are
// bitwise the same for 1 and 2 threads and for the training and inference forwards.
//
// Tolerance (float32 kernel vs float64 reference): |got - want| <= 1e-5 * max(|want|, rms(want)),
// the bound the GPU tests use for float32 attention. The kernel reassociates the same sums as the
// reference (online softmax rescaling, GEMM blocking), which costs a few float32 ulps (2^-24 =
// 6e-8) times the length of a sum; a wrong mask, a wrong head mapping or a missing tile is O(1).
// The gradients' scale has an absolute floor, kGradFloor = 0.1 of one term's size (dout . v ~ 1
// with unit-normal inputs), as in tests/gpu: at T = 1, dq and dk are exactly 0 in the reference
// (ds = p (dp - Dl) with p = 1 and Dl = dp) while the kernel's dp (a GEMM) and Dl = dout . out
// (a lane dot) are the same sum in two orders, ~1e-8 apart.
#include <omp.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/cpu_backend.h"
#include "core/memory.h"
#include "gradcheck.h"

using namespace zt;
using zt::test::randn;

namespace {

constexpr double kGradFloor = 0.1;

struct Case {
  int64_t B, T, Hq, Hkv, D;
  std::string str() const {
    return "B " + std::to_string(B) + " T " + std::to_string(T) + " Hq " + std::to_string(Hq) + " Hkv " +
           std::to_string(Hkv) + " D " + std::to_string(D);
  }
};

// Naive causal GQA attention in float64, forward and backward, straight from the definitions:
//   s_ij = q_i . k_j / sqrt(D) (j <= i), lse_i = log sum_j exp(s_ij), p_ij = exp(s_ij - lse_i),
//   o_i = sum_j p_ij v_j;  dp_ij = do_i . v_j, ds_ij = p_ij (dp_ij - sum_l p_il dp_il),
//   dq_i = sum_j ds_ij k_j / sqrt(D), dk_j = sum_i ds_ij q_i / sqrt(D), dv_j = sum_i p_ij do_i.
struct Naive {
  std::vector<double> out, lse, dq, dk, dv;
};
Naive naive(const Case& c, const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
            const std::vector<double>& dout) {
  const int64_t T = c.T, D = c.D;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Naive r{std::vector<double>(q.size()), std::vector<double>(c.B * c.Hq * T), std::vector<double>(q.size()),
          std::vector<double>(k.size()), std::vector<double>(k.size())};
  auto qi = [&](int64_t b, int64_t t, int64_t h) { return ((b * T + t) * c.Hq + h) * D; };
  auto ki = [&](int64_t b, int64_t t, int64_t h) { return ((b * T + t) * c.Hkv + h) * D; };
  std::vector<double> p(T), dp(T);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h) {
      const int64_t hk = h / (c.Hq / c.Hkv);
      for (int64_t i = 0; i < T; ++i) {
        double m = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0, sd = 0;
          for (int64_t e = 0; e < D; ++e) {
            s += q[qi(b, i, h) + e] * k[ki(b, j, hk) + e];
            sd += dout[qi(b, i, h) + e] * v[ki(b, j, hk) + e];
          }
          p[j] = s * scale;
          dp[j] = sd;
          m = std::max(m, p[j]);
        }
        double z = 0;
        for (int64_t j = 0; j <= i; ++j) z += std::exp(p[j] - m);
        const double lse = m + std::log(z);
        r.lse[(b * c.Hq + h) * T + i] = lse;
        double rowdot = 0;
        for (int64_t j = 0; j <= i; ++j) {
          p[j] = std::exp(p[j] - lse);
          rowdot += p[j] * dp[j];
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double ds = p[j] * (dp[j] - rowdot);
          for (int64_t e = 0; e < D; ++e) {
            r.out[qi(b, i, h) + e] += p[j] * v[ki(b, j, hk) + e];
            r.dq[qi(b, i, h) + e] += ds * k[ki(b, j, hk) + e] * scale;
            r.dk[ki(b, j, hk) + e] += ds * q[qi(b, i, h) + e] * scale;
            r.dv[ki(b, j, hk) + e] += p[j] * dout[qi(b, i, h) + e];
          }
        }
      }
    }
  return r;
}

void check_rms(const std::vector<double>& got, const std::vector<double>& want, double tol, const std::string& what,
               double floor = 0.0) {
  REQUIRE(got.size() == want.size());
  double ss = 0;
  for (double w : want) ss += w * w;
  const double rms = std::sqrt(ss / static_cast<double>(std::max<size_t>(1, want.size())));
  size_t bad = 0, worst_i = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - want[i]) / std::max({std::abs(want[i]), rms, floor});
    if (!(err <= tol)) ++bad;  // NaN counts as bad
    if (!(err <= worst)) worst = err, worst_i = i;
  }
  INFO(what << ": " << bad << " of " << got.size() << " beyond " << tol << "; worst " << worst << " at " << worst_i
            << " (got " << got[worst_i] << ", want " << want[worst_i] << ")");
  CHECK(bad == 0);
}

struct Result {
  Tensor out, saved, dq, dk, dv;
};
// The CPU backend's entries, the way autograd's causal_attention calls them.
Result run_op(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout) {
  CpuBackend& be = cpu_backend();
  Result r{Tensor::empty(q.shape(), q.dtype()), {}, Tensor::empty(q.shape(), q.dtype()),
           Tensor::empty(k.shape(), q.dtype()), Tensor::empty(k.shape(), q.dtype())};
  r.saved = be.attention(r.out, q, k, v, /*keep_for_backward=*/true);
  be.attention_backward(r.dq, r.dk, r.dv, dout, q, k, v, r.out, r.saved);
  return r;
}

bool same_bits(const Tensor& a, const Tensor& b) { return a.to_vector() == b.to_vector(); }

}  // namespace

TEST_CASE("tiled attention: float32 forward and saved lse and backward match a naive float64 implementation",
          "[attention][tiled]") {
  constexpr double kTol = 1e-5;
  uint64_t seed = 500;
  for (int64_t T : {1, 7, 64, 65, 200, 257})
    for (Case c : {Case{2, T, 6, 2, 16}, Case{1, T, 4, 1, 32}, Case{1, T, 3, 3, 24}}) {
      const std::string what = c.str();
      const Tensor q = randn({c.B, c.T, c.Hq, c.D}, ++seed, 1.0, DType::f32),
                   k = randn({c.B, c.T, c.Hkv, c.D}, ++seed, 1.0, DType::f32),
                   v = randn({c.B, c.T, c.Hkv, c.D}, ++seed, 1.0, DType::f32),
                   dout = randn({c.B, c.T, c.Hq, c.D}, ++seed, 1.0, DType::f32);
      const Result r = run_op(q, k, v, dout);
      REQUIRE(r.saved.defined());
      CHECK(r.saved.shape() == Shape{c.B, c.Hq, c.T});  // B * Hq * T elements: no (T, T) term
      CHECK(r.saved.numel() == c.B * c.Hq * c.T);
      CHECK(r.saved.dtype() == DType::f32);
      const Naive want = naive(c, q.to_vector(), k.to_vector(), v.to_vector(), dout.to_vector());
      check_rms(r.out.to_vector(), want.out, kTol, what + " out");
      // lse ~ log T: its own magnitude (at least 1) is the scale, as in tests/gpu for the GPU's
      std::vector<double> lse_scale(want.lse.size());
      const auto got_lse = r.saved.to_vector();
      size_t bad_lse = 0;
      for (size_t i = 0; i < want.lse.size(); ++i)
        bad_lse += !(std::abs(got_lse[i] - want.lse[i]) <= kTol * std::max(1.0, std::abs(want.lse[i])));
      INFO(what << " lse");
      CHECK(bad_lse == 0);
      check_rms(r.dq.to_vector(), want.dq, kTol, what + " dq", kGradFloor);
      check_rms(r.dk.to_vector(), want.dk, kTol, what + " dk", kGradFloor);
      check_rms(r.dv.to_vector(), want.dv, kTol, what + " dv", kGradFloor);
    }
}

TEST_CASE("tiled attention: float64 matches the naive implementation to float64 rounding", "[attention][tiled]") {
  uint64_t seed = 700;
  for (Case c : {Case{1, 65, 4, 2, 8}, Case{2, 130, 2, 1, 5}}) {
    const Tensor q = randn({c.B, c.T, c.Hq, c.D}, ++seed), k = randn({c.B, c.T, c.Hkv, c.D}, ++seed),
                 v = randn({c.B, c.T, c.Hkv, c.D}, ++seed), dout = randn({c.B, c.T, c.Hq, c.D}, ++seed);
    const Result r = run_op(q, k, v, dout);
    CHECK(r.saved.dtype() == DType::f64);
    const Naive want = naive(c, q.to_vector(), k.to_vector(), v.to_vector(), dout.to_vector());
    check_rms(r.out.to_vector(), want.out, 1e-12, c.str() + " out");
    check_rms(r.saved.to_vector(), want.lse, 1e-12, c.str() + " lse");
    check_rms(r.dq.to_vector(), want.dq, 1e-12, c.str() + " dq");
    check_rms(r.dk.to_vector(), want.dk, 1e-12, c.str() + " dk");
    check_rms(r.dv.to_vector(), want.dv, 1e-12, c.str() + " dv");
  }
}

TEST_CASE("tiled attention: the same bits for 1 and 2 threads and for training and inference forwards",
          "[attention][tiled][determinism]") {
  const Case c{2, 150, 6, 2, 16};
  const Tensor q = randn({c.B, c.T, c.Hq, c.D}, 81, 1.0, DType::f32),
               k = randn({c.B, c.T, c.Hkv, c.D}, 82, 1.0, DType::f32),
               v = randn({c.B, c.T, c.Hkv, c.D}, 83, 1.0, DType::f32),
               dout = randn({c.B, c.T, c.Hq, c.D}, 84, 1.0, DType::f32);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const Result one = run_op(q, k, v, dout);
  omp_set_num_threads(2);
  const Result two = run_op(q, k, v, dout);
  omp_set_num_threads(threads);
  CHECK(same_bits(one.out, two.out));
  CHECK(same_bits(one.saved, two.saved));
  CHECK(same_bits(one.dq, two.dq));
  CHECK(same_bits(one.dk, two.dk));
  CHECK(same_bits(one.dv, two.dv));
  Tensor out = Tensor::empty(q.shape(), DType::f32);
  CHECK_FALSE(cpu_backend().attention(out, q, k, v, /*keep_for_backward=*/false).defined());
  CHECK(same_bits(out, two.out));
}

TEST_CASE("tiled attention: memory is O(B H T) not O(B H T^2)", "[attention][tiled][memory]") {
  // T = 1024, B = 1, Hq = Hkv = 2, D = 16: the P of the old kernel would be 2 * 1024^2 * 4 bytes
  // = 8 MiB. The activation kept (lse) is 2 * 1024 * 4 = 8 KiB, and the backward's scratch is a
  // few (64, 64) tiles per thread: the peaks of both categories stay far below one (T, T) matrix.
  const Case c{1, 1024, 2, 2, 16};
  const Tensor q = randn({c.B, c.T, c.Hq, c.D}, 91, 1.0, DType::f32),
               k = randn({c.B, c.T, c.Hkv, c.D}, 92, 1.0, DType::f32),
               v = randn({c.B, c.T, c.Hkv, c.D}, 93, 1.0, DType::f32),
               dout = randn({c.B, c.T, c.Hq, c.D}, 94, 1.0, DType::f32);
  Tensor out = Tensor::empty(q.shape(), DType::f32), dq = Tensor::empty(q.shape(), DType::f32),
         dk = Tensor::empty(k.shape(), DType::f32), dv = Tensor::empty(k.shape(), DType::f32);
  Allocator& a = cpu_allocator();
  const MemoryStats before = a.stats();
  a.reset_peaks();
  const Tensor saved = cpu_backend().attention(out, q, k, v, true);
  cpu_backend().attention_backward(dq, dk, dv, dout, q, k, v, out, saved);
  const MemoryStats after = a.stats();
  const int64_t act = after.max(Category::activations) - before.cur(Category::activations);
  const int64_t ws = after.max(Category::workspace) - before.cur(Category::workspace);
  const int64_t one_P = c.B * c.Hq * c.T * c.T * 4;
  INFO("activations +" << act << " B, workspace peak +" << ws << " B, one P " << one_P << " B");
  CHECK(act == c.B * c.Hq * c.T * 4);  // exactly the lse
  CHECK(ws < one_P / 16);
}

TEST_CASE("tiled attention: bfloat16 on the cpu rounds only the outputs (Dl from a float32 out)",
          "[attention][tiled][bf16]") {
  // bf16 runs the float32 kernel on float32 copies and rounds dq, dk, dv once (core/cpu_bf16.h).
  // Reference: the float32 op on the same (bf16-representable) values, rounded nowhere. One
  // rounding to bf16 is at most 2^-9 = 2e-3 relative; taking Dl = rowsum(dout * out) from the
  // stored bf16 out instead costs ~1e-2 in dq and dk (the cancellation in dP - Dl), which the
  // 4e-3 bound catches.
  const Case c{2, 70, 4, 2, 32};
  const auto make = [&](const Shape& s, uint64_t seed) {
    Tensor t = randn(s, seed, 1.0, DType::bf16);
    return std::pair{t, t.to(DType::f32)};
  };
  const auto [q, q32] = make({c.B, c.T, c.Hq, c.D}, 601);
  const auto [k, k32] = make({c.B, c.T, c.Hkv, c.D}, 602);
  const auto [v, v32] = make({c.B, c.T, c.Hkv, c.D}, 603);
  const auto [dout, dout32] = make({c.B, c.T, c.Hq, c.D}, 604);
  const Result lo = run_op(q, k, v, dout), ref = run_op(q32, k32, v32, dout32);
  CHECK(lo.saved.dtype() == DType::f32);  // the statistics stay float32, as on a GPU
  check_rms(lo.out.to_vector(), ref.out.to_vector(), 4e-3, "bf16 out");
  check_rms(lo.dq.to_vector(), ref.dq.to_vector(), 4e-3, "bf16 dq", kGradFloor);
  check_rms(lo.dk.to_vector(), ref.dk.to_vector(), 4e-3, "bf16 dk", kGradFloor);
  check_rms(lo.dv.to_vector(), ref.dv.to_vector(), 4e-3, "bf16 dv", kGradFloor);
}
