// defines: cuda_kernels::layernorm_forward, layernorm_backward, rmsnorm_forward, rmsnorm_backward,
//          residual_layernorm_forward, residual_rmsnorm_forward, norm_backward_workspace_bytes — the row norms on the GPU, float32 or bfloat16 storage,
//          float32 math; and (CUDA sources only) cuda_kernels::dev row helpers (warp sums, a row
//          walk with 128-bit packs) shared with cuda/kernels/softmax_ce.cu.
//
// Semantics: those of core/kernels/norm.h (llm.c style), with the same formulas:
//   LayerNorm (Ba et al. 2016, as torch.nn.LayerNorm):
//     mean = sum(x)/C, var = sum((x - mean)^2)/C (biased, two passes), rstd = 1/sqrt(var + eps)
//     out = (x - mean) * rstd * w + b                     (b may be null: no bias)
//   backward, xhat = (x - mean) rstd, g = dout w (llm.c's layernorm_backward):
//     dx = rstd (g - mean(g) - xhat mean(g xhat)),  dw = sum_rows(dout xhat),  db = sum_rows(dout)
//   RMSNorm (Zhang & Sennrich 2019, as Llama's): rstd = 1/sqrt(sum(x^2)/C + eps), out = x rstd w
//   backward: dx = rstd (g - xhat mean(g xhat)), xhat = x rstd, dw = sum_rows(dout xhat)
// Buffers (device): x, out, dout, dx (N, C) and w, b, dw, db (C) of dtype t (f32, or bf16 as
// uint16_t bits); the saved statistics mean, rstd (N) are ALWAYS float32 (the math type), unlike
// the CPU op whose statistics have the storage type. Outputs are written, not accumulated; any of
// dx, dw, db may be null (not wanted). bfloat16 inputs are read exactly into float32 and every
// output rounded to nearest even once.
//
// GPU mapping: one warp per row (8 rows per 256-thread block). Lane l sums the elements
// l, l + 32, ... (or, when every buffer is 16-byte aligned and C % 8 == 0, the 8-element packs
// l, l + 32, ...), then the 32 lane sums combine by __shfl_xor_sync (every lane gets the same bits).
// The order depends only on C and alignment, so a row's statistics are the same bits on every run;
// they differ from the CPU's (16 lanes, another order) in the last bits: ~1e-6 relative.
// Residual + norm (llm.c's fused_residual_forward): the same warp per row first walks x and y,
// writes h = x + y rounded to the storage dtype, and sums that rounded h; the norm then reads h
// back (each lane the elements it wrote, still in cache). h, out, mean and rstd are the bits of
// the element-wise add followed by layernorm_forward / rmsnorm_forward.
// Backward's dw / db, deterministic without atomics: the rows are cut into
// nch = min(N, kNormChunks) fixed chunks [k N / nch, (k+1) N / nch) (as on the CPU, with more
// chunks: a GPU needs the threads); thread (k, pack of columns) sums its chunk's rows in order
// into partial[k][c] (float32, in the workspace); then a tree in a fixed shape adds the partials:
// kCombineGroups groups of consecutive chunks, each summed in chunk order, then the group sums in
// group order. The shape depends only on N, so: same inputs, same bits.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace zt::cuda_kernels {

// 1024 chunks: at N = 16384 rows (B 16 x T 1024) a chunk is 16 rows and a Llama-100m width
// (C = 768, 8-column packs) gives 98k threads; 128 chunks left 2-column threads latency bound
// (~6x their bytes' time on an H200).
inline constexpr int64_t kNormChunks = 1024;
inline constexpr int kCombineGroups = 16;

// Device bytes of workspace the backward needs (partials for dw and db: 2 * nch * C float32).
int64_t norm_backward_workspace_bytes(int64_t N, int64_t C);

// out (N, C), mean (N) f32, rstd (N) f32 from x (N, C), w (C), b (C) or null. eps >= 0.
void layernorm_forward(DType t, void* out, float* mean, float* rstd, const void* x, const void* w, const void* b,
                       int64_t N, int64_t C, float eps, cudaStream_t s);
// dx (N, C), dw (C), db (C) (each optional) from dout, x (N, C), w (C), mean, rstd (N) f32.
// dres (N, C) or null (needs dx; must not overlap it): dx = dres + the gradient rounded to T.
// workspace: >= norm_backward_workspace_bytes(N, C) device bytes (4-byte aligned), used until the
// launches complete; may be null when dw and db are both null.
void layernorm_backward(DType t, void* dx, void* dw, void* db, const void* dout, const void* x, const void* w,
                        const float* mean, const float* rstd, const void* dres, int64_t N, int64_t C, void* workspace,
                        cudaStream_t s);

