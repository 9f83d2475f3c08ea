// defines: cuda_kernels::dev::Ptrs, apply_at, ew_kernel, launch_ew — the element-wise map shared
//          by the element-wise kernels (cuda/kernels/activation.cu, cuda/kernels/elementwise.cu),
//          and its one launcher. nvcc only.
//
// ew_kernel<D, NI, NO>(ptrs, n, vec, op): for every i < n, reads NI inputs of storage dtype D at i
// (converted exactly to float32), calls op(y, x) with float y[NO], x[NI], and writes the NO outputs
// rounded to D (core/dtype.h's rounding, dev::Io). vec: packs of 8 elements through 128-bit
// accesses (every pointer 16-byte aligned), then the n % 8 tail element-wise; the two paths run
// the same per-element code, so the bits do not depend on the path. No __restrict__: an output
// may be an input (in place); each element is read, then written, by the same thread.
//
// launch_ew(who, t, ptrs, n, op, s): the host side — checks (dtype, n >= 0, no null pointer when
// n > 0, each a zt::Error naming `who`), then ew_kernel<D> for the runtime dtype t, with the vector
// path when n >= 8 and every pointer is 16-byte aligned.
#pragma once
#include "cuda/check.h"
#include "cuda/kernels/cast.h"      // dev::Io, dev::load8 / store8, dev::aligned16, dev::grid_for
#include "cuda/kernels/dispatch.h"  // dispatch_compute

namespace zt::cuda_kernels::dev {

template <int NI, int NO>
struct Ptrs {
  const void* in[NI];
  void* out[NO];
};

template <DType D, int NI, int NO, class Op>
__device__ __forceinline__ void apply_at(const Ptrs<NI, NO>& a, int64_t i, const Op& op) {
  using T = typename dev::Io<D>::T;
  float x[NI], y[NO];
#pragma unroll
  for (int k = 0; k < NI; ++k) x[k] = dev::Io<D>::load(static_cast<const T*>(a.in[k])[i]);
  op(y, x);
#pragma unroll
  for (int k = 0; k < NO; ++k) static_cast<T*>(a.out[k])[i] = dev::Io<D>::store(y[k]);
}

template <DType D, int NI, int NO, class Op>
__global__ void ew_kernel(Ptrs<NI, NO> a, int64_t n, bool vec, Op op) {
  using T = typename dev::Io<D>::T;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if (vec) {
    const int64_t packs = n / 8;
    for (int64_t j = t; j < packs; j += stride) {
      alignas(16) T in[NI][8];
      alignas(16) T out[NO][8];
#pragma unroll
      for (int k = 0; k < NI; ++k) dev::load8(in[k], static_cast<const T*>(a.in[k]) + j * 8);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        float x[NI], y[NO];
#pragma unroll
        for (int k = 0; k < NI; ++k) x[k] = dev::Io<D>::load(in[k][e]);
        op(y, x);
#pragma unroll
        for (int k = 0; k < NO; ++k) out[k][e] = dev::Io<D>::store(y[k]);
      }
#pragma unroll
      for (int k = 0; k < NO; ++k) dev::store8(static_cast<T*>(a.out[k]) + j * 8, out[k]);
    }
    done = packs * 8;
  }
  for (int64_t i = done + t; i < n; i += stride) apply_at<D>(a, i, op);
}

}  // namespace zt::cuda_kernels::dev

namespace zt::cuda_kernels {

// ew_kernel<D, NI, NO, Op> over n elements of dtype t: float32 or bfloat16, and float16 too when
// WithF16 (scale, the one op that float16 buffers take). 256 threads a block.
template <bool WithF16 = false, int NI, int NO, class Op>
void launch_ew(const char* who, DType t, const dev::Ptrs<NI, NO>& a, int64_t n, const Op& op, cudaStream_t s) {
  constexpr int kThreads = 256;
  if constexpr (WithF16) need_dtype<DType::f32, DType::bf16, DType::f16>(t, "cuda_kernels::", who);
  else check_compute(who, t);
  if (n < 0) ZT_THROW("cuda_kernels::", who, ": n = ", n, ", expected >= 0");
  if (n == 0) return;
  for (int k = 0; k < NI; ++k)
    if (!a.in[k]) ZT_THROW("cuda_kernels::", who, ": input ", k, " is null for n = ", n);
  for (int k = 0; k < NO; ++k)
    if (!a.out[k]) ZT_THROW("cuda_kernels::", who, ": output ", k, " is null for n = ", n);
  bool vec = n >= 8;
  for (int k = 0; k < NI; ++k) vec = vec && dev::aligned16(a.in[k]);
  for (int k = 0; k < NO; ++k) vec = vec && dev::aligned16(a.out[k]);
  const unsigned grid = dev::grid_for(vec ? (n + 7) / 8 : n, kThreads);
  const auto go = [&](auto d) {
    dev::ew_kernel<decltype(d)::value, NI, NO, Op><<<grid, kThreads, 0, s>>>(a, n, vec, op);
  };
  if constexpr (WithF16) dispatch_dtype<DType::f32, DType::bf16, DType::f16>(t, "cuda_kernels::", who, go);
  else dispatch_compute(t, who, go);
  ZT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zt::cuda_kernels
