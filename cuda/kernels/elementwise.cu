// defines: binary, scale, scale_by, mul_backward, silu_forward, silu_backward, accumulate, accumulate_cast,
//          fill_scaled, sum_all_workspace_bytes, sum_all and 3 more (cuda/kernels/elementwise.h);
//          file-local: mul, add, sub, sigmoid, AddOp, SubOp and 16 more
#include "cuda/kernels/elementwise.h"

#include <cmath>
#include <type_traits>

#include "core/kernels/elementwise.h"  // kSumBlock (the CPU's sum_all block)
#include "cuda/check.h"
#include "cuda/kernels/dispatch.h"  // check_compute, dispatch_compute
#include "cuda/kernels/ew_map.cuh"  // dev::Ptrs, launch_ew
#include "cuda/kernels/cast.h"  // dev::Io, dev::load8 / store8, dev::aligned16, dev::grid_for

namespace zt::cuda_kernels {

namespace {

using dev::Ptrs;

constexpr int kThreads = 256;
constexpr int kLanes = 16;  // = vm::kLanes (core/kernels/vec_math.h): the CPU's partial sums per row / block
static_assert(kThreads % 32 == 0 && 32 % kLanes == 0, "lane groups must not straddle warps");

__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float sigmoid(float x) { return __fdiv_rn(1.0f, add(1.0f, expf(-x))); }

// ---- per-element operations: y[NO] from x[NI], float32 (the CPU's operation order) ----
struct AddOp {
  __device__ void operator()(float (&y)[1], const float (&x)[2]) const { y[0] = add(x[0], x[1]); }
};
struct SubOp {
  __device__ void operator()(float (&y)[1], const float (&x)[2]) const { y[0] = sub(x[0], x[1]); }
};
struct MulOp {  // also mul_backward with one output: {dout, other}
  __device__ void operator()(float (&y)[1], const float (&x)[2]) const { y[0] = mul(x[0], x[1]); }
};
struct ScaleOp {  // scale_forward: s * x
  float f;
  __device__ void operator()(float (&y)[1], const float (&x)[1]) const { y[0] = mul(f, x[0]); }
};
struct ScaleByOp {  // scale_by: s[0] * x, s read on the device
  const float* s;
  __device__ void operator()(float (&y)[1], const float (&x)[1]) const { y[0] = mul(*s, x[0]); }
};
struct MulBwdBoth {  // x = {dout, a, b}, y = {da, db}
  __device__ void operator()(float (&y)[2], const float (&x)[3]) const {
    y[0] = mul(x[0], x[2]);
    y[1] = mul(x[0], x[1]);
  }
};
struct SiluFwd {  // x * sigmoid(x)
  __device__ void operator()(float (&y)[1], const float (&x)[1]) const { y[0] = mul(x[0], sigmoid(x[0])); }
};
struct SiluBwd {  // x = {dout, x}: dout * s * (1 + x (1 - s)), products left to right
  __device__ void operator()(float (&y)[1], const float (&x)[2]) const {
    const float s = sigmoid(x[1]);
    y[0] = mul(mul(x[0], s), add(1.0f, mul(x[1], sub(1.0f, s))));
  }
};
struct AxpyOp {  // x = {dst, src}, y = {dst}: fma(alpha, src, dst) (see elementwise.h)
  float alpha;
  __device__ void operator()(float (&y)[1], const float (&x)[2]) const { y[0] = __fmaf_rn(alpha, x[1], x[0]); }
};

// ---- accumulate over a strided layout ----
template <DType D>
__global__ void axpy_strided_kernel(typename dev::Io<D>::T* dst, const typename dev::Io<D>::T* src, StridedPair l,
                                    float alpha) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < l.numel; i += stride) {
    int64_t od, os;
    dev::strided_offsets(l, i, od, os);
    dst[od] = dev::Io<D>::store(__fmaf_rn(alpha, dev::Io<D>::load(src[os]), dev::Io<D>::load(dst[od])));
  }
}

