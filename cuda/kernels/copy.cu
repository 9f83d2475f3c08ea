// defines: make_strided_pair, copy, fill (cuda/kernels/copy.h); file-local: valid_dtype, float_family,
//          copy_bits_kernel, copy_float_kernel, load_double, store_double and 6 more
#include "cuda/kernels/copy.h"

#include <cstring>
#include <vector>

#include "cuda/check.h"
#include "cuda/kernels/dispatch.h"  // dispatch_storage_pair
#include "cuda/kernels/cast.h"  // cuda_kernels::cast, dev::Io, dev::grid_for

namespace zt::cuda_kernels {

namespace {

constexpr int kThreads = 256;

bool valid_dtype(DType t) {
  switch (t) {
    case DType::f32: case DType::f64: case DType::bf16: case DType::f16:
    case DType::i32:
    case DType::i64:
    case DType::u16:
    case DType::u8: return true;
  }
  return false;
}

bool float_family(DType t) { return dtype_in<DType::f32, DType::bf16, DType::f16>(t); }

// ---- same dtype: bits copied by element width ----
template <class W>
__global__ void copy_bits_kernel(W* __restrict__ dst, const W* __restrict__ src, StridedPair l) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < l.numel; i += stride) {
    int64_t od, os;
    dev::strided_offsets(l, i, od, os);
    dst[od] = src[os];
  }
}

// ---- f32 / bf16 / f16 pairs: through float32 (= through double, see copy.h) ----
template <DType S, DType D>
__global__ void copy_float_kernel(typename dev::Io<D>::T* __restrict__ dst, const typename dev::Io<S>::T* __restrict__ src,
                                  StridedPair l) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < l.numel; i += stride) {
    int64_t od, os;
    dev::strided_offsets(l, i, od, os);
    dst[od] = dev::Io<D>::store(dev::Io<S>::load(src[os]));
  }
}

// ---- every other pair: load as double, store from double (core/tensor.cpp's load / store) ----
// The dtype switch is uniform across the grid (no divergence); these copies are rare (ids,
// float64 test data), so one kernel serves them all.
__device__ __forceinline__ double load_double(const void* p, int64_t i, DType t) {
  switch (t) {
    case DType::f32: return static_cast<double>(static_cast<const float*>(p)[i]);
    case DType::f64: return static_cast<const double*>(p)[i];
    case DType::bf16: return static_cast<double>(dev::bf16_to_f32(static_cast<const uint16_t*>(p)[i]));
    case DType::f16: return static_cast<double>(dev::f16_to_f32(static_cast<const uint16_t*>(p)[i]));
    case DType::i32: return static_cast<double>(static_cast<const int32_t*>(p)[i]);
    case DType::i64: return __ll2double_rn(static_cast<const long long*>(p)[i]);
    case DType::u16: return static_cast<double>(static_cast<const uint16_t*>(p)[i]);
    case DType::u8: return static_cast<double>(static_cast<const uint8_t*>(p)[i]);
  }
  return 0.0;
}

__device__ __forceinline__ void store_double(void* p, int64_t i, DType t, double v) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = __double2float_rn(v); break;
    case DType::f64: static_cast<double*>(p)[i] = v; break;
    case DType::bf16: static_cast<uint16_t*>(p)[i] = dev::f32_to_bf16(__double2float_rn(v)); break;
    case DType::f16: static_cast<uint16_t*>(p)[i] = dev::f32_to_f16(__double2float_rn(v)); break;
    case DType::i32: static_cast<int32_t*>(p)[i] = __double2int_rz(v); break;
    case DType::i64: static_cast<long long*>(p)[i] = __double2ll_rz(v); break;
    case DType::u16: static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(__double2int_rz(v)); break;
    case DType::u8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(__double2int_rz(v)); break;
  }
}

__global__ void copy_double_kernel(void* dst, DType dt, const void* src, DType st, StridedPair l) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < l.numel; i += stride) {
    int64_t od, os;
    dev::strided_offsets(l, i, od, os);
    store_double(dst, od, dt, load_double(src, os, st));
  }
}

