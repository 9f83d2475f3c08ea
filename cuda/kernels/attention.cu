// defines: attention_forward, attention_backward_workspace_bytes, attention_backward
//          (cuda/kernels/attention.h); file-local: warp_sum, warp_max, odd_stride, stage, fwd_smem,
//          attn_bwd_dot_kernel and 8 more
//
// Causal grouped-query attention, forward and backward: see attention.h for the semantics, the
// tiling, the determinism argument and the cost.
#include "cuda/kernels/attention.h"

#include <climits>
#include <cmath>

#include "cuda/check.h"
#include "cuda/kernels/cast.h"  // dev::Io, grid_for
#include "cuda/kernels/dispatch.h"  // check_compute, dispatch_compute

namespace zt::cuda_kernels {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 4;                // query rows per warp (forward, dq)
constexpr int kBq = kWarps * kRows;     // query rows per block (forward, dq)
constexpr int kBk = 32;                 // key rows per shared-memory tile (forward, dq): one per lane
constexpr int kKeys = 4;                // key rows per warp (dk, dv)
constexpr int kBkv = kWarps * kKeys;    // key rows per block (dk, dv)
constexpr int kBt = 32;                 // query rows per shared-memory tile (dk, dv): one per lane
constexpr int kC = static_cast<int>(kAttentionMaxHeadDim / 32);  // columns per lane: d = lane + 32 c
constexpr unsigned kFull = 0xffffffffu;
constexpr size_t kDefaultSmem = 48 * 1024;

static_assert(kBk == 32 && kBt == 32, "one key (query) row per lane");

template <DType DT>
using Tp = typename dev::Io<DT>::T;

// Butterfly reductions: after the 5 steps every lane holds the same bits (each step adds the same
// two operands in both partner lanes, and float addition is commutative).
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(kFull, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(kFull, x, o));
  return x;
}

// Row stride of a shared tile whose rows are read one row per lane: odd, so lane j's element d
// (address j * stride + d) falls in bank (j * stride + d) % 32, distinct for the 32 lanes.
__host__ __device__ inline int odd_stride(int D) { return D | 1; }

// rows [r0, r0 + R) of a (T, ld)-strided head slice `src` into dst (R, stride) float32, zero
// rows beyond T. All threads of the block take part.
template <DType DT>
__device__ __forceinline__ void stage(float* dst, int stride, const Tp<DT>* src, int64_t ld, int64_t r0, int R,
                                      int64_t T, int D) {
  for (int e = threadIdx.x; e < R * D; e += kThreads) {
    const int r = e / D, d = e - r * D;
    const int64_t t = r0 + r;
    dst[r * stride + d] = t < T ? dev::Io<DT>::load(src[t * ld + d]) : 0.0f;
  }
}

// ---- forward ------------------------------------------------------------------------------------
// grid (ceil(T / kBq), Hq, B), kThreads threads; dynamic shared memory fwd_smem(D).
size_t fwd_smem(int D) { return sizeof(float) * (size_t(kBq) * D + size_t(kBk) * odd_stride(D) + size_t(kBk) * D); }

