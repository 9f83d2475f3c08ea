// defines: bias_gelu_forward, bias_gelu_backward, gelu_forward, gelu_backward, swiglu_forward,
//          swiglu_backward, swiglu_packed_forward, swiglu_packed_backward (cuda/kernels/activation.h); file-local: mul, add, sub, sigmoid, gelu_value,
//          gelu_slope and 9 more
#include "cuda/kernels/activation.h"

#include <cstdint>

#include "cuda/check.h"
#include "cuda/kernels/bias_grad.h"  // kBiasGradChunk, bias_grad_combine
#include "cuda/kernels/column_walk.cuh"  // dev::column_walk, store_pack
#include "cuda/kernels/ew_map.cuh"   // dev::Ptrs, launch_ew (cast.h's dev::Io, load8, grid_for)

namespace zt::cuda_kernels {

namespace {

using dev::Ptrs;

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // float(sqrt(2 / pi)), as the CPU rounds it
constexpr float kGeluC = 0.044715f;

// Every operation rounded on its own (no FMA contraction), so the vector and the scalar path, which
// inline the same op into different code, give the same bits.
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float sigmoid(float x) { return __fdiv_rn(1.0f, add(1.0f, expf(-x))); }

// gelu(v) and gelu'(v) in the operation order of core/kernels/activation.cpp (products left to
// right): the element-wise GELU and the fused bias + GELU share them.
__device__ __forceinline__ float gelu_value(float v) {
  const float u = mul(kSqrt2OverPi, add(v, mul(mul(mul(kGeluC, v), v), v)));
  return mul(v, sigmoid(mul(2.0f, u)));
}
__device__ __forceinline__ float gelu_slope(float v) {
  const float u = mul(kSqrt2OverPi, add(v, mul(mul(mul(kGeluC, v), v), v)));
  const float s = sigmoid(mul(2.0f, u));
  const float du = mul(kSqrt2OverPi, add(1.0f, mul(mul(mul(3.0f, kGeluC), v), v)));
  return add(s, mul(mul(mul(mul(v, 2.0f), s), sub(1.0f, s)), du));
}

// Per-element operations: y[NO] from x[NI], float32.
struct GeluFwd {
  __device__ void operator()(float (&y)[1], const float (&x)[1]) const { y[0] = gelu_value(x[0]); }
};
struct GeluBwd {  // x = {dout, x}
  __device__ void operator()(float (&y)[1], const float (&x)[2]) const { y[0] = mul(x[0], gelu_slope(x[1])); }
};
struct SwigluFwd {  // x = {gate, up}
  __device__ void operator()(float (&y)[1], const float (&x)[2]) const { y[0] = mul(mul(x[0], sigmoid(x[0])), x[1]); }
};
__device__ __forceinline__ float swiglu_dgate(float dout, float g, float up, float s) {
  return mul(mul(mul(dout, up), s), add(1.0f, mul(g, sub(1.0f, s))));
}
struct SwigluBwdBoth {  // x = {dout, gate, up}, y = {dgate, dup}
  __device__ void operator()(float (&y)[2], const float (&x)[3]) const {
    const float g = x[1], s = sigmoid(g);
    y[1] = mul(mul(x[0], g), s);
    y[0] = swiglu_dgate(x[0], g, x[2], s);
  }
};
struct SwigluBwdGate {  // x = {dout, gate, up}, y = {dgate}
  __device__ void operator()(float (&y)[1], const float (&x)[3]) const { y[0] = swiglu_dgate(x[0], x[1], x[2], sigmoid(x[1])); }
};
struct SwigluBwdUp {  // x = {dout, gate}, y = {dup}
  __device__ void operator()(float (&y)[1], const float (&x)[2]) const { y[0] = mul(mul(x[0], x[1]), sigmoid(x[1])); }
};

constexpr int kThreads = 256;

template <DType D>
using Tp = typename dev::Io<D>::T;

// out[i] = gelu(x[i] + b[i % C]). Vec (C % 8 == 0, pointers 16-byte aligned): pack j is elements
// 8j..8j+7 of one row, its bias the pack at (8j) % C.
template <DType D, bool Vec>
__global__ void bias_gelu_fwd_kernel(Tp<D>* __restrict__ out, const Tp<D>* __restrict__ x,
                                     const Tp<D>* __restrict__ b, int64_t n, int64_t C) {
  using Io = dev::Io<D>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (Vec) {
    for (int64_t j = t; j < n / 8; j += stride) {
      alignas(16) Tp<D> xv[8], bv[8], o[8];
      dev::load8(xv, x + j * 8);
      dev::load8(bv, b + (j * 8) % C);
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] = Io::store(gelu_value(add(Io::load(xv[e]), Io::load(bv[e]))));
      dev::store8(out + j * 8, o);
    }
  } else {
    for (int64_t i = t; i < n; i += stride) out[i] = Io::store(gelu_value(add(Io::load(x[i]), Io::load(b[i % C]))));
  }
}

// Thread (chunk k, pack of P columns from c), i = k C / P + c / P (consecutive threads: consecutive
// packs of a row): rows [k kBiasGradChunk, (k + 1) kBiasGradChunk) in order, dx written (when
// wanted) and its float32 value added to partial[k][c + e] (when wanted). P > 1: one access per
// pack (C % P == 0, dout, x and dx aligned to the pack).
// dx may be dout (in place): no __restrict__ on either, and each element is loaded (in its row
// batch) before the same thread stores it. b null: no bias (x is GELU's input as it is).
template <DType D, int P>
__global__ void bias_gelu_bwd_kernel(Tp<D>* dx, float* __restrict__ partial, const Tp<D>* dout,
                                     const Tp<D>* __restrict__ x, const Tp<D>* __restrict__ b, int64_t R, int64_t C,
                                     int64_t chunks) {
  using Io = dev::Io<D>;
  const int64_t packs = C / P;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < chunks * packs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = i / packs, c = (i % packs) * P;
    const int64_t r0 = k * kBiasGradChunk, r1 = r0 + kBiasGradChunk < R ? r0 + kBiasGradChunk : R;
    float bc[P], a[P];
#pragma unroll
    for (int e = 0; e < P; ++e) bc[e] = b ? Io::load(b[c + e]) : 0.0f, a[e] = 0.0f;
    const Tp<D>* const in[2] = {dout, x};
    dev::column_walk<D, P, 2, 0>(in, nullptr, C, c, r0, r1, [&](int64_t r, const float(&v)[2][P], const float(&)[1]) {
      alignas(16) Tp<D> o[P];
#pragma unroll
      for (int e = 0; e < P; ++e) {
        const float d = mul(v[0][e], gelu_slope(add(v[1][e], bc[e])));
        o[e] = Io::store(d);
        a[e] = add(a[e], d);
      }
      if (dx) dev::store_pack<P>(dx + r * C + c, o);
    });
    if (partial)
#pragma unroll
      for (int e = 0; e < P; ++e) partial[k * C + c + e] = a[e];
  }
}

}  // namespace

