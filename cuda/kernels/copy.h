// defines: cuda_kernels::kMaxDims, StridedPair, make_strided_pair — the element layout of a
//          strided copy (shape + destination and source strides, merged on the host);
//          cuda_kernels::copy (strided, dtype-converting device-to-device copy) and
//          cuda_kernels::fill (any strides); and (CUDA sources only) dev::strided_offsets.
//
// Semantics: those of core/tensor.cpp's Tensor::copy_ and fill_ on the host:
//  - same dtype: the bits are copied exactly (NaN payloads, -0, int values), whatever the dtype;
//  - different dtypes: every element is read as double and written from double, the CPU's
//    load / store (core/tensor.cpp). Between float32, bfloat16 and float16 this is the same as
//    going through float32 (float -> double -> float is exact), so those pairs take a float32
//    path with dev::Io's conversions (round to nearest even, core/dtype.h's NaN rules); float64
//    -> bf16 / f16 rounds to float32 first, then to the 2-byte type, as the CPU does.
//  - to an integer dtype: truncation toward zero of the double (static_cast on the CPU). Values
//    that fit are exact on both sides. Out of range or NaN is undefined behaviour in C++: x86
//    gives INT_MIN (int32, int64) / the low 16 bits of the int32 conversion (uint16), the GPU
//    (__double2int_rz / __double2ll_rz) saturates and gives 0 for NaN. uint16 keeps the low 16
//    bits of the int32 conversion on both sides for |v| < 2^31.
//  - int64 -> float32 rounds twice (to double, then to float) exactly as the CPU.
// fill: the value is converted once on the host with the same store rules (core/tensor.cpp), so
// every element receives the same bits; an all-zero-bytes value on a contiguous range is a
// cudaMemsetAsync.
//
// Layout: up to kMaxDims dimensions after merging (make_strided_pair drops size-1 dimensions and
// merges neighbours that are contiguous in both operands; a view of any rank whose merged form
// has at most 8 dimensions is accepted). Strides are in elements and may be any int64 (>= 0 from
// Tensor's views). dst and src must not share elements (the table's rule: outputs never overlap
// inputs); a contiguous pair that partially overlaps is refused, an identical same-dtype pair is
// a no-op. Element i (row-major over the shape) is read and written by one thread.
// Fast paths: both contiguous and the same dtype: cudaMemcpyAsync; both contiguous between
// f32 / bf16 / f16: cuda_kernels::cast (128-bit accesses). Asynchronous on s.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace zt::cuda_kernels {

inline constexpr int kMaxDims = 8;

// A row-major walk over `shape` with two stride sets (in elements): [0] destination, [1] source.
// Passed to kernels by value (kernel parameter space). numel = product of shape; contiguous:
// both stride sets are the row-major strides of shape (then offsets equal the linear index).
struct StridedPair {
  int ndim = 0;
  int64_t numel = 0;
  bool contiguous = true;
  int64_t shape[kMaxDims] = {};
  int64_t stride[2][kMaxDims] = {};
};

// Merges (shape, dst_strides, src_strides) of `ndim` dimensions (any ndim >= 0) into a
// StridedPair; throws a zt::Error when the merged form needs more than kMaxDims dimensions.
StridedPair make_strided_pair(int ndim, const int64_t* shape, const int64_t* dst_strides, const int64_t* src_strides);

// dst = src converted to dst_t (see above), element by element over the layout l.
// Dtypes: any of f32, f64, bf16, f16, i32, i64, u16 on either side.
void copy(DType dst_t, void* dst, DType src_t, const void* src, const StridedPair& l, cudaStream_t s);

// dst = value (converted to t on the host) at the offsets l.stride[0] (l.stride[1] is ignored).
void fill(DType t, void* dst, const StridedPair& l, double value, cudaStream_t s);

}  // namespace zt::cuda_kernels

#if defined(__CUDACC__)
namespace zt::cuda_kernels::dev {

// The offsets (in elements) of linear index i in both operands.
__device__ __forceinline__ void strided_offsets(const StridedPair& l, int64_t i, int64_t& o0, int64_t& o1) {
  if (l.contiguous) {
    o0 = o1 = i;
    return;
  }
  o0 = 0, o1 = 0;
#pragma unroll
  for (int d = kMaxDims - 1; d >= 0; --d) {
    if (d < l.ndim) {
      const int64_t q = i / l.shape[d], r = i - q * l.shape[d];
      o0 += r * l.stride[0][d];
      o1 += r * l.stride[1][d];
      i = q;
    }
  }
}

}  // namespace zt::cuda_kernels::dev
#endif
