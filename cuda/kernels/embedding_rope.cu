// defines: embedding_forward, embedding_backward_workspace_bytes, embedding_backward, rope_tables,
//          rope_forward, rope_backward (cuda/kernels/embedding_rope.h); file-local: emb_fwd_kernel,
//          iota_kernel, EmbWorkspace, align256, cub_sort_bytes, carve and 5 more
#include "cuda/kernels/embedding_rope.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <type_traits>

#include <cub/device/device_radix_sort.cuh>

#include "cuda/check.h"
#include "cuda/kernels/cast.h"  // dev::Io, load8 / store8, grid_for
#include "cuda/kernels/column_walk.cuh"  // dev::load_pack, store_pack, pack_aligned
#include "cuda/kernels/dispatch.h"  // check_compute, dispatch_compute, dispatch_compute_vec

namespace zt::cuda_kernels {

namespace {

constexpr int kThreads = 256;

template <DType D>
using Tp = typename dev::Io<D>::T;

// ---- embedding forward: one thread per element (or per 8-element pack) of out ----
template <DType D, bool Vec>
__global__ void emb_fwd_kernel(Tp<D>* __restrict__ out, const int32_t* __restrict__ ids,
                               const Tp<D>* __restrict__ table, int64_t n, int64_t V, int64_t C) {
  constexpr int64_t E = Vec ? 8 : 1;  // elements per item
  const int64_t per_row = C / E, items = n * per_row;
  const Tp<D> nan = dev::Io<D>::store(NAN), zero = dev::Io<D>::store(0.0f);
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < items;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = k / per_row, c = (k % per_row) * E;
    const int64_t id = ids[i];
    Tp<D>* o = out + i * C + c;
    if constexpr (Vec) {
      alignas(16) Tp<D> r[8];
      if (id >= 0 && id < V) dev::load8(r, table + id * C + c);
      else
        for (int e = 0; e < 8; ++e) r[e] = id == -1 ? zero : nan;  // -1: another rank's row
      dev::store8(o, r);
    } else {
      *o = (id >= 0 && id < V) ? table[id * C + c] : id == -1 ? zero : nan;
    }
  }
}

// ---- embedding backward: the ids sorted (stable), then one block per run of equal ids ----
__global__ void iota_kernel(int32_t* __restrict__ idx, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    idx[i] = static_cast<int32_t>(i);
}

// Sorted position p starts a run when its id differs from position p - 1's. The block of a run
// adds the run's dout rows, in token order (the sort is stable), into float32 accumulators that
// start from dtable[v]; thread g owns the columns g, g + kThreads, ... Ids outside [0, V) are skipped.
template <DType D>
__global__ void __launch_bounds__(kThreads)
    emb_bwd_runs_kernel(Tp<D>* __restrict__ dtable, const Tp<D>* __restrict__ dout,
                        const int32_t* __restrict__ sorted_ids, const int32_t* __restrict__ sorted_tok, int64_t n,
                        int64_t V, int64_t C) {
  for (int64_t p = blockIdx.x; p < n; p += gridDim.x) {
    const int32_t v = sorted_ids[p];
    if ((p > 0 && sorted_ids[p - 1] == v) || v < 0 || v >= V) continue;  // block-uniform
    for (int64_t c = threadIdx.x; c < C; c += kThreads) {
      float acc = dev::Io<D>::load(dtable[v * C + c]);
      for (int64_t k = p; k < n && sorted_ids[k] == v; ++k)
        acc += dev::Io<D>::load(dout[static_cast<int64_t>(sorted_tok[k]) * C + c]);
      dtable[v * C + c] = dev::Io<D>::store(acc);
    }
  }
}

// The workspace's parts: sorted ids, token indices (in order, then sorted), CUB's scratch.
struct EmbWorkspace {
  int32_t *sorted_ids, *tok, *sorted_tok;
  void* cub_tmp;
  size_t cub_bytes;
};
size_t align256(size_t b) { return (b + 255) / 256 * 256; }
size_t cub_sort_bytes(int64_t n) {
  size_t bytes = 0;
  ZT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int32_t*>(nullptr),
                                                static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                                static_cast<int32_t*>(nullptr), static_cast<int>(n)));
  return bytes;
}
EmbWorkspace carve(void* ws, int64_t n) {
  char* b = static_cast<char*>(ws);
  const size_t ids_bytes = align256(static_cast<size_t>(n) * sizeof(int32_t));
  EmbWorkspace w;
  w.sorted_ids = reinterpret_cast<int32_t*>(b);
  w.tok = reinterpret_cast<int32_t*>(b + ids_bytes);
  w.sorted_tok = reinterpret_cast<int32_t*>(b + 2 * ids_bytes);
  w.cub_tmp = b + 3 * ids_bytes;
  w.cub_bytes = cub_sort_bytes(n);
  return w;
}

