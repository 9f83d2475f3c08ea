// defines: bias_grad_workspace_bytes, bias_grad, bias_grad_combine (cuda/kernels/bias_grad.h); file-local:
//          bias_grad_partial_kernel, bias_grad_final_kernel, launch_final, launch
//
// The deterministic bias gradient: see bias_grad.h.
#include "cuda/kernels/bias_grad.h"

#include "cuda/check.h"
#include "cuda/kernels/cast.h"  // dev::Io, grid_for
#include "cuda/kernels/column_walk.cuh"  // dev::column_walk, sum_chunks_in_order
#include "cuda/kernels/dispatch.h"  // check_compute, dispatch_compute

namespace zt::cuda_kernels {

namespace {

constexpr int kThreads = 256;

template <DType DT>
using Tp = typename dev::Io<DT>::T;

// pass 1: partial[c, n] = sum of dy[m, n] for m in chunk c, in increasing m. One thread per (c,
// pack of P columns); consecutive threads take consecutive packs (coalesced rows).
template <DType DT, int P>
__global__ void bias_grad_partial_kernel(float* __restrict__ partial, const Tp<DT>* __restrict__ dy, int64_t M,
                                         int64_t N, int64_t chunks) {
  const int64_t packs = N / P;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < chunks * packs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i / packs, n = (i % packs) * P;
    const int64_t m0 = c * kBiasGradChunk, m1 = m0 + kBiasGradChunk < M ? m0 + kBiasGradChunk : M;
    float a[P] = {};
    const Tp<DT>* const in[1] = {dy};
    dev::column_walk<DT, P, 1, 0>(in, nullptr, N, n, m0, m1, [&](int64_t, const float(&v)[1][P], const float(&)[1]) {
#pragma unroll
      for (int e = 0; e < P; ++e) a[e] += v[0][e];
    });
#pragma unroll
    for (int e = 0; e < P; ++e) partial[c * N + n + e] = a[e];
  }
}

// pass 2: db[n] = [float(db[n]) +] sum over c in order of partial[c, n], rounded once.
template <DType DT>
__global__ void bias_grad_final_kernel(Tp<DT>* __restrict__ db, const float* __restrict__ partial, int64_t N,
                                       int64_t chunks, bool accumulate) {
  for (int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; n < N;
       n += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float a = dev::sum_chunks_in_order(partial, chunks, N, n);
    db[n] = dev::Io<DT>::store(accumulate ? dev::Io<DT>::load(db[n]) + a : a);
  }
}

template <DType DT>
void launch_final(void* db, const float* partial, int64_t M, int64_t N, bool accumulate, cudaStream_t s) {
  const int64_t chunks = (M + kBiasGradChunk - 1) / kBiasGradChunk;
  bias_grad_final_kernel<DT><<<dev::grid_for(N, kThreads), kThreads, 0, s>>>(static_cast<Tp<DT>*>(db), partial, N,
                                                                             chunks, accumulate);
  ZT_CUDA_CHECK(cudaGetLastError());
}

template <DType DT>
void launch(void* db, const void* dy, int64_t M, int64_t N, bool accumulate, float* partial, cudaStream_t s) {
  const int64_t chunks = (M + kBiasGradChunk - 1) / kBiasGradChunk;
  if (chunks > 0) {
    // pairs of columns: a warp reads 128 bytes of a bfloat16 row, and 2 N / 64 threads per chunk
    // keep the GPU busy (8-column packs left too few threads: slower on an H100)
    if (N % 2 == 0 && dev::pack_aligned(dy, 2, sizeof(Tp<DT>)))
      bias_grad_partial_kernel<DT, 2><<<dev::grid_for(chunks * N / 2, kThreads), kThreads, 0, s>>>(
          partial, static_cast<const Tp<DT>*>(dy), M, N, chunks);
    else
      bias_grad_partial_kernel<DT, 1><<<dev::grid_for(chunks * N, kThreads), kThreads, 0, s>>>(
          partial, static_cast<const Tp<DT>*>(dy), M, N, chunks);
    ZT_CUDA_CHECK(cudaGetLastError());
  }
  launch_final<DT>(db, partial, M, N, accumulate, s);
}

}  // namespace

int64_t bias_grad_workspace_bytes(int64_t M, int64_t N) {
  return (M + kBiasGradChunk - 1) / kBiasGradChunk * N * static_cast<int64_t>(sizeof(float));
}

void bias_grad(DType t, void* db, const void* dy, int64_t M, int64_t N, bool accumulate, void* workspace,
               cudaStream_t s) {
  check_compute("bias_grad", t);
  if (M < 0 || N < 0) ZT_THROW("cuda_kernels::bias_grad: M = ", M, ", N = ", N, ", expected >= 0");
  if (N == 0) return;
  if (!db || (M > 0 && (!dy || !workspace))) ZT_THROW("cuda_kernels::bias_grad: db, dy or workspace is null");
  if (reinterpret_cast<uintptr_t>(workspace) % alignof(float) != 0)
    ZT_THROW("cuda_kernels::bias_grad: workspace must be 4-byte aligned");
  float* partial = static_cast<float*>(workspace);
  dispatch_compute(t, "bias_grad", [&](auto d) { launch<decltype(d)::value>(db, dy, M, N, accumulate, partial, s); });
}

void bias_grad_combine(DType t, void* db, const float* partial, int64_t M, int64_t N, bool accumulate, cudaStream_t s) {
  check_compute("bias_grad_combine", t);
  if (M < 0 || N < 0) ZT_THROW("cuda_kernels::bias_grad_combine: M = ", M, ", N = ", N, ", expected >= 0");
  if (N == 0) return;
  if (!db || (M > 0 && !partial)) ZT_THROW("cuda_kernels::bias_grad_combine: db or partial is null");
  dispatch_compute(t, "bias_grad_combine", [&](auto d) { launch_final<decltype(d)::value>(db, partial, M, N, accumulate, s); });
}

}  // namespace zt::cuda_kernels
