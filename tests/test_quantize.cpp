// defines: Catch2 test cases tagged [quantize]; helpers: bound_ok, data
//
// core/kernels/quantize.h against a float64 reference: every element within the stated bound
// |x - x'| <= s_b / 2 + 2^-23 max|x|_block, the scale the block's max over qmax, codes in range,
// exact values (multiples of the scale) round-tripping exactly, zero blocks, a short last block,
// an odd count of 4-bit codes, odd block sizes, thread counts giving the same bytes, and the
// errors (bits, block, NaN / infinity named by element); DeepSpeed's scheme (its scale, range
// and rounding) beside the symmetric one.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/kernels/quantize.h"
#include "core/parallel.h"  // set_num_threads, num_threads

using namespace zt;

namespace {

std::vector<float> data(int64_t n, uint32_t seed, double spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(i)] = static_cast<float>(d(rng) * std::pow(10.0, spread * d(rng)));
  return x;
}

// Every element within the bound; the scales are the blocks' max |x| / qmax (symmetric) or
// max |x| / 2^(bits-1) (deepspeed), against a float64 reference.
void bound_ok(const std::vector<float>& x, int bits, int64_t block, QuantScheme scheme = QuantScheme::symmetric) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> codes(static_cast<size_t>(quantized_code_bytes(n, bits)));
  std::vector<float> scales(static_cast<size_t>(quantized_blocks(n, block))), back(x.size());
  quantize_blocks(x.data(), n, bits, block, codes.data(), scales.data(), scheme);
  dequantize_blocks(codes.data(), scales.data(), n, bits, block, back.data());
  const bool ds = scheme == QuantScheme::deepspeed;
  const double qmax = ds ? (bits == 8 ? 128.0 : 8.0) : (bits == 8 ? 127.0 : 7.0);
  int64_t worst = -1;
  double worst_ratio = 0;
  for (int64_t b = 0; b < static_cast<int64_t>(scales.size()); ++b) {
    const int64_t i0 = b * block, i1 = std::min(n, i0 + block);
    double amax = 0;
    for (int64_t i = i0; i < i1; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[static_cast<size_t>(i)])));
    REQUIRE(scales[static_cast<size_t>(b)] == static_cast<float>(amax / qmax));
    const double s = scales[static_cast<size_t>(b)];
    // deepspeed: +max's code 2^(bits-1) clamps one step down, a whole scale off
    const double bound = (ds ? s : s / 2) + std::ldexp(amax, -23);
    for (int64_t i = i0; i < i1; ++i) {
      const double err = std::fabs(static_cast<double>(x[static_cast<size_t>(i)]) - back[static_cast<size_t>(i)]);
      if (bound > 0 && err / bound > worst_ratio) worst_ratio = err / bound, worst = i;
      if (bound == 0) REQUIRE(back[static_cast<size_t>(i)] == 0.0f);
    }
  }
  INFO((ds ? "deepspeed" : "symmetric") << ", bits " << bits << ", block " << block << ", n " << n << ": worst element "
                                        << worst << " at " << worst_ratio << " of its bound");
  CHECK(worst_ratio <= 1.0);
}

}  // namespace

TEST_CASE("quantize: every element within s/2 of its value against a float64 reference", "[quantize]") {
  for (int bits : {8, 4})
    for (int64_t block : {int64_t(1), int64_t(7), int64_t(64), kQuantBlockDefault})
      for (int64_t n : {int64_t(1), int64_t(63), int64_t(1000), int64_t(20001)}) bound_ok(data(n, 7, 1.0), bits, block);
  // values across 30 orders of magnitude in one block: the small ones round to 0, within the bound
  bound_ok(data(5000, 8, 10.0), 8, 512);
  bound_ok(data(5000, 9, 10.0), 4, 512);
}

TEST_CASE("quantize, DeepSpeed's scheme: within a scale, codes in [-2^(b-1), 2^(b-1) - 1], half to even",
          "[quantize]") {
  for (int bits : {8, 4})
    for (int64_t block : {int64_t(1), int64_t(7), int64_t(64), kQuantBlockDefault})
      for (int64_t n : {int64_t(1), int64_t(63), int64_t(1000), int64_t(20001)})
        bound_ok(data(n, 11, 1.0), bits, block, QuantScheme::deepspeed);
  bound_ok(data(5000, 12, 10.0), 4, 512, QuantScheme::deepspeed);
  // one 4-bit block with max 8: s = 1; -8 is a code, +8 clamps to 7, halves go to the even code
  const std::vector<float> x = {-8.0f, 8.0f, 0.5f, 1.5f, 2.5f, -2.5f, -7.5f, 7.5f};
  std::vector<uint8_t> codes(4);
  std::vector<float> scale(1), back(x.size());
  quantize_blocks(x.data(), 8, 4, 8, codes.data(), scale.data(), QuantScheme::deepspeed);
  dequantize_blocks(codes.data(), scale.data(), 8, 4, 8, back.data());
  CHECK(scale[0] == 1.0f);
  CHECK(back == std::vector<float>{-8, 7, 0, 2, 2, -2, -8, 7});
  // the same block in the symmetric scheme: s = 8/7, half away from zero, never -8
  quantize_blocks(x.data(), 8, 4, 8, codes.data(), scale.data(), QuantScheme::symmetric);
  dequantize_blocks(codes.data(), scale.data(), 8, 4, 8, back.data());
  CHECK(back[0] == -7 * scale[0]);
}

