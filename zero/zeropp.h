// defines: QuantFormat, quantized_bytes, quantized_all_gather, hpz_secondary_group, qgz_runs,
//          qgz_summary, ExactRanges, QgzLayout, qgz_layout, QuantizedReduceScatter — ZeRO++'s three
//          communication changes to stage 3 (Wang et al. 2023, "ZeRO++: Extremely Efficient
//          Collective Communication for Giant Model Training"; DeepSpeed's zero_quantized_weights,
//          zero_hpz_partition_size, zero_quantized_gradients).
//
// Stage 3 moves 3 Psi per rank per step (zero/stage.h): the forward's all-gather, the
// backward's all-gather and the gradient reduce-scatter, and across nodes that volume is what a
// step waits for. ZeRO++ cuts each term; each part is owned by the policy whose collective it
// changes (zero/stage.h): qwZ and hpZ by ShardedParameters (zero/sharded_parameters.cpp), qgZ by
// ShardedGradient (zero/sharded_gradient.cpp). This file holds the collectives themselves:
//
//   qwZ (section 3.1)  the parameters' all-gathers send int8 blocks (one float32 scale per block,
//                      core/kernels/quantize.h; hpZ's secondary gather too, as DeepSpeed's; a
//                      persistent unit's refresh after the step not) and dequantize into the gathered buffer:
//                      Psi -> about Psi / 2 of 2-byte weights (Psi / 4 of float32 ones).
//   hpZ (section 3.2)  when the forward frees a unit, each rank keeps a secondary shard of it,
//                      1/H of the gathered (dequantized) parameters, H = zero_hpz_partition_size
//                      ranks of its node; the backward's all-gather runs over those H ranks only:
//                      no inter-node bytes, for P/H more elements per rank between a unit's
//                      forward and its backward (Category::secondary).
//   qgZ (section 3.3)  the gradient reduce-scatter becomes a hierarchical all-to-all: the
//                      gradient is quantized (int4 by default), exchanged within the node and
//                      summed, the node sums quantized again, exchanged across nodes (one rank
//                      per node: the ranks with the same local rank) and summed: one
//                      quantization per hop, never a ring of re-quantizations, and each rank's
//                      inter-node traffic is its 1/M of the node's gradient, M = ranks per node.
//
// qgZ's wire format (zero_quantized_gradients_format):
//   deepspeed (default) DeepSpeed's all_to_all_quant_reduce: a tensor of shape (d0, d1, ...) is
//                      quantized in max(d0, d1, world) groups of numel / that elements (about
//                      one row of a weight matrix; the same group size in both hops), with
//                      QuantScheme::deepspeed (codes [-8, 7], scale max / 8 at 4 bits, half to
//                      even), and each hop's sums are fp16 (DeepSpeed adds the dequantized
//                      payloads in __half; here float32 adds rounded to fp16 after each add).
//                      Groups start at the tensor's first element; where a slice boundary cuts
//                      a group, each side is a group of its own (DeepSpeed's slices fall on
//                      group boundaries when the group count is a multiple of the world size).
//                      Elements of no quantized tensor (exact tensors, padding) are not sent.
//   blocks (ours)      every slice in zero_quantization_block_size-element blocks,
//                      QuantScheme::symmetric (codes [-7, 7], scale max / 7), float32 sums: no
//                      fp16 range limit on a sum, one scale per 4096 elements instead of per
//                      row (bench/results/zeropp.md measures both: DeepSpeed's rows land closer
//                      to the exact sum, for 0.5% more bytes).
// Either way the result is the sum over ranks, as the plain reduce-scatter's; the engine then
// scales it by 1 / world (the mean). DeepSpeed's qgZ divides by the number of nodes only (its
// all_to_all_quant_reduce), where its plain path divides by the world: its qgZ gradient is M
// times its exact one. Ours keeps the mean either way (docs/zero.md).
//
// qgZ's slice order (the paper's "tensor slice reordering"). World rank w(k, l) is node k's l-th
// rank (K nodes of M ranks, ranks of a node ordered by rank, nodes by their lowest rank, as the
// Topology numbers them), and owns gradient shard w(k, l) (elements [w S, (w+1) S)). Hop 1 sends
// intra-node peer l' the K slices its inter-node group needs, in node order (shard w(0, l'),
// w(1, l'), ...); after summing over the node, block k' of what rank (k, l) holds is shard
// w(k', l) summed over node k, which hop 2 sends to node k' (inter-node rank k'): what lands is
// shard w(k, l), summed over every rank — this rank's shard, as a reduce-scatter gives it.
// A hop over one rank (one node; one rank per node) is skipped rather than quantized for nothing.
// On one node DeepSpeed does not run qgZ at all (qgz_runs): the plain reduce-scatter is exact.
//
// Non-finite values survive: a quantization block holding a NaN or an infinity dequantizes to
// NaN, so fp16's loss scaler still sees an overflow.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"  // defines: QuantScheme
#include "nn/param_set.h"  // defines: ParamInfo
#include "zero/engine_config.h"
#include "zero/pending.h"

