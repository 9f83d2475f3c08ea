// defines: cuda_kernels::dev::Ptrs, apply_at, ew_kernel — the element-wise map shared by the
//          element-wise kernels (cuda/kernels/activation.cu, cuda/kernels/elementwise.cu). nvcc only.
//
// ew_kernel<D, NI, NO>(ptrs, n, vec, op): for every i < n, reads NI inputs of storage dtype D at i
// (converted exactly to float32), calls op(y, x) with float y[NO], x[NI], and writes the NO outputs
// rounded to D (core/dtype.h's rounding, dev::Io). vec: packs of 8 elements through 128-bit
// accesses (every pointer 16-byte aligned), then the n % 8 tail element-wise; the two paths run
// the same per-element code, so the bits do not depend on the path. No __restrict__: an output
// may be an input (in place); each element is read, then written, by the same thread.
#pragma once
#include "cuda/kernels/cast.h"  // dev::Io, dev::load8 / store8

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
