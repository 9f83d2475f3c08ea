// defines: cuda_kernels::quantize_blocks, cuda_kernels::dequantize_blocks (cuda/kernels/quantize.h);
//          file-local: kThreads, qmax_of, code_of, get_code, scales_kernel, codes_kernel,
//          dequantize_kernel, check_format
#include "cuda/kernels/quantize.h"

#include <cmath>

#include "core/check.h"
#include "cuda/check.h"
#include "cuda/kernels/cast.h"  // dev::grid_for

namespace zt::cuda_kernels {

namespace {

constexpr int kThreads = 256;

__host__ __device__ int qmax_of(int bits) { return (1 << (bits - 1)) - 1; }

// The CPU's code_of (core/kernels/quantize.cpp): x / s in double, rounded half away from zero
// into [-qmax, qmax] (symmetric) or half to even into [-qmax - 1, qmax] (ds: deepspeed); a zero or
// NaN scale gives 0.
__device__ int code_of(float x, float s, int bits, bool ds) {
  if (s == 0.0f || isnan(s)) return 0;
  const int hi = qmax_of(bits), lo = ds ? -hi - 1 : -hi;
  const double r = static_cast<double>(x) / static_cast<double>(s);
  const double q = ds ? rint(r) : round(r);
  return static_cast<int>(q > hi ? hi : q < lo ? lo : q);
}

__device__ int get_code(const uint8_t* codes, int bits, int64_t i) {
  if (bits == 8) return static_cast<int8_t>(codes[i]);
  const int nib = (i % 2 == 0) ? (codes[i / 2] & 0xf) : (codes[i / 2] >> 4);
  return nib >= 8 ? nib - 16 : nib;
}

// One thread block per quantization block: its max |x| and whether every element is finite.
__global__ void scales_kernel(const float* __restrict__ x, int64_t n, int64_t block, int bits, bool ds,
                              float* __restrict__ scales) {
  __shared__ float smax[kThreads / 32];
  __shared__ int sbad[kThreads / 32];
  const int64_t b = blockIdx.x, i0 = b * block, i1 = i0 + block < n ? i0 + block : n;
  float amax = 0.0f;
  int bad = 0;
  for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
    const float v = x[i];
    bad |= !isfinite(v);
    amax = fmaxf(amax, fabsf(v));
  }
  for (int o = 16; o > 0; o >>= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    bad |= __shfl_xor_sync(0xffffffffu, bad, o);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) smax[warp] = amax, sbad[warp] = bad;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) amax = fmaxf(amax, smax[w]), bad |= sbad[w];
    // the CPU's scale_of: m / qmax in double, or m / 2^(bits-1) (exact)
    scales[b] = bad  ? __int_as_float(0x7fc00000)
                : ds ? ldexpf(amax, -(bits - 1))
                     : static_cast<float>(static_cast<double>(amax) / qmax_of(bits));
  }
}

// One thread per code byte.
__global__ void codes_kernel(const float* __restrict__ x, int64_t n, int bits, int64_t block, bool ds,
                             const float* __restrict__ scales, uint8_t* __restrict__ codes, int64_t nbytes) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < nbytes; j += stride) {
    if (bits == 8) {
      codes[j] = static_cast<uint8_t>(static_cast<int8_t>(code_of(x[j], scales[j / block], bits, ds)));
      continue;
    }
    const int64_t a = 2 * j, c = a + 1;
    const int lo = code_of(x[a], scales[a / block], bits, ds);
    const int hi = c < n ? code_of(x[c], scales[c / block], bits, ds) : 0;
    codes[j] = static_cast<uint8_t>((lo & 0xf) | ((hi & 0xf) << 4));
  }
}

__global__ void dequantize_kernel(const uint8_t* __restrict__ codes, const float* __restrict__ scales, int64_t n,
                                  int bits, int64_t block, float* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = static_cast<float>(get_code(codes, bits, i)) * scales[i / block];
}

void check_format(const char* who, int64_t n, int bits, int64_t block) {
  ZT_CHECK(bits == 4 || bits == 8, "cuda_kernels::", who, ": bits = ", bits, ", expected 4 or 8");
  ZT_CHECK(block >= 1 && n >= 0, "cuda_kernels::", who, ": n = ", n, ", block = ", block,
           ": expected n >= 0 and block >= 1");
}

}  // namespace

void quantize_blocks(const float* x, int64_t n, int bits, int64_t block, uint8_t* codes, float* scales, bool ds,
                     cudaStream_t s) {
  check_format("quantize_blocks", n, bits, block);
  if (n == 0) return;
  const int64_t nb = (n + block - 1) / block;
  ZT_CHECK(nb <= INT32_MAX, "cuda_kernels::quantize_blocks: ", nb, " blocks, at most 2^31 - 1");
  scales_kernel<<<static_cast<unsigned>(nb), kThreads, 0, s>>>(x, n, block, bits, ds, scales);
  ZT_CUDA_CHECK(cudaGetLastError());
  const int64_t nbytes = bits == 8 ? n : (n + 1) / 2;
  codes_kernel<<<dev::grid_for(nbytes, kThreads), kThreads, 0, s>>>(x, n, bits, block, ds, scales, codes, nbytes);
  ZT_CUDA_CHECK(cudaGetLastError());
}

void dequantize_blocks(const uint8_t* codes, const float* scales, int64_t n, int bits, int64_t block, float* out,
                       cudaStream_t s) {
  check_format("dequantize_blocks", n, bits, block);
  if (n == 0) return;
  dequantize_kernel<<<dev::grid_for(n, kThreads), kThreads, 0, s>>>(codes, scales, n, bits, block, out);
  ZT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zt::cuda_kernels
