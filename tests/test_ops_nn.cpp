// defines: 20 Catch2 test cases tagged [ops], [nn], [determinism], [errors], [attention]; helpers: randn32,
//          check_close, ref_layernorm, ref_rmsnorm, ref_rope, hf_llama3_inv_freq, ref_attention
//
// ops_nn: layernorm, rmsnorm, rope, causal_attention — gradient checks (float64), forward checks
// against naive references (float32), causality, determinism, and boundary errors.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "core/cpu_backend.h"
#include "core/kernels/attention.h"
#include "core/kernels/norm.h"
#include "core/kernels/rope.h"
#include "gradcheck.h"

using namespace zt;
using zt::test::gradcheck;
using zt::test::randn;

namespace {

Tensor randn32(const Shape& s, uint64_t seed, double std = 1.0) { return randn(s, seed, std, DType::f32); }

void check_close(const std::vector<double>& got, const std::vector<double>& want, double atol, double rtol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << " want " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]));
  }
}

// Naive references in double, on row-major vectors.
std::vector<double> ref_layernorm(const std::vector<double>& x, const std::vector<double>& w,
                                  const std::vector<double>& b, int64_t C, double eps) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / C; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < C; ++i) m += x[r * C + i];
    m /= C;
    for (int64_t i = 0; i < C; ++i) v += (x[r * C + i] - m) * (x[r * C + i] - m);
    v /= C;
    for (int64_t i = 0; i < C; ++i)
      out[r * C + i] = (x[r * C + i] - m) / std::sqrt(v + eps) * w[i] + (b.empty() ? 0.0 : b[i]);
  }
  return out;
}

std::vector<double> ref_rmsnorm(const std::vector<double>& x, const std::vector<double>& w, int64_t C, double eps) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / C; ++r) {
    double ms = 0;
    for (int64_t i = 0; i < C; ++i) ms += x[r * C + i] * x[r * C + i];
    ms /= C;
    for (int64_t i = 0; i < C; ++i) out[r * C + i] = x[r * C + i] / std::sqrt(ms + eps) * w[i];
  }
  return out;
}

// HF's formulation: out = x * cat(cos, cos) + rotate_half(x) * cat(sin, sin),
// rotate_half(x) = cat(-x[D/2:], x[:D/2]).
std::vector<double> ref_rope(const std::vector<double>& x, int64_t B, int64_t T, int64_t H, int64_t D, double theta) {
  std::vector<double> out(x.size());
  const int64_t half = D / 2;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const double* xr = x.data() + ((b * T + t) * H + h) * D;
        double* o = out.data() + ((b * T + t) * H + h) * D;
        for (int64_t e = 0; e < D; ++e) {
          const int64_t d = e % half;
          const double ang = t / std::pow(theta, 2.0 * d / D);
          const double rot = e < half ? -xr[e + half] : xr[e - half];
          o[e] = xr[e] * std::cos(ang) + rot * std::sin(ang);
        }
      }
  return out;
}

// Triple loop with an explicit -inf mask.
std::vector<double> ref_attention(const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, int64_t B, int64_t T, int64_t Hq, int64_t Hkv,
                                  int64_t D) {
  std::vector<double> out(q.size(), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / (Hq / Hkv);
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> s(T);
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < T; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < D; ++e) dot += q[((b * T + i) * Hq + h) * D + e] * k[((b * T + j) * Hkv + hk) * D + e];
          s[j] = j > i ? -std::numeric_limits<double>::infinity() : dot * scale;
          m = std::max(m, s[j]);
        }
        double z = 0;
        for (int64_t j = 0; j < T; ++j) z += (s[j] = std::exp(s[j] - m));
        for (int64_t j = 0; j < T; ++j)
          for (int64_t e = 0; e < D; ++e)
            out[((b * T + i) * Hq + h) * D + e] += s[j] / z * v[((b * T + j) * Hkv + hk) * D + e];
      }
    }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// LayerNorm