// out (N, C), rstd (N) f32 from x (N, C), w (C).
void rmsnorm_forward(DType t, void* out, float* rstd, const void* x, const void* w, int64_t N, int64_t C, float eps,
                     cudaStream_t s);
// dx (N, C), dw (C) (each optional); dres and workspace as for layernorm_backward.
void rmsnorm_backward(DType t, void* dx, void* dw, const void* dout, const void* x, const void* w, const float* rstd,
                      const void* dres, int64_t N, int64_t C, void* workspace, cudaStream_t s);

// h (N, C) = x + y, out (N, C) = layernorm(h) with mean, rstd (N) f32; b may be null. x, y, h, out
// must not overlap. The backward: layernorm_backward with h as x.
void residual_layernorm_forward(DType t, void* h, void* out, float* mean, float* rstd, const void* x, const void* y,
                                const void* w, const void* b, int64_t N, int64_t C, float eps, cudaStream_t s);
// h (N, C) = x + y, out (N, C) = rmsnorm(h) with rstd (N) f32.
void residual_rmsnorm_forward(DType t, void* h, void* out, float* rstd, const void* x, const void* y, const void* w,
                              int64_t N, int64_t C, float eps, cudaStream_t s);

}  // namespace zt::cuda_kernels

#if defined(__CUDACC__)
#include "cuda/kernels/cast.h"  // dev::Io, load8

// ---- row helpers for cuda/kernels/*.cu (nvcc only) ----
namespace zt::cuda_kernels::dev {

// Sum over the 32 lanes of a full warp, butterfly order: every lane returns the same bits.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o >= 1; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o >= 1; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Walks elements [0, n) of K rows p[0..K) of storage type Io<D>::T with `G` cooperating threads,
// thread `g` in [0, G): calls f(i, v) with v[k] = float(p[k][i]). Vec: packs of 8 through 128-bit
// loads (every p[k] 16-byte aligned) for i < n / 8 * 8, pack j to thread j % G, then the tail
// element-wise; else element i to thread i % G. Each thread visits its elements in increasing i.
template <DType D, bool Vec, int K, class F>
__device__ __forceinline__ void row_walk(const typename Io<D>::T* const (&p)[K], int64_t n, int g, int G, F&& f) {
  using T = typename Io<D>::T;
  int64_t done = 0;
  if constexpr (Vec) {
    const int64_t packs = n / 8;
    for (int64_t j = g; j < packs; j += G) {
      alignas(16) T r[K][8];
#pragma unroll
      for (int k = 0; k < K; ++k) load8(r[k], p[k] + j * 8);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        float v[K];
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] = Io<D>::load(r[k][e]);
        f(j * 8 + e, v);
      }
    }
    done = packs * 8;
  }
  for (int64_t i = done + g; i < n; i += G) {
    float v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = Io<D>::load(p[k][i]);
    f(i, v);
  }
}

// The same walk writing one output row: out[i] = Io<D>::store(f(i, v)) (128-bit stores on the
// vector path, out 16-byte aligned too). out may be one of the p[k] (each element is read, then
// written, by the same thread).
template <DType D, bool Vec, int K, class F>
__device__ __forceinline__ void row_map(typename Io<D>::T* out, const typename Io<D>::T* const (&p)[K], int64_t n,
                                        int g, int G, F&& f) {
  using T = typename Io<D>::T;
  int64_t done = 0;
  if constexpr (Vec) {
    const int64_t packs = n / 8;
    for (int64_t j = g; j < packs; j += G) {
      alignas(16) T r[K][8];
      alignas(16) T o[8];
#pragma unroll
      for (int k = 0; k < K; ++k) load8(r[k], p[k] + j * 8);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        float v[K];
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] = Io<D>::load(r[k][e]);
        o[e] = Io<D>::store(f(j * 8 + e, v));
      }
      store8(out + j * 8, o);
    }
    done = packs * 8;
  }
  for (int64_t i = done + g; i < n; i += G) {
    float v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = Io<D>::load(p[k][i]);
    out[i] = Io<D>::store(f(i, v));
  }
}

}  // namespace zt::cuda_kernels::dev
#endif