template <class W>
__global__ void fill_kernel(W* __restrict__ dst, W v, StridedPair l) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < l.numel; i += stride) {
    int64_t od, os;
    dev::strided_offsets(l, i, od, os);
    dst[od] = v;
  }
}

template <DType S, DType D>
void launch_float(void* dst, const void* src, const StridedPair& l, cudaStream_t s) {
  copy_float_kernel<S, D><<<dev::grid_for(l.numel, kThreads), kThreads, 0, s>>>(
      static_cast<typename dev::Io<D>::T*>(dst), static_cast<const typename dev::Io<S>::T*>(src), l);
}

template <class W>
void launch_bits(void* dst, const void* src, const StridedPair& l, cudaStream_t s) {
  copy_bits_kernel<W><<<dev::grid_for(l.numel, kThreads), kThreads, 0, s>>>(static_cast<W*>(dst),
                                                                            static_cast<const W*>(src), l);
}

// The byte extent [lo, hi) an operand touches (contiguous layouts only are checked for overlap).
bool ranges_overlap(const void* a, size_t an, const void* b, size_t bn) {
  const auto* x = static_cast<const char*>(a);
  const auto* y = static_cast<const char*>(b);
  return x < y + bn && y < x + an;
}

// The host-side store of core/tensor.cpp, into the raw bits of one element.
void host_bits(DType t, double v, void* out) {
  switch (t) {
    case DType::f32: { const float f = static_cast<float>(v); std::memcpy(out, &f, 4); break; }
    case DType::f64: std::memcpy(out, &v, 8); break;
    case DType::bf16: { const uint16_t h = f32_to_bf16(static_cast<float>(v)); std::memcpy(out, &h, 2); break; }
    case DType::f16: { const uint16_t h = f32_to_f16(static_cast<float>(v)); std::memcpy(out, &h, 2); break; }
    case DType::i32: { const int32_t k = static_cast<int32_t>(v); std::memcpy(out, &k, 4); break; }
    case DType::i64: { const int64_t k = static_cast<int64_t>(v); std::memcpy(out, &k, 8); break; }
    case DType::u16: { const uint16_t k = static_cast<uint16_t>(v); std::memcpy(out, &k, 2); break; }
    case DType::u8: {
      const uint8_t k = static_cast<uint8_t>(v);
      std::memcpy(out, &k, 1);
      break;
    }
  }
}

}  // namespace

StridedPair make_strided_pair(int ndim, const int64_t* shape, const int64_t* dst_strides, const int64_t* src_strides) {
  if (ndim < 0) ZT_THROW("cuda_kernels::make_strided_pair: ndim = ", ndim, ", expected >= 0");
  StridedPair l;
  l.numel = 1;
  for (int d = 0; d < ndim; ++d) {
    if (shape[d] < 0) ZT_THROW("cuda_kernels::make_strided_pair: dimension ", d, " has size ", shape[d]);
    l.numel *= shape[d];
  }
  if (l.numel == 0) return l;  // nothing to walk: ndim 0, contiguous
  // Outer to inner: drop size-1 dimensions; merge a dimension into the previous (outer) one when
  // the outer stride equals the inner stride times the inner size in both operands.
  std::vector<int64_t> sh, s0, s1;
  for (int d = 0; d < ndim; ++d) {
    if (shape[d] == 1) continue;
    if (!sh.empty() && s0.back() == dst_strides[d] * shape[d] && s1.back() == src_strides[d] * shape[d]) {
      sh.back() *= shape[d];
      s0.back() = dst_strides[d];
      s1.back() = src_strides[d];
    } else {
      sh.push_back(shape[d]);
      s0.push_back(dst_strides[d]);
      s1.push_back(src_strides[d]);
    }
  }
  if (sh.size() > static_cast<size_t>(kMaxDims))
    ZT_THROW("cuda_kernels: a strided copy of ", ndim, " dimensions still has ", sh.size(),
             " after merging contiguous ones; at most ", kMaxDims, " are supported (make the view contiguous first)");
  l.ndim = static_cast<int>(sh.size());
  for (int d = 0; d < l.ndim; ++d) l.shape[d] = sh[d], l.stride[0][d] = s0[d], l.stride[1][d] = s1[d];
  l.contiguous = l.ndim == 0 || (l.ndim == 1 && l.stride[0][0] == 1 && l.stride[1][0] == 1);
  return l;
}