TEST_CASE("layernorm: float64 gradients - with and without bias", "[ops][nn]") {
  gradcheck([](const std::vector<Var>& v) { return layernorm(v[0], v[1], v[2]); },
            {randn({2, 3, 7}, 1), randn({7}, 2), randn({7}, 3)});
  gradcheck([](const std::vector<Var>& v) { return layernorm(v[0], v[1], Var(), 1e-3); },
            {randn({4, 5}, 4), randn({5}, 5)});
  // only x differentiated: the weight's gradient is not needed
  gradcheck([](const std::vector<Var>& v) { return layernorm(v[0], v[1], v[2]); },
            {randn({3, 6}, 6), randn({6}, 7), randn({6}, 8)}, {true, false, false});
}

TEST_CASE("layernorm: float32 forward matches a reference", "[ops][nn]") {
  Tensor x = randn32({5, 3, 37}, 11, 2.0), w = randn32({37}, 12), b = randn32({37}, 13);
  Var y = layernorm(Var(x), Var(w), Var(b));
  CHECK(y.shape() == x.shape());
  check_close(y.value().to_vector(), ref_layernorm(x.to_vector(), w.to_vector(), b.to_vector(), 37, 1e-5), 1e-5,
              1e-5);
  Var y2 = layernorm(Var(x), Var(w), Var(), 0.1);
  check_close(y2.value().to_vector(), ref_layernorm(x.to_vector(), w.to_vector(), {}, 37, 0.1), 1e-5, 1e-5);
}

TEST_CASE("layernorm: dweight is the same bits for any thread count", "[ops][nn][determinism]") {
  Tensor x = randn32({300, 48}, 21), w = randn32({48}, 22), b = randn32({48}, 23), g = randn32({300, 48}, 24);
  auto run = [&](int threads) {
    const int prev = omp_get_max_threads();
    omp_set_num_threads(threads);
    Var vw(w.clone(), true), vb(b.clone(), true), vx(x.clone(), true);
    layernorm(vx, vw, vb).backward(g);
    omp_set_num_threads(prev);
    return std::vector<std::vector<double>>{vx.grad().to_vector(), vw.grad().to_vector(), vb.grad().to_vector()};
  };
  const auto a = run(1), c = run(2), d = run(3);
  CHECK(a == c);
  CHECK(a == d);
}

TEST_CASE("layernorm: shape and dtype errors", "[ops][nn][errors]") {
  Var x(randn32({2, 8}, 1)), w(randn32({8}, 2)), b(randn32({8}, 3));
  CHECK_THROWS_WITH(layernorm(x, Var(randn32({7}, 4)), b),
                    Catch::Contains("layernorm") && Catch::Contains("weight") && Catch::Contains("(8,)") &&
                        Catch::Contains("(7,)"));
  CHECK_THROWS_WITH(layernorm(x, w, Var(randn32({2, 8}, 5))), Catch::Contains("layernorm: bias"));
  CHECK_THROWS_WITH(layernorm(x, Var(randn({8}, 6)), b), Catch::Contains("layernorm: weight: expected float32"));
  CHECK_THROWS_WITH(layernorm(x, Var(), b), Catch::Contains("layernorm: weight is undefined"));
  CHECK_THROWS_WITH(layernorm(Var(Tensor::zeros({2, 8}, DType::i32)), w, b),
                    Catch::Contains("layernorm: x: expected a float32, float64 or bfloat16"));
}

// ---------------------------------------------------------------------------------------------
// RMSNorm

TEST_CASE("rmsnorm: float64 gradients", "[ops][nn]") {
  gradcheck([](const std::vector<Var>& v) { return rmsnorm(v[0], v[1]); }, {randn({2, 3, 9}, 31), randn({9}, 32)});
  gradcheck([](const std::vector<Var>& v) { return rmsnorm(v[0], v[1], 0.5); }, {randn({70, 3}, 33), randn({3}, 34)});
}

