// defines: cross_entropy_forward / cross_entropy_backward — fused softmax + negative log-likelihood.
//
// logits (N, V) contiguous, targets (N) int32 in [0, Vv) or -1 (ignored; the caller checks),
// Vv = valid_vocab <= V: only columns [0, Vv) take part (llm.c pads V to a multiple of 128).
// Forward, per row i with t = targets[i] != -1 (log-sum-exp with the max subtracted):
//   lse_i = m_i + log(sum_{j<Vv} exp(x_ij - m_i)),  m_i = max_{j<Vv} x_ij,  loss_i = lse_i - x_it
// writes lse (N) (kept for the backward; 0 for ignored rows) and returns sum_i loss_i in double
// (rows combined in order: deterministic for any thread count).
// Backward, one pass writing every element of dlogits (N, V):
//   dlogits_ij = scale * (exp(x_ij - lse_i) - [j == t_i])   for j < Vv and t_i != -1
//   dlogits_ij = 0                                          for j >= Vv or t_i == -1
// with scale = dloss / count (count = number of non-ignored rows).
// v0 (vocabulary parallelism): the columns are [v0, v0 + V) of a larger vocabulary, targets its
// ids, the target's column t - v0; a row whose target lies outside [v0, v0 + Vv) has its lse
// written, loss_i = 0, and no -1 in its gradient (another rank's columns hold it).
#pragma once
#include <cstdint>

namespace zt {

template <class T>
double cross_entropy_forward(T* lse, const T* logits, const int32_t* targets, int64_t N, int64_t V, int64_t Vv,
                             int64_t v0 = 0);
template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets, T scale, int64_t N,
                            int64_t V, int64_t Vv, int64_t v0 = 0);

}  // namespace zt
