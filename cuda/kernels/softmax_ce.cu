// defines: softmax_forward, softmax_backward, cross_entropy_forward, cross_entropy_backward,
//          cross_entropy_and_grad (cuda/kernels/softmax_ce.h); file-local: block_reduce,
//          softmax_fwd_kernel, stage_row, ce_fwd_kernel, row_lse, ce_grad, ce_fused_kernel, need, rows_aligned,
//          stage_rows, staged_bytes, check_ce and 5 more
#include "cuda/kernels/softmax_ce.h"

#include <cmath>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/kernels/dispatch.h"  // check_compute, dispatch_compute_vec
#include "cuda/kernels/norm.h"  // dev::row_walk, row_map, warp_sum, warp_max (and cast.h's dev::Io)

namespace zt::cuda_kernels {

namespace {

constexpr int kThreads = 256;  // one block per row
constexpr int kWarps = kThreads / 32;

template <DType D>
using Tp = typename dev::Io<D>::T;

// Block-wide sum / max: warp butterflies, then the kWarps results combined in warp order by every
// thread (all threads return the same bits). sh: kWarps floats of shared memory, reusable after.
template <bool Max>
__device__ __forceinline__ float block_reduce(float v, float* sh) {
  v = Max ? dev::warp_max(v) : dev::warp_sum(v);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x / 32] = v;
  __syncthreads();
  float r = sh[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) r = Max ? fmaxf(r, sh[w]) : r + sh[w];
  __syncthreads();
  return r;
}

// The log-sum-exp of a row's first n elements, p[0] the row (in memory or staged in shared
// memory): a max walk, then a sum of exp, each add rounded on its own (no contraction), so the
// forward and the fused kernel, which both call this, compute the same bits. Every thread of the
// block returns the value; sh as block_reduce's.
template <DType D, bool Vec>
__device__ __forceinline__ float row_lse(const Tp<D>* const (&p)[1], int64_t n, float* sh) {
  float acc = -INFINITY;
  dev::row_walk<D, Vec>(p, n, threadIdx.x, kThreads, [&](int64_t, const float(&v)[1]) { acc = fmaxf(acc, v[0]); });
  const float m = block_reduce<true>(acc, sh);
  acc = 0.0f;
  dev::row_walk<D, Vec>(p, n, threadIdx.x, kThreads,
                        [&](int64_t, const float(&v)[1]) { acc = __fadd_rn(acc, expf(v[0] - m)); });
  return __fadd_rn(m, logf(block_reduce<false>(acc, sh)));
}

template <DType D, bool Vec>
__global__ void __launch_bounds__(kThreads) softmax_fwd_kernel(Tp<D>* out, const Tp<D>* in, int64_t R, int64_t N) {
  __shared__ float sh[kWarps];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const Tp<D>* const p[1] = {in + r * N};
    float acc = -INFINITY;
    dev::row_walk<D, Vec>(p, N, threadIdx.x, kThreads, [&](int64_t, const float (&v)[1]) { acc = fmaxf(acc, v[0]); });
    const float m = block_reduce<true>(acc, sh);
    acc = 0.0f;
    dev::row_walk<D, Vec>(p, N, threadIdx.x, kThreads, [&](int64_t, const float (&v)[1]) { acc += expf(v[0] - m); });
    const float inv = 1.0f / block_reduce<false>(acc, sh);
    dev::row_map<D, Vec>(out + r * N, p, N, threadIdx.x, kThreads,
                         [&](int64_t, const float (&v)[1]) { return expf(v[0] - m) * inv; });
  }
}

template <DType D, bool Vec>
__global__ void __launch_bounds__(kThreads)
    softmax_bwd_kernel(Tp<D>* dx, const Tp<D>* dout, const Tp<D>* y, int64_t R, int64_t N) {
  __shared__ float sh[kWarps];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const Tp<D>* const p[2] = {dout + r * N, y + r * N};
    float acc = 0.0f;
    dev::row_walk<D, Vec>(p, N, threadIdx.x, kThreads, [&](int64_t, const float (&v)[2]) { acc += v[0] * v[1]; });
    const float dot = block_reduce<false>(acc, sh);
    dev::row_map<D, Vec>(dx + r * N, p, N, threadIdx.x, kThreads,
                         [&](int64_t, const float (&v)[2]) { return v[1] * (v[0] - dot); });
  }
}

