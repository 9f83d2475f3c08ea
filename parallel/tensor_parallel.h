// defines: TensorParallel, tp_copy, tp_reduce, tp_gather_tokens, tp_scatter_tokens, column_parallel_input,
//          ParallelSubLayer, partial_grad_read, add_bias, tp_share, column_slice, row_slice,
//          kv_heads_per_rank, kv_slice, shared_kv_read, split_tokens, join_tokens, free_bytes — Megatron's tensor parallelism (Shoeybi et al. 2019, section
//          3) and its sequence parallelism (Korthikanti et al. 2022, section 4.2.2) as autograd
//          operators, and the slices its layers are built with.
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
//
// Megatron's sequence parallelism (TensorParallel::split_sequence) splits that whole region too:
// between the sub-layers each rank holds T / tp of every sequence's tokens (B, T/tp, C), since the
// norms and the residual adds are per token. f becomes an all-gather of the tokens (backward: a
// reduce-scatter) and g a reduce-scatter (backward: an all-gather):
//
//   x (B, T/tp, C) --all-gather--> (B, T, C) --> column-parallel --> row-parallel --reduce-scatter--> (B, T/tp, C)
//
// An all-gather and a reduce-scatter move what one all-reduce moves, and the activations between the
// sub-layers fall by tp. The gathered input (B, T, C), which the column-parallel GEMM keeps for its
// weight's gradient, would undo that: as in Megatron, a sub-layer frees it at its exit and gathers
// it again when the backward reaches the exit (ParallelSubLayer), one more all-gather per
// sub-layer in the backward. A whole parameter read there (the norms'
// gains and biases, the row-parallel biases, GPT-2's positions) now sees one rank's tokens, so its
// gradient is a partial sum: it is read through f (partial_grad_read), whose backward sums it over
// the group. Megatron all-reduces those gradients once after the backward; here each is summed
// where it is made, so ZeRO's per-unit reduction finds it whole at any stage.
#pragma once
#include <cstdint>
#include <functional>

#include "autograd/var.h"
#include "dist/process_group.h"
#include "nn/param_set.h"

namespace zt {

// The group a model is split over. Null or a group of one: no tensor parallelism.
struct TensorParallel {
  ProcessGroup* group = nullptr;
  bool split_sequence = false;  // Megatron's sequence parallelism (above); only with 2 or more ranks
  int rank() const { return group ? group->rank() : 0; }
  int size() const { return group ? group->size() : 1; }
  bool on() const { return size() > 1; }
  bool splits_sequence() const { return on() && split_sequence; }
};

Var tp_copy(const Var& x, const TensorParallel& tp);    // f (see above); x any shape
// g (see above); x any shape: a partial sum that nothing else reads (a row-parallel layer's
// output, the vocabulary-parallel embedding's lookup), summed in its own buffer.
Var tp_reduce(const Var& x, const TensorParallel& tp);
// Megatron's sequence parallelism's pair. x (B, Tl, n), this rank's tokens [t Tl, (t + 1) Tl) ->
// (B, tp Tl, n) every rank's, in order: forward all-gather, backward reduce-scatter.
Var tp_gather_tokens(const Var& x, const TensorParallel& tp);
// x (B, T, n), a partial sum that nothing else reads -> (B, T / tp, n), this rank's tokens of the
// sum: forward reduce-scatter, backward all-gather. x's bytes are freed (its producer's backward
// must not read its output, as a GEMM's does not). T must be divisible by tp (an error names both).
Var tp_scatter_tokens(const Var& x, const TensorParallel& tp);
// A column-parallel layer's input: f, or under sequence parallelism the tokens gathered.
Var column_parallel_input(const Var& x, const TensorParallel& tp);

// One sub-layer's two ends, held by a block's forward:
//   ParallelSubLayer s(tp);
//   y = s.exit(layer(s.enter(x)), bias);
// enter is column_parallel_input. exit is g, or under sequence parallelism the tokens scattered;
// then the deferred bias once (undefined: none; under sequence parallelism read through
// partial_grad_read). Without tensor parallelism both return their input as it is (the layer added
// its bias itself). Under sequence parallelism exit also frees the gathered input's bytes, and
// its backward gathers them again from this rank's tokens before the layer's backward reads them.
class ParallelSubLayer {
 public:
  explicit ParallelSubLayer(const TensorParallel& tp) : tp_(tp) {}
  Var enter(const Var& x);                                // (B, T/tp, C) -> (B, T, C) under sequence parallelism
  Var exit(const Var& partial, const Var& bias = Var());  // (B, T, C) -> (B, T/tp, C) under sequence parallelism

 private:
  TensorParallel tp_;
  Var local_, gathered_;  // enter's input and output (sequence parallelism)
};
// How a whole parameter is read between the sub-layers (Module::read): under sequence parallelism
// through f, which sums its partial gradient over the group; otherwise empty (as it is).
std::function<Var(const Var&)> partial_grad_read(const TensorParallel& tp);
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

// Llama's kv heads over the group. Hkv divisible by tp: Hkv / tp a rank, cut as any column-parallel
// weight. Fewer kv heads than ranks (tp a multiple of Hkv): one a rank, each shared by the tp / Hkv
// consecutive ranks whose query heads use it (rank t: kv head t / (tp / Hkv)), as vLLM replicates
// them; Megatron requires Hkv divisible by tp. Anything else is an error naming both.
int64_t kv_heads_per_rank(int64_t Hkv, const TensorParallel& tp);
TensorSlice kv_slice(int64_t Hkv, const TensorParallel& tp);  // k_proj's, v_proj's (out, in) slice
// With shared kv heads, the stacked q | k | v weight (q_rows + 2 kv_rows, C) as CausalSelfAttention
// reads it (read_qkv): forward as it is; backward, the k and v rows' gradient (this rank's query
// heads' share) summed over the ranks sharing the head, through one all-reduce over the group of
// a (Hkv, 2 kv_rows C) buffer holding each rank's at its head's place. Empty when not shared.
std::function<Var(const Var&)> shared_kv_read(int64_t Hkv, int64_t q_rows, int64_t kv_rows, const TensorParallel& tp);

// The token blocks the collectives above (and Ulysses' exchange) send: y (B, T, n) -> (P, B, T/P,
// n), block j holding tokens [j T/P, (j + 1) T/P) (for rank j), in Category::comm; and back:
// (P, B, Tl, n) -> (B, P Tl, n) in `category`, or written into `into` (contiguous, that shape).
Tensor split_tokens(const Tensor& y, int64_t P);
Tensor join_tokens(const Tensor& blocks, Category category = Category::activations, Tensor into = Tensor());
// Hands t's bytes back when t is the whole of its storage (nothing else can be a view of them): an
// op's input that nothing reads again (the autograd graph would keep it until the backward). Its
// views stay; reading one before Storage::materialize() is an error.
void free_bytes(const Tensor& t);

}  // namespace zt
