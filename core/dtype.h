// defines: DType (element types), dtype_size, dtype_name, bf16/fp16 <-> fp32 conversion.
//
// float32 and float64 are compute types (float64 exists for gradient checks); bfloat16 and
// float16 are storage types: kernels convert them to float32 to compute. int32, int64 and
// uint16 hold token ids and indices (uint16 is llm.c's token-shard type).
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

namespace zt {

enum class DType : uint8_t { f32, f64, bf16, f16, i32, i64, u16, u8 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "float32", "float64", "bfloat16", ...
DType dtype_from_name(const std::string& name);  // inverse of dtype_name; throws on unknown

// C++ type -> DType, for typed access (Tensor::data<T>()).
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::u16; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };

// bfloat16: the top 16 bits of a float32. Conversion rounds to nearest even (as PyTorch and
// llm.c do); NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// IEEE half precision (F16C does this in hardware; this portable form is exact, round to even).
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

}  // namespace zt