TEST_CASE("rmsnorm: float32 forward matches a reference - errors", "[ops][nn]") {
  Tensor x = randn32({4, 2, 33}, 41, 3.0), w = randn32({33}, 42);
  Var y = rmsnorm(Var(x), Var(w));
  check_close(y.value().to_vector(), ref_rmsnorm(x.to_vector(), w.to_vector(), 33, 1e-5), 1e-5, 1e-5);
  CHECK_THROWS_WITH(rmsnorm(Var(x), Var(randn32({32}, 43))),
                    Catch::Contains("rmsnorm: weight: expected shape (33,)") && Catch::Contains("got (32,)"));
  CHECK_THROWS_WITH(rmsnorm(Var(randn32({}, 44)), Var(w)), Catch::Contains("rmsnorm: x: expected at least 1"));
}

// ---------------------------------------------------------------------------------------------
// RoPE

TEST_CASE("rope: float64 gradients", "[ops][nn]") {
  gradcheck([](const std::vector<Var>& v) { return rope(v[0]); }, {randn({2, 5, 3, 6}, 51)});
  gradcheck([](const std::vector<Var>& v) { return rope(v[0], 7.0); }, {randn({1, 4, 2, 2}, 52)});
}

TEST_CASE("rope: a rotation by hand - position 0 is the identity", "[ops][nn]") {
  // B=1, T=2, H=1, D=4, theta=100: at t=1, pair (0, 2) turns by 1 rad, pair (1, 3) by 100^(-1/2) = 0.1.
  Tensor x = Tensor::from_vector({5, 6, 7, 8, 1, 2, 3, 4}, {1, 2, 1, 4});
  auto y = rope(Var(x), 100.0).value().to_vector();
  CHECK(y[0] == 5);  // position 0: angle 0
  CHECK(y[1] == 6);
  CHECK(y[2] == 7);
  CHECK(y[3] == 8);
  const double c1 = std::cos(1.0), s1 = std::sin(1.0), c2 = std::cos(0.1), s2 = std::sin(0.1);
  CHECK(y[4] == Approx(1 * c1 - 3 * s1).margin(1e-6));
  CHECK(y[6] == Approx(3 * c1 + 1 * s1).margin(1e-6));
  CHECK(y[5] == Approx(2 * c2 - 4 * s2).margin(1e-6));
  CHECK(y[7] == Approx(4 * c2 + 2 * s2).margin(1e-6));
}

TEST_CASE("rope: float32 forward matches Hugging Face's rotate_half form - norms are kept", "[ops][nn]") {
  const int64_t B = 2, T = 19, H = 3, D = 16;
  Tensor x = randn32({B, T, H, D}, 53);
  auto y = rope(Var(x), 500.0).value().to_vector();
  check_close(y, ref_rope(x.to_vector(), B, T, H, D, 500.0), 1e-5, 1e-5);
  auto xv = x.to_vector();
  for (int64_t r = 0; r < B * T * H; ++r) {  // a rotation keeps each pair's length
    for (int64_t d = 0; d < D / 2; ++d) {
      const double a = std::hypot(xv[r * D + d], xv[r * D + d + D / 2]);
      const double b = std::hypot(y[r * D + d], y[r * D + d + D / 2]);
      CHECK(b == Approx(a).epsilon(1e-5));
    }
  }
}

// transformers' _compute_llama3_parameters (modeling_rope_utils.py), transcribed in its own array
// form and in float64: the reference for Llama 3's scaled frequencies.
std::vector<double> hf_llama3_inv_freq(double base, int64_t dim, double factor, double low_freq_factor,
                                       double high_freq_factor, double old_context_len) {
  std::vector<double> inv_freq(static_cast<size_t>(dim / 2)), out(inv_freq.size());
  for (int64_t i = 0; i < dim / 2; ++i) inv_freq[i] = 1.0 / std::pow(base, static_cast<double>(2 * i) / dim);
  const double low_freq_wavelen = old_context_len / low_freq_factor;
  const double high_freq_wavelen = old_context_len / high_freq_factor;
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const double wavelen = 2 * M_PI / inv_freq[i];
    // inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    double llama = wavelen > low_freq_wavelen ? inv_freq[i] / factor : inv_freq[i];
    const double smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
    const double smoothed = (1 - smooth_factor) * llama / factor + smooth_factor * llama;
    const bool is_medium_freq = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    out[i] = is_medium_freq ? smoothed : llama;
  }
  return out;
}

