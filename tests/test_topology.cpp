// defines: Catch2 test cases tagged [topology]; helpers: Env
//
// dist/topology.h: each launcher's variables read (OpenMPI, Slurm, torchrun; set here by hand),
// the first family present winning; malformed values refused by name; a Topology's local ranks
// and its summary; the one-process group's topology. (The MPI group's, found by
// MPI_Comm_split_type across real nodes, is checked in the cluster in a box:
// tests/cli/test_cluster_box.sh.)
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "dist/process_group.h"
#include "dist/topology.h"

using namespace zt;

namespace {
struct Env {
  std::map<std::string, std::string> vars;
  LauncherRanks read() const {
    return launcher_ranks([this](const char* n) -> const char* {
      auto it = vars.find(n);
      return it == vars.end() ? nullptr : it->second.c_str();
    });
  }
};
}  // namespace

TEST_CASE("launcher_ranks: OpenMPI, Slurm and torchrun variables", "[topology]") {
  CHECK(Env{}.read().launcher.empty());
  const LauncherRanks o = Env{
      {{"OMPI_COMM_WORLD_RANK", "3"},
       {"OMPI_COMM_WORLD_SIZE", "4"},
       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
       {"OMPI_COMM_WORLD_NODE_RANK",
        "1"}}}.read();
  CHECK(o.launcher == "OpenMPI");
  CHECK((o.rank == 3 && o.size == 4 && o.local_rank == 1 && o.local_size == 2));
  CHECK(o.node == -1);  // OpenMPI gives no node number (NODE_RANK is a rank within the node)

  const LauncherRanks s = Env{
      {{"SLURM_PROCID", "5"},
       {"SLURM_NTASKS", "8"},
       {"SLURM_LOCALID", "1"},
       {"SLURM_NODEID", "2"},
       {"SLURM_NNODES", "4"}}}.read();
  CHECK(s.launcher == "Slurm");
  CHECK((s.rank == 5 && s.size == 8 && s.local_rank == 1 && s.node == 2 && s.num_nodes == 4));

  const LauncherRanks t = Env{
      {{"RANK", "6"},
       {"WORLD_SIZE", "8"},
       {"LOCAL_RANK", "2"},
       {"LOCAL_WORLD_SIZE", "4"},
       {"GROUP_RANK", "1"},
       {"MASTER_ADDR", "10.0.0.1"},
       {"MASTER_PORT",
        "29500"}}}.read();
  CHECK(t.launcher == "torchrun");
  CHECK((t.rank == 6 && t.size == 8 && t.local_rank == 2 && t.local_size == 4 && t.node == 1 && t.num_nodes == 2));
  CHECK((t.master_addr == "10.0.0.1" && t.master_port == 29500));

  // mpirun inside a Slurm allocation: OpenMPI's variables describe the job
  const LauncherRanks both = Env{
      {{"SLURM_PROCID", "0"},
       {"SLURM_NTASKS", "1"},
       {"OMPI_COMM_WORLD_RANK", "1"},
       {"OMPI_COMM_WORLD_SIZE",
        "2"}}}.read();
  CHECK((both.launcher == "OpenMPI" && both.rank == 1 && both.size == 2));
}

TEST_CASE("launcher_ranks: a malformed variable is refused by name", "[topology][errors]") {
  CHECK_THROWS_WITH((Env{{{"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "4"}}}.read()),
                    Catch::Contains("SLURM_PROCID='x': expected an integer in [0, 3]"));
  CHECK_THROWS_WITH((Env{{{"RANK", "4"}, {"WORLD_SIZE", "4"}}}.read()),
                    Catch::Contains("RANK='4': expected an integer in [0, 3]"));
  CHECK_THROWS_WITH((Env{{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}}.read()),
                    Catch::Contains("MASTER_PORT='70000'"));
  CHECK_THROWS_WITH((Env{{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "0"}}}.read()),
                    Catch::Contains("OMPI_COMM_WORLD_SIZE='0'"));
}

TEST_CASE("Topology: nodes, local ranks and the summary", "[topology]") {
  const Topology t = topology_of_nodes({0, 0, 1, 1}, 3, "test");
  CHECK((t.num_nodes() == 2 && t.node() == 1 && t.local_rank() == 1 && t.local_size() == 2));
  CHECK(t.same_node(0, 1));
  CHECK_FALSE(t.same_node(1, 2));
  CHECK(t.summary() == "2 nodes x 2 ranks: node 0 = ranks 0-1, node 1 = ranks 2-3");
  // round-robin placement (mpirun --map-by node)
  const Topology rr = topology_of_nodes({0, 1, 0, 1, 0}, 4, "test");
  CHECK((rr.local_rank() == 2 && rr.local_size() == 3));
  CHECK(rr.summary() == "2 nodes, 5 ranks: node 0 = ranks 0,2,4, node 1 = ranks 1,3");
  CHECK(topology_of_nodes({0, 0, 0}, 0, "test").summary() == "1 node, 3 ranks");
  CHECK_THROWS_WITH(topology_of_nodes({1, 0}, 0, "test"), Catch::Contains("nodes must be numbered 0, 1, ..."));
  CHECK_THROWS_WITH(topology_of_nodes({0, 2}, 0, "test"), Catch::Contains("rank 1 is on node 2"));
}

TEST_CASE("the one-process group is one node of one rank", "[topology]") {
  SingleProcessGroup g;
  CHECK(g.topology().summary() == "1 node, 1 rank");
  CHECK(g.topology().source == "one process");
}
