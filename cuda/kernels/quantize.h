// defines: cuda_kernels::quantize_blocks, cuda_kernels::dequantize_blocks — ZeRO++'s block-wise
//          symmetric quantization on the GPU, the same bytes as the CPU's (core/kernels/quantize.h).
//
// Same format, same arithmetic, both schemes: per block s = float(double(max |x|) / qmax) or
// max |x| / 2^(bits-1) (a block with a NaN or an infinity: s = NaN, codes 0),
// q_i = double(x_i) / double(s) rounded half away from zero or half to even, clamped;
// x'_i = float(q_i) * s. IEEE double division and float multiplication are correctly
// rounded on the GPU as on the CPU, so the codes and scales are bitwise the CPU's
// (tests/gpu/test_cuda_quantize.cpp checks it).
//
// GPU mapping: quantize is two kernels. The scales: one thread block per quantization block, a
// max-reduction (max is exact: any order gives the same maximum) and a finite flag. The codes:
// one thread per code byte (one element at 8 bits, the two elements 2j, 2j + 1 at 4 bits, which
// may fall in two blocks), each reading its blocks' scales. dequantize: one thread per element.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace zt::cuda_kernels {

// x (n float32, device) -> codes (quantized_code_bytes(n, bits)), scales (quantized_blocks(n, block));
// QuantScheme::deepspeed's rounding when `deepspeed`, else symmetric's.
void quantize_blocks(const float* x, int64_t n, int bits, int64_t block, uint8_t* codes, float* scales, bool deepspeed,
                     cudaStream_t s);
// codes, scales -> out (n float32).
void dequantize_blocks(const uint8_t* codes, const float* scales, int64_t n, int bits, int64_t block, float* out,
                       cudaStream_t s);

}  // namespace zt::cuda_kernels
