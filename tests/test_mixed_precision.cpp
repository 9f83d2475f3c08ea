// defines: 12 Catch2 test cases tagged [cast], [clip], [loss_scaler]; helpers: bits, from_bits, Known,
//          known_values, test_values, f32_tensor and 5 more
//
// mixed precision: cast_ / accumulate_cast_ / all_finite against core/dtype.h's scalar
// conversions and hand-derived bit patterns, sum_of_squares on bfloat16/float16, and the fp16
// LossScaler against sequences traced by hand from DeepSpeed's DynamicLossScaler.update_scale.
#include <catch2/catch.hpp>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/kernels/cast.h"
#include "core/kernels/shard_norm.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "optim/loss_scaler.h"

using namespace zt;

namespace {

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// Hand-derived roundings: (float32 value, expected float16 bits, expected bfloat16 bits).
struct Known {
  float x;
  uint16_t f16, bf16;
};
const std::vector<Known>& known_values() {
  static const std::vector<Known> k = {
      {0.0f, 0x0000, 0x0000},
      {-0.0f, 0x8000, 0x8000},
      {1.0f, 0x3c00, 0x3f80},
      {-2.0f, 0xc000, 0xc000},
      {from_bits(0x3f808000), 0x3c04, 0x3f80},   // bf16 tie, kept mantissa even: stays
      {from_bits(0x3f818000), 0x3c0c, 0x3f82},   // bf16 tie, kept mantissa odd: rounds up
      {from_bits(0x3f808001), 0x3c04, 0x3f81},   // just above the bf16 tie
      {1.0f + 0x1p-11f, 0x3c00, 0x3f80},         // f16 tie at 1, even: stays 1
      {1.0f + 3 * 0x1p-11f, 0x3c02, 0x3f80},     // f16 tie between 1+ulp (odd) and 1+2ulp (even)
      {0x1p-24f, 0x0001, 0x3380},                // smallest f16 subnormal
      {0x1p-25f, 0x0000, 0x3300},                // half of it: tie to even 0
      {0x1.0002p-25f, 0x0001, 0x3300},           // just above half: rounds up
      {1.5f * 0x1p-24f, 0x0002, 0x33c0},         // tie between subnormals 1 and 2: to 2
      {2.5f * 0x1p-24f, 0x0002, 0x3420},         // tie between 2 and 3: to 2
      {1023.5f * 0x1p-24f, 0x0400, 0x3880},      // tie between the largest subnormal and 2^-14: to 2^-14
      {0x1p-14f, 0x0400, 0x3880},                // smallest f16 normal
      {65504.0f, 0x7bff, 0x4780},                // largest f16
      {65519.0f, 0x7bff, 0x4780},                // below the midpoint to 65536: stays finite
      {65520.0f, 0x7c00, 0x4780},                // the midpoint: ties to even = inf
      {1e6f, 0x7c00, 0x4974},                    // overflows f16; bf16(1e6) = 0x4974 (999424)
      {-1e6f, 0xfc00, 0xc974},
      {INFINITY, 0x7c00, 0x7f80},
      {-INFINITY, 0xfc00, 0xff80},
      {NAN, 0x7e00, 0x7fc0},
      {from_bits(0xff800001), 0xfe00, 0xffc0},   // signalling NaN, negative: quiet NaN, sign kept
      {1e-40f, 0x0000, 0x0001},                  // float32 denormal: f16 0, bf16 keeps it (0x00011...)
      {FLT_MAX, 0x7c00, 0x7f80},                 // bf16: rounds up to inf
  };
  return k;
}

// n float32 values: the known values at the start, the middle and the end (the SIMD tail), the
// rest normal * 2^k for k in [-30, 20] (many need rounding; the small ones land in f16's
// subnormal range, the large ones overflow it).
std::vector<float> test_values(int64_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = std::ldexp(r.normal(), static_cast<int>(r.next_u32() % 51) - 30);
  const auto& k = known_values();
  const int64_t m = static_cast<int64_t>(k.size());
  for (int64_t i = 0; i < m; ++i) {
    v[i] = k[i].x;
    v[n / 2 + i] = k[i].x;
    v[n - m + i] = k[i].x;
  }
  return v;
}

Tensor f32_tensor(const std::vector<float>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())});
  std::memcpy(t.raw(), v.data(), v.size() * sizeof(float));
  return t;
}

