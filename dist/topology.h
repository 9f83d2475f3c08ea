// defines: LauncherRanks, launcher_ranks, Topology, topology_of_nodes, topology_of_node_ids,
//          topology_of_equal_nodes — where each rank runs:
//          what the launcher says (its environment variables) and which ranks share a node.
//
// A rank learns its place from the program that started it, as PyTorch's and DeepSpeed's
// launchers hand it down:
//   OpenMPI (mpirun)  OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK,
//                     OMPI_COMM_WORLD_LOCAL_SIZE (no node index: OMPI_COMM_WORLD_NODE_RANK is the
//                     rank among a node's processes, not the node's number)
//   Slurm (srun)      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_NNODES
//   torchrun          RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (the node),
//                     MASTER_ADDR, MASTER_PORT
// The first family whose rank and size variables are both set wins, in that order (mpirun under
// Slurm: OpenMPI's are the ones that describe this job). The MPI process group then finds the
// nodes itself (MPI_Comm_split_type, processes that share memory) and checks the launcher's
// local rank against it; the Topology is what it found (docs/multi-node.md).
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace zt {

struct LauncherRanks {
  std::string launcher;                  // "OpenMPI", "Slurm", "torchrun"; "" when none of their variables is set
  int rank = -1, size = -1;              // -1: not given
  int local_rank = -1, local_size = -1;  // within this rank's node
  int node = -1, num_nodes = -1;         // the node's number, how many nodes
  std::string master_addr;               // torchrun's rendezvous (NCCL's bootstrap without MPI)
  int master_port = -1;
};
// The variables of the launcher that started this process. `env` reads one variable (nullptr:
// unset); tests pass their own. A set variable that is not a number in range is an error naming
// it and its value ("SLURM_LOCALID='x': expected an integer in [0, 3]").
LauncherRanks launcher_ranks(const std::function<const char*(const char*)>& env);
LauncherRanks launcher_ranks();  // from this process's environment

struct Topology {
  std::vector<int> node_of;  // every rank's node (0 .. num_nodes - 1), by rank; nodes numbered by their lowest rank
  int rank = 0;
  std::string source;  // how the nodes were found ("one process", "MPI_Comm_split_type", ...)
  int size() const { return static_cast<int>(node_of.size()); }
  int node() const { return node_of[rank]; }
  int num_nodes() const;
  int local_rank() const;  // this rank's place among its node's ranks (by rank)
  int local_size() const;  // ranks on this rank's node
  bool same_node(int a, int b) const { return node_of[a] == node_of[b]; }
  // "2 nodes x 2 ranks: node 0 = ranks 0-1, node 1 = ranks 2-3" (a list where ranks are not
  // consecutive; "1 node, 4 ranks" on one node)
  std::string summary() const;
};
// A Topology from every rank's node (node_of[r]), as the process groups build it: checks that
// nodes are numbered 0.. in order of their lowest rank.
Topology topology_of_nodes(std::vector<int> node_of, int rank, std::string source);
// The same from any per-rank node labels (a launcher's GROUP_RANK, a parent group's node numbers),
// renumbered 0, 1, ... in order of their lowest rank.
Topology topology_of_node_ids(const std::vector<int>& ids, int rank, std::string source);
// `size` ranks over `num_nodes` nodes of size / num_nodes ranks each, numbered node-major as the
// launchers place them (rank q on node q / (size / num_nodes)): the job a simulated group plays
// (dist/simulated_process_group.h). A size that is not a multiple of num_nodes is an error naming both.
Topology topology_of_equal_nodes(int size, int num_nodes, int rank);

}  // namespace zt