// ---- accumulate_cast: dst = round(float(dst) + float(src)) ----
template <DType Dd, DType Ds>
__global__ void accumulate_cast_kernel(typename dev::Io<Dd>::T* __restrict__ dst,
                                       const typename dev::Io<Ds>::T* __restrict__ src, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = dev::Io<Dd>::store(add(dev::Io<Dd>::load(dst[i]), dev::Io<Ds>::load(src[i])));
}

template <DType Dd, DType Ds>
void launch_accumulate_cast(void* dst, const void* src, int64_t n, cudaStream_t s) {
  accumulate_cast_kernel<Dd, Ds><<<dev::grid_for(n, kThreads), kThreads, 0, s>>>(
      static_cast<typename dev::Io<Dd>::T*>(dst), static_cast<const typename dev::Io<Ds>::T*>(src), n);
}

// ---- fill_scaled ----
template <DType D>
__device__ __forceinline__ typename dev::Io<D>::T store_from_double(double v) {
  return dev::Io<D>::store(__double2float_rn(v));  // the CPU's static_cast<float>(double), then round
}

template <DType D>
__global__ void fill_scaled_kernel(typename dev::Io<D>::T* __restrict__ dx, const typename dev::Io<D>::T* __restrict__ g,
                                   double factor, int64_t n) {
  const typename dev::Io<D>::T v = store_from_double<D>(__dmul_rn(static_cast<double>(dev::Io<D>::load(*g)), factor));
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) dx[i] = v;
}

// ---- sum_all: one thread per (block b, lane l); 16 consecutive threads per block ----
template <DType D>
__global__ void sum_blocks_kernel(const typename dev::Io<D>::T* __restrict__ x, int64_t n, int64_t nb,
                                  double* __restrict__ partial) {
  const int64_t gid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t b = gid / kLanes;
  const int lane = static_cast<int>(threadIdx.x % kLanes);
  double acc = 0.0;
  if (b < nb) {
    const int64_t lo = b * kSumBlock, len = n - lo < kSumBlock ? n - lo : kSumBlock;
    const typename dev::Io<D>::T* p = x + lo;
    for (int64_t i = lane; i < len; i += kLanes) acc = __dadd_rn(acc, static_cast<double>(dev::Io<D>::load(p[i])));
  }
  // vm::lane_combine: acc[l] += acc[l + 8], then + 4, + 2, + 1; lane 0 ends with the CPU's acc[0]
  // (a + b == b + a bitwise). Every lane of the warp takes part in the shuffles.
#pragma unroll
  for (int w = kLanes / 2; w >= 1; w /= 2) acc = __dadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, w));
  if (lane == 0 && b < nb) partial[b] = acc;
}

template <DType D>
__global__ void sum_combine_kernel(typename dev::Io<D>::T* __restrict__ out, const double* __restrict__ partial,
                                   int64_t nb, double factor) {
  double s = 0.0;
  for (int64_t b = 0; b < nb; ++b) s = __dadd_rn(s, partial[b]);
  *out = store_from_double<D>(__dmul_rn(factor, s));
}

// ---- sum_last: 16 threads per row (lanes j % 16), float32 as vm::lane_sum ----
template <DType D>
__global__ void sum_last_kernel(typename dev::Io<D>::T* __restrict__ out, const typename dev::Io<D>::T* __restrict__ x,
                                int64_t R, int64_t N) {
  constexpr int kRows = kThreads / kLanes;
  const int sub_row = static_cast<int>(threadIdx.x / kLanes), lane = static_cast<int>(threadIdx.x % kLanes);
  // r0 is the same for the whole block, so every thread runs the same iterations (full-warp shuffles).
  for (int64_t r0 = static_cast<int64_t>(blockIdx.x) * kRows; r0 < R; r0 += static_cast<int64_t>(gridDim.x) * kRows) {
    const int64_t r = r0 + sub_row;
    float acc = 0.0f;
    if (r < R) {
      const typename dev::Io<D>::T* p = x + r * N;
      for (int64_t j = lane; j < N; j += kLanes) acc = add(acc, dev::Io<D>::load(p[j]));
    }
#pragma unroll
    for (int w = kLanes / 2; w >= 1; w /= 2) acc = add(acc, __shfl_xor_sync(0xffffffffu, acc, w));
    if (lane == 0 && r < R) out[r] = dev::Io<D>::store(acc);
  }
}