template <DType DT>
__global__ void __launch_bounds__(kThreads)
    attn_fwd_kernel(Tp<DT>* __restrict__ out, float* __restrict__ lse, const Tp<DT>* __restrict__ q,
                    const Tp<DT>* __restrict__ k, const Tp<DT>* __restrict__ v, int64_t T, int Hq, int Hkv, int D,
                    float scale) {
  extern __shared__ float smem[];
  const int ks = odd_stride(D);
  float* Qs = smem;             // (kBq, D)
  float* Ks = Qs + kBq * D;     // (kBk, ks)
  float* Vs = Ks + kBk * ks;    // (kBk, D)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t b = blockIdx.z;
  const int h = blockIdx.y, hk = h / (Hq / Hkv);
  const int64_t q0 = (static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x) * kBq;  // longest rows first
  const int64_t ldq = int64_t(Hq) * D, ldk = int64_t(Hkv) * D;
  const Tp<DT>* qb = q + b * T * ldq + int64_t(h) * D;
  const Tp<DT>* kb = k + b * T * ldk + int64_t(hk) * D;
  const Tp<DT>* vb = v + b * T * ldk + int64_t(hk) * D;
  stage<DT>(Qs, D, qb, ldq, q0, kBq, T, D);

  const int64_t q_end = q0 + kBq < T ? q0 + kBq : T;  // rows [q0, q_end) exist
  int64_t last[kRows];  // the last key each row sees (padding rows >= T act as row T - 1, unwritten)
  float m[kRows], l[kRows], acc[kRows][kC];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t t = q0 + warp * kRows + r;
    last[r] = t < T ? t : T - 1;
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < kC; ++c) acc[r][c] = 0.0f;
  }
  const float* Qw = Qs + warp * kRows * D;

  for (int64_t k0 = 0; k0 < q_end; k0 += kBk) {
    __syncthreads();  // Q staged (first tile); every warp done with the previous K, V tile
    stage<DT>(Ks, ks, kb, ldk, k0, kBk, T, D);
    stage<DT>(Vs, D, vb, ldk, k0, kBk, T, D);
    __syncthreads();

    // scores of this warp's rows against key j = k0 + lane
    float s[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) s[r] = 0.0f;
    const float* Kr = Ks + lane * ks;
#pragma unroll 4
    for (int d = 0; d < D; ++d) {
      const float kv = Kr[d];
#pragma unroll
      for (int r = 0; r < kRows; ++r) s[r] = fmaf(Qw[r * D + d], kv, s[r]);
    }
    const int64_t j = k0 + lane;
    float p[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float sc = j <= last[r] ? s[r] * scale : -INFINITY;
      // finite: the first tile holds key 0, which every row sees
      const float m_new = fmaxf(m[r], warp_max(sc));
      const float corr = expf(m[r] - m_new);  // 0 on the first tile (m = -inf)
      p[r] = expf(sc - m_new);                // 0 where masked
      l[r] = l[r] * corr + warp_sum(p[r]);
      m[r] = m_new;
#pragma unroll
      for (int c = 0; c < kC; ++c) acc[r][c] *= corr;
    }
    // acc += p V over the tile's keys (keys past q_end have p = 0 for every row: skipped)
    const int n = q_end - k0 < kBk ? static_cast<int>(q_end - k0) : kBk;
    for (int jj = 0; jj < n; ++jj) {
      float pj[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) pj[r] = __shfl_sync(kFull, p[r], jj);
      const float* Vr = Vs + jj * D;
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        const int d = lane + 32 * c;
        if (d < D) {
          const float vv = Vr[d];
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[r][c] = fmaf(pj[r], vv, acc[r][c]);
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t t = q0 + warp * kRows + r;
    if (t >= T) continue;
    const float inv = 1.0f / l[r];  // l >= 1: the row's maximum contributes exp(0)
    Tp<DT>* o = out + b * T * ldq + t * ldq + int64_t(h) * D;
#pragma unroll
    for (int c = 0; c < kC; ++c) {
      const int d = lane + 32 * c;
      if (d < D) o[d] = dev::Io<DT>::store(acc[r][c] * inv);
    }
    if (lse && lane == 0) lse[(b * Hq + h) * T + t] = m[r] + logf(l[r]);
  }
}

// ---- backward (1): Dl_t = dout_t . out_t, one warp per row ----------------------------------------
template <DType DT>
__global__ void attn_bwd_dot_kernel(float* __restrict__ Dl, const Tp<DT>* __restrict__ dout,
                                    const Tp<DT>* __restrict__ out, int64_t rows, int64_t T, int Hq, int D) {
  const int lane = threadIdx.x & 31;
  const int64_t warps_per_block = blockDim.x / 32;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * warps_per_block + (threadIdx.x >> 5); row < rows;
       row += static_cast<int64_t>(gridDim.x) * warps_per_block) {
    // row = (b T + t) Hq + h: the memory order of dout / out
    float a = 0.0f;
    for (int d = lane; d < D; d += 32)
      a = fmaf(dev::Io<DT>::load(dout[row * D + d]), dev::Io<DT>::load(out[row * D + d]), a);
    a = warp_sum(a);
    if (lane == 0) {
      const int64_t h = row % Hq, bt = row / Hq, t = bt % T, b = bt / T;
      Dl[(b * Hq + h) * T + t] = a;
    }
  }
}

// ---- backward (2): dq --------------------------------------------------------------------------
// grid (ceil(T / kBq), Hq, B); dynamic shared memory dq_smem(D).
size_t dq_smem(int D) { return sizeof(float) * (2 * size_t(kBq) * D + 2 * size_t(kBk) * odd_stride(D)); }

// s_r = q_r . k_lane and dp_r = dout_r . v_lane for the warp's rows r, over d in increasing order
// (the forward's sequence of fmaf for s: the same bits).
__device__ __forceinline__ void scores_dp(float (&s)[kRows], float (&dp)[kRows], const float* Qw, const float* dOw,
                                          const float* Kr, const float* Vr, int D) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) s[r] = dp[r] = 0.0f;
