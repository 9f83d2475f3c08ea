// defines: sum_of_squares_workspace_bytes, sum_of_squares_async, sum_of_squares (cuda/kernels/reduce.h);
//          file-local: chunk_sums_kernel, sum_partials_kernel, chunk_count
#include "cuda/kernels/reduce.h"

#include "core/dispatch.h"  // need_dtype, dispatch_dtype
#include "cuda/check.h"
#include "cuda/kernels/cast.h"  // dev::Io, dev::grid_for

namespace zt::cuda_kernels {

namespace {

constexpr int kThreads = 256;  // one block per chunk: all of them load it, 8 of them add it

// One block per chunk c. The block's threads copy the chunk into shared memory with 16-byte loads
// (every load of the chunk in flight at once: one trip to memory), then threads 0..7 — lane l —
// add the squares of chunk elements l, l + 8, l + 16, ... in order from shared memory, and the
// 8 lanes combine in the CPU's fixed tree. (The former mapping, one thread per (chunk, lane)
// reading memory directly, made each thread wait for memory 128 times, 16 loads at a time.)
template <DType D>
__global__ void __launch_bounds__(kThreads)
    chunk_sums_kernel(const typename dev::Io<D>::T* __restrict__ x, int64_t n, double* __restrict__ partial) {
  using T = typename dev::Io<D>::T;
  extern __shared__ uint4 staged_chunk[];
  T* const sm = reinterpret_cast<T*>(staged_chunk);
  const int64_t c = blockIdx.x, b = c * kCudaSumChunk;
  const int64_t len = n - b < kCudaSumChunk ? n - b : kCudaSumChunk;
  const T* const p = x + b;
  int64_t done = 0;
  if (dev::aligned16(p)) {  // x 16-byte aligned (chunks start at multiples of 32 KiB from it)
    const int64_t words = len * static_cast<int64_t>(sizeof(T)) / 16;
    const uint4* p4 = reinterpret_cast<const uint4*>(p);
#pragma unroll 8
    for (int64_t w = threadIdx.x; w < words; w += kThreads) staged_chunk[w] = p4[w];
    done = words * 16 / static_cast<int64_t>(sizeof(T));
  }
  for (int64_t i = done + threadIdx.x; i < len; i += kThreads) sm[i] = p[i];
  __syncthreads();
  if (threadIdx.x >= 8) return;
  const int lane = static_cast<int>(threadIdx.x);
  double acc = 0.0;
#pragma unroll 16
  for (int64_t i = lane; i < len; i += 8) {
    const double d = static_cast<double>(dev::Io<D>::load(sm[i]));
    acc = __fma_rn(d, d, acc);
  }
  // ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) lands in lane 0 (a + b == b + a bitwise).
  acc = __dadd_rn(acc, __shfl_xor_sync(0xffu, acc, 1));
  acc = __dadd_rn(acc, __shfl_xor_sync(0xffu, acc, 2));
  acc = __dadd_rn(acc, __shfl_xor_sync(0xffu, acc, 4));
  if (lane == 0) partial[c] = acc;
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
    ZT_CHECK(chunks <= int64_t{0x7fffffff}, "sum_of_squares: ", chunks, " chunks exceed one launch");
    dispatch_dtype<DType::f32, DType::bf16, DType::f16>(t, "cuda_kernels::", "sum_of_squares", [&](auto d) {
      constexpr DType Dt = decltype(d)::value;
      using T = typename dev::Io<Dt>::T;
      const int bytes = static_cast<int>(kCudaSumChunk * static_cast<int64_t>(sizeof(T)));  // 32 or 64 KiB
      ZT_CUDA_CHECK(cudaFuncSetAttribute(chunk_sums_kernel<Dt>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
      chunk_sums_kernel<Dt><<<static_cast<unsigned>(chunks), kThreads, static_cast<size_t>(bytes), s>>>(
          static_cast<const T*>(x), n, partial);
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
