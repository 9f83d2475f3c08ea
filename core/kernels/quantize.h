// defines: kQuantBlockDefault, quantized_code_bytes, quantized_blocks, quantize_blocks,
//          dequantize_blocks, quantize_, dequantize_ — block-wise symmetric integer quantization of a flat float32 buffer:
//          the wire format of ZeRO++'s quantized collectives (Wang et al. 2023, "ZeRO++", section
//          3: qwZ sends the weights' all-gather as int8, qgZ the gradients as int4 or int8).
//
// Format. The n values are cut into blocks of `block` elements (the last one may be shorter).
// Block b has one float32 scale s_b = float(max |x| over the block / qmax), qmax = 2^(bits-1) - 1
// (127 for 8 bits, 7 for 4), and every element a code q_i = round(x_i / s_b), to the nearest
// integer (half away from zero), clamped to [-qmax, qmax]; a block of zeros has s_b = 0 and codes
// 0. 8-bit codes are one int8 each; 4-bit codes are two's-complement nibbles packed two per byte,
// element 2j in the low nibble of byte j, 2j+1 in the high one (across block boundaries: the
// packing is by element index). Dequantized, x'_i = float(q_i * s_b).
//
// Error bound (the division done in double): |x_i - x'_i| <= s_b / 2 + 2^-23 max|x|_block, that
// is about max|x|_block / 254 for 8 bits and / 14 for 4 bits. tests/test_quantize.cpp checks it
// against a float64 reference on every element. A block holding a NaN or an infinity gets a NaN
// scale and codes 0: every element of it dequantizes to NaN, so whoever checks the values after
// the collective (fp16's loss scaler looking for an overflow) still sees that it was not finite.
//
// Block size: DeepSpeed's CUDA quantizer picks, per parameter, groups just under 8000 elements
// ("the optimal size is 4k"); here the size is fixed per call, kQuantBlockDefault by default.
// Threads: blocks are independent (OpenMP over blocks); the result does not depend on the count.
// The CUDA kernels (cuda/kernels/quantize.cu) compute the same bytes: the scale and the code are
// the same double divisions, the dequantized value the same float32 product.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zt {

inline constexpr int64_t kQuantBlockDefault = 4096;

// Bytes of the codes of n values: n (8 bits) or ceil(n / 2) (4 bits). bits other than 4 or 8 throw.
int64_t quantized_code_bytes(int64_t n, int bits);
// Blocks (and so scales) of n values: ceil(n / block).
int64_t quantized_blocks(int64_t n, int64_t block);

// x (n) -> codes (quantized_code_bytes(n, bits)), scales (quantized_blocks(n, block)).
void quantize_blocks(const float* x, int64_t n, int bits, int64_t block, uint8_t* codes, float* scales);
// codes, scales -> out (n): x'_i = q_i * s_b.
void dequantize_blocks(const uint8_t* codes, const float* scales, int64_t n, int bits, int64_t block, float* out);

// The same on tensors, on whatever device they are (the backend's quantize / dequantize):
// x (n, float32) -> codes (uint8, quantized_code_bytes(n, bits)), scales (float32,
// quantized_blocks(n, block)); all contiguous, on one device. A wrong size or dtype is an error
// naming the tensor.
void quantize_(const Tensor& codes, const Tensor& scales, const Tensor& x, int bits, int64_t block);
// codes, scales -> out (n, float32).
void dequantize_(const Tensor& out, const Tensor& codes, const Tensor& scales, int bits, int64_t block);

}  // namespace zt
