// defines: attention_forward, attention_backward — causal scaled-dot-product attention with
// grouped-query heads (GQA), as GEMMs on strided head views (no copies of q, k, v).
//
// Layouts (all contiguous, row-major):
//   q, dq, out, dout: (B, T, Hq, D)     k, v, dk, dv: (B, T, Hkv, D)
//   P: (B, Hq, T, T) softmax probabilities, saved by the forward for the backward.
// Query head h reads kv head h / (Hq / Hkv); scale = 1/sqrt(D); position i attends to j <= i.
//
// Per (b, h), with Q, K, V the (T, D) head slices (row stride Hq*D or Hkv*D):
//   forward:  S = scale Q K^T, P = softmax_row(S masked to j <= i), O = P V
//   backward: dP = dO V^T, dV += P^T dO, dS = P * (dP - rowsum(dP * P)) * scale,
//             dQ = dS K, dK += dS^T Q
// Work above the diagonal is skipped in blocks: rows are processed in blocks of `block` rows,
// and row block [i0, i1) only multiplies against keys [0, i1) (about half the flops for
// T >> block). Entries of P with j > i inside a row's block are written as 0; entries at or
// beyond the row's block end are never read and are left unset.
//
// Memory: the saved P costs B * Hq * T^2 elements per call (gpt-mini, B=8 Hq=6 T=256, float32:
// 12.6 MB per layer; GPT-2 small at T=1024: 48 MB per batch row per layer) — a flash-attention
// style recompute from the row log-sum-exp would trade that for one more GEMM in backward.
// The forward with P == nullptr (inference) uses a (block, T) scratch per thread instead. The
// backward uses a (T, T) scratch per thread and, when Hq > Hkv, (B, Hq, T, D) scratch for dK
// and dV per query head, summed over each group's heads in order.
//
// Parallel over (b, h) with OpenMP (static schedule); the GEMMs inside run single-threaded in
// OpenBLAS's OpenMP build. Every output element is produced by one fixed sequence of
// operations, so results are bitwise reproducible for a fixed thread count (in fact for any).
#pragma once
#include <cstdint>

namespace zt {

inline constexpr int64_t kAttentionBlock = 64;

// out: (B, T, Hq, D), written. P: (B, Hq, T, T) written, or nullptr (not saved).
template <class T>
void attention_forward(T* out, T* P, const T* q, const T* k, const T* v, int64_t B, int64_t T_len, int64_t Hq,
                       int64_t Hkv, int64_t D, int64_t block = kAttentionBlock);

// dq (B, T, Hq, D), dk and dv (B, T, Hkv, D): written (not accumulated). P: from the forward.
template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* P,
                        int64_t B, int64_t T_len, int64_t Hq, int64_t Hkv, int64_t D,
                        int64_t block = kAttentionBlock);

}  // namespace zt
