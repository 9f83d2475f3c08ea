// defines: ProcessGrid::describe, make_process_grid (dist/process_grid.h)
#include "dist/process_grid.h"

#include <vector>

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
  // Every rank makes the four groups in the same order (collective over the world, as split is).
  // Every rank computes every group's members from the degrees, so none is gathered (as the node
  // groups of dist/process_group.h): a simulated rank (dist/simulated_process_group.h) makes them too.
  auto group = [&](int color, auto same) {
    std::vector<int> members;  // in world order, which is each group's own index order
    for (int q = 0; q < N; ++q)
      if (same(q % tp, (q / tp) % sp, q / (tp * sp))) members.push_back(q);
    return world.split_members(color, members);
  };
  g.tensor = group(g.dp_rank * sp + g.sp_rank, [&](int, int s, int d) { return d == g.dp_rank && s == g.sp_rank; });
  g.sequence = group(g.dp_rank * tp + g.tp_rank, [&](int t, int, int d) { return d == g.dp_rank && t == g.tp_rank; });
  g.data = group(g.sp_rank * tp + g.tp_rank, [&](int t, int s, int) { return s == g.sp_rank && t == g.tp_rank; });
  g.replica = group(g.tp_rank, [&](int t, int, int) { return t == g.tp_rank; });
  // Every tensor x sequence block (tp * sp consecutive ranks) on one node: from the topology,
  // which every rank knows whole.
  const Topology& topo = world.topology();
  for (int q = 0; q < N; ++q) g.inside_node = g.inside_node && topo.same_node(q, q / (tp * sp) * (tp * sp));
  return g;
}

}  // namespace zt