// ---- RoPE ----
__global__ void rope_tables_kernel(float* __restrict__ cos_t, float* __restrict__ sin_t, int64_t T, int64_t D,
                                   RopeParams p) {
  const int64_t half = D / 2;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < T * half;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = k / half, d = k % half;
    const double inv_freq = rope_inv_freq(d, D, p);  // the CPU's formula (core/rope.h)
    const double a = static_cast<double>(t) * inv_freq;
    cos_t[k] = static_cast<float>(cos(a));
    sin_t[k] = static_cast<float>(sin(a));
  }
}

// One block per token (b, t) (grid-stride over the B T tokens), its threads over the token's
// H * D/2 pairs (h, d < D/2) in 32-bit index math: the position, the head and the table row come
// from one division a token and one a pack. A thread takes P pairs (d .. d + P-1 of one head: P
// adjacent elements of each half, one access each; the launcher picks P = 4, 2 or 1 as D/2 and
// the alignments allow; the per-element arithmetic is the same for every P, so are the bits).
// Heads h >= rot_heads are copied (packed v), or left alone in place. out may be x (each pack read,
// then written, by one thread). sign = -1: the inverse rotation.
template <DType D, int P>
__global__ void rope_kernel(Tp<D>* out, const Tp<D>* x, const float* __restrict__ cos_t,
                            const float* __restrict__ sin_t, int64_t tokens, int T, int H, int half, int rot_heads,
                            float sign) {
  const int packs = H * half / P, width = 2 * H * half;
  for (int64_t tok = blockIdx.x; tok < tokens; tok += gridDim.x) {
    const int t = static_cast<int>(tok % T);
    const float* c = cos_t + static_cast<int64_t>(t) * half;
    const float* sn = sin_t + static_cast<int64_t>(t) * half;
    const Tp<D>* xr = x + tok * width;
    Tp<D>* o = out + tok * width;
    for (int j = threadIdx.x; j < packs; j += blockDim.x) {
      const int h = j * P / half, d = j * P - h * half, off = h * 2 * half + d;
      if (h >= rot_heads && o == xr) continue;
      Tp<D> a[P], b[P];
      dev::load_pack<P>(a, xr + off);
      dev::load_pack<P>(b, xr + off + half);
      if (h < rot_heads) {
        float cc[P], ss[P];
        dev::load_pack<P>(cc, c + d);
        dev::load_pack<P>(ss, sn + d);
#pragma unroll
        for (int e = 0; e < P; ++e) {
          const float x0 = dev::Io<D>::load(a[e]), x1 = dev::Io<D>::load(b[e]), s = sign * ss[e];
          a[e] = dev::Io<D>::store(x0 * cc[e] - x1 * s);
          b[e] = dev::Io<D>::store(x1 * cc[e] + x0 * s);
        }
      }
      dev::store_pack<P>(o + off, a);
      dev::store_pack<P>(o + off + half, b);
    }
  }
}

void need(const char* who, const char* name, const void* p) {
  if (!p) ZT_THROW("cuda_kernels::", who, ": ", name, " is null");
}
void check_emb(const char* who, DType t, int64_t n, int64_t V, int64_t C) {
  check_compute(who, t);
  if (n < 0 || V < 1 || C < 1)
    ZT_THROW("cuda_kernels::", who, ": n = ", n, ", V = ", V, ", C = ", C, ", expected n >= 0, V >= 1, C >= 1");
}

