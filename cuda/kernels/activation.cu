#include "cuda/kernels/activation.h"

#include "cuda/check.h"
#include "cuda/kernels/ew_map.cuh"  // dev::Ptrs, launch_ew

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

// Per-element operations: y[NO] from x[NI], float32, in the operation order of
// core/kernels/activation.cpp (products left to right).
struct GeluFwd {
  __device__ void operator()(float (&y)[1], const float (&x)[1]) const {
    const float v = x[0];
    const float u = mul(kSqrt2OverPi, add(v, mul(mul(mul(kGeluC, v), v), v)));
    y[0] = mul(v, sigmoid(mul(2.0f, u)));
  }
};
struct GeluBwd {  // x = {dout, x}
  __device__ void operator()(float (&y)[1], const float (&x)[2]) const {
    const float v = x[1];
    const float u = mul(kSqrt2OverPi, add(v, mul(mul(mul(kGeluC, v), v), v)));
    const float s = sigmoid(mul(2.0f, u));
    const float du = mul(kSqrt2OverPi, add(1.0f, mul(mul(mul(3.0f, kGeluC), v), v)));
    y[0] = mul(x[0], add(s, mul(mul(mul(mul(v, 2.0f), s), sub(1.0f, s)), du)));
  }
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

}  // namespace

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

}  // namespace zt::cuda_kernels