Tensor u16_tensor(const std::vector<uint16_t>& v, DType dt) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, dt);
  std::memcpy(t.raw(), v.data(), v.size() * sizeof(uint16_t));
  return t;
}

template <class U>
std::vector<U> raw_vec(const Tensor& t) {
  std::vector<U> out(static_cast<size_t>(t.numel()));
  std::memcpy(out.data(), t.raw(), out.size() * sizeof(U));
  return out;
}

uint16_t ref_round(DType dt, float x) { return dt == DType::bf16 ? f32_to_bf16(x) : f32_to_f16(x); }
float ref_load(DType dt, uint16_t h) { return dt == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h); }

// Runs f with 1 thread and with 2 threads; the caller compares what each run produced.
template <class F>
void with_threads(int n, F f) {
  const int before = num_threads();
  set_num_threads(n);
  f();
  set_num_threads(before);
}

}  // namespace

TEST_CASE("the inline conversions equal dtype.h's bit for bit", "[cast]") {
  for (uint32_t h = 0; h < 65536; ++h) {
    REQUIRE(bits(cvt::f16_to_f32(static_cast<uint16_t>(h))) == bits(f16_to_f32(static_cast<uint16_t>(h))));
    REQUIRE(bits(cvt::bf16_to_f32(static_cast<uint16_t>(h))) == h << 16);
  }
  // A stride through every float32 bit pattern (the full 2^32 sweep was run once, offline).
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4093) {
    const float f = from_bits(static_cast<uint32_t>(u));
    REQUIRE(cvt::f32_to_f16(f) == f32_to_f16(f));
    REQUIRE(cvt::f32_to_bf16(f) == f32_to_bf16(f));
  }
  for (const Known& k : known_values()) {
    INFO("x bits " << std::hex << bits(k.x));
    CHECK(f32_to_f16(k.x) == k.f16);
    CHECK(f32_to_bf16(k.x) == k.bf16);
  }
}

TEST_CASE("cast_ float32 to bfloat16 and float16 rounds like the scalar conversions", "[cast]") {
  const int64_t n = 100003;  // above the parallel threshold, odd tail
  const std::vector<float> v = test_values(n, 5);
  Tensor src = f32_tensor(v);
  for (DType dt : {DType::bf16, DType::f16}) {
    INFO(dtype_name(dt));
    for (double factor : {1.0, 1.0 / 1024, 65536.0, 1.0 / 3}) {
      INFO("factor " << factor);
      const float f = static_cast<float>(factor);
      Tensor d1 = Tensor::empty({n}, dt), d2 = Tensor::empty({n}, dt);
      with_threads(1, [&] { cast_(d1, src, factor); });
      with_threads(2, [&] { cast_(d2, src, factor); });
      const auto o1 = raw_vec<uint16_t>(d1), o2 = raw_vec<uint16_t>(d2);
      CHECK(o1 == o2);  // bitwise, any thread count
      int64_t bad = 0;
      for (int64_t i = 0; i < n; ++i) bad += o1[i] != ref_round(dt, factor == 1.0 ? v[i] : v[i] * f);
      CHECK(bad == 0);
      if (factor == 1.0) {
        const auto& k = known_values();
        for (size_t i = 0; i < k.size(); ++i) {
          const uint16_t want = dt == DType::bf16 ? k[i].bf16 : k[i].f16;
          CHECK(o1[i] == want);
          CHECK(o1[n - k.size() + i] == want);
        }
      }
    }
  }
  // NaN stays NaN, -0 stays -0, overflow gives inf (read back through the scalar conversions).
  Tensor h = Tensor::empty({3}, DType::f16);
  cast_(h, Tensor::from_vector({NAN, -0.0, 1e5}, {3}));
  const auto hv = raw_vec<uint16_t>(h);
  CHECK(std::isnan(f16_to_f32(hv[0])));
  CHECK(hv[1] == 0x8000);
  CHECK(std::isinf(f16_to_f32(hv[2])));
}

