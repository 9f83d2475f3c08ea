// defines: 2 Catch2 test cases tagged [backend], [f32_matmul]
//
// The float32 matmul precision of the backend table (core/backend.h F32Matmul): the parser, and the
// CPU backend's refusal of TF32 (a GPU mode). The GPU side is tests/gpu/test_cuda_f32_matmul.cpp.
#include <catch2/catch.hpp>

#include "core/backend.h"

using namespace zt;

TEST_CASE("parse_f32_matmul takes PyTorch's names and refuses others", "[backend][f32_matmul]") {
  CHECK(parse_f32_matmul("highest") == F32Matmul::highest);
  CHECK(parse_f32_matmul("high") == F32Matmul::high);
  CHECK(std::string(f32_matmul_name(F32Matmul::highest)) == "highest");
  CHECK(std::string(f32_matmul_name(F32Matmul::high)) == "high");
  CHECK(parse_f32_matmul(f32_matmul_name(F32Matmul::high)) == F32Matmul::high);
  CHECK_THROWS_WITH(parse_f32_matmul("medium"), Catch::Contains("'medium'") && Catch::Contains("highest") &&
                                                    Catch::Contains("high (TF32"));
  CHECK_THROWS_WITH(parse_f32_matmul(""), Catch::Contains("is not one of"));
  CHECK_THROWS_WITH(parse_f32_matmul("HIGH"), Catch::Contains("'HIGH'"));  // case matters, as in PyTorch
}

TEST_CASE("the cpu backend computes float32 GEMMs in IEEE fp32 and refuses tf32", "[backend][f32_matmul]") {
  Backend& cpu = backend(Device::cpu());
  CHECK(cpu.f32_matmul_precision() == F32Matmul::highest);
  CHECK_THROWS_WITH(cpu.set_f32_matmul_precision(F32Matmul::high),
                    Catch::Contains("tf32 is a GPU matmul mode") && Catch::Contains("device cpu") &&
                        Catch::Contains("IEEE fp32"));
  CHECK(cpu.f32_matmul_precision() == F32Matmul::highest);  // unchanged by the refused call
  CHECK_NOTHROW(cpu.set_f32_matmul_precision(F32Matmul::highest));
  CHECK(cpu.f32_matmul_precision() == F32Matmul::highest);
}
