// defines: 4 Catch2 test cases tagged [cpu_adam]; helpers: IsaGuard, State, random_state, regrad, args,
//          update and 3 more
//
// cpu_adam: the run-time-dispatched CPU AdamW kernel (core/kernels/adamw.h). Its two float32
// paths (portable, avx2_fma) give the same bits on random data, tails included; both agree with
// a float64 evaluation of the header's formula from the same float inputs to a few ulp; the
// result does not depend on the thread count or on shard boundaries; forcing an unavailable path
// or an unknown ZT_CPU_ADAM value is a clear error.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/kernels/adamw.h"
#include "tests/skip.h"  // defines: ZT_SKIP

using namespace zt;

namespace {

// Restores the process-wide path (and the OpenMP thread count) a test changed.
struct IsaGuard {
  CpuAdamIsa saved = cpu_adam_isa();
  int threads = omp_get_max_threads();
  ~IsaGuard() {
    set_cpu_adam_isa(saved);
    omp_set_num_threads(threads);
  }
};

// p, g, m, v of n elements. m and v look like a few steps in: m ~ g-sized with either sign,
// v >= 0 ~ g^2-sized, some exact zeros (a parameter whose gradient was always 0) and a spread of
// magnitudes so the eps term and the decay term both matter somewhere.
struct State {
  std::vector<float> p, g, m, v;
};

State random_state(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-6, 1);
  State s;
  s.p.resize(n), s.g.resize(n), s.m.resize(n), s.v.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const float gs = std::ldexp(1.0f, 2 * scale(rng));  // 2^-12 .. 2^2
    s.p[i] = nd(rng);
    s.g[i] = gs * nd(rng);
    s.m[i] = (i % 7 == 3) ? 0.0f : 0.5f * gs * nd(rng);
    s.v[i] = (i % 7 == 3) ? 0.0f : gs * gs * std::abs(nd(rng));
  }
  return s;
}

// New gradients for step t (same spread as random_state).
void regrad(State& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-6, 1);
  for (float& x : s.g) x = std::ldexp(1.0f, 2 * scale(rng)) * nd(rng);
}

AdamWArgs args(int64_t step, bool decay) {
  AdamWArgs h;
  h.lr = 3e-3;
  h.beta1 = 0.9;
  h.beta2 = 0.95;
  h.eps = 1e-6;  // large enough to matter for the small-v elements
  h.weight_decay = 0.1;
  h.step = step;
  h.decay = decay;
  return h;
}

void update(State& s, const AdamWArgs& h, int64_t b = 0, int64_t e = -1) {
  if (e < 0) e = static_cast<int64_t>(s.p.size());
  adamw_update<float>(s.p.data() + b, s.g.data() + b, s.m.data() + b, s.v.data() + b, e - b, h);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void check_same(const State& a, const State& b) {
  CHECK(same_bits(a.p, b.p));
  CHECK(same_bits(a.m, b.m));
  CHECK(same_bits(a.v, b.v));
}

std::vector<CpuAdamIsa> available_paths() {
  std::vector<CpuAdamIsa> r{CpuAdamIsa::portable};
  if (cpu_adam_isa_available(CpuAdamIsa::avx2_fma)) r.push_back(CpuAdamIsa::avx2_fma);
  return r;
}

}  // namespace

TEST_CASE("cpu adam portable and avx2_fma paths give the same bits", "[cpu_adam]") {
  if (!cpu_adam_isa_available(CpuAdamIsa::avx2_fma)) {
    ZT_SKIP("this CPU has no AVX2+FMA: only the portable path exists, nothing to compare");
  }
  IsaGuard guard;
  std::vector<int64_t> sizes;
  for (int64_t n = 1; n <= 40; ++n) sizes.push_back(n);
  sizes.push_back(100003);  // multi-threaded, with a tail of 3 after the last 8-block
  for (int64_t n : sizes) {
    for (bool decay : {true, false}) {
      INFO("n = " << n << ", decay " << decay);
      State a = random_state(n, 1000 + static_cast<uint32_t>(n)), b = a;
      for (int64_t t = 1; t <= 3; ++t) {
        regrad(a, 77 * static_cast<uint32_t>(t) + static_cast<uint32_t>(n));
        b.g = a.g;
        set_cpu_adam_isa(CpuAdamIsa::portable);
        update(a, args(t, decay));
        set_cpu_adam_isa(CpuAdamIsa::avx2_fma);
        update(b, args(t, decay));
        INFO("step " << t);
        check_same(a, b);
      }
    }
  }
  // The comparison can fail: the paths would differ if either dropped an FMA (checked directly:
  // the plain mul-then-subtract of the last line differs from the fused one on this data).
  const State s = random_state(4096, 5);
  const AdamWArgs h = args(1, true);
  const float keep = static_cast<float>(1.0 - h.lr * h.weight_decay);
  int differ = 0;
  for (size_t i = 0; i < s.p.size(); ++i) {
    const float upd = 1e-3f * s.m[i];
    volatile float prod = s.p[i] * keep;  // rounded on its own
    differ += (prod - upd) != std::fma(s.p[i], keep, -upd);
  }
  CHECK(differ > 0);
}

