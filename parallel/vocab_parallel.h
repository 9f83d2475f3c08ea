// defines: vocab_parallel_embedding, vocab_parallel_cross_entropy — Megatron's vocabulary-parallel
//          input embedding and output layer with its cross-entropy (Shoeybi et al. 2019, section
//          3: "parallelize the input embedding weight matrix along the vocabulary dimension" and
//          "fuse the output embedding GEMM with the cross entropy loss"), so that neither the
//          (Vp, C) table nor the (B, T, Vp) logits are ever whole on a rank.
//
// Rank t of the tensor group holds rows [v0, v0 + Vl) of the table, v0 = t Vl, Vl = Vp / tp.
//
//   embedding:  x = g(table_local[id - v0] for the ids in [v0, v0 + Vl), 0 for the others)   (B, T, C)
//   loss:       z = f(x) table_local^T                                   (B, T, Vl): this rank's logits
//               lse_t = logsumexp over this rank's columns, per position; all-gathered (tp, B T)
//               LSE = logsumexp over the ranks' lse_t                   the whole vocabulary's
//               loss = mean over positions of (LSE - z[target]), z[target] from the rank holding it
//               dz = (exp(z - LSE) - onehot(target - v0)) / count       this rank's columns only
//
// A step adds per position: two all-reduces of C (the embedding's g, the head's f backward) and
// one all-gather of tp floats (the lse), in place of the whole logits. The lse are combined on
// the host (B T values a step), where the loss and its count are made. Under Megatron's sequence
// parallelism (TensorParallel::split_sequence) the embedding's g is a reduce-scatter to this rank's
// T / tp tokens, and the head's f an all-gather of every rank's.
#pragma once
#include <cstdint>

#include "autograd/var.h"
#include "parallel/tensor_parallel.h"

namespace zt {

// ids int32 (B, T) (any device; read on the host), table (Vl, C): this rank's rows -> (B, T, C),
// the same on every rank of the group (sequence parallelism: (B, T / tp, C), this rank's tokens).
// Without tensor parallelism: embedding(ids, table).
Var vocab_parallel_embedding(const Tensor& ids, const Var& table, const TensorParallel& tp);
// x (B, T, C) (the same on every rank; sequence parallelism: (B, T / tp, C), this rank's tokens),
// w (Vl, C) this rank's rows of the output layer, targets
// int32 (B, T) in [0, vocab) or -1 (ignored) -> the mean cross-entropy over the first `vocab`
// columns of the whole vocabulary, shape (), in the logits' stats dtype (float32). Without tensor
// parallelism: linear_cross_entropy(x, w, targets, vocab).
Var vocab_parallel_cross_entropy(const Var& x, const Var& w, const Tensor& targets, int64_t vocab,
                                 const TensorParallel& tp);

}  // namespace zt