#pragma unroll 4
  for (int d = 0; d < D; ++d) {
    const float kv = Kr[d], vv = Vr[d];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      s[r] = fmaf(Qw[r * D + d], kv, s[r]);
      dp[r] = fmaf(dOw[r * D + d], vv, dp[r]);
    }
  }
}

// RowsumD: Dl is computed here, as sum_j p_tj dp_tj over the key tiles in order (each tile's 32
// terms by the warp butterfly), and written to Dl for the dk / dv pass; otherwise Dl is read (the
// dot kernel's dout . out).
template <DType DT, bool RowsumD>
__global__ void __launch_bounds__(kThreads)
    attn_bwd_dq_kernel(Tp<DT>* __restrict__ dq, const Tp<DT>* __restrict__ dout, const Tp<DT>* __restrict__ q,
                       const Tp<DT>* __restrict__ k, const Tp<DT>* __restrict__ v, const float* __restrict__ lse,
                       float* __restrict__ Dl, int64_t T, int Hq, int Hkv, int D, float scale) {
  extern __shared__ float smem[];
  const int ks = odd_stride(D);
  float* Qs = smem;              // (kBq, D)
  float* dOs = Qs + kBq * D;     // (kBq, D)
  float* Ks = dOs + kBq * D;     // (kBk, ks)
  float* Vs = Ks + kBk * ks;     // (kBk, ks)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t b = blockIdx.z;
  const int h = blockIdx.y, hk = h / (Hq / Hkv);
  const int64_t q0 = (static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x) * kBq;
  const int64_t ldq = int64_t(Hq) * D, ldk = int64_t(Hkv) * D, bh = b * Hq + h;
  const Tp<DT>* kb = k + b * T * ldk + int64_t(hk) * D;
  const Tp<DT>* vb = v + b * T * ldk + int64_t(hk) * D;
  stage<DT>(Qs, D, q + b * T * ldq + int64_t(h) * D, ldq, q0, kBq, T, D);
  stage<DT>(dOs, D, dout + b * T * ldq + int64_t(h) * D, ldq, q0, kBq, T, D);

  const int64_t q_end = q0 + kBq < T ? q0 + kBq : T;
  int64_t last[kRows];
  float row_lse[kRows], row_dl[kRows], acc[kRows][kC];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t t = q0 + warp * kRows + r;
    last[r] = t < T ? t : T - 1;
    row_lse[r] = lse[bh * T + last[r]];
    row_dl[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < kC; ++c) acc[r][c] = 0.0f;
  }
  const float* Qw = Qs + warp * kRows * D;
  const float* dOw = dOs + warp * kRows * D;
  const float* Kr = Ks + lane * ks;
  const float* Vr = Vs + lane * ks;

  if constexpr (RowsumD) {  // first sweep: Dl_t = sum_j p_tj dp_tj
    for (int64_t k0 = 0; k0 < q_end; k0 += kBk) {
      __syncthreads();
      stage<DT>(Ks, ks, kb, ldk, k0, kBk, T, D);
      stage<DT>(Vs, ks, vb, ldk, k0, kBk, T, D);
      __syncthreads();
      float s[kRows], dp[kRows];
      scores_dp(s, dp, Qw, dOw, Kr, Vr, D);
      const int64_t j = k0 + lane;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float p = j <= last[r] ? expf(s[r] * scale - row_lse[r]) : 0.0f;
        row_dl[r] += warp_sum(p * dp[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t t = q0 + warp * kRows + r;
      if (t < T && lane == 0) Dl[bh * T + t] = row_dl[r];
    }
  } else {
#pragma unroll
    for (int r = 0; r < kRows; ++r) row_dl[r] = Dl[bh * T + last[r]];
  }

  for (int64_t k0 = 0; k0 < q_end; k0 += kBk) {
    __syncthreads();
    stage<DT>(Ks, ks, kb, ldk, k0, kBk, T, D);
    stage<DT>(Vs, ks, vb, ldk, k0, kBk, T, D);
    __syncthreads();

    float s[kRows], dp[kRows];
    scores_dp(s, dp, Qw, dOw, Kr, Vr, D);
    const int64_t j = k0 + lane;
    float ds[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float p = j <= last[r] ? expf(s[r] * scale - row_lse[r]) : 0.0f;
      ds[r] = p * (dp[r] - row_dl[r]);
    }
    const int n = q_end - k0 < kBk ? static_cast<int>(q_end - k0) : kBk;
    for (int jj = 0; jj < n; ++jj) {
      float dsj[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) dsj[r] = __shfl_sync(kFull, ds[r], jj);
      const float* Kj = Ks + jj * ks;
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        const int d = lane + 32 * c;
        if (d < D) {
          const float kv = Kj[d];
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[r][c] = fmaf(dsj[r], kv, acc[r][c]);
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t t = q0 + warp * kRows + r;
    if (t >= T) continue;
    Tp<DT>* o = dq + b * T * ldq + t * ldq + int64_t(h) * D;
#pragma unroll
    for (int c = 0; c < kC; ++c) {
      const int d = lane + 32 * c;
      if (d < D) o[d] = dev::Io<DT>::store(acc[r][c] * scale);
    }
  }
}

// ---- backward (3): dk, dv per key row -------------------------------------------------------------
// grid (ceil(T / kBkv), Hkv, B); dynamic shared memory dkdv_smem(D).
size_t dkdv_smem(int D) { return sizeof(float) * (2 * size_t(kBkv) * D + 2 * size_t(kBt) * odd_stride(D)); }

template <DType DT>
__global__ void __launch_bounds__(kThreads)
    attn_bwd_dkdv_kernel(Tp<DT>* __restrict__ dk, Tp<DT>* __restrict__ dv, const Tp<DT>* __restrict__ dout,
                         const Tp<DT>* __restrict__ q, const Tp<DT>* __restrict__ k, const Tp<DT>* __restrict__ v,
                         const float* __restrict__ lse, const float* __restrict__ Dl, int64_t T, int Hq, int Hkv,
                         int D, float scale) {
  extern __shared__ float smem[];
  const int ks = odd_stride(D);
  float* Ks = smem;               // (kBkv, D)
  float* Vs = Ks + kBkv * D;      // (kBkv, D)
  float* Qs = Vs + kBkv * D;      // (kBt, ks)
  float* dOs = Qs + kBt * ks;     // (kBt, ks)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t b = blockIdx.z;
  const int hk = blockIdx.y, G = Hq / Hkv;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kBkv;  // the first tiles see the most queries
  const int64_t ldq = int64_t(Hq) * D, ldk = int64_t(Hkv) * D;
  stage<DT>(Ks, D, k + b * T * ldk + int64_t(hk) * D, ldk, j0, kBkv, T, D);
  stage<DT>(Vs, D, v + b * T * ldk + int64_t(hk) * D, ldk, j0, kBkv, T, D);

  int64_t key[kKeys];  // this warp's key rows (rows >= T see no query: zero, unwritten)
  float dka[kKeys][kC], dva[kKeys][kC];
#pragma unroll
  for (int r = 0; r < kKeys; ++r) {
    key[r] = j0 + warp * kKeys + r;
#pragma unroll
    for (int c = 0; c < kC; ++c) dka[r][c] = dva[r][c] = 0.0f;
  }
  const float* Kw = Ks + warp * kKeys * D;
  const float* Vw = Vs + warp * kKeys * D;

  for (int g = 0; g < G; ++g) {  // the group's query heads, in order
    const int h = hk * G + g;
    const int64_t bh = b * Hq + h;
    const Tp<DT>* qb = q + b * T * ldq + int64_t(h) * D;
    const Tp<DT>* dob = dout + b * T * ldq + int64_t(h) * D;
    for (int64_t t0 = j0; t0 < T; t0 += kBt) {  // query rows t >= j0 only (causal)
      __syncthreads();  // K, V staged (first pass); every warp done with the previous Q, dO tile
      stage<DT>(Qs, ks, qb, ldq, t0, kBt, T, D);
      stage<DT>(dOs, ks, dob, ldq, t0, kBt, T, D);
      __syncthreads();

      const int64_t t = t0 + lane;  // this lane's query row
      const float t_lse = t < T ? lse[bh * T + t] : 0.0f;
      const float t_dl = t < T ? Dl[bh * T + t] : 0.0f;
      float s[kKeys], dp[kKeys];
#pragma unroll
      for (int r = 0; r < kKeys; ++r) s[r] = dp[r] = 0.0f;
      const float* Qr = Qs + lane * ks;
      const float* dOr = dOs + lane * ks;
#pragma unroll 4
      for (int d = 0; d < D; ++d) {
        const float qv = Qr[d], ov = dOr[d];
#pragma unroll
        for (int r = 0; r < kKeys; ++r) {
          s[r] = fmaf(qv, Kw[r * D + d], s[r]);  // the forward's products in the forward's order
          dp[r] = fmaf(ov, Vw[r * D + d], dp[r]);
        }
      }
      float p[kKeys], ds[kKeys];
#pragma unroll
      for (int r = 0; r < kKeys; ++r) {
        p[r] = (t < T && t >= key[r]) ? expf(s[r] * scale - t_lse) : 0.0f;
        ds[r] = p[r] * (dp[r] - t_dl);
      }
      const int n = T - t0 < kBt ? static_cast<int>(T - t0) : kBt;
      for (int i = 0; i < n; ++i) {
        float pi[kKeys], dsi[kKeys];
#pragma unroll
        for (int r = 0; r < kKeys; ++r) {
          pi[r] = __shfl_sync(kFull, p[r], i);
          dsi[r] = __shfl_sync(kFull, ds[r], i);
        }
        const float* Qi = Qs + i * ks;
        const float* dOi = dOs + i * ks;
#pragma unroll
        for (int c = 0; c < kC; ++c) {
          const int d = lane + 32 * c;
          if (d < D) {
            const float qv = Qi[d], ov = dOi[d];
#pragma unroll
            for (int r = 0; r < kKeys; ++r) {
              dva[r][c] = fmaf(pi[r], ov, dva[r][c]);
              dka[r][c] = fmaf(dsi[r], qv, dka[r][c]);
            }
          }
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kKeys; ++r) {
    if (key[r] >= T) continue;
    const int64_t off = b * T * ldk + key[r] * ldk + int64_t(hk) * D;
#pragma unroll
    for (int c = 0; c < kC; ++c) {
      const int d = lane + 32 * c;
      if (d < D) {
        dk[off + d] = dev::Io<DT>::store(dka[r][c] * scale);
        dv[off + d] = dev::Io<DT>::store(dva[r][c]);
      }
    }
  }
}

// ---- host side ------------------------------------------------------------------------------------
void check_args(const char* who, DType t, int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D) {
  check_compute(who, t);
  if (B < 0 || T < 0) ZT_THROW("cuda_kernels::", who, ": B = ", B, ", T = ", T, ", expected >= 0");
  if (D < 1 || D > kAttentionMaxHeadDim)
    ZT_THROW("cuda_kernels::", who, ": head dimension D = ", D, " is not supported: this kernel needs 1 <= D <= ",
             kAttentionMaxHeadDim, " (4 float32 accumulators per lane of a warp)");
  if (Hkv < 1 || Hq < 1 || Hq % Hkv != 0)
    ZT_THROW("cuda_kernels::", who, ": Hq = ", Hq, ", Hkv = ", Hkv, ", expected Hkv >= 1 dividing Hq");
  if (Hq > 65535 || B > 65535)
    ZT_THROW("cuda_kernels::", who, ": Hq = ", Hq, ", B = ", B, " exceed the grid's y / z limit 65535");
  if ((T + kBq - 1) / kBq > INT32_MAX) ZT_THROW("cuda_kernels::", who, ": T = ", T, " is too large");
}
void need(const char* who, const char* name, const void* p) {
  if (!p) ZT_THROW("cuda_kernels::", who, ": ", name, " is null");
}
template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  if (bytes > kDefaultSmem)
    ZT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

template <DType DT>
void forward_impl(void* out, float* lse, const void* q, const void* k, const void* v, int64_t B, int64_t T,
                  int64_t Hq, int64_t Hkv, int64_t D, cudaStream_t s) {
  using P = Tp<DT>;
  const size_t smem = fwd_smem(static_cast<int>(D));
  allow_smem(attn_fwd_kernel<DT>, smem);
  const dim3 grid(static_cast<unsigned>((T + kBq - 1) / kBq), static_cast<unsigned>(Hq), static_cast<unsigned>(B));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  attn_fwd_kernel<DT><<<grid, kThreads, smem, s>>>(static_cast<P*>(out), lse, static_cast<const P*>(q),
                                                   static_cast<const P*>(k), static_cast<const P*>(v), T,
                                                   static_cast<int>(Hq), static_cast<int>(Hkv), static_cast<int>(D),
                                                   scale);
  ZT_CUDA_CHECK(cudaGetLastError());
}

template <DType DT>
void backward_impl(void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k, const void* v,
                   const void* out, const float* lse, float* Dl, int64_t B, int64_t T, int64_t Hq, int64_t Hkv,
                   int64_t D, cudaStream_t s) {
  using P = Tp<DT>;
  const int iHq = static_cast<int>(Hq), iHkv = static_cast<int>(Hkv), iD = static_cast<int>(D);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  // (1) Dl: float32 storage: dout . out (out is the float32 result itself); bfloat16: computed by
  // the dq kernel as rowsum(p * dp), since dout . out on the rounded out would carry its 2^-9
  // rounding into dp - Dl (a cancellation: ~1.5e-2 relative error in dq, dk instead of ~4e-3)
  constexpr bool kRowsumD = DT == DType::bf16;
  if constexpr (!kRowsumD) {
    const int64_t rows = B * T * Hq;
    constexpr int kDotThreads = 256;
    attn_bwd_dot_kernel<DT><<<dev::grid_for(rows * 32, kDotThreads), kDotThreads, 0, s>>>(
        Dl, static_cast<const P*>(dout), static_cast<const P*>(out), rows, T, iHq, iD);
    ZT_CUDA_CHECK(cudaGetLastError());
  }
  // (2) dq
  const size_t smem_q = dq_smem(iD);
  allow_smem(attn_bwd_dq_kernel<DT, kRowsumD>, smem_q);
  const dim3 grid_q(static_cast<unsigned>((T + kBq - 1) / kBq), static_cast<unsigned>(Hq), static_cast<unsigned>(B));
  attn_bwd_dq_kernel<DT, kRowsumD><<<grid_q, kThreads, smem_q, s>>>(
      static_cast<P*>(dq), static_cast<const P*>(dout), static_cast<const P*>(q), static_cast<const P*>(k),
      static_cast<const P*>(v), lse, Dl, T, iHq, iHkv, iD, scale);
  ZT_CUDA_CHECK(cudaGetLastError());
  // (3) dk, dv
  const size_t smem_kv = dkdv_smem(iD);
  allow_smem(attn_bwd_dkdv_kernel<DT>, smem_kv);
  const dim3 grid_kv(static_cast<unsigned>((T + kBkv - 1) / kBkv), static_cast<unsigned>(Hkv),
                     static_cast<unsigned>(B));
  attn_bwd_dkdv_kernel<DT><<<grid_kv, kThreads, smem_kv, s>>>(
      static_cast<P*>(dk), static_cast<P*>(dv), static_cast<const P*>(dout), static_cast<const P*>(q),
      static_cast<const P*>(k), static_cast<const P*>(v), lse, Dl, T, iHq, iHkv, iD, scale);
  ZT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void attention_forward(DType t, void* out, float* lse, const void* q, const void* k, const void* v, int64_t B,
                       int64_t T, int64_t Hq, int64_t Hkv, int64_t D, cudaStream_t s) {
  const char* who = "attention_forward";
  check_args(who, t, B, T, Hq, Hkv, D);
  if (B == 0 || T == 0) return;
  need(who, "out", out), need(who, "q", q), need(who, "k", k), need(who, "v", v);
  dispatch_compute(t, who, [&](auto d) { forward_impl<decltype(d)::value>(out, lse, q, k, v, B, T, Hq, Hkv, D, s); });
}

int64_t attention_backward_workspace_bytes(int64_t B, int64_t T, int64_t Hq) {
  return B * T * Hq * static_cast<int64_t>(sizeof(float));
}

void attention_backward(DType t, void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                        const void* v, const void* out, const float* lse, void* workspace, int64_t B, int64_t T,
                        int64_t Hq, int64_t Hkv, int64_t D, cudaStream_t s) {
  const char* who = "attention_backward";
  check_args(who, t, B, T, Hq, Hkv, D);
  if (B == 0 || T == 0) return;
  need(who, "dq", dq), need(who, "dk", dk), need(who, "dv", dv), need(who, "dout", dout), need(who, "q", q);
  need(who, "k", k), need(who, "v", v), need(who, "out", out), need(who, "lse", lse), need(who, "workspace", workspace);
  if (reinterpret_cast<uintptr_t>(workspace) % alignof(float) != 0)
    ZT_THROW("cuda_kernels::", who, ": workspace must be 4-byte aligned");
  float* Dl = static_cast<float*>(workspace);
  dispatch_compute(t, who, [&](auto d) {
    backward_impl<decltype(d)::value>(dq, dk, dv, dout, q, k, v, out, lse, Dl, B, T, Hq, Hkv, D, s);
  });
}

}  // namespace zt::cuda_kernels