TEST_CASE("cast_ from bfloat16 and float16 is exact and round-trips", "[cast]") {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  for (DType dt : {DType::bf16, DType::f16}) {
    INFO(dtype_name(dt));
    Tensor src = u16_tensor(all, dt);
    Tensor f = Tensor::empty({65536});
    cast_(f, src);
    const auto fv = raw_vec<float>(f);
    for (uint32_t h = 0; h < 65536; ++h) REQUIRE(bits(fv[h]) == bits(ref_load(dt, static_cast<uint16_t>(h))));
    // back to the 2-byte type: every non-NaN pattern is reproduced exactly
    Tensor back = Tensor::empty({65536}, dt);
    cast_(back, f);
    const auto bv = raw_vec<uint16_t>(back);
    for (uint32_t h = 0; h < 65536; ++h)
      if (!std::isnan(fv[h])) REQUIRE(bv[h] == h);
    // 2-byte to 2-byte with a factor: through float32, one rounding at the end
    const DType other = dt == DType::bf16 ? DType::f16 : DType::bf16;
    Tensor o = Tensor::empty({65536}, other);
    cast_(o, src, 1.0 / 1024);
    const auto ov = raw_vec<uint16_t>(o);
    for (uint32_t h = 0; h < 65536; ++h)
      REQUIRE(ov[h] == ref_round(other, ref_load(dt, static_cast<uint16_t>(h)) * (1.0f / 1024)));
  }
  // float32 -> float32 with factor 1 keeps the bits (NaN payload included); in place is allowed
  Tensor a = f32_tensor({from_bits(0x7fc01234), -0.0f, 3.5f});
  Tensor b = Tensor::empty({3});
  cast_(b, a);
  CHECK(raw_vec<uint32_t>(b) == raw_vec<uint32_t>(a));
  cast_(b, b, 0.5);
  CHECK(raw_vec<float>(b)[2] == 1.75f);
}