// Copies row src[0, n) into dst (shared memory) with the block's threads; Vec: both 16-byte
// aligned, whole 16-byte words four at a time per thread (loads in flight), the tail element-wise.
template <class T, bool Vec>
__device__ __forceinline__ void stage_row(T* __restrict__ dst, const T* __restrict__ src, int64_t n) {
  int64_t done = 0;
  if constexpr (Vec) {
    const int64_t words = n * static_cast<int64_t>(sizeof(T)) / 16;
    const uint4* s4 = reinterpret_cast<const uint4*>(src);
    uint4* d4 = reinterpret_cast<uint4*>(dst);
    int64_t i = threadIdx.x;
    for (; i + 3 * kThreads < words; i += 4 * kThreads) {
      const uint4 a = s4[i], b = s4[i + kThreads], c = s4[i + 2 * kThreads], d = s4[i + 3 * kThreads];
      d4[i] = a, d4[i + kThreads] = b, d4[i + 2 * kThreads] = c, d4[i + 3 * kThreads] = d;
    }
    for (; i < words; i += kThreads) d4[i] = s4[i];
    done = words * 16 / static_cast<int64_t>(sizeof(T));
  }
  for (int64_t j = done + threadIdx.x; j < n; j += kThreads) dst[j] = src[j];
}

// Staged: the row is first copied to shared memory (dynamic, the row's Vv elements rounded up to
// 16 bytes), and the two walks (max, then sum of exp) read it there: the logits are read from
// memory once instead of twice. The walks, and so the bits, are the same either way.
template <DType D, bool Vec, bool Staged>
__global__ void __launch_bounds__(kThreads)
    ce_fwd_kernel(float* __restrict__ loss, float* __restrict__ lse, const Tp<D>* __restrict__ logits,
                  const int32_t* __restrict__ targets, int64_t N, int64_t V, int64_t Vv, int64_t v0) {
  __shared__ float sh[kWarps];
  extern __shared__ uint4 staged_row[];
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const int32_t t = targets[r];
    if (t == -1) {  // block-uniform
      if (threadIdx.x == 0) loss[r] = 0.0f, lse[r] = 0.0f;
      continue;
    }
    const Tp<D>* row = logits + r * V;
    if constexpr (Staged) {
      stage_row<Tp<D>, Vec>(reinterpret_cast<Tp<D>*>(staged_row), row, Vv);
      __syncthreads();
      row = reinterpret_cast<const Tp<D>*>(staged_row);
    }
    const Tp<D>* const p[1] = {row};
    const float l = row_lse<D, Vec>(p, Vv, sh);
    if (threadIdx.x == 0) {
      lse[r] = l;
      const int64_t tl = t - v0;  // the target's column here; outside [0, Vv): another rank's columns
      loss[r] = (tl >= 0 && tl < Vv) ? l - dev::Io<D>::load(p[0][tl]) : 0.0f;
    }
    if constexpr (Staged) __syncthreads();  // thread 0's read of the row before the next row's copy
  }
}

// One block: *mean = sum(loss) / count, sums in double in a fixed order; count = the given one
// (given >= 0) or the number of targets != -1 (given < 0).
__global__ void __launch_bounds__(kThreads)
    ce_mean_kernel(float* __restrict__ mean, const float* __restrict__ loss, const int32_t* __restrict__ targets,
                   int64_t N, long long given) {
  __shared__ double ps[kThreads];
  __shared__ long long pc[kThreads];
  double acc = 0.0;
  long long cnt = 0;
  for (int64_t i = threadIdx.x; i < N; i += kThreads) {
    acc += static_cast<double>(loss[i]);
    cnt += targets[i] != -1;
  }
  ps[threadIdx.x] = acc;
  pc[threadIdx.x] = cnt;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0.0;
    long long c = 0;
    for (int k = 0; k < kThreads; ++k) s += ps[k], c += pc[k];
    if (given >= 0) c = given;
    *mean = c ? static_cast<float>(s / static_cast<double>(c)) : NAN;
  }
}

// One valid element's gradient, dlogit = scale (exp(x - lse) - [target]); the product rounded on
// its own (no FMA contraction), so the backward and the fused kernel give the same bits.
__device__ __forceinline__ float ce_grad(float x, float lse, float scale, bool target) {
  const float d = __fmul_rn(scale, expf(x - lse));
  return target ? d - scale : d;
}

