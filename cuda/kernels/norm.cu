// defines: norm_backward_workspace_bytes, layernorm_forward, layernorm_backward, rmsnorm_forward,
//          residual_layernorm_forward, residual_rmsnorm_forward, rmsnorm_backward (cuda/kernels/norm.h);
//          file-local: num_chunks, first_term, norm_row_from, norm_fwd_kernel, residual_norm_fwd_kernel,
//          norm_bwd_dx_kernel and 8 more
#include "cuda/kernels/norm.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/kernels/column_walk.cuh"  // dev::column_walk, sum_chunks_in_order
#include "cuda/kernels/dispatch.h"       // check_compute, dispatch_compute_vec, dispatch_bool

namespace zt::cuda_kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / 32;  // one warp per row

template <DType D>
using Tp = typename dev::Io<D>::T;

int64_t num_chunks(int64_t N) { return std::max<int64_t>(1, std::min<int64_t>(N, kNormChunks)); }

// ---- forward: one warp per row, rows strided by the grid ----
// Mode: 0 LayerNorm with bias, 1 LayerNorm without bias, 2 RMSNorm.

// The row's first sum, per element: x for LayerNorm's mean, x^2 for RMSNorm's mean square.
template <int Mode>
__device__ __forceinline__ float first_term(float v) {
  return Mode == 2 ? v * v : v;
}

// The rest of row r once this lane holds its part `acc` of the first sum (over the elements
// row_walk gives it, in row_walk's order): LayerNorm's variance walk, then out (C) and the row's
// statistics. xr is the row being normalized.
template <DType D, bool Vec, int Mode>
__device__ __forceinline__ void norm_row_from(float acc, Tp<D>* __restrict__ outr, float* __restrict__ mean,
                                              float* __restrict__ rstd, const Tp<D>* xr, const Tp<D>* __restrict__ w,
                                              const Tp<D>* __restrict__ b, int64_t r, int64_t C, float eps,
                                              int lane) {
  const float inv_c = 1.0f / static_cast<float>(C);
  const Tp<D>* const px[1] = {xr};
  float m = 0.0f;
  if constexpr (Mode != 2) {
    m = dev::warp_sum(acc) * inv_c;
    acc = 0.0f;
    dev::row_walk<D, Vec>(px, C, lane, 32, [&](int64_t, const float (&v)[1]) {
      const float d = v[0] - m;
      acc += d * d;
    });
  }
  const float s = 1.0f / sqrtf(dev::warp_sum(acc) * inv_c + eps);
  if constexpr (Mode == 0) {
    const Tp<D>* const p[3] = {xr, w, b};
    dev::row_map<D, Vec>(outr, p, C, lane, 32,
                         [&](int64_t, const float (&v)[3]) { return (v[0] - m) * s * v[1] + v[2]; });
  } else {
    const Tp<D>* const p[2] = {xr, w};
    dev::row_map<D, Vec>(outr, p, C, lane, 32, [&](int64_t, const float (&v)[2]) {
      return Mode == 1 ? (v[0] - m) * s * v[1] : v[0] * s * v[1];
    });
  }
  if (lane == 0) {
    if constexpr (Mode != 2) mean[r] = m;
    rstd[r] = s;
  }
}

template <DType D, bool Vec, int Mode>
__global__ void norm_fwd_kernel(Tp<D>* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                const Tp<D>* __restrict__ x, const Tp<D>* __restrict__ w, const Tp<D>* __restrict__ b,
                                int64_t N, int64_t C, float eps) {
  const int lane = threadIdx.x & 31;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32; r < N;
       r += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const Tp<D>* const px[1] = {x + r * C};
    float acc = 0.0f;
    dev::row_walk<D, Vec>(px, C, lane, 32, [&](int64_t, const float (&v)[1]) { acc += first_term<Mode>(v[0]); });
    norm_row_from<D, Vec, Mode>(acc, out + r * C, mean, rstd, x + r * C, w, b, r, C, eps, lane);
  }
}

