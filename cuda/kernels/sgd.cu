// defines: sgd_step (cuda/kernels/sgd.h); file-local: Scalars, sgd_one, sgd_kernel, aligned
#include "cuda/kernels/sgd.h"

#include "cuda/check.h"
#include "cuda/kernels/cast.h"  // dev::grid_for

namespace zt::cuda_kernels {

namespace {

constexpr int kThreads = 256;

struct Scalars {
  float lr, mu, wd;  // wd = 0 without decay
  bool nesterov;
};

// One element, in the order of the header's formula; each operation rounded on its own. kMomentum:
// mu > 0 (b is the element's momentum buffer; unused otherwise).
template <bool kMomentum> __device__ __forceinline__ void sgd_one(float& p, float g, float& b, const Scalars& s) {
  if constexpr (!kMomentum) {
    p = __fsub_rn(p, __fmul_rn(s.lr, __fadd_rn(g, __fmul_rn(s.wd, p))));
  } else {
    const float d = __fadd_rn(g, __fmul_rn(s.wd, p));
    b = __fadd_rn(__fmul_rn(s.mu, b), d);
    const float u = s.nesterov ? __fadd_rn(d, __fmul_rn(s.mu, b)) : b;
    p = __fsub_rn(p, __fmul_rn(s.lr, u));
  }
}

// vec: float4 packs (all pointers aligned), then the n % 4 tail element-wise; else element-wise.
template <bool kMomentum>
__global__ void sgd_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ buf, int64_t n,
                           Scalars s, bool vec) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if (vec) {
    const int64_t packs = n / 4;
    for (int64_t j = t; j < packs; j += stride) {
      float4 pp = reinterpret_cast<const float4*>(p)[j];
      const float4 gg = reinterpret_cast<const float4*>(g)[j];
      float4 bb = kMomentum ? reinterpret_cast<const float4*>(buf)[j] : make_float4(0.f, 0.f, 0.f, 0.f);
      sgd_one<kMomentum>(pp.x, gg.x, bb.x, s);
      sgd_one<kMomentum>(pp.y, gg.y, bb.y, s);
      sgd_one<kMomentum>(pp.z, gg.z, bb.z, s);
      sgd_one<kMomentum>(pp.w, gg.w, bb.w, s);
      reinterpret_cast<float4*>(p)[j] = pp;
      if (kMomentum) reinterpret_cast<float4*>(buf)[j] = bb;
    }
    done = packs * 4;
  }
  for (int64_t i = done + t; i < n; i += stride) {
    float pi = p[i], bi = kMomentum ? buf[i] : 0.f;
    sgd_one<kMomentum>(pi, g[i], bi, s);
    p[i] = pi;
    if (kMomentum) buf[i] = bi;
  }
}

bool aligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

}  // namespace

void sgd_step(float* param, const float* grad, float* buf, int64_t n, const SgdConfig& h, bool decay, cudaStream_t s) {
  if (n < 0) ZT_THROW("cuda_kernels::sgd_step: n = ", n, ", expected >= 0");
  const bool momentum = h.momentum > 0;
  if ((buf != nullptr) != momentum)
    ZT_THROW("cuda_kernels::sgd_step: momentum ", h.momentum, " with ", buf ? "a" : "no",
             " momentum buffer (one expected exactly when momentum > 0)");
  if (n == 0) return;
  if (!param || !grad)
    ZT_THROW("cuda_kernels::sgd_step: null pointer (param ", param, ", grad ", grad, ") for n = ", n);
  // Scalars rounded once to float: the same code as core/kernels/sgd.cpp.
  Scalars sc;
  sc.lr = static_cast<float>(h.lr);
  sc.mu = static_cast<float>(h.momentum);
  sc.wd = decay ? static_cast<float>(h.weight_decay) : 0.0f;
  sc.nesterov = h.nesterov;
  const bool vec = n >= 4 && aligned(param, 16) && aligned(grad, 16) && (!momentum || aligned(buf, 16));
  const unsigned grid = dev::grid_for(vec ? (n + 3) / 4 : n, kThreads);
  if (momentum) sgd_kernel<true><<<grid, kThreads, 0, s>>>(param, grad, buf, n, sc, vec);
  else sgd_kernel<false><<<grid, kThreads, 0, s>>>(param, grad, nullptr, n, sc, vec);
  ZT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zt::cuda_kernels
