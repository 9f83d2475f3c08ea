// defines: cuda_kernels::dev::column_walk, sum_chunks_in_order — the two halves of every chunked
//          column sum (bias gradients, the norms' weight gradients), shared by
//          cuda/kernels/activation.cu, bias_grad.cu and norm.cu. nvcc only.
//
// A chunked column sum of dY (R, C) has a fixed order, independent of the launch: rows are cut
// into chunks, pass 1 sums each chunk's rows in increasing row order into a float32 partial
// (chunk, C), pass 2 adds the partials in chunk order. Both passes are memory bound, and both were
// latency bound when a thread walked one column with one dependent add per load: a warp then
// moves 64 bytes (bfloat16) per row and waits on each. These helpers keep every add where it was
// (so the bits do not change) and only change how the loads are issued:
//
//   column_walk  pass 1's walk: a thread takes P adjacent columns (P = 8 with 128-bit loads, the
//                vector path, or 1) of NI arrays over rows [r0, r1), and loads kRowBatch rows
//                before it hands them, in row order, to its callback.
//   sum_chunks_in_order  pass 2 for one column: kChunkBatch partials loaded, then added in order.
#pragma once
#include "cuda/kernels/cast.h"  // dev::Io, dev::load8

namespace zt::cuda_kernels::dev {

inline constexpr int kRowBatch = 4;     // rows of loads in flight per thread in column_walk
inline constexpr int kChunkBatch = 16;  // partials in flight per thread in sum_chunks_in_order

template <int P, class T> __device__ __forceinline__ void load_pack(T (&r)[P], const T* p) {
  static_assert(P == 1 || P == 8, "a pack is one element or eight (128-bit loads)");
  if constexpr (P == 8) load8(r, p);
  else r[0] = p[0];
}
template <int P, class T> __device__ __forceinline__ void store_pack(T* p, const T (&r)[P]) {
  static_assert(P == 1 || P == 8, "a pack is one element or eight (128-bit stores)");
  if constexpr (P == 8) store8(p, r);
  else p[0] = r[0];
}

// f(r, v) for r = r0, r0 + 1, ..., r1 - 1 in order, v[k][e] = float(in[k][r C + c + e]) for
// e < P. P == 8: C % 8 == 0, c % 8 == 0 and every in[k] 16-byte aligned.
template <DType D, int P, int NI, class F>
__device__ __forceinline__ void column_walk(const typename Io<D>::T* const (&in)[NI], int64_t C, int64_t c, int64_t r0,
                                            int64_t r1, F&& f) {
  using T = typename Io<D>::T;
  const auto hand = [&](int64_t r, const T(&raw)[NI][P]) {
    float v[NI][P];
#pragma unroll
    for (int k = 0; k < NI; ++k)
#pragma unroll
      for (int e = 0; e < P; ++e) v[k][e] = Io<D>::load(raw[k][e]);
    f(r, v);
  };
  int64_t r = r0;
  for (; r + kRowBatch <= r1; r += kRowBatch) {
    alignas(16) T buf[kRowBatch][NI][P];
#pragma unroll
    for (int u = 0; u < kRowBatch; ++u)
#pragma unroll
      for (int k = 0; k < NI; ++k) load_pack<P>(buf[u][k], in[k] + (r + u) * C + c);
#pragma unroll
    for (int u = 0; u < kRowBatch; ++u) hand(r + u, buf[u]);
  }
  for (; r < r1; ++r) {
    alignas(16) T buf[NI][P];
#pragma unroll
    for (int k = 0; k < NI; ++k) load_pack<P>(buf[k], in[k] + r * C + c);
    hand(r, buf);
  }
}

// sum over k = 0 .. chunks - 1, in order and from 0.0f, of partial[k C + c] (float32 adds).
__device__ __forceinline__ float sum_chunks_in_order(const float* __restrict__ partial, int64_t chunks, int64_t C,
                                                     int64_t c) {
  float a = 0.0f;
  int64_t k = 0;
  for (; k + kChunkBatch <= chunks; k += kChunkBatch) {
    float v[kChunkBatch];
#pragma unroll
    for (int u = 0; u < kChunkBatch; ++u) v[u] = partial[(k + u) * C + c];
#pragma unroll
    for (int u = 0; u < kChunkBatch; ++u) a = __fadd_rn(a, v[u]);
  }
  for (; k < chunks; ++k) a = __fadd_rn(a, partial[k * C + c]);
  return a;
}

}  // namespace zt::cuda_kernels::dev
