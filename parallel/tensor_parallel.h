// defines: TensorParallel, tp_copy, tp_reduce, row_parallel_output, add_bias, tp_share, column_slice, row_slice —
//          Megatron's tensor parallelism (Shoeybi et al. 2019, section 3) as autograd operators
//          and the slices its layers are built with.
//
// A transformer block's two sub-layers are split across the tp ranks of a tensor-parallel group:
// the first GEMM by columns (each rank computes its share of the outputs: its attention heads,
// its share of the MLP's hidden units), the second by rows (each rank's partial sum of the full
// output). Two conjugate operators (the paper's f and g, Figure 3) carry the gradient across:
//
//   x (B, T, C) --f--> column-parallel --(heads / hidden, local)--> row-parallel --g--> (B, T, C)
//   f = tp_copy:   forward identity,   backward all-reduce of the input's gradient
//   g = tp_reduce: forward all-reduce, backward identity
//
// so one block costs two all-reduces of (B, T, C) forward and two backward. A row-parallel layer's
// bias is added once, after g (add_bias). Everything outside the two sub-layers (the norms, the
// residual stream, the embedding and the head here) runs whole and the same on every rank of the
// group: their gradients come out equal on every rank, with no collective.
#pragma once
#include <cstdint>

#include "autograd/var.h"
#include "dist/process_group.h"
#include "nn/param_set.h"

namespace zt {

// The group a model is split over. Null or a group of one: no tensor parallelism.
struct TensorParallel {
  ProcessGroup* group = nullptr;
  int rank() const { return group ? group->rank() : 0; }
  int size() const { return group ? group->size() : 1; }
  bool on() const { return size() > 1; }
};

Var tp_copy(const Var& x, const TensorParallel& tp);    // f (see above); x any shape
// g (see above); x any shape: a partial sum that nothing else reads (a row-parallel layer's
// output, the vocabulary-parallel embedding's lookup), summed in its own buffer.
Var tp_reduce(const Var& x, const TensorParallel& tp);
// A row-parallel layer's output: g, then its deferred bias once (undefined: none). Without tensor
// parallelism the layer added its bias itself and this returns partial as it is.
Var row_parallel_output(const Var& partial, const Var& bias, const TensorParallel& tp);
// y (..., C) + b (C) on every row, as the rank-1 GEMM ones (..., 1) b^T (linear): b's gradient is
// the column sums of dy in linear's fixed order, on any backend.
Var add_bias(const Var& y, const Var& b);

// n / tp.size(); a zt::Error naming `what` when tp.size() does not divide n.
int64_t tp_share(int64_t n, const TensorParallel& tp, const char* what);
// This rank's slice of a column-parallel weight (out, in) or bias (out), cut along dim 0; a fused
// weight of `groups` stacked blocks (GPT-2's c_attn: q; k; v) is cut block by block.
TensorSlice column_slice(const TensorParallel& tp, int64_t groups = 1);
// This rank's slice of a row-parallel weight (out, in), cut along dim 1.
TensorSlice row_slice(const TensorParallel& tp);

}  // namespace zt