template <class W>
__global__ void broadcast_rows_kernel(W* __restrict__ dx, const W* __restrict__ dout, int64_t R, int64_t N) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t n = R * N;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) dx[i] = dout[i / N];
}

// ---- all_finite ----
template <class U>
__global__ void nonfinite_kernel(const U* __restrict__ x, int64_t n, U mask, int* __restrict__ flag) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  bool bad = false;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    bad = bad || (x[i] & mask) == mask;
  if (bad) *flag = 1;
}

}  // namespace

void binary(EwOp op, DType t, void* out, const void* a, const void* b, int64_t n, cudaStream_t s) {
  const Ptrs<2, 1> p{{a, b}, {out}};
  switch (op) {
    case EwOp::add: return launch_ew("binary(add)", t, p, n, AddOp{}, s);
    case EwOp::sub: return launch_ew("binary(sub)", t, p, n, SubOp{}, s);
    case EwOp::mul: return launch_ew("binary(mul)", t, p, n, MulOp{}, s);
  }
  ZT_THROW("cuda_kernels::binary: unknown op ", static_cast<int>(op));
}

void scale(DType t, void* out, const void* x, double factor, int64_t n, cudaStream_t s) {
  launch_ew</*WithF16=*/true>("scale", t, Ptrs<1, 1>{{x}, {out}}, n, ScaleOp{static_cast<float>(factor)}, s);
}

void scale_by(DType t, void* out, const void* x, const float* s, int64_t n, cudaStream_t stream) {
  if (!s) ZT_THROW("cuda_kernels::scale_by: s is null");
  launch_ew("scale_by", t, Ptrs<1, 1>{{x}, {out}}, n, ScaleByOp{s}, stream);
}

void mul_backward(DType t, void* da, void* db, const void* dout, const void* a, const void* b, int64_t n,
                  cudaStream_t s) {
  if (da && db) launch_ew("mul_backward", t, Ptrs<3, 2>{{dout, a, b}, {da, db}}, n, MulBwdBoth{}, s);
  else if (da) launch_ew("mul_backward", t, Ptrs<2, 1>{{dout, b}, {da}}, n, MulOp{}, s);
  else if (db) launch_ew("mul_backward", t, Ptrs<2, 1>{{dout, a}, {db}}, n, MulOp{}, s);
  else ZT_THROW("cuda_kernels::mul_backward: da and db are both null (expected at least one output)");
}

void silu_forward(DType t, void* out, const void* x, int64_t n, cudaStream_t s) {
  launch_ew("silu_forward", t, Ptrs<1, 1>{{x}, {out}}, n, SiluFwd{}, s);
}

void silu_backward(DType t, void* dx, const void* dout, const void* x, int64_t n, cudaStream_t s) {
  launch_ew("silu_backward", t, Ptrs<2, 1>{{dout, x}, {dx}}, n, SiluBwd{}, s);
}

