// defines: zt::test::Vec, check_close, rnd, ids_tensor — helpers shared by the backend tests
//          (tests/test_backend.cpp, tests/test_backend_cpu.cpp).
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/tensor.h"
#include "tests/gradcheck.h"

namespace zt::test {

using Vec = std::vector<double>;

// |got - want| <= atol + rtol |want| elementwise, with the first failure reported.
inline void check_close(const Vec& got, const Vec& want, double atol = 1e-5, double rtol = 1e-5) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << " want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]));
  }
}

inline Tensor rnd(const Shape& s, uint64_t seed, DType dt = DType::f32, double std = 1.0) {
  return randn(s, seed, std, dt);
}
inline Tensor ids_tensor(const std::vector<int>& v, const Shape& s) {
  return Tensor::from_vector(Vec(v.begin(), v.end()), s, DType::i32);
}

}  // namespace zt::test