// Residual + norm (llm.c's fused_residual_forward): row r of h = x + y is written (rounded to D)
// by the walk that also sums it, then normalized from h, which each lane reads back where it wrote
// it (row_walk and row_map give a lane the same elements): the bits of binary add + norm_fwd_kernel.
// h is not __restrict__: it is written, then read, in this kernel.
template <DType D, bool Vec, int Mode>
__global__ void residual_norm_fwd_kernel(Tp<D>* h, Tp<D>* __restrict__ out, float* __restrict__ mean,
                                         float* __restrict__ rstd, const Tp<D>* __restrict__ x,
                                         const Tp<D>* __restrict__ y, const Tp<D>* __restrict__ w,
                                         const Tp<D>* __restrict__ b, int64_t N, int64_t C, float eps) {
  using Io = dev::Io<D>;
  const int lane = threadIdx.x & 31;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32; r < N;
       r += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const Tp<D>* const pxy[2] = {x + r * C, y + r * C};
    float acc = 0.0f;
    dev::row_map<D, Vec>(h + r * C, pxy, C, lane, 32, [&](int64_t, const float (&v)[2]) {
      const float hv = Io::load(Io::store(v[0] + v[1]));  // h as stored
      acc += first_term<Mode>(hv);
      return hv;
    });
    norm_row_from<D, Vec, Mode>(acc, out + r * C, mean, rstd, h + r * C, w, b, r, C, eps, lane);
  }
}

// ---- backward dx: one warp per row; mean(g) and mean(g xhat) in one walk ----
// Res: dx = dres + that gradient rounded to the storage type (the bits of a separate add after
// it), the residual stream's gradient read in the same pass that writes dx.
template <DType D, bool Vec, bool LN, bool Res>
__global__ void norm_bwd_dx_kernel(Tp<D>* __restrict__ dx, const Tp<D>* __restrict__ dout, const Tp<D>* __restrict__ x,
                                   const Tp<D>* __restrict__ w, const float* __restrict__ mean,
                                   const float* __restrict__ rstd, const Tp<D>* __restrict__ dres, int64_t N,
                                   int64_t C) {
  const int lane = threadIdx.x & 31;
  const float inv_c = 1.0f / static_cast<float>(C);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32; r < N;
       r += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const float m = LN ? mean[r] : 0.0f, s = rstd[r];
    const Tp<D>* const p[3] = {dout + r * C, x + r * C, w};  // v = {dout, x, w}
    float ag = 0.0f, agx = 0.0f;
    dev::row_walk<D, Vec>(p, C, lane, 32, [&](int64_t, const float (&v)[3]) {
      const float g = v[0] * v[2];
      ag += g;
      agx += g * ((v[1] - m) * s);
    });
    const float gm = LN ? dev::warp_sum(ag) * inv_c : 0.0f;
    const float gxm = dev::warp_sum(agx) * inv_c;
    const auto dx_of = [&](const float* v) {
      const float xhat = (v[1] - m) * s;
      return LN ? s * (v[0] * v[2] - gm - xhat * gxm) : s * (v[0] * v[2] - xhat * gxm);
    };
    if constexpr (Res) {
      const Tp<D>* const q[4] = {dout + r * C, x + r * C, w, dres + r * C};  // v = {dout, x, w, dres}
      dev::row_map<D, Vec>(dx + r * C, q, C, lane, 32, [&](int64_t, const float(&v)[4]) {
        return __fadd_rn(v[3], dev::Io<D>::load(dev::Io<D>::store(dx_of(v))));
      });
    } else {
      dev::row_map<D, Vec>(dx + r * C, p, C, lane, 32, [&](int64_t, const float(&v)[3]) { return dx_of(v); });
    }
  }
}

// ---- backward dw / db: thread (chunk k, pack of P columns from c) sums its chunk's rows in order ----
// P > 1: one access per pack (C % P == 0, dout and x aligned to the pack). The mean and rstd of a
// batch of rows are loaded with the rows.
template <DType D, int P, bool LN>
__global__ void norm_bwd_partial_kernel(float* __restrict__ pw, float* __restrict__ pb, const Tp<D>* __restrict__ dout,
                                        const Tp<D>* __restrict__ x, const float* __restrict__ mean,
                                        const float* __restrict__ rstd, int64_t N, int64_t C, int64_t nch) {
  constexpr int NR = LN ? 2 : 1;  // per-row values: {mean, rstd} or {rstd}
  const float* const rows[2] = {LN ? mean : rstd, rstd};
  const int64_t packs = C / P;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < nch * packs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = i / packs, c = (i % packs) * P;
    float aw[P] = {}, ab[P] = {};
    const Tp<D>* const in[2] = {dout, x};
    const auto add_row = [&](int64_t, const float(&v)[2][P], const float(&w)[NR]) {
      const float m = LN ? w[0] : 0.0f, s = w[NR - 1];
#pragma unroll
      for (int e = 0; e < P; ++e) {
        const float g = v[0][e], xv = v[1][e];
        aw[e] += g * (LN ? (xv - m) * s : xv * s);
        ab[e] += g;
      }
    };
    dev::column_walk<D, P, 2, NR>(in, rows, C, c, k * N / nch, (k + 1) * N / nch, add_row);
#pragma unroll
    for (int e = 0; e < P; ++e) {
      if (pw) pw[k * C + c + e] = aw[e];
      if (pb) pb[k * C + c + e] = ab[e];
    }
  }
}