TEST_CASE("cast_ refuses bad arguments with clear messages", "[cast]") {
  Tensor f = Tensor::zeros({4, 3});
  Tensor h = Tensor::zeros({12}, DType::bf16);
  CHECK_THROWS_WITH(cast_(h, Tensor::zeros({11})),
                    Catch::Contains("cast_") && Catch::Contains("bfloat16(12,)") && Catch::Contains("float32(11,)") &&
                        Catch::Contains("same number of elements"));
  CHECK_THROWS_WITH(cast_(h, f.transpose(0, 1)), Catch::Contains("cast_") && Catch::Contains("contiguous"));
  CHECK_THROWS_WITH(cast_(Tensor::zeros({12}, DType::f64), h),
                    Catch::Contains("float64(12,)") && Catch::Contains("expected dtypes float32, bfloat16 or float16"));
  CHECK_THROWS_WITH(cast_(h, Tensor::zeros({12}, DType::i32)), Catch::Contains("int32"));
  CHECK_THROWS_WITH(cast_(h, f, 1e300), Catch::Contains("factor") && Catch::Contains("not finite"));
  CHECK_THROWS_WITH(cast_(h, f, NAN), Catch::Contains("not finite"));
  Tensor big = Tensor::zeros({16});
  CHECK_THROWS_WITH(cast_(big.flat_view(1, {8}), big.flat_view(0, {8})), Catch::Contains("overlap"));
  CHECK_THROWS_WITH(accumulate_cast_(h, Tensor::zeros({12}, DType::f16)),
                    Catch::Contains("accumulate_cast_") && Catch::Contains("src float32 or dst's dtype"));
  CHECK_THROWS_WITH(accumulate_cast_(h, Tensor::zeros({13})), Catch::Contains("same number of elements"));
  CHECK_THROWS_WITH(all_finite(Tensor::zeros({3}, DType::i64)), Catch::Contains("all_finite") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(all_finite(f.transpose(0, 1)), Catch::Contains("not contiguous"));
}

TEST_CASE("accumulate_cast_ adds float32 into a 2-byte buffer with one rounding", "[cast]") {
  const int64_t n = 70001;
  Rng r(9);
  std::vector<float> g(n), init(n);
  for (int64_t i = 0; i < n; ++i) {
    g[i] = r.normal() * 0.01f;
    init[i] = r.normal();
  }
  Tensor gs = f32_tensor(g);
  for (DType dt : {DType::bf16, DType::f16}) {
    INFO(dtype_name(dt));
    std::vector<uint16_t> start(n);
    for (int64_t i = 0; i < n; ++i) start[i] = ref_round(dt, init[i]);
    Tensor d1 = u16_tensor(start, dt), d2 = u16_tensor(start, dt);
    with_threads(1, [&] { accumulate_cast_(d1, gs); accumulate_cast_(d1, gs); });
    with_threads(2, [&] { accumulate_cast_(d2, gs); accumulate_cast_(d2, gs); });
    const auto o1 = raw_vec<uint16_t>(d1);
    CHECK(o1 == raw_vec<uint16_t>(d2));
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      uint16_t want = ref_round(dt, ref_load(dt, start[i]) + g[i]);
      want = ref_round(dt, ref_load(dt, want) + g[i]);
      bad += o1[i] != want;
    }
    CHECK(bad == 0);
  }
  // float16 overflow: 65504 + 16 = 65520 ties to even = inf; 65504 + 8 stays 65504; inf + finite = inf
  Tensor h = u16_tensor({0x7bff, 0x7bff, 0x7c00, 0x3c00}, DType::f16);
  accumulate_cast_(h, f32_tensor({16.0f, 8.0f, -1.0f, 0x1p-11f}));
  CHECK(raw_vec<uint16_t>(h) == std::vector<uint16_t>{0x7c00, 0x7bff, 0x7c00, 0x3c00});
  // 2-byte source of the same dtype (reduced gradient shards summed over micro-steps): one rounding
  for (DType dt : {DType::bf16, DType::f16}) {
    INFO(dtype_name(dt));
    std::vector<uint16_t> a(n), b(n);
    for (int64_t i = 0; i < n; ++i) {
      a[i] = ref_round(dt, init[i]);
      b[i] = ref_round(dt, g[i] * 37.0f);
    }
    Tensor da = u16_tensor(a, dt);
    accumulate_cast_(da, u16_tensor(b, dt));
    const auto o = raw_vec<uint16_t>(da);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += o[i] != ref_round(dt, ref_load(dt, a[i]) + ref_load(dt, b[i]));
    CHECK(bad == 0);
  }
  // float32 destination: a plain +=
  Tensor f = f32_tensor({1.0f, 2.0f});
  accumulate_cast_(f, f32_tensor({0.5f, -2.0f}));
  CHECK(raw_vec<float>(f) == std::vector<float>{1.5f, 0.0f});
}

