// defines: 1 Catch2 test case tagged [simulated]; helpers: Groups, Snapshot, snapshot, run_sequence,
//          require_equal
//
// dist/simulated_process_group.h against the real thing: every rank issues one sequence of
// collectives (every kind, several sizes, some that the group size does not divide where the kind
// allows it, uint8 payloads, async ones in flight together, the host scalars) on the world, on
// intra_node_group and on inter_node_group, once on the MPI group and once on a
// SimulatedProcessGroup(rank, the MPI group's topology). After every collective the counters of
// all three groups (bytes and calls per kind, bytes per link class) must be equal, exactly. On one
// machine the topology is one node (the inter-node groups are one rank each); the cluster in a box
// (tests/cli/test_cluster_box.sh) runs this case on 2 nodes x 2 ranks, where the links differ by rank.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "dist/simulated_process_group.h"

using namespace zt;

namespace {

// A world and its two node groups.
struct Groups {
  ProcessGroup& world;
  std::unique_ptr<ProcessGroup> intra, inter;
  explicit Groups(ProcessGroup& w) : world(w), intra(intra_node_group(w)), inter(inter_node_group(w)) {}
};

// The counters of the three groups after one step of the sequence, and what the step was.
struct Snapshot {
  std::string step;
  CommCounters world, intra, inter;
};

Snapshot snapshot(const Groups& g, std::string step) {
  return {std::move(step), g.world.counters(), g.intra->counters(), g.inter->counters()};
}

Tensor ramp(int64_t n, DType t) {  // any values: only the counters are compared
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>(i % 7);
  return Tensor::from_vector(v, {n}, t, Category::comm);
}

// The sequence, the same on every rank and on both backends: the counters after each step.
std::vector<Snapshot> run_sequence(Groups& g) {
  std::vector<Snapshot> out;
  g.world.reset_counters();
  g.intra->reset_counters();
  g.inter->reset_counters();
  auto step = [&](const char* where, const std::string& what, const std::function<void()>& call) {
    call();
    out.push_back(snapshot(g, std::string(where) + " " + what));
  };
  const std::vector<std::pair<const char*, ProcessGroup*>> groups = {
      {"world", &g.world}, {"intra", g.intra.get()}, {"inter", g.inter.get()}};
  for (const auto& [where, gp] : groups) {
    ProcessGroup& p = *gp;
    const int64_t M = p.size();
    for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
      const std::string d = dtype_name(t);
      for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{33}, 5 * M})  // 7, 33: not multiples of M = 2, 4
        step(where, "all_reduce " + d + " " + std::to_string(n), [&] { p.all_reduce(ramp(n, t)); });
      for (int64_t S : {1, 3})
        step(where, "reduce_scatter " + d + " " + std::to_string(S),
             [&] { p.reduce_scatter(ramp(M * S, t), Tensor::zeros({S}, t, Category::comm)); });
      for (int64_t S : {1, 5})
        step(where, "all_gather " + d + " " + std::to_string(S),
             [&] { p.all_gather(ramp(S, t), Tensor::zeros({M * S}, t, Category::comm)); });
      step(where, "broadcast " + d, [&] { p.broadcast(ramp(11, t), static_cast<int>(M - 1)); });
      step(where, "all_to_all " + d, [&] { p.all_to_all(ramp(M * 2, t), Tensor::zeros({M * 2}, t, Category::comm)); });
    }
    // uint8: ZeRO++'s quantized payloads move through the kinds that only move data
    for (int64_t S : {3, 13})
      step(where, "all_gather uint8 " + std::to_string(S),
           [&] { p.all_gather(ramp(S, DType::u8), Tensor::zeros({M * S}, DType::u8, Category::comm)); });
    step(where, "broadcast uint8 17", [&] { p.broadcast(ramp(17, DType::u8), 0); });
    step(where, "all_to_all uint8 5",
         [&] { p.all_to_all(ramp(M * 5, DType::u8), Tensor::zeros({M * 5}, DType::u8, Category::comm)); });
    step(where, "barrier", [&] { p.barrier(); });
    step(where, "all_reduce_sum", [&] { p.all_reduce_sum(1.0); });
    step(where, "first_error", [&] { (void)p.first_error(""); });
  }
  // in flight together, on the three groups (counted when issued)
  step("all", "async", [&] {
    Tensor a = ramp(9, DType::f32), b = ramp(g.intra->size() * 4, DType::f32), c = ramp(6, DType::bf16);
    Tensor bo = Tensor::zeros({4}, DType::f32, Category::comm);
    Tensor co = Tensor::zeros({g.inter->size() * 6}, DType::bf16, Category::comm);
    std::vector<WorkPtr> ws = {g.world.all_reduce_async(a), g.intra->reduce_scatter_async(b, bo),
                               g.inter->all_gather_async(c, co), g.world.barrier_async()};
    for (WorkPtr& w : ws) w->wait();
  });
  return out;
}

void require_equal(const CommCounters& mpi, const CommCounters& sim, const char* group) {
  INFO(group);
  for (int k = 0; k < kNumCollectives; ++k) {
    INFO(collective_name(static_cast<Collective>(k)));
    REQUIRE(sim.bytes[k] == mpi.bytes[k]);
    REQUIRE(sim.calls[k] == mpi.calls[k]);
  }
  REQUIRE(sim.intra_node() == mpi.intra_node());
  REQUIRE(sim.inter_node() == mpi.inter_node());
}

}  // namespace

TEST_CASE("a simulated rank counts what the MPI rank counts: every kind on the world and the node groups",
          "[simulated]") {
  ProcessGroup& world = init_process_group();
  const Topology& t = world.topology();
  INFO("rank " << world.rank() << " of " << t.summary());
  SimulatedProcessGroup sim(world.rank(), t);
  REQUIRE(sim.size() == world.size());

  Groups real_groups(world), sim_groups(sim);
  REQUIRE(sim_groups.intra->size() == real_groups.intra->size());
  REQUIRE(sim_groups.intra->rank() == real_groups.intra->rank());
  REQUIRE(sim_groups.inter->size() == real_groups.inter->size());
  REQUIRE(sim_groups.inter->rank() == real_groups.inter->rank());
  REQUIRE(sim_groups.inter->topology().node_of == real_groups.inter->topology().node_of);

  const std::vector<Snapshot> real = run_sequence(real_groups);
  const std::vector<Snapshot> simulated = run_sequence(sim_groups);
  REQUIRE(real.size() == simulated.size());
  for (size_t i = 0; i < real.size(); ++i) {
    INFO("after step " << i << ": " << real[i].step);
    require_equal(real[i].world, simulated[i].world, "world");
    require_equal(real[i].intra, simulated[i].intra, "intra_node_group");
    require_equal(real[i].inter, simulated[i].inter, "inter_node_group");
  }
  // every byte of the node groups is the world's too, and some moved wherever there are peers
  const CommCounters& w = real.back().world;
  CHECK(w.total() >= real.back().intra.total() + real.back().inter.total());
  if (world.size() > 1) CHECK(w.total() > 0);
  if (t.num_nodes() > 1) CHECK(real.back().inter.inter_node() > 0);
}