// out[c] = the partials' sum in the tree of norm.h: group g (threadIdx.y) adds partial[k][c] for
// its chunks k in order, then row 0 adds the kCombineGroups group sums in order; rounded once to D.
// Block (32, kCombineGroups): a warp reads 32 adjacent columns of one chunk (128 bytes).
template <DType D>
__global__ void combine_partials_kernel(Tp<D>* __restrict__ out, const float* __restrict__ partial, int64_t nch,
                                        int64_t C) {
  __shared__ float group_sum[kCombineGroups][32];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const int g = static_cast<int>(threadIdx.y);
  const int64_t k0 = g * nch / kCombineGroups, k1 = (g + 1) * nch / kCombineGroups;
  group_sum[g][threadIdx.x] = c < C ? dev::sum_chunks_in_order(partial + k0 * C, k1 - k0, C, c) : 0.0f;
  __syncthreads();
  if (g != 0 || c >= C) return;
  float a = 0.0f;
#pragma unroll
  for (int j = 0; j < kCombineGroups; ++j) a = __fadd_rn(a, group_sum[j][threadIdx.x]);
  out[c] = dev::Io<D>::store(a);
}

void check_args(const char* who, DType t, int64_t N, int64_t C) {
  check_compute(who, t);
  if (N < 0 || C < 1) ZT_THROW("cuda_kernels::", who, ": N = ", N, ", C = ", C, ", expected N >= 0 and C >= 1");
}
void need(const char* who, const char* name, const void* p) {
  if (!p) ZT_THROW("cuda_kernels::", who, ": ", name, " is null");
}
bool all_aligned(std::initializer_list<const void*> ps) {
  for (const void* p : ps)
    if (p && !dev::aligned16(p)) return false;
  return true;
}