TEST_CASE("all_finite finds inf and NaN anywhere in a large tensor", "[cast]") {
  const int64_t n = 5 * kParallelMinElements + 17;
  struct Case {
    DType dt;
    uint64_t inf, nan, maxfinite;
  };
  const Case cases[] = {{DType::f32, 0x7f800000u, 0x7fc00000u, 0x7f7fffffu},
                        {DType::f64, 0x7ff0000000000000ull, 0x7ff8000000000000ull, 0x7fefffffffffffffull},
                        {DType::bf16, 0x7f80u, 0x7fc0u, 0x7f7fu},
                        {DType::f16, 0x7c00u, 0x7e00u, 0x7bffu}};
  for (const Case& c : cases) {
    INFO(dtype_name(c.dt));
    Tensor t = Tensor::zeros({n}, c.dt);
    const size_t es = t.element_size();
    auto set = [&](int64_t i, uint64_t b) { std::memcpy(static_cast<char*>(t.raw()) + i * es, &b, es); };
    set(3, c.maxfinite);  // largest finite, both signs: still finite
    set(4, c.maxfinite | (uint64_t(1) << (8 * es - 1)));
    CHECK(all_finite(t));
    for (int64_t pos : {int64_t(0), n / 2, n - 1})
      for (uint64_t b : {c.inf, c.inf | (uint64_t(1) << (8 * es - 1)), c.nan}) {
        INFO("position " << pos << " bits " << std::hex << b);
        set(pos, b);
        bool r1 = true, r2 = true;
        with_threads(1, [&] { r1 = all_finite(t); });
        with_threads(2, [&] { r2 = all_finite(t); });
        CHECK_FALSE(r1);
        CHECK_FALSE(r2);
        set(pos, 0);
        CHECK(all_finite(t));
      }
  }
  CHECK(all_finite(Tensor::zeros({0}, DType::f16)));
}

TEST_CASE("sum_of_squares on bfloat16 and float16 tensors", "[cast][clip]") {
  const int64_t n = 5 * kSumChunk + 7;
  Rng r(21);
  std::vector<float> v(n);
  for (auto& x : v) x = r.normal();
  Tensor src = f32_tensor(v);
  for (DType dt : {DType::bf16, DType::f16}) {
    INFO(dtype_name(dt));
    Tensor h = Tensor::empty({n}, dt);
    cast_(h, src);
    const auto hv = raw_vec<uint16_t>(h);
    double ref = 0;
    for (uint16_t x : hv) ref += static_cast<double>(ref_load(dt, x)) * ref_load(dt, x);
    double s1 = 0, s2 = 0;
    with_threads(1, [&] { s1 = sum_of_squares(h); });
    with_threads(2, [&] { s2 = sum_of_squares(h); });
    CHECK(s1 == s2);
    CHECK(std::abs(s1 - ref) <= 1e-12 * ref);
    // the same fixed-chunk scheme as float32: equal bits on the converted values
    Tensor f = Tensor::empty({n});
    cast_(f, h);
    CHECK(sum_of_squares(f) == s1);
    CHECK(sum_of_squares(std::vector<Tensor>{h, f}) == s1 + s1);
    // a small tensor (one chunk) and a non-finite element
    Tensor small = Tensor::empty({3}, dt);
    cast_(small, f32_tensor({3.0f, -4.0f, 0.5f}));
    CHECK(sum_of_squares(small) == 25.25);
    cast_(small, f32_tensor({3.0f, INFINITY, 0.5f}));
    CHECK(std::isinf(sum_of_squares(small)));
  }
  CHECK_THROWS_WITH(sum_of_squares(Tensor::zeros({4}, DType::i32)),
                    Catch::Contains("sum_of_squares") && Catch::Contains("int32"));
  CHECK_THROWS_WITH(sum_of_squares(Tensor::zeros({4, 4}, DType::bf16).transpose(0, 1)),
                    Catch::Contains("not contiguous"));
}

// ---------------------------------------------------------------------------------------------
// LossScaler. Expected sequences are traced by hand from DeepSpeed's update_scale (see
// optim/loss_scaler.h); each comment gives (cur_iter - last_overflow_iter) % window for ok steps.