TEST_CASE("cpu adam matches a float64 evaluation of the formula", "[cpu_adam]") {
  IsaGuard guard;
  const int64_t n = 1000;
  for (CpuAdamIsa isa : available_paths()) {
    set_cpu_adam_isa(isa);
    for (bool decay : {true, false}) {
      INFO("path " << cpu_adam_isa_name(isa) << ", decay " << decay);
      State s = random_state(n, 42);
      double moved = 0;
      for (int64_t t = 1; t <= 4; ++t) {
        regrad(s, 900 + static_cast<uint32_t>(t));
        const State in = s;
        const AdamWArgs h = args(t, decay);
        update(s, h);
        // torch.optim.AdamW on the float inputs, every operation in double.
        const double bc1 = 1 - std::pow(h.beta1, t), bc2 = 1 - std::pow(h.beta2, t);
        const double keep = decay ? 1 - h.lr * h.weight_decay : 1.0;
        int bad = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double g = in.g[i];
          const double m1 = h.beta1 * in.m[i], m2 = (1 - h.beta1) * g;
          const double v1 = h.beta2 * in.v[i], v2 = (1 - h.beta2) * g * g;
          const double m = m1 + m2, v = v1 + v2;
          const double upd = (h.lr / bc1) * m / (std::sqrt(v) / std::sqrt(bc2) + h.eps);
          const double p = in.p[i] * keep - upd;
          // A few float ulps (2^-24 = 6e-8) of the terms' sizes: 5 roundings in the chain to upd.
          const double rtol = 6e-7;
          bad += std::abs(s.m[i] - m) > rtol * (std::abs(m1) + std::abs(m2));
          bad += std::abs(s.v[i] - v) > rtol * (std::abs(v1) + std::abs(v2));
          bad += std::abs(s.p[i] - p) > rtol * (std::abs(in.p[i] * keep) + std::abs(upd));
          moved += std::abs(s.p[i] - static_cast<double>(in.p[i]));
        }
        INFO("step " << t);
        CHECK(bad == 0);
      }
      CHECK(moved / (4 * n) > 1e-3);  // the update did something far above the tolerance
    }
  }
  // float64: the same formula, the scalar path, to double rounding.
  std::mt19937 rng(3);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> p(257), g(257), m(257), v(257);
  for (size_t i = 0; i < p.size(); ++i) p[i] = nd(rng), g[i] = 0.01 * nd(rng), m[i] = 0.005 * nd(rng), v[i] = 1e-4 * std::abs(nd(rng));
  const auto p0 = p, g0 = g, m0 = m, v0 = v;
  const AdamWArgs h = args(2, true);
  adamw_update<double>(p.data(), g.data(), m.data(), v.data(), static_cast<int64_t>(p.size()), h);
  const double bc1 = 1 - std::pow(h.beta1, 2), bc2 = 1 - std::pow(h.beta2, 2);
  int bad = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double mr = h.beta1 * m0[i] + (1 - h.beta1) * g0[i], vr = h.beta2 * v0[i] + (1 - h.beta2) * g0[i] * g0[i];
    const double upd = (h.lr / bc1) * mr / (std::sqrt(vr) / std::sqrt(bc2) + h.eps);
    const double pr = p0[i] * (1 - h.lr * h.weight_decay) - upd;
    // Relative to the summands, not the sum: beta1*m + (1-beta1)*g may cancel, and a compiler
    // that fuses the multiply-add (clang does, -ffp-contract=on) rounds it once instead of twice.
    bad += std::abs(m[i] - mr) > 1e-14 * (std::abs(h.beta1 * m0[i]) + std::abs((1 - h.beta1) * g0[i]));
    bad += std::abs(v[i] - vr) > 1e-14 * (std::abs(h.beta2 * v0[i]) + std::abs((1 - h.beta2) * g0[i] * g0[i]));
    bad += std::abs(p[i] - pr) > 1e-14 * (std::abs(p0[i]) + std::abs(upd));
  }
  CHECK(bad == 0);
}