TEST_CASE("rope llama3: the tables are transformers' scaled frequencies - all three bands, past the original context",
          "[ops][nn]") {
  // Llama 3.2 1B's scaling (theta 500000, D 64, factor 32, low 1, high 4, original 8192) and a
  // small one that puts every band in a 16-wide head.
  struct Case {
    double theta;
    int64_t D;
    RopeScaling s;
  };
  const Case cases[] = {
      {500000.0, 64, {RopeScaling::Type::llama3, 32.0, 1.0, 4.0, 8192}},
      {50.0, 16, {RopeScaling::Type::llama3, 8.0, 1.0, 4.0, 64}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.theta, c.D);
    const std::vector<double> ref = hf_llama3_inv_freq(c.theta, c.D, c.s.factor, c.s.low_freq_factor,
                                                       c.s.high_freq_factor, static_cast<double>(c.s.original_max_position));
    int kept = 0, scaled = 0, between = 0;
    for (int64_t d = 0; d < c.D / 2; ++d) {
      const double plain = std::pow(c.theta, -2.0 * d / c.D), got = rope_inv_freq(d, c.D, RopeParams(c.theta, c.s));
      CHECK(got == Approx(ref[d]).epsilon(1e-14));
      kept += got == plain;
      scaled += got == plain / c.s.factor;
      between += got != plain && got != plain / c.s.factor;
    }
    CHECK(kept > 0);  // the bands each hold a frequency: the test reaches every branch
    CHECK(scaled > 0);
    CHECK(between > 0);
    // The backend's tables at positions past the original context: cos / sin of t * inv_freq.
    const int64_t T = c.s.original_max_position * 3 + 5;
    Tensor cos_t = Tensor::empty({T, c.D / 2}, DType::f64), sin_t = Tensor::empty({T, c.D / 2}, DType::f64);
    cpu_backend().rope_tables(cos_t, sin_t, RopeParams(c.theta, c.s));
    const std::vector<double> cv = cos_t.to_vector(), sv = sin_t.to_vector();
    double worst = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < c.D / 2; ++d) {
        worst = std::max(worst, std::abs(cv[t * (c.D / 2) + d] - std::cos(t * ref[d])));
        worst = std::max(worst, std::abs(sv[t * (c.D / 2) + d] - std::sin(t * ref[d])));
      }
    CHECK(worst < 1e-9);
  }
  // The op with the scaling: float64 gradients (a rotation by other angles: still its own inverse's transpose).
  const RopeParams p(50.0, {RopeScaling::Type::llama3, 8.0, 1.0, 4.0, 64});
  gradcheck([p](const std::vector<Var>& v) { return rope(v[0], p); }, {randn({1, 9, 2, 16}, 54)});
  gradcheck([p](const std::vector<Var>& v) { return rope_packed(v[0], 2, 1, p); }, {randn({1, 9, 64}, 55)});
}

TEST_CASE("rope: shape errors", "[ops][nn][errors]") {
  CHECK_THROWS_WITH(rope(Var(randn32({1, 3, 2, 5}, 1))),
                    Catch::Contains("rope: head dim D must be even") && Catch::Contains("D = 5"));
  CHECK_THROWS_WITH(rope(Var(randn32({3, 2, 4}, 2))), Catch::Contains("rope: x: expected shape (B, T, H, D)"));
  CHECK_THROWS_WITH(rope(Var(randn32({1, 3, 2, 4}, 3)), -1.0), Catch::Contains("rope: theta must be > 0"));
}

// ---------------------------------------------------------------------------------------------
// Causal attention