template <DType D, bool Vec>
__global__ void __launch_bounds__(kThreads)
    ce_bwd_kernel(Tp<D>* __restrict__ dlogits, const Tp<D>* __restrict__ logits, const float* __restrict__ lse,
                  const int32_t* __restrict__ targets, float scale, const float* __restrict__ dloss, double count,
                  int64_t N, int64_t V, int64_t Vv, int64_t v0) {
  // the table's form; count 0 (every row ignored: nothing uses the scale) gives 0, as the cpu backend
  if (dloss) scale = count > 0 ? static_cast<float>(static_cast<double>(*dloss) / count) : 0.0f;
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const int32_t t = targets[r];
    const bool ignored = t == -1;
    const int64_t tl = t - v0;  // the target's column; outside [0, Vv): another rank's (no -1 here)
    const float l = lse[r];
    const Tp<D>* const p[1] = {logits + r * V};
    dev::row_map<D, Vec>(dlogits + r * V, p, V, threadIdx.x, kThreads, [&](int64_t j, const float(&v)[1]) {
      if (ignored || j >= Vv) return 0.0f;
      return ce_grad(v[0], l, scale, j == tl);
    });
  }
}

// cross_entropy_and_grad, one block per row: ce_fwd_kernel's two walks (max, sum of exp), then
// ce_bwd_kernel's map for dloss = 1 written over the row it reads (row_map: each element read,
// then written, by one thread). The row's loss is taken by the thread that maps the target, from
// the value it reads before writing it. Staged (the row fits in shared memory, as the forward's):
// the walks and the map read the shared-memory copy, so the row comes from memory once and goes
// back once; unstaged, the three passes read it from memory (L2, mostly) as the forward and
// backward would. Padded columns and ignored rows: 0.
template <DType D, bool Vec, bool Staged>
__global__ void __launch_bounds__(kThreads)
    ce_fused_kernel(float* __restrict__ loss, Tp<D>* logits, const int32_t* __restrict__ targets, float scale,
                    int64_t N, int64_t V, int64_t Vv) {
  __shared__ float sh[kWarps];
  extern __shared__ uint4 staged_row[];
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    Tp<D>* const row = logits + r * V;
    const int32_t t = targets[r];
    const bool ignored = t == -1, bad = !ignored && (t < 0 || t >= Vv);  // block-uniform
    if (ignored) {
      for (int64_t j = threadIdx.x; j < V; j += kThreads) row[j] = dev::Io<D>::store(0.0f);
      if (threadIdx.x == 0) loss[r] = 0.0f;
      continue;
    }
    const Tp<D>* src = row;
    if constexpr (Staged) {
      stage_row<Tp<D>, Vec>(reinterpret_cast<Tp<D>*>(staged_row), row, Vv);
      __syncthreads();
      src = reinterpret_cast<const Tp<D>*>(staged_row);
    }
    const Tp<D>* const p[1] = {src};
    const float l = row_lse<D, Vec>(p, Vv, sh);  // (its last barrier: every read of the walks is done)
    if (bad && threadIdx.x == 0) loss[r] = NAN;
    dev::row_map<D, Vec>(row, p, Vv, threadIdx.x, kThreads, [&](int64_t j, const float(&v)[1]) {
      if (bad) return NAN;
      if (j == t) loss[r] = l - v[0];
      return ce_grad(v[0], l, scale, j == t);
    });
    for (int64_t j = Vv + threadIdx.x; j < V; j += kThreads) row[j] = dev::Io<D>::store(0.0f);
    if constexpr (Staged) __syncthreads();  // every read of the staged row before the next row's copy
  }
}

