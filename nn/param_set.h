// defines: TensorSlice, ParamInfo, ParamSet — one unit's parameters in one flat buffer (the ZeRO spine).
//
// Layout (fixed by the order of add()):
//
//   flat      [ p0 ........ | p1 .... | p2 ...... | pad ]   Category::params
//   flat_grad [ g0 ........ | g1 .... | g2 ...... | pad ]   Category::grads
//              ^offset 0      ^info[1].offset         ^numel()       ^padded_numel()
//
// padded_numel() is a multiple of world_size * alignment, so rank r of N owns exactly
// [r*S, (r+1)*S) with S = padded_numel() / N. Every parameter is a view into `flat`; its
// gradient is the view at the same offset into `flat_grad`, so a unit's gradients are
// contiguous by construction (DeepSpeed's contiguous_gradients) and backward accumulates
// straight into them. The pad is zero and stays zero (no op reads it).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "autograd/var.h"

namespace zt {

// Which part of the model's full tensor a parameter holds. Under tensor parallelism
// (parallel/tensor_parallel.h) a rank builds each layer with its own slice: Megatron's
// column-parallel weights (out, in) are cut along dim 0, row-parallel ones along dim 1. The full
// dimension is `groups` equal blocks (GPT-2's c_attn stacks q; k; v: 3 blocks, each cut apart),
// each cut into `parts` equal pieces; this parameter holds piece `part` of every block, in block
// order. dim -1: the whole tensor (every tensor-parallel rank holds the same copy). `replicas`:
// how many consecutive ranks of the group hold each piece (Llama's kv heads when there are fewer
// of them than ranks: rank t holds piece t / replicas, parts x replicas = the group's size).
//
//   full dim d:   [ block 0: p0 | p1 | ... ][ block 1: p0 | p1 | ... ] ...
//   local dim d:  [ block 0: p_part ][ block 1: p_part ] ...            (groups * full / (groups * parts))
struct TensorSlice {
  int dim = -1;
  int64_t groups = 1;
  int64_t part = 0, parts = 1;
  int64_t replicas = 1;

  bool whole() const { return dim < 0; }
  Shape full_shape(const Shape& local) const;  // local's dim d times parts
  // The row-major index in the full tensor of element k (row-major) of the local one.
  int64_t full_index(const Shape& local, int64_t k) const;
  // How many elements from local element k on are consecutive in the full tensor too (>= 1).
  int64_t run_length(const Shape& local, int64_t k) const;
  // The other way, over every part of this cut (each of shape `local`): element g of the full
  // tensor is element `index` of part `part`, and the `run` elements from g on (>= 1) are
  // consecutive in both. The whole tensor (dim -1) is part 0.
  struct Place {
    int64_t part = 0, index = 0, run = 1;
  };
  Place locate(const Shape& local, int64_t g) const;
  bool operator==(const TensorSlice&) const = default;
};

struct ParamInfo {
  std::string name;  // Hugging Face style within the unit: "attn.c_attn.weight"
  Shape shape;       // this rank's (a slice's shape under tensor parallelism)
  int64_t offset = 0;  // in elements, into the flat buffers
  int64_t numel = 0;
  bool decay = true;  // AdamW weight decay applies (2-D weights), not to biases and norm gains
  TensorSlice slice;  // which part of the full tensor it is (whole unless tensor-parallel)
};

class ParamSet {
 public:
  explicit ParamSet(std::string unit_name, DType dtype = DType::f32);
  ParamSet(const ParamSet&) = delete;
  ParamSet& operator=(const ParamSet&) = delete;

  // ---- building: add() every parameter, then finalize() once ----
  int add(const std::string& name, const Shape& shape, bool decay);  // returns the index
  // Marks parameter i as a slice of a full tensor (before finalize; checked against its shape).
  void set_slice(int i, const TensorSlice& slice);
  // Lays out both flat buffers, padded to a multiple of world_size * alignment. materialize:
  // allocated and zero-filled; otherwise they hold no bytes (Tensor::released) until the ZeRO
  // engine materializes what its stage keeps (partitioned construction: zero/engine.h), and the
  // parameter views and leaves exist all the same.
  void finalize(int64_t world_size = 1, int64_t alignment = 1, bool materialize = true);
  bool finalized() const { return flat_.defined(); }
  // The model holds its own parameter values: built with bytes (finalize(..., materialize = true))
  // and not released since (an engine's destructor leaves stage 3's units released).
  bool holds_values() const { return built_with_bytes_ && flat_.storage()->resident(); }
  // A fresh gradient buffer: allocated again (after release()) and zeroed.
  void fresh_grad();

  // ---- layout ----
  const std::string& unit_name() const { return unit_name_; }
  DType dtype() const { return dtype_; }
  const std::vector<ParamInfo>& infos() const { return infos_; }
  int size() const { return static_cast<int>(infos_.size()); }
  int find(const std::string& name) const;  // -1 when absent
  int64_t numel() const { return numel_; }  // sum of parameter sizes, no padding
  int64_t padded_numel() const { return padded_numel_; }

  // ---- storage ----
  const Tensor& flat() const { return flat_; }
  const Tensor& flat_grad() const { return flat_grad_; }
  Tensor value(int i) const;  // view of parameter i
  Tensor grad(int i) const;   // view of its gradient
  // The autograd leaf of parameter i: value view + gradient view, in this set's LeafGroup.
  const Var& var(int i) const;
  const std::vector<Var>& vars() const { return vars_; }
  // A leaf over rows [row0, row0 + rows) of parameter i (first dimension), its gradient landing
  // in the same rows of the parameter's gradient. (GPT-2's fused c_attn does not use it: it runs
  // as one GEMM of width 3C read packed by causal_attention_packed, nn/layers.cpp.)
  Var var_rows(int i, int64_t row0, int64_t rows) const;
  // A leaf over `count` consecutive parameters i, i+1, ... stacked along their first dimension:
  // Llama's q_proj | k_proj | v_proj weights as one (C + 2 kv, C) matrix, so the three projections
  // run as one GEMM (and gate_proj | up_proj as one (2F, C)). Each keeps its own name, shape and
  // offset (checkpoints and Hugging Face files see them apart); the layout of add() places them
  // back to back in both flat buffers, so the stack is a view of each, no copy. The parameters
  // must share every dimension after the first.
  Var var_span(int i, int count) const;
  const std::shared_ptr<LeafGroup>& group() const { return group_; }

  void zero_grad();

 private:
  void build_vars();

  std::string unit_name_;
  DType dtype_;
  std::vector<ParamInfo> infos_;
  int64_t numel_ = 0, padded_numel_ = 0;
  bool built_with_bytes_ = false;
  Tensor flat_, flat_grad_;
  std::vector<Var> vars_;
  std::shared_ptr<LeafGroup> group_;
};

}  // namespace zt
