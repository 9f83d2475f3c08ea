// defines: adamw_step (cuda/kernels/adamw.h); file-local: Scalars, adamw_one, adamw_at, adamw_kernel,
//          aligned
#include "cuda/kernels/adamw.h"

#include <cmath>

#include "cuda/check.h"
#include "cuda/kernels/cast.h"  // dev::f32_to_bf16, dev::grid_for

namespace zt::cuda_kernels {

namespace {

constexpr int kThreads = 256;

struct Scalars {
  float step_size, bc2_sqrt, keep, b1, b2, c1, c2, eps;
};

// One element, in the order of the header's formula; each operation rounded on its own.
__device__ __forceinline__ void adamw_one(float& p, float g, float& m, float& v, const Scalars& s) {
  const float mi = __fadd_rn(__fmul_rn(s.b1, m), __fmul_rn(s.c1, g));
  const float vi = __fadd_rn(__fmul_rn(s.b2, v), __fmul_rn(s.c2, __fmul_rn(g, g)));
  m = mi;
  v = vi;
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bc2_sqrt), s.eps);
  p = __fsub_rn(__fmul_rn(p, s.keep), __fdiv_rn(__fmul_rn(s.step_size, mi), denom));
}

__device__ __forceinline__ void adamw_at(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                                         float* __restrict__ v, uint16_t* __restrict__ out, int64_t i,
                                         const Scalars& s) {
  float pi = p[i], mi = m[i], vi = v[i];
  adamw_one(pi, g[i], mi, vi, s);
  p[i] = pi;
  m[i] = mi;
  v[i] = vi;
  if (out) out[i] = dev::f32_to_bf16(pi);
}

// vec: float4 packs (all pointers aligned), then the n % 4 tail element-wise; else element-wise.
__global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                             float* __restrict__ v, uint16_t* __restrict__ out, int64_t n, Scalars s, bool vec) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if (vec) {
    const int64_t packs = n / 4;
    for (int64_t j = t; j < packs; j += stride) {
      float4 pp = reinterpret_cast<const float4*>(p)[j];
      const float4 gg = reinterpret_cast<const float4*>(g)[j];
      float4 mm = reinterpret_cast<const float4*>(m)[j];
      float4 vv = reinterpret_cast<const float4*>(v)[j];
      adamw_one(pp.x, gg.x, mm.x, vv.x, s);
      adamw_one(pp.y, gg.y, mm.y, vv.y, s);
      adamw_one(pp.z, gg.z, mm.z, vv.z, s);
      adamw_one(pp.w, gg.w, mm.w, vv.w, s);
      reinterpret_cast<float4*>(p)[j] = pp;
      reinterpret_cast<float4*>(m)[j] = mm;
      reinterpret_cast<float4*>(v)[j] = vv;
      if (out) {
        uint2 b;
        b.x = static_cast<uint32_t>(dev::f32_to_bf16(pp.x)) | (static_cast<uint32_t>(dev::f32_to_bf16(pp.y)) << 16);
        b.y = static_cast<uint32_t>(dev::f32_to_bf16(pp.z)) | (static_cast<uint32_t>(dev::f32_to_bf16(pp.w)) << 16);
        reinterpret_cast<uint2*>(out)[j] = b;  // little-endian: element 4j at the low half
      }
    }
    done = packs * 4;
  }
  for (int64_t i = done + t; i < n; i += stride) adamw_at(p, g, m, v, out, i, s);
}

bool aligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

}  // namespace

void adamw_step(float* master, const float* grad, float* m, float* v, int64_t n, const AdamWConfig& h, int64_t step,
                bool decay, uint16_t* out_bf16, cudaStream_t s) {
  if (step < 1) ZT_THROW("cuda_kernels::adamw_step: step is 1-based, got ", step);
  if (n < 0) ZT_THROW("cuda_kernels::adamw_step: n = ", n, ", expected >= 0");
  if (n == 0) return;
  if (!master || !grad || !m || !v)
    ZT_THROW("cuda_kernels::adamw_step: null pointer (master ", master, ", grad ", grad, ", m ", m, ", v ", v,
             ") for n = ", n);
  // Scalars in double, rounded once to float: the same code as optim/adamw.cpp.
  const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(step));
  Scalars sc;
  sc.step_size = static_cast<float>(h.lr / bc1);
  sc.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  sc.keep = decay ? static_cast<float>(1.0 - h.lr * h.weight_decay) : 1.0f;
  sc.b1 = static_cast<float>(h.beta1);
  sc.b2 = static_cast<float>(h.beta2);
  sc.c1 = static_cast<float>(1.0 - h.beta1);
  sc.c2 = static_cast<float>(1.0 - h.beta2);
  sc.eps = static_cast<float>(h.eps);
  const bool vec = n >= 4 && aligned(master, 16) && aligned(grad, 16) && aligned(m, 16) && aligned(v, 16) &&
                   (!out_bf16 || aligned(out_bf16, 8));
  const unsigned grid = dev::grid_for(vec ? (n + 3) / 4 : n, kThreads);
  adamw_kernel<<<grid, kThreads, 0, s>>>(master, grad, m, v, out_bf16, n, sc, vec);
  ZT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zt::cuda_kernels