TEST_CASE("causal_attention: float64 gradients - GQA and MHA", "[ops][nn][attention]") {
  auto f = [](const std::vector<Var>& v) { return causal_attention(v[0], v[1], v[2]); };
  SECTION("GQA Hq=4 Hkv=2, T=5") {
    gradcheck(f, {randn({2, 5, 4, 3}, 61), randn({2, 5, 2, 3}, 62), randn({2, 5, 2, 3}, 63)});
  }
  SECTION("MHA H=2, T=5") {
    gradcheck(f, {randn({1, 5, 2, 4}, 64), randn({1, 5, 2, 4}, 65), randn({1, 5, 2, 4}, 66)});
  }
  SECTION("MQA Hq=3 Hkv=1, T=1") {
    gradcheck(f, {randn({2, 1, 3, 2}, 67), randn({2, 1, 1, 2}, 68), randn({2, 1, 1, 2}, 69)});
  }
  SECTION("GQA Hq=4 Hkv=2, T=70: two query and two key tiles, a partial last tile") {
    gradcheck(f, {randn({1, 70, 4, 3}, 73), randn({1, 70, 2, 3}, 74), randn({1, 70, 2, 3}, 75)});
  }
  SECTION("only k differentiated") {
    gradcheck(f, {randn({1, 4, 2, 2}, 70), randn({1, 4, 1, 2}, 71), randn({1, 4, 1, 2}, 72)}, {false, true, false});
  }
}

TEST_CASE("causal_attention: float32 forward matches a naive masked triple loop", "[ops][nn][attention]") {
  struct Case { int64_t B, T, Hq, Hkv, D; };
  // T = 70 spans two query and two key tiles of the kernel (AttentionTiles: 64 x 64).
  for (Case c : {Case{2, 5, 4, 2, 8}, Case{1, 70, 3, 3, 16}, Case{2, 67, 6, 2, 8}}) {
    INFO("B " << c.B << " T " << c.T << " Hq " << c.Hq << " Hkv " << c.Hkv << " D " << c.D);
    Tensor q = randn32({c.B, c.T, c.Hq, c.D}, 81), k = randn32({c.B, c.T, c.Hkv, c.D}, 82),
           v = randn32({c.B, c.T, c.Hkv, c.D}, 83);
    const auto want = ref_attention(q.to_vector(), k.to_vector(), v.to_vector(), c.B, c.T, c.Hq, c.Hkv, c.D);
    Var y = causal_attention(Var(q, true), Var(k), Var(v));  // saves lse
    CHECK(y.shape() == q.shape());
    check_close(y.value().to_vector(), want, 2e-6, 2e-5);
    NoGradGuard ng;  // the inference path (no lse kept) gives the same bits
    CHECK(causal_attention(Var(q), Var(k), Var(v)).value().to_vector() == y.value().to_vector());
  }
}

TEST_CASE("causal_attention: output at t does not depend on inputs after t", "[ops][nn][attention]") {
  const int64_t B = 2, T = 9, Hq = 4, Hkv = 2, D = 8, t = 3;
  Tensor q = randn32({B, T, Hq, D}, 91), k = randn32({B, T, Hkv, D}, 92), v = randn32({B, T, Hkv, D}, 93);
  auto y0 = causal_attention(Var(q), Var(k), Var(v)).value().to_vector();
  for (Tensor* x : {&q, &k, &v}) x->slice(1, t + 1, T).fill_(100.0);
  auto y1 = causal_attention(Var(q), Var(k), Var(v)).value().to_vector();
  const int64_t row = Hq * D;
  int64_t changed = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t e = 0; e < row; ++e) {
        const int64_t idx = (b * T + i) * row + e;
        if (i <= t) CHECK(y1[idx] == y0[idx]);
        else changed += y1[idx] != y0[idx];
      }
  CHECK(changed > 0);  // the test can fail: later positions did see the change

  // And the gradient: d out[:, :t+1] / d k, v at positions > t is zero.
  Var vq(q, true), vk(k, true), vv(v, true);
  Tensor g = Tensor::zeros({B, T, Hq, D});
  g.slice(1, 0, t + 1).copy_(randn32({B, t + 1, Hq, D}, 94));
  causal_attention(vq, vk, vv).backward(g);
  for (const Var* x : {&vk, &vv})
    for (double e : x->grad().slice(1, t + 1, T).to_vector()) CHECK(e == 0.0);
}

