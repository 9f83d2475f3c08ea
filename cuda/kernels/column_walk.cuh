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
//   column_walk  pass 1's walk: a thread takes P adjacent columns (a pack: 1, 2, 4 or 8, one
//                access of P elements) of NI arrays over rows [r0, r1), and loads a batch of rows
//                before it hands them, in row order, to its callback. The launcher picks P: wider
//                packs mean fewer threads (the chunk count fixes how many rows each walks), so a
//                kernel takes the widest pack that still leaves the GPU enough warps.
//   sum_chunks_in_order  pass 2 for one column: kChunkBatch partials loaded, then added in order.
#pragma once
#include "cuda/kernels/cast.h"  // dev::Io, dev::load8

namespace zt::cuda_kernels::dev {

inline constexpr int kChunkBatch = 16;  // partials in flight per thread in sum_chunks_in_order

// P adjacent elements of T as one access of P sizeof(T) bytes (two or more 16-byte words above 16).
template <int Bytes> struct Word;
template <> struct Word<2> { using T = unsigned short; };
template <> struct Word<4> { using T = unsigned int; };
template <> struct Word<8> { using T = uint2; };
template <> struct Word<16> { using T = uint4; };

template <int P, class T> __device__ __forceinline__ void load_pack(T (&r)[P], const T* p) {
  constexpr int kBytes = P * static_cast<int>(sizeof(T));
  static_assert(P == 1 || P == 2 || P == 4 || P == 8, "a pack is 1, 2, 4 or 8 elements");
  if constexpr (P == 1) r[0] = p[0];
  else if constexpr (kBytes <= 16)
    *reinterpret_cast<typename Word<kBytes>::T*>(r) = *reinterpret_cast<const typename Word<kBytes>::T*>(p);
  else load8(r, p);
}
template <int P, class T> __device__ __forceinline__ void store_pack(T* p, const T (&r)[P]) {
  constexpr int kBytes = P * static_cast<int>(sizeof(T));
  static_assert(P == 1 || P == 2 || P == 4 || P == 8, "a pack is 1, 2, 4 or 8 elements");
  if constexpr (P == 1) p[0] = r[0];
  else if constexpr (kBytes <= 16)
    *reinterpret_cast<typename Word<kBytes>::T*>(p) = *reinterpret_cast<const typename Word<kBytes>::T*>(r);
  else store8(p, r);
}

// Whether a pack of P elements of `elem` bytes can be accessed at p: aligned to the pack's size
// (16 bytes at most: a larger pack is several 16-byte words).
__host__ __device__ inline bool pack_aligned(const void* p, int P, int elem) {
  const int a = P * elem < 16 ? P * elem : 16;
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(a) == 0;
}

// Rows whose loads a thread issues before it uses them: about 128 bytes of packs in flight.
template <int P, int NI, class T>
inline constexpr int kRowBatch =
    128 / (P * NI * static_cast<int>(sizeof(T)))<1 ? 1 : 128 / (P * NI * static_cast<int>(sizeof(T)))> 8
        ? 8
        : 128 / (P * NI * static_cast<int>(sizeof(T)));

// f(r, v, w) for r = r0, r0 + 1, ..., r1 - 1 in order, v[k][e] = float(in[k][r C + c + e]) for
// e < P, w[j] = rows[j][r] (NR per-row float32 values, e.g. a norm's mean and rstd; NR may be 0).
// P > 1: C % P == 0, c % P == 0 and every in[k] pack_aligned.
template <DType D, int P, int NI, int NR, class F>
__device__ __forceinline__ void column_walk(const typename Io<D>::T* const (&in)[NI], const float* const* rows,
                                            int64_t C, int64_t c, int64_t r0, int64_t r1, F&& f) {
  using T = typename Io<D>::T;
  constexpr int RB = kRowBatch<P, NI, T>;
  constexpr int kNR = NR > 0 ? NR : 1;
  const auto hand = [&](int64_t r, const T(&raw)[NI][P], const float(&w)[kNR]) {
    float v[NI][P];
#pragma unroll
    for (int k = 0; k < NI; ++k)
#pragma unroll
      for (int e = 0; e < P; ++e) v[k][e] = Io<D>::load(raw[k][e]);
    f(r, v, w);
  };
  int64_t r = r0;
  for (; r + RB <= r1; r += RB) {
    alignas(16) T buf[RB][NI][P];
    float w[RB][kNR];
#pragma unroll
    for (int u = 0; u < RB; ++u) {
#pragma unroll
      for (int k = 0; k < NI; ++k) load_pack<P>(buf[u][k], in[k] + (r + u) * C + c);
#pragma unroll
      for (int j = 0; j < NR; ++j) w[u][j] = rows[j][r + u];
    }
#pragma unroll
    for (int u = 0; u < RB; ++u) hand(r + u, buf[u], w[u]);
  }
  for (; r < r1; ++r) {
    alignas(16) T buf[NI][P];
    float w[kNR];
#pragma unroll
    for (int k = 0; k < NI; ++k) load_pack<P>(buf[k], in[k] + r * C + c);
#pragma unroll
    for (int j = 0; j < NR; ++j) w[j] = rows[j][r];
    hand(r, buf, w);
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