void copy(DType dst_t, void* dst, DType src_t, const void* src, const StridedPair& l, cudaStream_t s) {
  if (!valid_dtype(dst_t) || !valid_dtype(src_t))
    ZT_THROW("cuda_kernels::copy: unsupported dtype pair (dst ", static_cast<int>(dst_t), ", src ",
             static_cast<int>(src_t), ")");
  if (l.numel == 0) return;
  if (!dst || !src) ZT_THROW("cuda_kernels::copy: null pointer (dst ", dst, ", src ", src, ") for ", l.numel, " elements");
  if (l.contiguous) {
    const size_t db = static_cast<size_t>(l.numel) * dtype_size(dst_t), sb = static_cast<size_t>(l.numel) * dtype_size(src_t);
    if (dst_t == src_t && dst == src) return;  // the same elements: nothing to do
    if (ranges_overlap(dst, db, src, sb))
      ZT_THROW("cuda_kernels::copy: dst ", dst, " (", dtype_name(dst_t), ") and src ", src, " (", dtype_name(src_t),
               ") overlap (", l.numel, " elements); expected disjoint buffers");
    if (dst_t == src_t) {
      ZT_CUDA_CHECK(cudaMemcpyAsync(dst, src, db, cudaMemcpyDeviceToDevice, s));
      return;
    }
    if (float_family(dst_t) && float_family(src_t)) return cast(dst_t, dst, src_t, src, l.numel, 1.0f, s);
  }
  if (dst_t == src_t) {
    switch (dtype_size(dst_t)) {
      case 2: launch_bits<uint16_t>(dst, src, l, s); break;
      case 4: launch_bits<uint32_t>(dst, src, l, s); break;
      default: launch_bits<unsigned long long>(dst, src, l, s); break;
    }
  } else if (float_family(dst_t) && float_family(src_t)) {
    dispatch_storage_pair(src_t, dst_t, "copy", [&](auto sd, auto dd) {
      launch_float<decltype(sd)::value, decltype(dd)::value>(dst, src, l, s);
    });
  } else {
    copy_double_kernel<<<dev::grid_for(l.numel, kThreads), kThreads, 0, s>>>(dst, dst_t, src, src_t, l);
  }
  ZT_CUDA_CHECK(cudaGetLastError());
}

void fill(DType t, void* dst, const StridedPair& l, double value, cudaStream_t s) {
  if (!valid_dtype(t)) ZT_THROW("cuda_kernels::fill: unsupported dtype ", static_cast<int>(t));
  if (l.numel == 0) return;
  if (!dst) ZT_THROW("cuda_kernels::fill: null dst for ", l.numel, " elements");
  unsigned char bits[8] = {};
  host_bits(t, value, bits);
  const size_t w = dtype_size(t);
  bool bytes_equal = true;
  for (size_t b = 1; b < w; ++b) bytes_equal = bytes_equal && bits[b] == bits[0];
  // A contiguous destination: the layout's destination strides are row-major (the source side
  // of a fill layout repeats the destination's, so `contiguous` speaks for both).
  if (l.contiguous && bytes_equal) {
    ZT_CUDA_CHECK(cudaMemsetAsync(dst, bits[0], static_cast<size_t>(l.numel) * w, s));
    return;
  }
  const unsigned grid = dev::grid_for(l.numel, kThreads);
  if (w == 2) {
    uint16_t v;
    std::memcpy(&v, bits, 2);
    fill_kernel<uint16_t><<<grid, kThreads, 0, s>>>(static_cast<uint16_t*>(dst), v, l);
  } else if (w == 4) {
    uint32_t v;
    std::memcpy(&v, bits, 4);
    fill_kernel<uint32_t><<<grid, kThreads, 0, s>>>(static_cast<uint32_t*>(dst), v, l);
  } else {
    unsigned long long v;
    std::memcpy(&v, bits, 8);
    fill_kernel<unsigned long long><<<grid, kThreads, 0, s>>>(static_cast<unsigned long long*>(dst), v, l);
  }
  ZT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zt::cuda_kernels
