// defines: cast_, accumulate_cast_, all_finite — conversions between float32 and the 2-byte
//          storage types (bfloat16, float16) for mixed-precision training, with a scale folded in;
//          cvt::{bf16_to_f32, f32_to_bf16, f16_to_f32, f32_to_f16} — branchless inline forms of
//          dtype.h's conversions that `#pragma omp simd` loops vectorize.
//
// Rounding: every store to bf16 / f16 rounds to nearest even, bit for bit what core/dtype.h's
// scalar conversions return (NaN stays NaN: bf16 keeps the top bits and sets the quiet bit, f16
// becomes sign | 0x7e00; f16 overflow gives +-inf; f16 subnormals are rounded, not flushed).
// Arithmetic is float32: dst = round_to(dst.dtype, float(src) * float(factor)).
//
// Devices: a tensor not on the cpu runs on its device's backend (core/backend.h's cast,
// accumulate_cast, all_finite), after the same checks; dst and src must be on one device.
//
// Determinism: element-wise, each element's result depends on that element only, so the output
// is bitwise the same for any thread count (OpenMP static split of the elements).
//
// Mixed precision (ZeRO): cast_(bf16 param view, float32 master shard) before the all-gather;
// accumulate_cast_(bf16 grad buffer, float32 unit gradient) during accumulation;
// cast_(float32 grad shard, f16 grad shard, 1 / loss_scale) to unscale; all_finite for the
// loss scaler's overflow verdict (optim/loss_scaler.h).
#pragma once
#include <bit>
#include <cstdint>

#include "core/tensor.h"

namespace zt {

// dst = round_to(dst.dtype, float(src) * float(factor)), element-wise. dst and src contiguous,
// same numel (shapes may differ), dtypes any of float32, bfloat16, float16. factor must be finite
// in float32. factor == 1 is skipped (the copy is exact: a float32 -> float32 cast is memcpy-equal,
// a NaN keeps its payload). dst and src must not partially overlap (dst == src is fine).
void cast_(const Tensor& dst, const Tensor& src, double factor = 1.0);

// dst = round_to(dst.dtype, float(dst) + float(src)), element-wise: gradient accumulation of a
// unit's float32 gradient into a 2-byte (or float32) gradient buffer, or of a reduced 2-byte
// gradient shard into another (ZeRO stages 2-3 over micro-steps). dst: float32, bfloat16 or
// float16; src: float32 or dst's dtype; both contiguous, same numel.
void accumulate_cast_(const Tensor& dst, const Tensor& src);

// true when every element is finite (no inf, no NaN). t: contiguous float32, float64, bfloat16 or
// float16. Tests exponent bits (exact; an integer OR, so deterministic for any thread count).
bool all_finite(const Tensor& t);

namespace cvt {

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// Round to nearest even on the top 16 bits; NaN -> (bits >> 16) | 0x40 (quiet). Same bits as
// zt::f32_to_bf16 for every input.
inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

// Exact. Subnormal halves are normalized by a float subtraction (m * 2^-24 = (2^-14 + m 2^-24)
// - 2^-14, exact and normal). inf / NaN keep sign and payload. Same bits as zt::f16_to_f32.
inline float f16_to_f32(uint16_t h) {
  const uint32_t magic = 113u << 23;         // 2^-14 as float32 bits
  const uint32_t shifted_exp = 0x7c00u << 13;  // f16 exponent mask, moved to float32's position
  uint32_t o = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
  const uint32_t exp = o & shifted_exp;
  o += (127u - 15u) << 23;  // rebias
  const uint32_t infnan = o + ((128u - 16u) << 23);
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(o + (1u << 23)) - std::bit_cast<float>(magic));
  // Select with masks, not `?:`: gcc does not if-convert a float op, and the loop would not vectorize.
  const uint32_t is_infnan = 0u - static_cast<uint32_t>(exp == shifted_exp);
  const uint32_t is_sub = 0u - static_cast<uint32_t>(exp == 0);
  o = (infnan & is_infnan) | (sub & is_sub) | (o & ~(is_infnan | is_sub));
  return std::bit_cast<float>(o | ((static_cast<uint32_t>(h) & 0x8000u) << 16));
}

// Round to nearest even (F. Giesen's float_to_half_fast3_rtne, branch-free). |f| >= 65520 -> inf,
// NaN -> sign | 0x7e00, results below 2^-14 rounded into f16 subnormals by one float addition
// (float32 denormal inputs are far below half the smallest f16 subnormal and give +-0 either
// way). Same bits as zt::f32_to_f16 for every input.
inline uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  const uint32_t f16max = (127u + 16u) << 23;                      // 65536.0f: exponent out of range (65520 up to here round up to inf in `norm`)
  const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;  // 0.5f: aligns bit 2^-24 to ulp
  const uint32_t big = 0x7c00u | ((0u - static_cast<uint32_t>(a > 0x7f800000u)) & 0x200u);  // inf, or NaN
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(a) + std::bit_cast<float>(denorm_magic)) - denorm_magic;
  const uint32_t odd = (a >> 13) & 1u;
  const uint32_t norm = (a + ((15u - 127u) << 23) + 0xfffu + odd) >> 13;  // carry into the exponent is correct
  // Select with masks (see f16_to_f32). is_big and is_sub never both hold.
  const uint32_t is_big = 0u - static_cast<uint32_t>(a >= f16max);
  const uint32_t is_sub = 0u - static_cast<uint32_t>(a < (113u << 23));
  const uint32_t o = (big & is_big) | (sub & is_sub) | (norm & ~(is_big | is_sub));
  return static_cast<uint16_t>(o | sign);
}

}  // namespace cvt
}  // namespace zt