TEST_CASE("attention kernels: every tile size gives the same result", "[ops][nn][attention]") {
  // The op uses AttentionTiles{64, 64}; gradients were checked on T < 64 (one tile) and T = 70.
  // Here the tiled paths (diagonal tiles, partial last tiles, Br != Bc, rows that see none of a
  // key tile) must agree with one tile covering everything, in float64.
  const int64_t B = 2, T = 11, Hq = 4, Hkv = 2, D = 5;
  Tensor q = randn({B, T, Hq, D}, 101), k = randn({B, T, Hkv, D}, 102), v = randn({B, T, Hkv, D}, 103),
         g = randn({B, T, Hq, D}, 104);
  auto run = [&](AttentionTiles tiles) {
    Tensor out = Tensor::empty(q.shape(), DType::f64), lse = Tensor::empty({B, Hq, T}, DType::f64);
    Tensor dq = Tensor::empty(q.shape(), DType::f64), dk = Tensor::empty(k.shape(), DType::f64),
           dv = Tensor::empty(v.shape(), DType::f64);
    attention_forward<double>(out.data<double>(), lse.data<double>(), q.data<double>(), k.data<double>(),
                              v.data<double>(), B, T, Hq, Hkv, D, tiles);
    attention_backward<double>(dq.data<double>(), dk.data<double>(), dv.data<double>(), g.data<double>(),
                               q.data<double>(), k.data<double>(), v.data<double>(), out.data<double>(),
                               lse.data<double>(), B, T, Hq, Hkv, D, tiles);
    return std::vector<std::vector<double>>{out.to_vector(), lse.to_vector(), dq.to_vector(), dk.to_vector(),
                                            dv.to_vector()};
  };
  const auto ref = run({64, 64});
  for (AttentionTiles tiles : {AttentionTiles{1, 1}, AttentionTiles{2, 3}, AttentionTiles{3, 2},
                               AttentionTiles{4, 4}, AttentionTiles{10, 1}, AttentionTiles{1, 10},
                               AttentionTiles{7, 5}}) {
    INFO("tiles " << tiles.q << " x " << tiles.k);
    const auto got = run(tiles);
    for (size_t i = 0; i < ref.size(); ++i) check_close(got[i], ref[i], 1e-12, 1e-12);
  }
}

TEST_CASE("causal_attention: backward is bitwise reproducible", "[ops][nn][attention][determinism]") {
  const int64_t B = 2, T = 40, Hq = 6, Hkv = 2, D = 16;
  Tensor q = randn32({B, T, Hq, D}, 111), k = randn32({B, T, Hkv, D}, 112), v = randn32({B, T, Hkv, D}, 113),
         g = randn32({B, T, Hq, D}, 114);
  auto run = [&] {
    Var vq(q, true), vk(k, true), vv(v, true);
    causal_attention(vq, vk, vv).backward(g);
    return std::vector<std::vector<double>>{vq.grad().to_vector(), vk.grad().to_vector(), vv.grad().to_vector()};
  };
  CHECK(run() == run());
}