void need(const char* who, const char* name, const void* p) {
  if (!p) ZT_THROW("cuda_kernels::", who, ": ", name, " is null");
}
// Row starts 16-byte aligned: aligned bases and a row stride of whole 8-element packs.
bool rows_aligned(int64_t stride, std::initializer_list<const void*> ps) {
  if (stride % 8 != 0) return false;
  for (const void* p : ps)
    if (!dev::aligned16(p)) return false;
  return true;
}
// Whether the forward stages a row of `bytes` in shared memory: from 16 KiB on (a shorter row is
// read twice from L1 / L2 anyway, and the copy would only add a barrier), and only while two blocks
// still fit on a multiprocessor (one block per SM would leave too few warps to hide the loads).
bool stage_rows(int64_t bytes) {
  int dev = 0, per_block = 0, per_sm = 0;
  ZT_CUDA_CHECK(cudaGetDevice(&dev));
  ZT_CUDA_CHECK(cudaDeviceGetAttribute(&per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  ZT_CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  const int64_t block = bytes + static_cast<int64_t>(kWarps * sizeof(float)) + 1024;  // + static, + reserved
  return bytes >= 16 * 1024 && block <= per_block && 2 * block <= per_sm;
}
// A row kernel's staged form, when stage_rows says so: the bytes of Vv elements of `elem` bytes
// rounded up to 16, with the staged kernel's shared-memory limit raised to them; else 0 (launch
// the unstaged form).
template <class Kernel> int64_t staged_bytes(Kernel staged_kernel, int64_t Vv, int64_t elem) {
  const int64_t stage = (Vv * elem + 15) / 16 * 16;
  if (!stage_rows(stage)) return 0;
  ZT_CUDA_CHECK(
      cudaFuncSetAttribute(staged_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(stage)));
  return stage;
}

void check_ce(const char* who, DType t, int64_t N, int64_t V, int64_t Vv) {
  check_compute(who, t);
  if (N < 0 || V < 1 || Vv < 1 || Vv > V)
    ZT_THROW("cuda_kernels::", who, ": N = ", N, ", V = ", V, ", Vv = ", Vv, ", expected N >= 0 and 1 <= Vv <= V");
}

}  // namespace

void softmax_forward(DType t, void* out, const void* in, int64_t R, int64_t N, cudaStream_t s) {
  check_compute("softmax_forward", t);
  if (R < 0 || N < 0) ZT_THROW("cuda_kernels::softmax_forward: R = ", R, ", N = ", N, ", expected >= 0");
  if (R == 0 || N == 0) return;
  need("softmax_forward", "out", out), need("softmax_forward", "in", in);
  dispatch_compute_vec(t, rows_aligned(N, {out, in}), "softmax_forward", [&](auto d, auto v) {
    constexpr DType D = decltype(d)::value;
    softmax_fwd_kernel<D, decltype(v)::value><<<dev::grid_for(R, 1), kThreads, 0, s>>>(
        static_cast<Tp<D>*>(out), static_cast<const Tp<D>*>(in), R, N);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

void softmax_backward(DType t, void* dx, const void* dout, const void* out, int64_t R, int64_t N, cudaStream_t s) {
  check_compute("softmax_backward", t);
  if (R < 0 || N < 0) ZT_THROW("cuda_kernels::softmax_backward: R = ", R, ", N = ", N, ", expected >= 0");
  if (R == 0 || N == 0) return;
  need("softmax_backward", "dx", dx), need("softmax_backward", "dout", dout), need("softmax_backward", "out", out);
  dispatch_compute_vec(t, rows_aligned(N, {dx, dout, out}), "softmax_backward", [&](auto d, auto v) {
    constexpr DType D = decltype(d)::value;
    softmax_bwd_kernel<D, decltype(v)::value><<<dev::grid_for(R, 1), kThreads, 0, s>>>(
        static_cast<Tp<D>*>(dx), static_cast<const Tp<D>*>(dout), static_cast<const Tp<D>*>(out), R, N);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

namespace {

// count < 0: counted by the kernel (the mean form); count >= 0: the caller's (the table's form).
void cross_entropy_forward_impl(DType t, float* mean_loss, float* loss, float* lse, const void* logits,
                                const int32_t* targets, int64_t N, int64_t V, int64_t Vv, int64_t count, int64_t v0,
                                cudaStream_t s) {
  const char* who = "cross_entropy_forward";
  check_ce(who, t, N, V, Vv);
  need(who, "mean_loss", mean_loss);
  if (N > 0) need(who, "loss", loss), need(who, "lse", lse), need(who, "logits", logits), need(who, "targets", targets);
  if (N > 0)
    dispatch_compute_vec(t, rows_aligned(V, {logits}), who, [&](auto d, auto v) {
      constexpr DType D = decltype(d)::value;
      constexpr bool Vec = decltype(v)::value;
      const auto* lg = static_cast<const Tp<D>*>(logits);
      const int64_t stage = staged_bytes(ce_fwd_kernel<D, Vec, true>, Vv, sizeof(Tp<D>));
      const unsigned grid = dev::grid_for(N, 1);
      if (stage)
        ce_fwd_kernel<D, Vec, true>
            <<<grid, kThreads, static_cast<size_t>(stage), s>>>(loss, lse, lg, targets, N, V, Vv, v0);
      else ce_fwd_kernel<D, Vec, false><<<grid, kThreads, 0, s>>>(loss, lse, lg, targets, N, V, Vv, v0);
    });
  ce_mean_kernel<<<1, kThreads, 0, s>>>(mean_loss, loss, targets, N, static_cast<long long>(count));
  ZT_CUDA_CHECK(cudaGetLastError());
}

// dloss null: the host scale; else scale = float(double(*dloss) / count), read on the device.
void cross_entropy_backward_impl(DType t, void* dlogits, const void* logits, const float* lse, const int32_t* targets,
                                 float scale, const float* dloss, double count, int64_t N, int64_t V, int64_t Vv,
                                 int64_t v0, cudaStream_t s) {
  const char* who = "cross_entropy_backward";
  check_ce(who, t, N, V, Vv);
  if (N == 0) return;
  need(who, "dlogits", dlogits), need(who, "logits", logits), need(who, "lse", lse), need(who, "targets", targets);
  dispatch_compute_vec(t, rows_aligned(V, {dlogits, logits}), who, [&](auto d, auto v) {
    constexpr DType D = decltype(d)::value;
    ce_bwd_kernel<D, decltype(v)::value>
        <<<dev::grid_for(N, 1), kThreads, 0, s>>>(static_cast<Tp<D>*>(dlogits), static_cast<const Tp<D>*>(logits), lse,
                                                  targets, scale, dloss, count, N, V, Vv, v0);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void cross_entropy_and_grad(DType t, float* mean_loss, float* loss, void* logits, const int32_t* targets, int64_t N,
                            int64_t V, int64_t Vv, int64_t count, cudaStream_t s) {
  const char* who = "cross_entropy_and_grad";
  check_ce(who, t, N, V, Vv);
  if (count < 0) ZT_THROW("cuda_kernels::", who, ": count = ", count, ", expected >= 0");
  need(who, "mean_loss", mean_loss);
  // cross_entropy_backward's scale for dloss = 1: float(double(1.0f) / count), 0 when count is 0
  const float scale = count > 0 ? static_cast<float>(1.0 / static_cast<double>(count)) : 0.0f;
  if (N > 0) {
    need(who, "loss", loss), need(who, "logits", logits), need(who, "targets", targets);
    dispatch_compute_vec(t, rows_aligned(V, {logits}), who, [&](auto d, auto v) {
      constexpr DType D = decltype(d)::value;
      constexpr bool Vec = decltype(v)::value;
      auto* lg = static_cast<Tp<D>*>(logits);
      const int64_t stage = staged_bytes(ce_fused_kernel<D, Vec, true>, Vv, sizeof(Tp<D>));
      const unsigned grid = dev::grid_for(N, 1);
      if (stage)
        ce_fused_kernel<D, Vec, true>
            <<<grid, kThreads, static_cast<size_t>(stage), s>>>(loss, lg, targets, scale, N, V, Vv);
      else ce_fused_kernel<D, Vec, false><<<grid, kThreads, 0, s>>>(loss, lg, targets, scale, N, V, Vv);
    });
  }
  ce_mean_kernel<<<1, kThreads, 0, s>>>(mean_loss, loss, targets, N, static_cast<long long>(count));
  ZT_CUDA_CHECK(cudaGetLastError());
}

void cross_entropy_forward(DType t, float* mean_loss, float* loss, float* lse, const void* logits,
                           const int32_t* targets, int64_t N, int64_t V, int64_t Vv, cudaStream_t s) {
  cross_entropy_forward_impl(t, mean_loss, loss, lse, logits, targets, N, V, Vv, -1, 0, s);
}

void cross_entropy_forward(DType t, float* mean_loss, float* loss, float* lse, const void* logits,
                           const int32_t* targets, int64_t N, int64_t V, int64_t Vv, int64_t count, int64_t v0,
                           cudaStream_t s) {
  if (count < 0) ZT_THROW("cuda_kernels::cross_entropy_forward: count = ", count, ", expected >= 0");
  cross_entropy_forward_impl(t, mean_loss, loss, lse, logits, targets, N, V, Vv, count, v0, s);
}

void cross_entropy_backward(DType t, void* dlogits, const void* logits, const float* lse, const int32_t* targets,
                            float scale, int64_t N, int64_t V, int64_t Vv, cudaStream_t s) {
  if (!std::isfinite(scale)) ZT_THROW("cuda_kernels::cross_entropy_backward: scale ", scale, " is not finite");
  cross_entropy_backward_impl(t, dlogits, logits, lse, targets, scale, nullptr, 1.0, N, V, Vv, 0, s);
}

void cross_entropy_backward(DType t, void* dlogits, const void* logits, const float* lse, const int32_t* targets,
                            const float* dloss, int64_t count, int64_t N, int64_t V, int64_t Vv, int64_t v0,
                            cudaStream_t s) {
  if (!dloss) ZT_THROW("cuda_kernels::cross_entropy_backward: dloss is null");
  if (count < 0) ZT_THROW("cuda_kernels::cross_entropy_backward: count = ", count, ", expected >= 0");
  cross_entropy_backward_impl(t, dlogits, logits, lse, targets, 0.0f, dloss, static_cast<double>(count), N, V, Vv, v0,
                              s);
}

}  // namespace zt::cuda_kernels