TEST_CASE("cpu adam is bitwise independent of thread count and shard boundaries", "[cpu_adam]") {
  IsaGuard guard;
  const int64_t n = 100003;  // above kParallelMinElements: the OpenMP split is used
  for (CpuAdamIsa isa : available_paths()) {
    set_cpu_adam_isa(isa);
    INFO("path " << cpu_adam_isa_name(isa));
    const State s0 = random_state(n, 9);
    std::vector<State> out;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      State s = s0;
      for (int64_t t = 1; t <= 2; ++t) update(s, args(t, true));
      out.push_back(std::move(s));
    }
    INFO("1 vs 2 threads");
    check_same(out[0], out[1]);
    INFO("1 vs 3 threads");
    check_same(out[0], out[2]);
    // Shards [0, k) [k, j) [j, n) at odd boundaries (a ZeRO rank's piece), two threads.
    omp_set_num_threads(2);
    State sh = s0;
    for (int64_t t = 1; t <= 2; ++t) {
      update(sh, args(t, true), 0, 12345);
      update(sh, args(t, true), 12345, 60001);
      update(sh, args(t, true), 60001, n);
    }
    INFO("shards vs whole");
    check_same(out[0], sh);
    CHECK_FALSE(same_bits(out[0].p, s0.p));
  }
}

TEST_CASE("cpu adam path selection and its errors", "[cpu_adam]") {
  IsaGuard guard;
  const bool has = cpu_adam_isa_available(CpuAdamIsa::avx2_fma);
  CHECK(cpu_adam_isa_available(CpuAdamIsa::portable));
  CHECK(std::string(cpu_adam_isa_name(CpuAdamIsa::portable)) == "portable");
  CHECK(std::string(cpu_adam_isa_name(CpuAdamIsa::avx2_fma)) == "avx2_fma");
  const CpuAdamIsa best = has ? CpuAdamIsa::avx2_fma : CpuAdamIsa::portable;
  CHECK(cpu_adam_isa_from_env(nullptr) == best);
  CHECK(cpu_adam_isa_from_env("") == best);
  CHECK(cpu_adam_isa_from_env("auto") == best);
  CHECK(cpu_adam_isa_from_env("portable") == CpuAdamIsa::portable);
  CHECK_THROWS_WITH(cpu_adam_isa_from_env("avx512"),
                    Catch::Contains("ZT_CPU_ADAM='avx512'") && Catch::Contains("expected portable, avx2_fma or auto"));
  CHECK_THROWS_WITH(cpu_adam_isa_from_env("Portable"), Catch::Contains("ZT_CPU_ADAM='Portable'"));
  CHECK_THROWS_WITH(cpu_adam_isa_name(static_cast<CpuAdamIsa>(7)), Catch::Contains("invalid CpuAdamIsa value 7"));
  CHECK_THROWS_WITH(set_cpu_adam_isa(static_cast<CpuAdamIsa>(7)), Catch::Contains("invalid CpuAdamIsa value 7"));
  set_cpu_adam_isa(CpuAdamIsa::portable);
  CHECK(cpu_adam_isa() == CpuAdamIsa::portable);
  if (has) {
    CHECK(cpu_adam_isa_from_env("avx2_fma") == CpuAdamIsa::avx2_fma);
    set_cpu_adam_isa(CpuAdamIsa::avx2_fma);
    CHECK(cpu_adam_isa() == CpuAdamIsa::avx2_fma);
  } else {
    CHECK_THROWS_WITH(cpu_adam_isa_from_env("avx2_fma"), Catch::Contains("ZT_CPU_ADAM=avx2_fma") && Catch::Contains("no AVX2+FMA"));
    CHECK_THROWS_WITH(set_cpu_adam_isa(CpuAdamIsa::avx2_fma), Catch::Contains("no AVX2+FMA"));
    CHECK(cpu_adam_isa() == CpuAdamIsa::portable);  // the failed force changed nothing
  }
}
