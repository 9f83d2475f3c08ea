// defines: 8 Catch2 test cases tagged [core], [memory]
//
// core: tensors, views, dtypes, allocators, RNG.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include "core/checked.h"
#include "core/json.h"
#include "core/rng.h"
#include "core/tensor.h"

using namespace zt;

TEST_CASE("tensor views share storage and follow strides", "[core]") {
  Tensor t = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor tt = t.transpose(0, 1);
  CHECK(tt.shape() == Shape{3, 2});
  CHECK_FALSE(tt.is_contiguous());
  CHECK(tt.to_vector() == std::vector<double>{0, 3, 1, 4, 2, 5});
  Tensor c = tt.contiguous();
  CHECK(c.is_contiguous());
  CHECK(c.to_vector() == std::vector<double>{0, 3, 1, 4, 2, 5});
  Tensor s = t.slice(1, 1, 3);
  CHECK(s.to_vector() == std::vector<double>{1, 2, 4, 5});
  s.fill_(9);
  CHECK(t.to_vector() == std::vector<double>{0, 9, 9, 3, 9, 9});
  CHECK(t.view({3, -1}).shape() == Shape{3, 2});
  CHECK_THROWS_WITH(tt.view({6}), Catch::Contains("non-contiguous"));
  CHECK_THROWS_WITH(t.view({4, 2}), Catch::Contains("does not match"));
}

TEST_CASE("permute and strided slices", "[core]") {
  std::vector<double> v(24);
  for (int i = 0; i < 24; ++i) v[i] = i;
  Tensor t = Tensor::from_vector(v, {2, 3, 4});
  Tensor p = t.permute({2, 0, 1}).contiguous();  // p[k][i][j] = t[i][j][k]
  CHECK(p.shape() == Shape{4, 2, 3});
  auto pv = p.to_vector();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) CHECK(pv[k * 6 + i * 3 + j] == v[i * 12 + j * 4 + k]);
  CHECK(t.slice(2, 0, 4, 2).to_vector()[1] == 2);
}

TEST_CASE("dtype conversions round-trip", "[core]") {
  Tensor f = Tensor::from_vector({1.0, -2.5, 3.140625, 65504.0, 1e-7}, {5});
  Tensor b = f.to(DType::bf16).to(DType::f32);
  CHECK(b.to_vector()[0] == 1.0);
  CHECK(b.to_vector()[1] == -2.5);
  CHECK(b.to_vector()[2] == 3.140625);
  Tensor h = f.to(DType::f16).to(DType::f32);
  CHECK(h.to_vector()[3] == 65504.0);
  CHECK(h.to_vector()[4] == Approx(1.19209e-07).epsilon(0.01));  // f16 subnormal
  CHECK(f16_to_f32(f32_to_f16(1.0f / 3)) == Approx(1.0 / 3).epsilon(1e-3));
  CHECK(bf16_to_f32(f32_to_bf16(1.0f + 1.0f / 256)) == 1.0f);  // ties round to even
  Tensor i = Tensor::from_vector({65535, 7}, {2}, DType::u16);
  CHECK(i.to(DType::i32).to_vector() == std::vector<double>{65535, 7});
}

TEST_CASE("allocator tracks categories and enforces the cap", "[core][memory]") {
  auto& a = cpu_allocator();
  const int64_t before = a.stats().cur(Category::optim);
  {
    Tensor t = Tensor::empty({1024}, DType::f32, Category::optim);
    CHECK(a.stats().cur(Category::optim) == before + 4096);
  }
  CHECK(a.stats().cur(Category::optim) == before);
  a.set_limit(a.stats().total() + 1000);
  CHECK_THROWS_AS(Tensor::empty({1000}, DType::f32, Category::activations), OutOfMemory);
  try {
    Tensor::empty({1000}, DType::f32, Category::activations);
  } catch (const OutOfMemory& e) {
    CHECK_THAT(e.what(), Catch::Contains("activations") && Catch::Contains("params"));
  }
  a.set_limit(0);
  Tensor ok = Tensor::empty({1000}, DType::f32, Category::activations);
  CHECK(ok.numel() == 1000);
}