TEST_CASE("dynamic loss scaling follows DeepSpeed's update_scale", "[loss_scaler]") {
  LossScalerOptions o;
  o.initial_scale_power = 4;  // 16
  o.scale_window = 3;
  o.hysteresis = 2;
  LossScaler s(o);
  CHECK(s.scale() == 16);
  struct Step {
    bool overflow;
    double scale;
    int hysteresis_left;
  };
  const Step seq[] = {
      {true, 16, 1},   // it 0: hysteresis 2 -> 1, scale kept; last = 0
      {true, 8, 1},    // it 1: hysteresis 1 -> halve; last = 1
      {false, 8, 1},   // it 2: (2-1)%3 = 1
      {false, 8, 1},   // it 3: 2
      {false, 16, 2},  // it 4: 0 -> double, hysteresis restored
      {false, 16, 2},  // it 5: 1
      {false, 16, 2},  // it 6: 2
      {false, 32, 2},  // it 7: 0 -> double
      {true, 32, 1},   // it 8: hysteresis 2 -> 1; last = 8
      {false, 32, 1},  // it 9: 1
      {false, 32, 1},  // it 10: 2
      {false, 64, 2},  // it 11: 0 -> double
      {true, 64, 1},   // it 12: hysteresis -> 1
      {true, 32, 1},   // it 13: halve
      {true, 16, 1},   // it 14: halve
      {false, 16, 1},  // it 15: 1
  };
  int64_t skipped = 0, it = 0;
  for (const Step& st : seq) {
    INFO("iteration " << it);
    CHECK(s.update(st.overflow) == st.overflow);
    skipped += st.overflow;
    ++it;
    CHECK(s.scale() == st.scale);
    CHECK(s.state().hysteresis_left == st.hysteresis_left);
    CHECK(s.skipped_steps() == skipped);
    CHECK(s.iteration() == it);
  }
  CHECK(s.state() == LossScaler::State{16, 16, 14, 1, 6});

  // No overflow at all: the first growth comes at the window-th step ((it - (-1)) % 3 == 0 at it 2).
  LossScaler fresh(o);
  fresh.update(false);
  fresh.update(false);
  CHECK(fresh.scale() == 16);
  fresh.update(false);
  CHECK(fresh.scale() == 32);
}

TEST_CASE("hysteresis 1 halves at once and min_scale is a floor", "[loss_scaler]") {
  LossScalerOptions o;
  o.initial_scale_power = 2;  // 4
  o.scale_window = 2;
  o.hysteresis = 1;
  o.min_scale = 3;
  o.raise_error_at_min_scale = false;
  LossScaler s(o);
  s.update(true);
  CHECK(s.scale() == 3);  // max(4 / 2, 3)
  s.update(true);
  CHECK(s.scale() == 3);  // max(1.5, 3)
  s.update(false);        // (2 - 1) % 2 = 1
  CHECK(s.scale() == 3);
  s.update(false);  // 0 -> double
  CHECK(s.scale() == 6);

  // DeepSpeed's default: an overflow at the floor is an error, and nothing changes.
  o.raise_error_at_min_scale = true;
  o.min_scale = 1;
  o.initial_scale_power = 1;  // 2
  LossScaler r(o);
  r.update(true);
  CHECK(r.scale() == 1);
  const LossScaler::State before = r.state();
  CHECK_THROWS_WITH(r.update(true), Catch::Contains("min_scale = 1") && Catch::Contains("iteration 1"));
  CHECK(r.state() == before);
  // with hysteresis left, an overflow at the floor only uses it up (DeepSpeed checks in the halving branch)
  o.hysteresis = 2;
  LossScaler h(o);
  h.update(true);  // hysteresis 2 -> 1, scale 2
  h.update(true);  // halve to 1
  CHECK(h.scale() == 1);
  CHECK_THROWS(h.update(true));
}

