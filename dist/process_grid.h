// defines: ProcessGrid, make_process_grid — the job's ranks as a data × sequence × tensor grid
//          (Megatron's and DeepSpeed's parallel groups), each axis a sub-group of the world, made
//          as ProcessGroup::split makes them but without its gather (every rank knows the grid).
//
// World rank w = (d * sp + s) * tp + t: the tensor index t varies fastest, then the sequence
// index s, then the data index d (Megatron's order). The launchers place consecutive ranks on one
// node, so a tensor group (every block's activations all-reduced twice forward and twice backward)
// and then a sequence group fall inside a node whenever the ranks per node are a multiple of their
// size; `inside_node` says whether they do. For 8 ranks on 2 nodes at tp 2, sp 1, dp 4:
//
//   node 0: w 0 1 | 2 3     tensor groups {0,1} {2,3} {4,5} {6,7}
//   node 1: w 4 5 | 6 7     data groups   {0,2,4,6} {1,3,5,7}
//
// Groups (every rank belongs to one of each kind):
//   tensor    the tp ranks of one (d, s): they split each block's weights (parallel/tensor_parallel.h)
//   sequence  the sp ranks of one (d, t): they split each sequence (Ulysses)
//   data      the dp ranks of one (s, t): they see different batches
//   replica   the dp * sp ranks of one t: the ranks that hold the same tensor slice of every
//             parameter, over which ZeRO shards it and averages its gradients (DeepSpeed's
//             sequence-data-parallel group: Ulysses' ranks see different tokens of one batch)
#pragma once
#include <memory>
#include <string>

#include "dist/process_group.h"

namespace zt {

struct ProcessGrid {
  int tp = 1, sp = 1, dp = 1;                 // the degrees; tp * sp * dp = the world's size
  int tp_rank = 0, sp_rank = 0, dp_rank = 0;  // this rank's place
  std::unique_ptr<ProcessGroup> tensor, sequence, data, replica;
  bool inside_node = true;  // every tensor and sequence group on one node
  // "dp 4 x sp 1 x tp 2 (tensor and sequence groups inside a node)"
  std::string describe() const;
};

// Collective over `world` (every rank calls it, with the same degrees). Throws zt::Error naming
// tensor_parallel_size / sequence_parallel_size when a degree is below 1 or their product does
// not divide the world's size.
ProcessGrid make_process_grid(ProcessGroup& world, int tensor_parallel_size, int sequence_parallel_size);

}  // namespace zt