namespace zt {

struct QuantFormat {
  int bits = 8;
  int64_t block = 4096;  // elements per float32 scale
  QuantScheme scheme = QuantScheme::symmetric;
  std::string name() const { return "int" + std::to_string(bits); }
};

// Payload bytes of n values: the codes and the float32 scales.
int64_t quantized_bytes(int64_t n, QuantFormat f);

// qwZ's all-gather: src (S, any float dtype) of every rank into dst (N * S), chunk by chunk of at
// most `chunk` elements per rank, each chunk quantized by its owner (blocks restart at a chunk)
// and sent as two all-gathers (codes, scales); rank q's dequantized values land at
// dst[q S, (q+1) S), converted to dst's dtype, when the chunk's Pending finishes.
void quantized_all_gather(ProcessGroup& g, const Tensor& src, const Tensor& dst, int64_t chunk, QuantFormat f,
                          std::deque<Pending>& out);

// hpZ: the group of H = zero_hpz_partition_size consecutive ranks of this rank's node that keeps
// the secondary shards (ShardedParameters, zero/stage.h: this rank's slice [h P/H, (h+1) P/H) of a
// unit's P gathered elements, h its rank in the group, all-gathered back into P inside the group).
// Collective over `world`; an error names the key and the nodes unless H divides every node's
// rank count.
std::unique_ptr<ProcessGroup> hpz_secondary_group(const ZeroOptimization& z, ProcessGroup& world);

// Whether qgZ quantizes this job's gradient reduce-scatter, as DeepSpeed decides it: at stage 3
// (zeropp_problem refuses the key below), across nodes only (`num_nodes > 1` in DeepSpeed's
// stage3.py); on one node the reduce-scatter stays exact, unless zero_quantized_gradients_one_node
// (ours) asks for the intra-node hop anyway, to study it on one machine.
bool qgz_runs(const ZeroOptimization& z, int num_nodes);
// What qgZ does in this job, one phrase for the banner ("" when the key is off).
std::string qgz_summary(const ZeroOptimization& z, int num_nodes);

// A unit's gradient as qgZ sends it, tensor by tensor as DeepSpeed's all_to_all_quant_reduce:
//   exact      the flat ranges [begin, end) reduced exactly: 1-D tensors (biases, norm gains) and
//              tensors whose size is not a multiple of 2 x world (its int4 codes pack two to a byte
//              per rank's slice). Sorted.
//   quantized  every other tensor's flat range and its group size in the deepspeed format,
//              numel / max(d0, d1, world). Sorted.
using ExactRanges = std::vector<std::pair<int64_t, int64_t>>;
struct QgzLayout {
  struct Run {
    int64_t begin, end, group;
    bool operator==(const Run&) const = default;
  };
  ExactRanges exact;
  std::vector<Run> quantized;
};
QgzLayout qgz_layout(const std::vector<ParamInfo>& params, int world_size);

// qgZ: the gradient reduce-scatter of ShardedGradient (zero/stage.h) as the hierarchical
// all-to-all above.
class QuantizedReduceScatter {
 public:
  // Collective over `world` (every rank, at the same point): makes the node groups from
  // world.topology() and checks that every node has the same number of ranks (an error names the
  // key and the nodes).
  QuantizedReduceScatter(const ZeroOptimization& z, ProcessGroup& world);

  // Receives chunk [a, a + n) of this rank's shard: `sum` (n, float32), the sum over every rank.
  using Land = std::function<void(int64_t a, const Tensor& sum)>;
  // The hierarchical reduce-scatter of grad (N * S, any float dtype) in chunks of at most
  // `chunk` elements of the shard. The intra-node hop is waited for here; the inter-node hop is
  // left in flight in `out`, its chunk landed when it finishes. The elements inside
  // layout.exact (flat ranges of grad) go through a plain reduce-scatter of their own, packed
  // shard by shard; in the quantized hops they are zeros (blocks: a zero quantizes to zero
  // exactly, and leaves its block's scale to the other elements) or not sent (deepspeed).
  void reduce_scatter(const Tensor& grad, int64_t S, int64_t chunk, const QgzLayout& layout, const Land& land,
                      std::deque<Pending>& out) const;

 private:
  const ZeroOptimization& z_;
  ProcessGroup& world_;
  std::unique_ptr<ProcessGroup> intra_, inter_;  // this node's M ranks; one rank per node (K)
  std::vector<int> world_rank_;                  // [k * M + l] = w(k, l)
  bool deepspeed_ = true;                        // the wire format: deepspeed, or blocks
};

}  // namespace zt