TEST_CASE("a static loss scale never changes but overflow still skips", "[loss_scaler]") {
  LossScalerOptions o;
  o.dynamic = false;
  o.static_scale = 128;
  o.scale_window = 1;
  LossScaler s(o);
  for (int i = 0; i < 10; ++i) {
    const bool ovf = i % 3 == 0;
    CHECK(s.update(ovf) == ovf);
    CHECK(s.scale() == 128);
  }
  CHECK(s.skipped_steps() == 4);
  CHECK(s.state() == LossScaler::State{128, 10, 9, 2, 4});
}

TEST_CASE("loss scaler state round-trips and is validated", "[loss_scaler]") {
  LossScalerOptions o;
  o.initial_scale_power = 8;
  o.scale_window = 4;
  o.hysteresis = 3;
  LossScaler a(o);
  for (bool ovf : {false, true, true, true, false, false, true, false}) a.update(ovf);
  LossScaler b(o);
  b.load_state(a.state());
  CHECK(b.state() == a.state());
  for (bool ovf : {false, false, false, true, false, false, false, false, false}) {
    CHECK(a.update(ovf) == b.update(ovf));
    CHECK(a.state() == b.state());
  }

  LossScaler c(o);
  auto bad = [&](LossScaler::State st, const char* what) {
    const LossScaler::State before = c.state();
    CHECK_THROWS_WITH(c.load_state(st), Catch::Contains(what));
    CHECK(c.state() == before);
  };
  const LossScaler::State ok{64, 10, 7, 2, 3};
  c.load_state(ok);
  CHECK(c.state() == ok);
  bad({0, 10, 7, 2, 3}, "scale = 0");
  bad({INFINITY, 10, 7, 2, 3}, "scale = inf");
  bad({0.5, 10, 7, 2, 3}, "below min_scale");
  bad({64, -1, -1, 2, 0}, "iter = -1");
  bad({64, 10, 10, 2, 3}, "last_overflow_iter = 10");
  bad({64, 10, -2, 2, 0}, "last_overflow_iter = -2");
  bad({64, 10, 7, 0, 3}, "hysteresis_left = 0");
  bad({64, 10, 7, 4, 3}, "hysteresis_left = 4");
  bad({64, 10, 7, 2, 11}, "skipped = 11");
  bad({64, 10, 7, 2, 0}, "skipped = 0");
  bad({64, 10, -1, 2, 1}, "skipped = 1");

  LossScalerOptions so;
  so.dynamic = false;
  so.static_scale = 8;
  LossScaler st(so);
  CHECK_THROWS_WITH(st.load_state({16, 1, -1, 2, 0}), Catch::Contains("static_scale = 8"));
}

TEST_CASE("loss scaler options are validated", "[loss_scaler]") {
  auto bad = [](auto edit, const char* what) {
    LossScalerOptions o;
    edit(o);
    CHECK_THROWS_WITH(o.validate(), Catch::Contains(what));
    CHECK_THROWS_WITH(LossScaler(o), Catch::Contains(what));
  };
  bad([](LossScalerOptions& o) { o.scale_window = 0; }, "scale_window = 0");
  bad([](LossScalerOptions& o) { o.hysteresis = 0; }, "hysteresis = 0");
  bad([](LossScalerOptions& o) { o.min_scale = 0; }, "min_scale = 0");
  bad([](LossScalerOptions& o) { o.min_scale = NAN; }, "min_scale = nan");
  bad([](LossScalerOptions& o) { o.static_scale = -1; }, "static_scale = -1");
  bad([](LossScalerOptions& o) { o.initial_scale_power = -1; }, "initial_scale_power = -1");
  bad([](LossScalerOptions& o) { o.initial_scale_power = 65; }, "initial_scale_power = 65");
  bad([](LossScalerOptions& o) { o.initial_scale_power = 1; o.min_scale = 4; }, "below min_scale = 4");
  LossScalerOptions o;
  o.initial_scale_power = 64;
  CHECK(LossScaler(o).scale() == 0x1p64);
  o.initial_scale_power = 0;
  CHECK(LossScaler(o).scale() == 1);
}
