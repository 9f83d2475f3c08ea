// defines: ProcessGrid::describe, make_process_grid (dist/process_grid.h)
#include "dist/process_grid.h"

#include "core/check.h"

namespace zt {

std::string ProcessGrid::describe() const {
  std::string s = "dp " + std::to_string(dp) + " x sp " + std::to_string(sp) + " x tp " + std::to_string(tp);
  if (tp * sp > 1)
    s += inside_node ? " (tensor and sequence groups inside a node)" : " (tensor or sequence groups span nodes)";
  return s;
}

ProcessGrid make_process_grid(ProcessGroup& world, int tp, int sp) {
  const int N = world.size(), w = world.rank();
  if (tp < 1) ZT_THROW("tensor_parallel_size ", tp, ": expected 1 or more");
  if (sp < 1) ZT_THROW("sequence_parallel_size ", sp, ": expected 1 or more");
  if (N % (tp * sp) != 0)
    ZT_THROW("tensor_parallel_size ", tp, " x sequence_parallel_size ", sp, " = ", tp * sp, " does not divide the ", N,
             " rank(s) of the job: the data-parallel degree would not be whole");
  ProcessGrid g;
  g.tp = tp, g.sp = sp, g.dp = N / (tp * sp);
  g.tp_rank = w % tp, g.sp_rank = (w / tp) % sp, g.dp_rank = w / (tp * sp);
  // Every rank makes the four groups in the same order (split is collective over the world).
  g.tensor = world.split(g.dp_rank * sp + g.sp_rank, g.tp_rank);
  g.sequence = world.split(g.dp_rank * tp + g.tp_rank, g.sp_rank);
  g.data = world.split(g.sp_rank * tp + g.tp_rank, g.dp_rank);
  g.replica = world.split(g.tp_rank, g.dp_rank * sp + g.sp_rank);
  const Topology& topo = world.topology();
  const int block = tp * sp, first = w / block * block;  // this rank's tensor x sequence block
  bool mine = true;
  for (int q = first; q < first + block; ++q) mine = mine && topo.same_node(first, q);
  // every rank's answer, so that all agree (one rank's block may span nodes while another's does not)
  g.inside_node = world.all_reduce_sum(mine ? 0.0 : 1.0) == 0.0;
  return g;
}

}  // namespace zt