TEST_CASE("causal_attention: shape and dtype errors", "[ops][nn][attention][errors]") {
  Var q(randn32({2, 5, 6, 8}, 1)), k(randn32({2, 5, 4, 8}, 2)), v(randn32({2, 5, 4, 8}, 3));
  CHECK_THROWS_WITH(causal_attention(q, k, v), Catch::Contains("causal_attention: query heads Hq = 6") &&
                                                   Catch::Contains("multiple of kv heads Hkv = 4"));
  Var k2(randn32({2, 5, 2, 4}, 4)), v2(randn32({2, 5, 2, 4}, 5));
  CHECK_THROWS_WITH(causal_attention(q, k2, v2), Catch::Contains("causal_attention: k: expected shape (2, 5, Hkv, 8)"));
  Var k3(randn32({2, 5, 2, 8}, 6));
  CHECK_THROWS_WITH(causal_attention(q, k3, v), Catch::Contains("causal_attention: v: expected the shape of k"));
  CHECK_THROWS_WITH(causal_attention(Var(randn32({5, 6, 8}, 7)), k, v),
                    Catch::Contains("causal_attention: q: expected shape (B, T, Hq, D)"));
  CHECK_THROWS_WITH(causal_attention(q, Var(randn({2, 5, 2, 8}, 8)), Var(randn({2, 5, 2, 8}, 9))),
                    Catch::Contains("causal_attention: q, k, v must share one dtype"));
}

TEST_CASE("causal_attention_packed: float64 gradients - GQA and MHA", "[ops][nn][attention]") {
  SECTION("GQA Hq=4 Hkv=2, D=3, T=5") {
    gradcheck([](const std::vector<Var>& v) { return causal_attention_packed(v[0], 4, 2); },
              {randn({2, 5, (4 + 2 * 2) * 3}, 81)});
  }
  SECTION("MHA H=2, D=4, T=70: two query and key tiles") {
    gradcheck([](const std::vector<Var>& v) { return causal_attention_packed(v[0], 2, 2); },
              {randn({1, 70, 6 * 4}, 82)});
  }
}

TEST_CASE("causal_attention_packed: the same bits as causal_attention on the cut-out blocks", "[ops][nn][attention]") {
  const int64_t B = 2, T = 67, Hq = 4, Hkv = 2, D = 8, W = (Hq + 2 * Hkv) * D;
  Tensor qkv = randn32({B, T, W}, 83), g = randn32({B, T, Hq, D}, 84);
  Var packed(qkv.clone(), true);
  Var y = causal_attention_packed(packed, Hq, Hkv);
  y.backward(g);
  auto cut = [&](int64_t c0, int64_t heads) {
    return Var(qkv.slice(2, c0, c0 + heads * D).contiguous().view({B, T, heads, D}), true);
  };
  Var q = cut(0, Hq), k = cut(Hq * D, Hkv), v = cut((Hq + Hkv) * D, Hkv);
  Var y_ref = causal_attention(q, k, v);
  y_ref.backward(g);
  CHECK(y.value().to_vector() == y_ref.value().to_vector());
  // the packed gradient is [dq | dk | dv] along the last dim
  const Tensor dqkv = packed.grad();
  CHECK(dqkv.slice(2, 0, Hq * D).contiguous().to_vector() == q.grad().view({B, T, Hq * D}).to_vector());
  CHECK(dqkv.slice(2, Hq * D, (Hq + Hkv) * D).contiguous().to_vector() == k.grad().view({B, T, Hkv * D}).to_vector());
  CHECK(dqkv.slice(2, (Hq + Hkv) * D, W).contiguous().to_vector() == v.grad().view({B, T, Hkv * D}).to_vector());
}

TEST_CASE("causal_attention_packed: shape errors name the op", "[ops][nn][attention][errors]") {
  CHECK_THROWS_WITH(causal_attention_packed(Var(randn32({2, 5, 4, 8}, 1)), 2, 1),
                    Catch::Contains("causal_attention_packed: qkv: expected shape (B, T, (Hq + 2 Hkv) D)"));
  CHECK_THROWS_WITH(causal_attention_packed(Var(randn32({2, 5, 30}, 2)), 4, 2),
                    Catch::Contains("the last dim 30 is not (Hq + 2 Hkv) = 8 heads"));
  CHECK_THROWS_WITH(causal_attention_packed(Var(randn32({2, 5, 24}, 3)), 3, 2),
                    Catch::Contains("expected Hkv >= 1 dividing Hq"));
}
