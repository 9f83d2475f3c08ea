// defines: cuda_kernels::dev::Ptrs, apply_at, apply_pack8, ew_kernel, Lds, ew_rows_kernel, launch_ew,
//          launch_ew_rows — the element-wise map shared by the element-wise kernels
//          (cuda/kernels/activation.cu, cuda/kernels/elementwise.cu), flat and over rows of column
//          blocks, and their launchers. nvcc only.
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
//
// launch_ew_rows(who, t, ptrs, lds, rows, cols, op, s): the same map over rows x cols elements,
// pointer k's row r starting at ptrs[k] + r * lds[k] (column blocks of one packed tensor).
#pragma once
#include <algorithm>

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

// Elements [8 j, 8 j + 8) through 128-bit accesses (every pointer 16-byte aligned there).
template <DType D, int NI, int NO, class Op>
__device__ __forceinline__ void apply_pack8(const Ptrs<NI, NO>& a, int64_t j, const Op& op) {
  using T = typename dev::Io<D>::T;
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

template <DType D, int NI, int NO, class Op> __global__ void ew_kernel(Ptrs<NI, NO> a, int64_t n, bool vec, Op op) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if (vec) {
    const int64_t packs = n / 8;
    for (int64_t j = t; j < packs; j += stride) apply_pack8<D>(a, j, op);
    done = packs * 8;
  }
  for (int64_t i = done + t; i < n; i += stride) apply_at<D>(a, i, op);
}

// Leading dimensions (in elements) of the pointers of an ew_rows_kernel.
template <int NI, int NO> struct Lds {
  int64_t in[NI];
  int64_t out[NO];
};

// The same map over `rows` rows of `cols` elements, pointer k's row r at k + r * ld[k]: column
// blocks of one packed tensor (the gate and up halves of Llama's (N, 2F) gate | up). One block a
// row (grid-stride), its threads over the columns; vec: packs of 8 (cols % 8 == 0, every pointer
// and leading dimension 16-byte aligned).
template <DType D, int NI, int NO, class Op>
__global__ void ew_rows_kernel(Ptrs<NI, NO> a, Lds<NI, NO> ld, int64_t rows, int64_t cols, bool vec, Op op) {
  using T = typename dev::Io<D>::T;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    Ptrs<NI, NO> row;
#pragma unroll
    for (int k = 0; k < NI; ++k) row.in[k] = static_cast<const T*>(a.in[k]) + r * ld.in[k];
#pragma unroll
    for (int k = 0; k < NO; ++k) row.out[k] = static_cast<T*>(a.out[k]) + r * ld.out[k];
    int64_t done = 0;
    if (vec) {
      for (int64_t j = threadIdx.x; j < cols / 8; j += blockDim.x) apply_pack8<D>(row, j, op);
      done = cols / 8 * 8;
    }
    for (int64_t i = done + threadIdx.x; i < cols; i += blockDim.x) apply_at<D>(row, i, op);
  }
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

// ew_rows_kernel<D, NI, NO, Op> over rows x cols elements of dtype t (float32 or bfloat16), 256
// threads a block, the same checks as launch_ew.
template <int NI, int NO, class Op>
void launch_ew_rows(const char* who, DType t, const dev::Ptrs<NI, NO>& a, const dev::Lds<NI, NO>& ld, int64_t rows,
                    int64_t cols, const Op& op, cudaStream_t s) {
  constexpr int kThreads = 256;
  check_compute(who, t);
  if (rows < 0 || cols < 0) ZT_THROW("cuda_kernels::", who, ": rows = ", rows, ", cols = ", cols, ", expected >= 0");
  if (rows == 0 || cols == 0) return;
  const int64_t elem = static_cast<int64_t>(dtype_size(t));
  bool vec = cols >= 8 && cols % 8 == 0;
  for (int k = 0; k < NI; ++k) {
    if (!a.in[k]) ZT_THROW("cuda_kernels::", who, ": input ", k, " is null for ", rows, " x ", cols);
    vec = vec && dev::aligned16(a.in[k]) && ld.in[k] * elem % 16 == 0;
  }
  for (int k = 0; k < NO; ++k) {
    if (!a.out[k]) ZT_THROW("cuda_kernels::", who, ": output ", k, " is null for ", rows, " x ", cols);
    vec = vec && dev::aligned16(a.out[k]) && ld.out[k] * elem % 16 == 0;
  }
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 30));
  dispatch_compute(t, who, [&](auto d) {
    dev::ew_rows_kernel<decltype(d)::value, NI, NO, Op><<<grid, kThreads, 0, s>>>(a, ld, rows, cols, vec, op);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zt::cuda_kernels