TEST_CASE("rng is deterministic and roughly normal", "[core]") {
  Rng r1(42), r2(42), r3(43);
  Tensor a = Tensor::empty({10000}), b = Tensor::empty({10000}), c = Tensor::empty({10000});
  r1.fill_normal(a, 0, 1);
  r2.fill_normal(b, 0, 1);
  r3.fill_normal(c, 0, 1);
  CHECK(a.to_vector() == b.to_vector());
  CHECK(a.to_vector() != c.to_vector());
  double m = 0, s = 0;
  for (double x : a.to_vector()) { m += x; s += x * x; }
  m /= 10000; s = s / 10000 - m * m;
  CHECK(std::abs(m) < 0.05);
  CHECK(std::abs(s - 1) < 0.05);
}

TEST_CASE("size arithmetic is checked: products that wrap 64 bits are errors", "[core]") {
  const int64_t big = int64_t(1) << 40;
  CHECK(zt::checked_mul(big, 1 << 20, "x") == int64_t(1) << 60);
  CHECK_THROWS_WITH(zt::checked_mul(big, big, "tensor 'w' numel"),
                    Catch::Contains("tensor 'w' numel") && Catch::Contains("overflows a 64-bit size"));
  CHECK_THROWS_WITH(zt::checked_add(std::numeric_limits<int64_t>::max(), 1, "offset"), Catch::Contains("offset"));
  CHECK_THROWS_WITH(zt::checked_bytes(-3, 4, "header"), Catch::Contains("negative element count -3"));
  // a shape from a file whose product wraps: numel and the factories refuse it, nothing allocated
  const zt::Shape wraps{int64_t(1) << 33, int64_t(1) << 33};
  CHECK_THROWS_WITH(zt::shape_numel(wraps), Catch::Contains("overflows"));
  CHECK_THROWS_WITH(zt::Tensor::empty(wraps), Catch::Contains("overflows"));
  // bytes wrap even where the element count does not
  CHECK_THROWS_WITH(zt::Tensor::empty({int64_t(1) << 62}, zt::DType::f32), Catch::Contains("tensor bytes"));
}

TEST_CASE("json_integer refuses floats and out-of-range values before converting", "[core]") {
  CHECK(zt::json_integer(nlohmann::json(42), "n") == 42);
  CHECK(zt::json_integer(nlohmann::json(-3), "n", -5, 5) == -3);
  CHECK_THROWS_WITH(zt::json_integer(nlohmann::json(1.66667e46), "meta.json world_size"),
                    Catch::Contains("meta.json world_size = 1.66667e+46 is invalid: expected an integer"));
  CHECK_THROWS_WITH(zt::json_integer(nlohmann::json(2.0), "n"), Catch::Contains("expected an integer"));
  CHECK_THROWS_WITH(zt::json_integer(nlohmann::json(18446744073709551615ull), "n"), Catch::Contains("n = 18446744073709551615"));
  CHECK_THROWS_WITH(zt::json_integer(nlohmann::json(7), "n", 0, 5), Catch::Contains("in [0, 5]"));
  CHECK_THROWS_WITH(zt::json_integer(nlohmann::json("7"), "n"), Catch::Contains("n = \"7\" is invalid"));
  CHECK(zt::json_shape(nlohmann::json::array({2, 3}), "s") == std::vector<int64_t>{2, 3});
  CHECK_THROWS_WITH(zt::json_shape(nlohmann::json::array({2, -1}), "s"), Catch::Contains("s[1] = -1 is invalid"));
}

TEST_CASE("parse_json bounds nesting and names the source", "[core]") {
  CHECK(zt::parse_json("{\"a\": [1, [2, {\"b\": 3}]]}", "x")["a"][1][1]["b"] == 3);
  const std::string ok = std::string(63, '[') + std::string(63, ']');  // 63 levels: the top is 0
  CHECK_NOTHROW(zt::parse_json(ok, "ok"));
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  CHECK_THROWS_WITH(zt::parse_json(deep, "header of 'f'"),
                    Catch::Contains("header of 'f' nests JSON deeper than 64 levels"));
  CHECK_THROWS_WITH(zt::parse_json(std::string(1000000, '['), "config 'c'"), Catch::Contains("config 'c' nests JSON"));
  CHECK_THROWS_WITH(zt::parse_json("{\"a\": }", "config 'c'"),
                    Catch::Contains("config 'c' is not valid JSON") && Catch::Contains("line 1"));
  CHECK_THROWS_WITH(zt::read_json_file("/nonexistent/zt.json", "config 'z'"), Catch::Contains("config 'z': cannot open"));
}
