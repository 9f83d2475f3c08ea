// defines: cast (cuda/kernels/cast.h); file-local: cast_one, cast_kernel, launch, is_cast_dtype
#include "cuda/kernels/cast.h"

#include <cmath>

#include "cuda/check.h"
#include "cuda/kernels/dispatch.h"  // dispatch_storage_pair, dispatch_bool

namespace zt::cuda_kernels {

namespace {

constexpr int kThreads = 256;

template <DType S, DType D, bool Scale>
__device__ __forceinline__ typename dev::Io<D>::T cast_one(typename dev::Io<S>::T x, float f) {
  float v = dev::Io<S>::load(x);
  if constexpr (Scale) v = __fmul_rn(v, f);
  return dev::Io<D>::store(v);
}

// vec: packs of 8 (both pointers 16-byte aligned) then the tail element-wise; otherwise all
// element-wise. No __restrict__: dst == src (in place) is allowed, each element is read and then
// written by the same thread.
template <DType S, DType D, bool Scale>
__global__ void cast_kernel(typename dev::Io<D>::T* dst, const typename dev::Io<S>::T* src, int64_t n, float f,
                            bool vec) {
  using TS = typename dev::Io<S>::T;
  using TD = typename dev::Io<D>::T;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if (vec) {
    const int64_t packs = n / 8;
    for (int64_t j = t; j < packs; j += stride) {
      alignas(16) TS in[8];
      alignas(16) TD out[8];
      dev::load8(in, src + j * 8);
#pragma unroll
      for (int e = 0; e < 8; ++e) out[e] = cast_one<S, D, Scale>(in[e], f);
      dev::store8(dst + j * 8, out);
    }
    done = packs * 8;
  }
  for (int64_t i = done + t; i < n; i += stride) dst[i] = cast_one<S, D, Scale>(src[i], f);
}

template <DType S, DType D, bool Scale>
void launch(void* dst, const void* src, int64_t n, float f, cudaStream_t s) {
  const bool vec = dev::aligned16(dst) && dev::aligned16(src) && n >= 8;
  const unsigned grid = dev::grid_for(vec ? (n + 7) / 8 : n, kThreads);
  cast_kernel<S, D, Scale><<<grid, kThreads, 0, s>>>(static_cast<typename dev::Io<D>::T*>(dst),
                                                      static_cast<const typename dev::Io<S>::T*>(src), n, f, vec);
  ZT_CUDA_CHECK(cudaGetLastError());
}

bool is_cast_dtype(DType t) { return dtype_in<DType::f32, DType::bf16, DType::f16>(t); }

}  // namespace

void cast(DType dst_t, void* dst, DType src_t, const void* src, int64_t n, float factor, cudaStream_t s) {
  if (!is_cast_dtype(dst_t) || !is_cast_dtype(src_t))
    ZT_THROW("cuda_kernels::cast: dst ", dtype_name(dst_t), ", src ", dtype_name(src_t),
             ": expected dtypes float32, bfloat16 or float16");
  if (n < 0) ZT_THROW("cuda_kernels::cast: n = ", n, ", expected >= 0");
  if (!std::isfinite(factor)) ZT_THROW("cuda_kernels::cast: factor ", factor, " is not finite");
  if (n == 0) return;
  if (!dst || !src) ZT_THROW("cuda_kernels::cast: null pointer (dst ", dst, ", src ", src, ") for n = ", n);
  const auto* d = static_cast<const char*>(dst);
  const auto* p = static_cast<const char*>(src);
  const int64_t db = n * static_cast<int64_t>(dtype_size(dst_t)), sb = n * static_cast<int64_t>(dtype_size(src_t));
  const bool overlap = d < p + sb && p < d + db;
  if (overlap && !(d == p && db == sb))
    ZT_THROW("cuda_kernels::cast: dst ", dst, " (", dtype_name(dst_t), ") and src ", src, " (", dtype_name(src_t),
             ") overlap without being the same elements (expected disjoint or identical buffers), n = ", n);
  // factor == 1 skips the multiply (an exact copy, NaN payloads included: see cast.h)
  dispatch_storage_pair(src_t, dst_t, "cast", [&](auto sd, auto dd) {
    dispatch_bool(factor != 1.0f, [&](auto scale) {
      launch<decltype(sd)::value, decltype(dd)::value, decltype(scale)::value>(dst, src, n, factor, s);
    });
  });
}

}  // namespace zt::cuda_kernels