TEST_CASE("quantize: multiples of the scale round-trip exactly and zeros stay zeros", "[quantize]") {
  for (int bits : {8, 4}) {
    const int qmax = bits == 8 ? 127 : 7;
    std::vector<float> x;
    for (int q = -qmax; q <= qmax; ++q) x.push_back(0.125f * static_cast<float>(q));  // s = 0.125
    x.push_back(0.0f);                                                                // odd count for 4 bits
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> codes(static_cast<size_t>(quantized_code_bytes(n, bits)));
    std::vector<float> scales(1), back(x.size());
    quantize_blocks(x.data(), n, bits, n, codes.data(), scales.data());
    CHECK(scales[0] == 0.125f);
    dequantize_blocks(codes.data(), scales.data(), n, bits, n, back.data());
    CHECK(back == x);
    std::vector<float> zeros(33, 0.0f), zback(33, 1.0f);
    std::vector<uint8_t> zc(static_cast<size_t>(quantized_code_bytes(33, bits)), 0xff);
    std::vector<float> zs(3, -1.0f);
    quantize_blocks(zeros.data(), 33, bits, 16, zc.data(), zs.data());
    CHECK(zs == std::vector<float>(3, 0.0f));
    dequantize_blocks(zc.data(), zs.data(), 33, bits, 16, zback.data());
    CHECK(zback == zeros);
  }
  CHECK(quantized_code_bytes(7, 4) == 4);
  CHECK(quantized_code_bytes(7, 8) == 7);
  CHECK(quantized_blocks(4097, 4096) == 2);
  CHECK(quantized_blocks(0, 4096) == 0);
}

TEST_CASE("quantize: the bytes do not depend on the thread count", "[quantize]") {
  const std::vector<float> x = data(300001, 11, 1.0);
  for (int bits : {8, 4})
    for (int64_t block : {int64_t(4096), int64_t(255)}) {
      const int64_t n = static_cast<int64_t>(x.size());
      auto run = [&] {
        std::vector<uint8_t> c(static_cast<size_t>(quantized_code_bytes(n, bits)));
        std::vector<float> s(static_cast<size_t>(quantized_blocks(n, block)));
        quantize_blocks(x.data(), n, bits, block, c.data(), s.data());
        return std::make_pair(c, s);
      };
      const int prev = num_threads();
      set_num_threads(1);
      const auto one = run();
      set_num_threads(2);
      const auto two = run();
      set_num_threads(prev);
      CHECK(one.first == two.first);
      CHECK(one.second == two.second);
    }
}

TEST_CASE("quantize: bad formats are refused by name", "[quantize][errors]") {
  std::vector<float> x{1.0f, 2.0f, 3.0f, 4.0f};
  std::vector<uint8_t> c(4);
  std::vector<float> s(4);
  CHECK_THROWS_WITH(quantize_blocks(x.data(), 4, 2, 4, c.data(), s.data()),
                    Catch::Contains("bits = 2, expected 4 or 8"));
  CHECK_THROWS_WITH(quantize_blocks(x.data(), 4, 8, 0, c.data(), s.data()),
                    Catch::Contains("block = 0, expected >= 1"));
  CHECK_THROWS_WITH(dequantize_blocks(c.data(), s.data(), 4, 16, 4, x.data()), Catch::Contains("bits = 16"));
}

// An overflow must survive the trip: fp16's loss scaler looks for it after the collective.
TEST_CASE("quantize: a block with a NaN or infinity dequantizes to NaN and leaves its neighbours alone", "[quantize]") {
  for (int bits : {4, 8})
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      CAPTURE(bits, bad);
      std::vector<float> x{1.0f, -2.0f, bad, 4.0f, 0.5f, -0.25f};
      std::vector<uint8_t> c(6);
      std::vector<float> s(3), y(6);
      quantize_blocks(x.data(), 6, bits, 2, c.data(), s.data());
      dequantize_blocks(c.data(), s.data(), 6, bits, 2, y.data());
      CHECK(std::isnan(s[1]));
      CHECK(std::isnan(y[2]));
      CHECK(std::isnan(y[3]));
      CHECK(std::isfinite(y[0]));
      CHECK(std::isfinite(y[1]));
      CHECK(y[4] == Approx(0.5f).margin(0.5f / 14 + 1e-6));
      CHECK(y[5] == Approx(-0.25f).margin(0.5f / 14 + 1e-6));
    }
}
