// defines: attention_forward, attention_backward, AttentionTiles, attention_forward_scratch,
//          attention_backward_scratch — causal scaled-dot-product
// attention with grouped-query heads (GQA), tiled the way FlashAttention-2 tiles it (Dao 2023,
// "FlashAttention-2", Algorithm 1 forward, Algorithm 2 backward): the probabilities are never
// stored; the forward keeps one log-sum-exp per row, the backward recomputes P tile by tile.
//
// Layouts (all contiguous, row-major):
//   q, dq, out, dout: (B, T, Hq, D)     k, v, dk, dv: (B, T, Hkv, D)
//   lse: (B, Hq, T), the row log-sum-exp of the scaled, masked scores (natural log), in the
//        inputs' dtype — the same statistic the CUDA kernels save (cuda/kernels/attention.h).
// Query head h reads kv head h / (Hq / Hkv); scale = 1/sqrt(D); position i attends to j <= i:
//   s_ij = scale q_i . k_j,  lse_i = log sum_{j<=i} exp(s_ij),  p_ij = exp(s_ij - lse_i),
//   o_i = sum_{j<=i} p_ij v_j.
//
// Per (b, h), with Q, K, V the (T, D) head slices (row stride Hq*D or Hkv*D), query tiles Q_i of
// Br rows and key tiles K_j, V_j of Bc rows (AttentionTiles):
//   forward (Algorithm 1), for each query tile i, for each key tile j up to the diagonal:
//     S = scale Q_i K_j^T (Br, Bc)                                     [line 9]
//     m_new = max(m, rowmax S),  P = exp(S - m_new),
//     l = exp(m - m_new) l + rowsum P                                  [line 10]
//     O_i = diag(exp(m - m_new)) O_i + P V_j                           [line 11]
//   then O_i = diag(l)^-1 O_i, lse_i = m + log l                      [lines 13-14]
//   (O_i accumulates in `out`'s own rows; m, l are (Br) per thread.)
//   backward (Algorithm 2): first Dl_i = rowsum(dO_i * O_i) (T) [line 5], then for each key
//   tile j = rows [j0, j0 + Bc) (outer, line 6), for each query tile i of Br rows tiling
//   [j0, T) — the rows that see these keys — (inner, line 9):
//     P = exp(scale Q_i K_j^T - lse_i)                                [lines 11-12]
//     dV_j += P^T dO_i                                                 [line 13]
//     dP = dO_i V_j^T,  dS = P * (dP - Dl_i)                           [lines 14-15]
//     dQ_i += scale dS K_j                                             [line 16]
//     dK_j += scale dS^T Q_i                                           [line 17]
//   (line 16's atomic add is not needed here: one thread owns all of (b, h)'s tiles.)
//   (Dl_i = rowsum(dP * P) because sum_j p_ij dp_ij = do_i . sum_j p_ij v_j = do_i . o_i.)
// The causal mask: key tiles entirely above the diagonal are skipped (about half the work for
// T >> tile), and inside a diagonal tile row i keeps only its keys j <= i (P = 0 beyond).
// All tile products are GEMMs (core/kernels/gemm.h, single-threaded inside the parallel loop)
// on strided views of q, k, v: nothing is copied or transposed.
//
// Memory: lse is B * Hq * T elements (gpt-mini, B=8 Hq=6 T=256, float32: 48 KB per layer, where
// the P this kernel replaced cost 12.6 MB). Scratch, per thread: the forward's S tile (Br, Bc)
// and m, l (Br); the backward's P and dS tiles (Br, Bc each) and Dl (T). Under GQA (Hq > Hkv)
// the backward also keeps (B, Hq, T, D) twice, dK and dV per query head, summed over each
// group's heads in head order (the layout of the inputs, so it is not an O(T^2) term).
//
// Parallel over (b, h) with OpenMP (static schedule). Every output element is produced by one
// thread in one fixed sequence of operations (tiles in increasing order, row reductions through
// vec_math's fixed lane order), so results are bitwise reproducible for any thread count
// (tests/test_attention_tiled.cpp compares 1 and 2 threads).
// Training and inference forwards (lse or nullptr) give the same bits.
//
// The P-saving kernel this one replaced (softmax over whole rows, P (B, Hq, T, T) kept for the
// backward) was deleted from core: bench/attention.cpp carries a copy as the measured baseline.
// bench/results/attention.md (gpt-mini's heads): forward + backward 2.6x faster at T = 1024 and
// 1.4-2.7x at T = 4096, with 0.2 MiB instead of 192-768 MiB saved; at T = 256 slower (0.86x on
// 1 thread, 0.94x on 2: the backward multiplies 5 tile products where the P-saving one
// multiplied 4 whole-row ones, at ~55 against ~90 GFLOP/s; writing P costs little at that size). The tests compare against a naive float64 implementation. There
// is one CPU attention path.
#pragma once
#include <cstdint>

namespace zt {

// Tile sizes, chosen by bench/attention.cpp on the 2-core AVX2 machine: Br query rows, Bc keys.
struct AttentionTiles {
  int64_t q = 64;  // Br
  int64_t k = 64;  // Bc
};

// The scratch the kernels below allocate (Category::workspace, the kernel's dtype, freed on
// return): (threads, per_thread) elements, one row per OpenMP thread; the backward also
// (B, Hq, T, D) x 2 for grouped-query attention (Hq > Hkv: each query head's dK, dV before the
// group's sum). Declared here, beside the kernels, so the meta device counts what they allocate.
inline int64_t attention_forward_scratch(int64_t T_len, AttentionTiles tiles = {}) {
  const int64_t br = tiles.q < T_len ? tiles.q : T_len, bc = tiles.k < T_len ? tiles.k : T_len;
  return br * bc + 2 * br;  // S (Br, Bc), m (Br), l (Br)
}
inline int64_t attention_backward_scratch(int64_t T_len, AttentionTiles tiles = {}) {
  const int64_t br = tiles.q < T_len ? tiles.q : T_len, bc = tiles.k < T_len ? tiles.k : T_len;
  return 2 * br * bc + T_len;  // P (Br, Bc), dS (Br, Bc), Dl (T)
}

// out: (B, T, Hq, D), written. lse: (B, Hq, T) written, or nullptr (inference: not saved).
template <class T>
void attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, int64_t B, int64_t T_len, int64_t Hq,
                       int64_t Hkv, int64_t D, AttentionTiles tiles = {});

// dq (B, T, Hq, D), dk and dv (B, T, Hkv, D): written (not accumulated). out and lse: from the
// forward.
template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                        const T* lse, int64_t B, int64_t T_len, int64_t Hq, int64_t Hkv, int64_t D,
                        AttentionTiles tiles = {});

}  // namespace zt