void bias_gelu_forward(DType t, void* out, const void* x, const void* b, int64_t R, int64_t C, cudaStream_t s) {
  check_compute("bias_gelu_forward", t);
  if (R < 0 || C < 0) ZT_THROW("cuda_kernels::bias_gelu_forward: R = ", R, ", C = ", C, ", expected >= 0");
  const int64_t n = R * C;
  if (n == 0) return;
  if (!out || !x || !b) ZT_THROW("cuda_kernels::bias_gelu_forward: out, x or b is null");
  const bool vec = C % 8 == 0 && dev::aligned16(out) && dev::aligned16(x) && dev::aligned16(b);
  const unsigned grid = dev::grid_for(vec ? n / 8 : n, kThreads);
  dispatch_compute_vec(t, vec, "bias_gelu_forward", [&](auto d, auto v) {
    constexpr DType D = decltype(d)::value;
    bias_gelu_fwd_kernel<D, decltype(v)::value><<<grid, kThreads, 0, s>>>(
        static_cast<Tp<D>*>(out), static_cast<const Tp<D>*>(x), static_cast<const Tp<D>*>(b), n, C);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

void bias_gelu_backward(DType t, void* dx, void* db, const void* dout, const void* x, const void* b, int64_t R,
                        int64_t C, bool accumulate, void* workspace, cudaStream_t s) {
  check_compute("bias_gelu_backward", t);
  if (R < 0 || C < 0) ZT_THROW("cuda_kernels::bias_gelu_backward: R = ", R, ", C = ", C, ", expected >= 0");
  if (!dx && !db) ZT_THROW("cuda_kernels::bias_gelu_backward: dx and db are both null (expected at least one output)");
  if (C == 0) return;
  const int64_t chunks = (R + kBiasGradChunk - 1) / kBiasGradChunk;
  float* partial = db ? static_cast<float*>(workspace) : nullptr;
  if (R > 0) {
    if (!dout || !x) ZT_THROW("cuda_kernels::bias_gelu_backward: dout or x is null");
    if (db && !workspace) ZT_THROW("cuda_kernels::bias_gelu_backward: db wanted but the workspace is null");
    if (reinterpret_cast<uintptr_t>(workspace) % alignof(float) != 0)
      ZT_THROW("cuda_kernels::bias_gelu_backward: workspace must be 4-byte aligned");
    // packs of 4 columns (8-byte bfloat16 loads): measured on an H100 at GPT-2's shapes, 1-column
    // threads waited on their loads, 8-column packs were faster still but leave fewer threads
    const int64_t es = static_cast<int64_t>(dtype_size(t));
    const bool pack = C % 4 == 0 && (!dx || dev::pack_aligned(dx, 4, es)) && dev::pack_aligned(dout, 4, es) &&
                      dev::pack_aligned(x, 4, es);
    dispatch_compute_vec(t, pack, "bias_gelu_backward", [&](auto d, auto v) {
      constexpr DType D = decltype(d)::value;
      constexpr int P = decltype(v)::value ? 4 : 1;
      bias_gelu_bwd_kernel<D, P><<<dev::grid_for(chunks * C / P, kThreads), kThreads, 0, s>>>(
          static_cast<Tp<D>*>(dx), partial, static_cast<const Tp<D>*>(dout), static_cast<const Tp<D>*>(x),
          static_cast<const Tp<D>*>(b), R, C, chunks);
    });
    ZT_CUDA_CHECK(cudaGetLastError());
  }
  if (db) bias_grad_combine(t, db, partial, R, C, accumulate, s);  // R == 0: db = 0 (or kept, accumulate)
}

void gelu_forward(DType t, void* out, const void* x, int64_t n, cudaStream_t s) {
  launch_ew("gelu_forward", t, Ptrs<1, 1>{{x}, {out}}, n, GeluFwd{}, s);
}

void gelu_backward(DType t, void* dx, const void* dout, const void* x, int64_t n, cudaStream_t s) {
  launch_ew("gelu_backward", t, Ptrs<2, 1>{{dout, x}, {dx}}, n, GeluBwd{}, s);
}

void swiglu_forward(DType t, void* out, const void* gate, const void* up, int64_t n, cudaStream_t s) {
  launch_ew("swiglu_forward", t, Ptrs<2, 1>{{gate, up}, {out}}, n, SwigluFwd{}, s);
}

void swiglu_backward(DType t, void* dgate, void* dup, const void* dout, const void* gate, const void* up, int64_t n,
                     cudaStream_t s) {
  if (dgate && dup) launch_ew("swiglu_backward", t, Ptrs<3, 2>{{dout, gate, up}, {dgate, dup}}, n, SwigluBwdBoth{}, s);
  else if (dgate) launch_ew("swiglu_backward", t, Ptrs<3, 1>{{dout, gate, up}, {dgate}}, n, SwigluBwdGate{}, s);
  else if (dup) launch_ew("swiglu_backward", t, Ptrs<2, 1>{{dout, gate}, {dup}}, n, SwigluBwdUp{}, s);
  else ZT_THROW("cuda_kernels::swiglu_backward: dgate and dup are both null (expected at least one output)");
}

// gu (N, 2F) = [gate | up] rows: the gate half at column 0, the up half at column F, both with
// leading dimension 2F; the per-element ops are swiglu_forward's and swiglu_backward's.
void swiglu_packed_forward(DType t, void* out, const void* gu, int64_t N, int64_t F, cudaStream_t s) {
  const size_t half = static_cast<size_t>(F) * dtype_size(t);
  const auto* g = static_cast<const char*>(gu);
  launch_ew_rows("swiglu_packed_forward", t, Ptrs<2, 1>{{g, g ? g + half : nullptr}, {out}},
                 dev::Lds<2, 1>{{2 * F, 2 * F}, {F}}, N, F, SwigluFwd{}, s);
}

void swiglu_packed_backward(DType t, void* dgu, const void* dout, const void* gu, int64_t N, int64_t F,
                            cudaStream_t s) {
  const size_t half = static_cast<size_t>(F) * dtype_size(t);
  const auto* g = static_cast<const char*>(gu);
  auto* dg = static_cast<char*>(dgu);
  launch_ew_rows("swiglu_packed_backward", t,
                 Ptrs<3, 2>{{dout, g, g ? g + half : nullptr}, {dg, dg ? dg + half : nullptr}},
                 dev::Lds<3, 2>{{F, 2 * F, 2 * F}, {2 * F, 2 * F}}, N, F, SwigluBwdBoth{}, s);
}

}  // namespace zt::cuda_kernels