void launch_fwd(const char* who, DType t, void* out, float* mean, float* rstd, const void* x, const void* w,
                const void* b, int64_t N, int64_t C, float eps, bool ln, cudaStream_t s) {
  check_args(who, t, N, C);
  if (!(eps >= 0.0f) || !std::isfinite(eps)) ZT_THROW("cuda_kernels::", who, ": eps = ", eps, ", expected finite >= 0");
  if (N == 0) return;
  need(who, "out", out), need(who, "rstd", rstd), need(who, "x", x), need(who, "w", w);
  if (ln) need(who, "mean", mean);
  const bool vec = C % 8 == 0 && all_aligned({out, x, w, b});
  const unsigned grid = dev::grid_for(N, kRowsPerBlock);
  dispatch_compute_vec(t, vec, who, [&](auto d, auto v) {
    constexpr DType D = decltype(d)::value;
    constexpr bool V = decltype(v)::value;
    auto* o = static_cast<Tp<D>*>(out);
    const auto *px = static_cast<const Tp<D>*>(x), *pw = static_cast<const Tp<D>*>(w),
               *pb = static_cast<const Tp<D>*>(b);
    if (!ln) norm_fwd_kernel<D, V, 2><<<grid, kThreads, 0, s>>>(o, mean, rstd, px, pw, pb, N, C, eps);
    else if (b) norm_fwd_kernel<D, V, 0><<<grid, kThreads, 0, s>>>(o, mean, rstd, px, pw, pb, N, C, eps);
    else norm_fwd_kernel<D, V, 1><<<grid, kThreads, 0, s>>>(o, mean, rstd, px, pw, pb, N, C, eps);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

void launch_residual_fwd(const char* who, DType t, void* h, void* out, float* mean, float* rstd, const void* x,
                         const void* y, const void* w, const void* b, int64_t N, int64_t C, float eps, bool ln,
                         cudaStream_t s) {
  check_args(who, t, N, C);
  if (!(eps >= 0.0f) || !std::isfinite(eps)) ZT_THROW("cuda_kernels::", who, ": eps = ", eps, ", expected finite >= 0");
  if (N == 0) return;
  need(who, "h", h), need(who, "out", out), need(who, "rstd", rstd), need(who, "x", x), need(who, "y", y);
  need(who, "w", w);
  if (ln) need(who, "mean", mean);
  const bool vec = C % 8 == 0 && all_aligned({h, out, x, y, w, b});
  const unsigned grid = dev::grid_for(N, kRowsPerBlock);
  dispatch_compute_vec(t, vec, who, [&](auto d, auto v) {
    constexpr DType D = decltype(d)::value;
    constexpr bool V = decltype(v)::value;
    auto *ph = static_cast<Tp<D>*>(h), *o = static_cast<Tp<D>*>(out);
    const auto *px = static_cast<const Tp<D>*>(x), *py = static_cast<const Tp<D>*>(y),
               *pw = static_cast<const Tp<D>*>(w), *pb = static_cast<const Tp<D>*>(b);
    if (!ln) residual_norm_fwd_kernel<D, V, 2><<<grid, kThreads, 0, s>>>(ph, o, mean, rstd, px, py, pw, pb, N, C, eps);
    else if (b) residual_norm_fwd_kernel<D, V, 0><<<grid, kThreads, 0, s>>>(ph, o, mean, rstd, px, py, pw, pb, N, C, eps);
    else residual_norm_fwd_kernel<D, V, 1><<<grid, kThreads, 0, s>>>(ph, o, mean, rstd, px, py, pw, pb, N, C, eps);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

void launch_bwd(const char* who, DType t, void* dx, void* dw, void* db, const void* dout, const void* x, const void* w,
                const float* mean, const float* rstd, const void* dres, int64_t N, int64_t C, void* workspace, bool ln,
                cudaStream_t s) {
  check_args(who, t, N, C);
  const bool reduce = dw || db;
  if (N == 0) {  // empty sums: zero gradients, as on the CPU
    if (dw) ZT_CUDA_CHECK(cudaMemsetAsync(dw, 0, C * dtype_size(t), s));
    if (db) ZT_CUDA_CHECK(cudaMemsetAsync(db, 0, C * dtype_size(t), s));
    return;
  }
  need(who, "dout", dout), need(who, "x", x), need(who, "rstd", rstd);
  if (ln) need(who, "mean", mean);
  if (dx) need(who, "w", w);
  if (dres) need(who, "dx", dx);
  if (reduce) need(who, "workspace", workspace);
  const bool vec = dx && C % 8 == 0 && all_aligned({dx, dout, x, w}) && (!dres || all_aligned({dres}));
  dispatch_compute_vec(t, vec, who, [&](auto d, auto v) {
    constexpr DType D = decltype(d)::value;
    constexpr bool V = decltype(v)::value;
    const auto *pg = static_cast<const Tp<D>*>(dout), *px = static_cast<const Tp<D>*>(x);
    if (dx) {
      const unsigned grid = dev::grid_for(N, kRowsPerBlock);
      auto* pdx = static_cast<Tp<D>*>(dx);
      const auto* pw = static_cast<const Tp<D>*>(w);
      const auto* pr = static_cast<const Tp<D>*>(dres);
      dispatch_bool(ln, [&](auto l) {
        constexpr bool L = decltype(l)::value;
        if (pr) norm_bwd_dx_kernel<D, V, L, true><<<grid, kThreads, 0, s>>>(pdx, pg, px, pw, mean, rstd, pr, N, C);
        else norm_bwd_dx_kernel<D, V, L, false><<<grid, kThreads, 0, s>>>(pdx, pg, px, pw, mean, rstd, pr, N, C);
      });
      ZT_CUDA_CHECK(cudaGetLastError());
    }
    if (reduce) {
      const int64_t nch = num_chunks(N);
      float* pw_part = dw ? static_cast<float*>(workspace) : nullptr;
      float* pb_part = db ? static_cast<float*>(workspace) + nch * C : nullptr;
      // packs of 8 columns (one 16-byte access of bfloat16) where C and the pointers allow, else
      // pairs, else single columns: nch C / P threads
      const int es = static_cast<int>(sizeof(Tp<D>));
      const bool aligned2 = dev::pack_aligned(dout, 2, es) && dev::pack_aligned(x, 2, es);
      const int P = C % 8 == 0 && dev::pack_aligned(dout, 8, es) && dev::pack_aligned(x, 8, es) ? 8
                    : C % 2 == 0 && aligned2                                                    ? 2
                                                                                                : 1;
      const unsigned grid = dev::grid_for(nch * C / P, kThreads);
      dispatch_bool(ln, [&](auto l) {
        constexpr bool L = decltype(l)::value;
        if (P == 8)
          norm_bwd_partial_kernel<D, 8, L><<<grid, kThreads, 0, s>>>(pw_part, pb_part, pg, px, mean, rstd, N, C, nch);
        else if (P == 2)
          norm_bwd_partial_kernel<D, 2, L><<<grid, kThreads, 0, s>>>(pw_part, pb_part, pg, px, mean, rstd, N, C, nch);
        else
          norm_bwd_partial_kernel<D, 1, L><<<grid, kThreads, 0, s>>>(pw_part, pb_part, pg, px, mean, rstd, N, C, nch);
      });
      ZT_CUDA_CHECK(cudaGetLastError());
      const unsigned cgrid = static_cast<unsigned>((C + 31) / 32);
      const dim3 cblock(32, kCombineGroups);
      if (dw) combine_partials_kernel<D><<<cgrid, cblock, 0, s>>>(static_cast<Tp<D>*>(dw), pw_part, nch, C);
      if (db) combine_partials_kernel<D><<<cgrid, cblock, 0, s>>>(static_cast<Tp<D>*>(db), pb_part, nch, C);
      ZT_CUDA_CHECK(cudaGetLastError());
    }
  });
}

}  // namespace

int64_t norm_backward_workspace_bytes(int64_t N, int64_t C) {
  if (N < 0 || C < 0) ZT_THROW("cuda_kernels::norm_backward_workspace_bytes: N = ", N, ", C = ", C, ", expected >= 0");
  return 2 * num_chunks(N) * C * static_cast<int64_t>(sizeof(float));
}

void layernorm_forward(DType t, void* out, float* mean, float* rstd, const void* x, const void* w, const void* b,
                       int64_t N, int64_t C, float eps, cudaStream_t s) {
  launch_fwd("layernorm_forward", t, out, mean, rstd, x, w, b, N, C, eps, true, s);
}

void layernorm_backward(DType t, void* dx, void* dw, void* db, const void* dout, const void* x, const void* w,
                        const float* mean, const float* rstd, const void* dres, int64_t N, int64_t C, void* workspace,
                        cudaStream_t s) {
  launch_bwd("layernorm_backward", t, dx, dw, db, dout, x, w, mean, rstd, dres, N, C, workspace, true, s);
}

void rmsnorm_forward(DType t, void* out, float* rstd, const void* x, const void* w, int64_t N, int64_t C, float eps,
                     cudaStream_t s) {
  launch_fwd("rmsnorm_forward", t, out, nullptr, rstd, x, w, nullptr, N, C, eps, false, s);
}

void residual_layernorm_forward(DType t, void* h, void* out, float* mean, float* rstd, const void* x, const void* y,
                                const void* w, const void* b, int64_t N, int64_t C, float eps, cudaStream_t s) {
  launch_residual_fwd("residual_layernorm_forward", t, h, out, mean, rstd, x, y, w, b, N, C, eps, true, s);
}

void residual_rmsnorm_forward(DType t, void* h, void* out, float* rstd, const void* x, const void* y, const void* w,
                              int64_t N, int64_t C, float eps, cudaStream_t s) {
  launch_residual_fwd("residual_rmsnorm_forward", t, h, out, nullptr, rstd, x, y, w, nullptr, N, C, eps, false, s);
}

void rmsnorm_backward(DType t, void* dx, void* dw, const void* dout, const void* x, const void* w, const float* rstd,
                      const void* dres, int64_t N, int64_t C, void* workspace, cudaStream_t s) {
  launch_bwd("rmsnorm_backward", t, dx, dw, nullptr, dout, x, w, nullptr, rstd, dres, N, C, workspace, false, s);
}

}  // namespace zt::cuda_kernels
