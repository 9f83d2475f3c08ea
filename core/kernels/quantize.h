// defines: kQuantBlockDefault, quantized_code_bytes, quantized_blocks, quantize_blocks,
//          dequantize_blocks, quantize_, dequantize_ — block-wise symmetric integer quantization of a
//          flat float32 buffer: the wire format of ZeRO++'s quantized collectives (Wang et al. 2023,
//          "ZeRO++", section 3: qwZ sends the weights' all-gather as int8, qgZ the gradients as int4
//          or int8).
//
// Format. The n values are cut into blocks of `block` elements (the last one may be shorter).
// Block b has one float32 scale s_b and every element a b-bit code q_i; dequantized,
// x'_i = float(q_i * s_b). Two schemes (QuantScheme, core/backend.h) pick s_b and q_i from
// m = max |x| over the block:
//   symmetric  s_b = float(m / qmax), qmax = 2^(bits-1) - 1 (127 for 8 bits, 7 for 4);
//              q_i = round(x_i / s_b) half away from zero, clamped to [-qmax, qmax].
//              Error: |x_i - x'_i| <= s_b / 2 + 2^-23 m, about m / 254 (8 bits), m / 14 (4 bits).
//   deepspeed  DeepSpeed's symmetric quantizer (csrc/quantization/quantization_utils.h): its
//              scale 2^bits / (2 m) is the inverse of s_b = m / 2^(bits-1) (exact: a power of
//              two), q_i = round(x_i / s_b) half to even (CUDA's __float2int_rn), clamped to
//              [-2^(bits-1), 2^(bits-1) - 1] ([-8, 7] for 4 bits). DeepSpeed multiplies x_i by
//              its float scale where we divide by s_b: the codes can differ only where
//              x_i / s_b lies within a float rounding of a half-integer.
//              Error: s_b / 2 = m / 16 (4 bits) below 2^(bits-1) - 1/2 steps, up to s_b = m / 8
//              at +m (its code 8 clamps to 7): |x_i - x'_i| <= s_b + 2^-23 m.
// Either way the division is done in double, a block of zeros has s_b = 0 and codes 0, 8-bit
// codes are one int8 each and 4-bit codes are two's-complement nibbles packed two per byte,
// element 2j in the low nibble of byte j, 2j+1 in the high one (across block boundaries: the
// packing is by element index). tests/test_quantize.cpp checks both bounds against a float64
// reference on every element. A block holding a NaN or an infinity gets a NaN scale and codes 0:
// every element of it dequantizes to NaN, so whoever checks the values after the collective
// (fp16's loss scaler looking for an overflow) still sees that it was not finite.
//
// Block size: DeepSpeed's weight quantizer picks, per parameter, groups just under 8000 elements
// ("the optimal size is 4k"), its gradient quantizer about one row (zero/zeropp.h); here the size
// is fixed per call, kQuantBlockDefault by default.
// Threads: blocks are independent (OpenMP over blocks); the result does not depend on the count.
// The CUDA kernels (cuda/kernels/quantize.cu) compute the same bytes: the scale and the code are
// the same double divisions, the dequantized value the same float32 product.
#pragma once
#include <cstdint>

#include "core/backend.h"  // defines: QuantScheme
#include "core/tensor.h"

namespace zt {

inline constexpr int64_t kQuantBlockDefault = 4096;

// Bytes of the codes of n values: n (8 bits) or ceil(n / 2) (4 bits). bits other than 4 or 8 throw.
int64_t quantized_code_bytes(int64_t n, int bits);
// Blocks (and so scales) of n values: ceil(n / block).
int64_t quantized_blocks(int64_t n, int64_t block);

// x (n) -> codes (quantized_code_bytes(n, bits)), scales (quantized_blocks(n, block)).
void quantize_blocks(const float* x, int64_t n, int bits, int64_t block, uint8_t* codes, float* scales,
                     QuantScheme scheme = QuantScheme::symmetric);
// codes, scales -> out (n): x'_i = q_i * s_b.
void dequantize_blocks(const uint8_t* codes, const float* scales, int64_t n, int bits, int64_t block, float* out);

// The same on tensors, on whatever device they are (the backend's quantize / dequantize):
// x (n, float32) -> codes (uint8, quantized_code_bytes(n, bits)), scales (float32,
// quantized_blocks(n, block)); all contiguous, on one device. A wrong size or dtype is an error
// naming the tensor.
void quantize_(const Tensor& codes, const Tensor& scales, const Tensor& x, int bits, int64_t block,
               QuantScheme scheme = QuantScheme::symmetric);
// codes, scales -> out (n, float32).
void dequantize_(const Tensor& out, const Tensor& codes, const Tensor& scales, int bits, int64_t block);

}  // namespace zt