void accumulate(DType t, void* dst, const void* src, const StridedPair& l, double alpha, cudaStream_t s) {
  check_compute("accumulate", t);
  if (l.numel == 0) return;
  if (!dst || !src) ZT_THROW("cuda_kernels::accumulate: null pointer (dst ", dst, ", src ", src, ")");
  const float a = static_cast<float>(alpha);
  if (l.contiguous) return launch_ew("accumulate", t, Ptrs<2, 1>{{dst, src}, {dst}}, l.numel, AxpyOp{a}, s);
  const unsigned grid = dev::grid_for(l.numel, kThreads);
  dispatch_compute(t, "accumulate", [&](auto d) {
    using T = typename dev::Io<decltype(d)::value>::T;
    axpy_strided_kernel<decltype(d)::value><<<grid, kThreads, 0, s>>>(static_cast<T*>(dst), static_cast<const T*>(src),
                                                                      l, a);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

void accumulate_cast(DType dst_t, void* dst, DType src_t, const void* src, int64_t n, cudaStream_t s) {
  if (n < 0) ZT_THROW("cuda_kernels::accumulate_cast: n = ", n, ", expected >= 0");
  const bool f32_dst = dst_t == DType::f32 && (src_t == DType::f32 || src_t == DType::bf16 || src_t == DType::f16);
  const bool lowp_dst = (dst_t == DType::bf16 || dst_t == DType::f16) && (src_t == dst_t || src_t == DType::f32);
  if (!f32_dst && !lowp_dst)
    ZT_THROW("cuda_kernels::accumulate_cast: dst ", dtype_name(dst_t), ", src ", dtype_name(src_t),
             ": expected dst float32 with src float32 / bfloat16 / float16, or dst bfloat16 / float16 with src of "
             "the same dtype or float32");
  if (n == 0) return;
  if (!dst || !src) ZT_THROW("cuda_kernels::accumulate_cast: null pointer (dst ", dst, ", src ", src, ")");
  dispatch_storage_pair(src_t, dst_t, "accumulate_cast", [&](auto sd, auto dd) {
    constexpr DType Ds = decltype(sd)::value, Dd = decltype(dd)::value;
    // the pairs accepted above; the others are refused there and need no kernel
    if constexpr (Dd == DType::f32 || Ds == Dd || Ds == DType::f32) launch_accumulate_cast<Dd, Ds>(dst, src, n, s);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

void fill_scaled(DType t, void* dx, const void* g, double factor, int64_t n, cudaStream_t s) {
  check_compute("fill_scaled", t);
  if (n < 0) ZT_THROW("cuda_kernels::fill_scaled: n = ", n, ", expected >= 0");
  if (n == 0) return;
  if (!dx || !g) ZT_THROW("cuda_kernels::fill_scaled: null pointer (dx ", dx, ", g ", g, ")");
  const unsigned grid = dev::grid_for(n, kThreads);
  dispatch_compute(t, "fill_scaled", [&](auto d) {
    using T = typename dev::Io<decltype(d)::value>::T;
    fill_scaled_kernel<decltype(d)::value><<<grid, kThreads, 0, s>>>(static_cast<T*>(dx), static_cast<const T*>(g),
                                                                     factor, n);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

int64_t sum_all_workspace_bytes(int64_t n) {
  if (n < 0) ZT_THROW("cuda_kernels::sum_all_workspace_bytes: n = ", n, ", expected >= 0");
  const int64_t nb = (n + kSumBlock - 1) / kSumBlock;
  return (nb > 0 ? nb : 1) * static_cast<int64_t>(sizeof(double));
}

void sum_all(DType t, void* out, const void* x, int64_t n, double factor, void* workspace, cudaStream_t s) {
  check_compute("sum_all", t);
  if (n < 0) ZT_THROW("cuda_kernels::sum_all: n = ", n, ", expected >= 0");
  if (!out || !workspace || (n > 0 && !x))
    ZT_THROW("cuda_kernels::sum_all: null pointer (out ", out, ", x ", x, ", workspace ", workspace, ")");
  if (reinterpret_cast<uintptr_t>(workspace) % alignof(double) != 0)
    ZT_THROW("cuda_kernels::sum_all: workspace ", workspace, " is not 8-byte aligned");
  const int64_t nb = (n + kSumBlock - 1) / kSumBlock;
  auto* partial = static_cast<double*>(workspace);
  dispatch_compute(t, "sum_all", [&](auto d) {
    constexpr DType D = decltype(d)::value;
    using T = typename dev::Io<D>::T;
    if (nb > 0) {
      const unsigned grid = dev::grid_for(nb * kLanes, kThreads);
      ZT_CHECK(static_cast<int64_t>(grid) * kThreads >= nb * kLanes, "sum_all: ", nb, " blocks exceed one launch");
      sum_blocks_kernel<D><<<grid, kThreads, 0, s>>>(static_cast<const T*>(x), n, nb, partial);
      ZT_CUDA_CHECK(cudaGetLastError());
    }
    sum_combine_kernel<D><<<1, 1, 0, s>>>(static_cast<T*>(out), partial, nb, factor);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

void sum_last_forward(DType t, void* out, const void* x, int64_t R, int64_t N, cudaStream_t s) {
  check_compute("sum_last_forward", t);
  if (R < 0 || N < 0) ZT_THROW("cuda_kernels::sum_last_forward: R = ", R, ", N = ", N, ", expected >= 0");
  if (R == 0) return;
  if (!out || (N > 0 && !x)) ZT_THROW("cuda_kernels::sum_last_forward: null pointer (out ", out, ", x ", x, ")");
  const unsigned grid = dev::grid_for(R, kThreads / kLanes);
  dispatch_compute(t, "sum_last_forward", [&](auto d) {
    using T = typename dev::Io<decltype(d)::value>::T;
    sum_last_kernel<decltype(d)::value><<<grid, kThreads, 0, s>>>(static_cast<T*>(out), static_cast<const T*>(x), R, N);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

void sum_last_backward(DType t, void* dx, const void* dout, int64_t R, int64_t N, cudaStream_t s) {
  check_compute("sum_last_backward", t);
  if (R < 0 || N < 0) ZT_THROW("cuda_kernels::sum_last_backward: R = ", R, ", N = ", N, ", expected >= 0");
  if (R == 0 || N == 0) return;
  if (!dx || !dout) ZT_THROW("cuda_kernels::sum_last_backward: null pointer (dx ", dx, ", dout ", dout, ")");
  const unsigned grid = dev::grid_for(R * N, kThreads);
  dispatch_compute(t, "sum_last_backward", [&](auto d) {
    // the bits of one element, copied as they are
    using W = std::conditional_t<decltype(d)::value == DType::f32, uint32_t, uint16_t>;
    broadcast_rows_kernel<W><<<grid, kThreads, 0, s>>>(static_cast<W*>(dx), static_cast<const W*>(dout), R, N);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

void all_finite_async(DType t, const void* x, int64_t n, int* flag_dev, cudaStream_t s) {
  if (n < 0) ZT_THROW("cuda_kernels::all_finite: n = ", n, ", expected >= 0");
  if (!flag_dev) ZT_THROW("cuda_kernels::all_finite: null flag");
  if (n == 0) return;
  if (!x) ZT_THROW("cuda_kernels::all_finite: null x for n = ", n);
  const unsigned grid = dev::grid_for(n, kThreads);
  switch (t) {
    case DType::f32:
      nonfinite_kernel<uint32_t><<<grid, kThreads, 0, s>>>(static_cast<const uint32_t*>(x), n, 0x7f800000u, flag_dev);
      break;
    case DType::f64:
      nonfinite_kernel<unsigned long long><<<grid, kThreads, 0, s>>>(static_cast<const unsigned long long*>(x), n,
                                                                     0x7ff0000000000000ull, flag_dev);
      break;
    case DType::bf16:
      nonfinite_kernel<uint16_t><<<grid, kThreads, 0, s>>>(static_cast<const uint16_t*>(x), n, uint16_t(0x7f80u), flag_dev);
      break;
    case DType::f16:
      nonfinite_kernel<uint16_t><<<grid, kThreads, 0, s>>>(static_cast<const uint16_t*>(x), n, uint16_t(0x7c00u), flag_dev);
      break;
    default:
      ZT_THROW("cuda_kernels::all_finite: dtype ", dtype_name(t), ", expected float32, float64, bfloat16 or float16");
  }
  ZT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zt::cuda_kernels