void rope_launch(const char* who, DType t, void* out, const void* x, const float* cos_t, const float* sin_t, int64_t B,
                 int64_t T, int64_t H, int64_t D, int64_t rot_heads, float sign, cudaStream_t s) {
  check_compute(who, t);
  if (B < 0 || T < 0 || H < 0 || D < 2 || D % 2 != 0 || rot_heads < 0 || rot_heads > H || H * D >= (int64_t{1} << 30) ||
      T >= (int64_t{1} << 31))
    ZT_THROW("cuda_kernels::", who, ": B = ", B, ", T = ", T, ", H = ", H, ", D = ", D, ", rot_heads = ", rot_heads,
             ", expected B, T, H >= 0, D even >= 2, 0 <= rot_heads <= H, H D < 2^30, T < 2^31");
  const int64_t tokens = B * T;
  if (tokens == 0 || H == 0) return;
  need(who, "out", out), need(who, "x", x), need(who, "cos_t", cos_t), need(who, "sin_t", sin_t);
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(tokens, int64_t{1} << 30));
  // P pairs a thread: D/2 a multiple of P, and x, out and the tables aligned to a pack (each
  // token's row and each half then are: their offsets are multiples of D/2)
  const int es = static_cast<int>(dtype_size(t));
  const auto fits = [&](int P) {
    return (D / 2) % P == 0 && dev::pack_aligned(x, P, es) && dev::pack_aligned(out, P, es) &&
           dev::pack_aligned(cos_t, P, 4) && dev::pack_aligned(sin_t, P, 4);
  };
  const int P = fits(4) ? 4 : fits(2) ? 2 : 1;
  dispatch_compute(t, who, [&](auto d) {
    constexpr DType DT = decltype(d)::value;
    const auto launch = [&](auto kernel) {
      kernel<<<grid, kThreads, 0, s>>>(static_cast<Tp<DT>*>(out), static_cast<const Tp<DT>*>(x), cos_t, sin_t, tokens,
                                       static_cast<int>(T), static_cast<int>(H), static_cast<int>(D / 2),
                                       static_cast<int>(rot_heads), sign);
    };
    if (P == 4) launch(rope_kernel<DT, 4>);
    else if (P == 2) launch(rope_kernel<DT, 2>);
    else launch(rope_kernel<DT, 1>);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void embedding_forward(DType t, void* out, const int32_t* ids, const void* table, int64_t n, int64_t V, int64_t C,
                       cudaStream_t s) {
  const char* who = "embedding_forward";
  check_emb(who, t, n, V, C);
  if (n == 0) return;
  need(who, "out", out), need(who, "ids", ids), need(who, "table", table);
  const bool vec = C % 8 == 0 && dev::aligned16(out) && dev::aligned16(table);
  const unsigned grid = dev::grid_for(vec ? n * C / 8 : n * C, kThreads);
  dispatch_compute_vec(t, vec, who, [&](auto d, auto v) {
    constexpr DType D = decltype(d)::value;
    emb_fwd_kernel<D, decltype(v)::value><<<grid, kThreads, 0, s>>>(static_cast<Tp<D>*>(out), ids,
                                                                    static_cast<const Tp<D>*>(table), n, V, C);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

int64_t embedding_backward_workspace_bytes(int64_t n) {
  if (n <= 0) return 0;
  return static_cast<int64_t>(3 * align256(static_cast<size_t>(n) * sizeof(int32_t)) + cub_sort_bytes(n));
}

void embedding_backward(DType t, void* dtable, const void* dout, const int32_t* ids, int64_t n, int64_t V, int64_t C,
                        void* workspace, cudaStream_t s) {
  const char* who = "embedding_backward";
  check_emb(who, t, n, V, C);
  if (n > INT32_MAX) ZT_THROW("cuda_kernels::", who, ": n = ", n, " tokens; the sort takes at most 2^31 - 1");
  if (n == 0) return;
  need(who, "dtable", dtable), need(who, "dout", dout), need(who, "ids", ids), need(who, "workspace", workspace);
  EmbWorkspace w = carve(workspace, n);
  iota_kernel<<<dev::grid_for(n, kThreads), kThreads, 0, s>>>(w.tok, n);
  ZT_CUDA_CHECK(cudaGetLastError());
  // stable: equal ids keep token order, so each row's additions run in token order
  ZT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(w.cub_tmp, w.cub_bytes, ids, w.sorted_ids, w.tok, w.sorted_tok,
                                                static_cast<int>(n), 0, 32, s));
  const unsigned grid = static_cast<unsigned>(n < (int64_t(1) << 20) ? n : (int64_t(1) << 20));
  dispatch_compute(t, who, [&](auto d) {
    constexpr DType D = decltype(d)::value;
    emb_bwd_runs_kernel<D><<<grid, kThreads, 0, s>>>(static_cast<Tp<D>*>(dtable), static_cast<const Tp<D>*>(dout),
                                                     w.sorted_ids, w.sorted_tok, n, V, C);
  });
  ZT_CUDA_CHECK(cudaGetLastError());
}

void rope_tables(float* cos_t, float* sin_t, int64_t T, int64_t D, const RopeParams& p, cudaStream_t s) {
  if (T < 0 || D < 2 || D % 2 != 0 || !(p.theta > 0.0) || !std::isfinite(p.theta))
    ZT_THROW("cuda_kernels::rope_tables: T = ", T, ", D = ", D, ", theta = ", p.theta,
             ", expected T >= 0, D even >= 2, theta finite > 0");
  if (T == 0) return;
  need("rope_tables", "cos_t", cos_t), need("rope_tables", "sin_t", sin_t);
  rope_tables_kernel<<<dev::grid_for(T * (D / 2), kThreads), kThreads, 0, s>>>(cos_t, sin_t, T, D, p);
  ZT_CUDA_CHECK(cudaGetLastError());
}

void rope_forward(DType t, void* out, const void* x, const float* cos_t, const float* sin_t, int64_t B, int64_t T,
                  int64_t H, int64_t D, int64_t rot_heads, cudaStream_t s) {
  rope_launch("rope_forward", t, out, x, cos_t, sin_t, B, T, H, D, rot_heads, 1.0f, s);
}

void rope_backward(DType t, void* dx, const void* dout, const float* cos_t, const float* sin_t, int64_t B, int64_t T,
                   int64_t H, int64_t D, int64_t rot_heads, cudaStream_t s) {
  rope_launch("rope_backward", t, dx, dout, cos_t, sin_t, B, T, H, D, rot_heads, -1.0f, s);
}

}  // namespace zt::cuda_kernels
