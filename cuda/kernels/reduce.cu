// defines: sum_of_squares_workspace_bytes, sum_of_squares_async, sum_of_squares (cuda/kernels/reduce.h);
//          file-local: chunk_sums_kernel, sum_partials_kernel, chunk_count
#include "cuda/kernels/reduce.h"

#include "core/dispatch.h"  // need_dtype, dispatch_dtype
#include "cuda/check.h"
#include "cuda/kernels/cast.h"  // dev::Io, dev::grid_for

namespace zt::cuda_kernels {

namespace {

constexpr int kThreads = 256;  // a multiple of 32: every warp is full, so shuffles see 8-lane groups whole
constexpr int kBatch = 16;     // loads in flight per thread before its (serial) adds

// One thread per (chunk c, lane l): sums the squares of chunk elements l, l + 8, l + 16, ... in
// order, then the chunk's 8 lanes (8 consecutive threads) combine in the CPU's fixed tree.
template <DType D>
__global__ void chunk_sums_kernel(const typename dev::Io<D>::T* __restrict__ x, int64_t n, int64_t chunks,
                                  double* __restrict__ partial) {
  const int64_t gid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t c = gid >> 3;
  const int lane = static_cast<int>(threadIdx.x & 7u);
  double acc = 0.0;
  if (c < chunks) {
    const int64_t b = c * kCudaSumChunk;
    const int64_t len = n - b < kCudaSumChunk ? n - b : kCudaSumChunk;
    const typename dev::Io<D>::T* p = x + b;
    int64_t i = lane;
    for (; i + 8 * (kBatch - 1) < len; i += 8 * kBatch) {
      float v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) v[u] = dev::Io<D>::load(p[i + 8 * u]);
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const double d = static_cast<double>(v[u]);
        acc = __fma_rn(d, d, acc);
      }
    }
    for (; i < len; i += 8) {
      const double d = static_cast<double>(dev::Io<D>::load(p[i]));
      acc = __fma_rn(d, d, acc);
    }
  }
  // ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) lands in lane 0 (a + b == b + a bitwise).
  acc = __dadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, 1));
  acc = __dadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, 2));
  acc = __dadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, 4));
  if (lane == 0 && c < chunks) partial[c] = acc;
}

// One thread: the partials added in chunk order, from 0 (chunks == 0 gives 0).
__global__ void sum_partials_kernel(const double* __restrict__ partial, int64_t chunks, double* __restrict__ result) {
  double s = 0.0;
#pragma unroll 8
  for (int64_t c = 0; c < chunks; ++c) s = __dadd_rn(s, partial[c]);
  *result = s;
}

int64_t chunk_count(int64_t n) { return (n + kCudaSumChunk - 1) / kCudaSumChunk; }

}  // namespace

int64_t sum_of_squares_workspace_bytes(int64_t n) {
  if (n < 0) ZT_THROW("cuda_kernels::sum_of_squares_workspace_bytes: n = ", n, ", expected >= 0");
  return chunk_count(n) * static_cast<int64_t>(sizeof(double));
}

void sum_of_squares_async(const void* x, DType t, int64_t n, double* result_dev, void* workspace, cudaStream_t s) {
  need_dtype<DType::f32, DType::bf16, DType::f16>(t, "cuda_kernels::", "sum_of_squares");
  if (n < 0) ZT_THROW("cuda_kernels::sum_of_squares: n = ", n, ", expected >= 0");
  if (!result_dev) ZT_THROW("cuda_kernels::sum_of_squares: null result pointer");
  const int64_t chunks = chunk_count(n);
  if (chunks > 0) {
    if (!x || !workspace)
      ZT_THROW("cuda_kernels::sum_of_squares: null pointer (x ", x, ", workspace ", workspace, ") for n = ", n);
    if (reinterpret_cast<uintptr_t>(workspace) % alignof(double) != 0)
      ZT_THROW("cuda_kernels::sum_of_squares: workspace ", workspace, " is not 8-byte aligned");
    auto* partial = static_cast<double*>(workspace);
    const unsigned grid = dev::grid_for(chunks * 8, kThreads);
    ZT_CHECK(static_cast<int64_t>(grid) * kThreads >= chunks * 8, "sum_of_squares: ", chunks, " chunks exceed one launch");
    dispatch_dtype<DType::f32, DType::bf16, DType::f16>(t, "cuda_kernels::", "sum_of_squares", [&](auto d) {
      using T = typename dev::Io<decltype(d)::value>::T;
      chunk_sums_kernel<decltype(d)::value><<<grid, kThreads, 0, s>>>(static_cast<const T*>(x), n, chunks, partial);
    });
    ZT_CUDA_CHECK(cudaGetLastError());
  }
  sum_partials_kernel<<<1, 1, 0, s>>>(static_cast<const double*>(workspace), chunks, result_dev);
  ZT_CUDA_CHECK(cudaGetLastError());
}

void sum_of_squares(const void* x, DType t, int64_t n, double* result_host, cudaStream_t s) {
  if (!result_host) ZT_THROW("cuda_kernels::sum_of_squares: null result_host");
  if (n < 0) ZT_THROW("cuda_kernels::sum_of_squares: n = ", n, ", expected >= 0");
  need_dtype<DType::f32, DType::bf16, DType::f16>(t, "cuda_kernels::", "sum_of_squares");
  const int64_t ws = sum_of_squares_workspace_bytes(n);
  void* buf = nullptr;  // [result double | partials]
  ZT_CUDA_CHECK(cudaMallocAsync(&buf, static_cast<size_t>(ws) + sizeof(double), s));
  try {
    auto* result = static_cast<double*>(buf);
    sum_of_squares_async(x, t, n, result, result + 1, s);
    ZT_CUDA_CHECK(cudaMemcpyAsync(result_host, result, sizeof(double), cudaMemcpyDeviceToHost, s));
  } catch (...) {
    cudaFreeAsync(buf, s);
    throw;
  }
  ZT_CUDA_CHECK(cudaFreeAsync(buf, s));
  ZT_CUDA_CHECK(cudaStreamSynchronize(s));
}

}  // namespace zt::cuda_kernels
