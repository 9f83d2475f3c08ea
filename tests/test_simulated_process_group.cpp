// defines: Catch2 test cases tagged [simulated]; helpers: kRanks, kNodes, kPlayed, filled, Moved, moved_by,
//          ring_link, NoBytes
//
// dist/simulated_process_group.h: one rank of 64 ranks over 8 nodes played alone, in four places
// (0 and 8: their ring successor on their node; 7 and 63: on the next node, 63's wrapping to node
// 0). Each collective kind counts ring_bytes on the ring model's link, an all-to-all each block on
// its own link; the node groups have the topology's sizes, ranks and nodes and count into the
// world; the general split is refused by message, with nothing counted; cpu buffers get the answer
// "as if every rank held the same data"; tensors on another device (memory that faults when
// touched) are counted and left alone; abort throws. (Against the MPI group's own counters, on
// real ranks: tests/mpi/test_simulated.cpp.)
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <functional>
#include <memory>
#include <vector>

#include "core/trace.h"  // defines: Tracer
#include "dist/simulated_process_group.h"
#include "dist/topology.h"

using namespace zt;

namespace {
constexpr int kRanks = 64, kNodes = 8;           // 8 ranks per node, node-major
const std::vector<int> kPlayed = {0, 7, 8, 63};  // the ranks each case plays

Tensor filled(int64_t n, DType t, const std::function<double(int64_t)>& f) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = f(i);
  return Tensor::from_vector(v, {n}, t, Category::comm);
}

// What one collective added to g's counters.
struct Moved {
  int64_t bytes, calls, intra, inter;
};
Moved moved_by(ProcessGroup& g, Collective c, const std::function<void()>& call) {
  const CommCounters before = g.counters();
  call();
  const CommCounters d = g.counters() - before;
  return {d.of(c), d.calls[static_cast<int>(c)], d.intra_node(), d.inter_node()};
}

// The ring model's link for rank r of t: 0 when its successor shares its node, else 1.
int ring_link(const Topology& t, int r) { return t.same_node(r, (r + 1) % t.size()) ? 0 : 1; }

// n elements whose memory faults when read or written (PROT_NONE), on a device that is not the
// cpu: what a device or meta tensor is to the simulated group (counted, never touched).
struct NoBytes {
  void* p = nullptr;
  size_t len = 0;
  explicit NoBytes(size_t bytes) : len(bytes) {
    p = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
  }
  ~NoBytes() { munmap(p, len); }
  Tensor tensor(int64_t offset_bytes, int64_t n, DType t) const {
    return Tensor::borrow(static_cast<char*>(p) + offset_bytes, {n}, t, Device::cuda(0));
  }
};
}  // namespace

TEST_CASE("topology_of_equal_nodes: node-major ranks and sizes that do not divide refused", "[simulated]") {
  const Topology t = topology_of_equal_nodes(kRanks, kNodes, 13);
  REQUIRE(t.size() == kRanks);
  for (int q = 0; q < kRanks; ++q) REQUIRE(t.node_of[static_cast<size_t>(q)] == q / 8);
  CHECK((t.rank == 13 && t.node() == 1 && t.local_rank() == 5 && t.local_size() == 8 && t.num_nodes() == 8));
  CHECK(topology_of_equal_nodes(4, 2, 0).summary() == "2 nodes x 2 ranks: node 0 = ranks 0-1, node 1 = ranks 2-3");
  CHECK_THROWS_WITH(topology_of_equal_nodes(10, 4, 0), Catch::Contains("10 ranks over 4 equal nodes"));
  CHECK_THROWS_WITH(topology_of_equal_nodes(4, 2, 4), Catch::Contains("rank 4 of 4"));
  CHECK_THROWS_WITH(SimulatedProcessGroup(64, topology_of_equal_nodes(kRanks, kNodes, 0)),
                    Catch::Contains("rank 64 is not a rank of 64"));
}

TEST_CASE("simulated group: every collective's bytes are ring_bytes on the ring model's link", "[simulated]") {
  for (int r : kPlayed) {
    SimulatedProcessGroup g(r, topology_of_equal_nodes(kRanks, kNodes, 0));
    CAPTURE(r);
    REQUIRE((g.rank() == r && g.size() == kRanks && g.backend() == "simulated"));
    REQUIRE(g.topology().rank == r);
    const int link = ring_link(g.topology(), r);
    CHECK(link == (r == 7 || r == 63 ? 1 : 0));
    const int64_t N = kRanks;
    // one check per call: its kind's bytes and calls, and all of its bytes on one link
    auto check = [&](Collective c, int64_t want, const std::function<void()>& call) {
      const Moved m = moved_by(g, c, call);
      CHECK(m.bytes == want);
      CHECK(m.calls == 1);
      CHECK((link == 0 ? m.intra : m.inter) == want);
      CHECK((link == 0 ? m.inter : m.intra) == 0);
    };
    for (DType t : {DType::f32, DType::bf16, DType::f64}) {
      const int64_t b = static_cast<int64_t>(dtype_size(t));
      for (int64_t n : {1, 33, 64 * 5}) {  // sizes that N divides and that it does not
        check(Collective::all_reduce, ring_bytes(2, n, b, N), [&] { g.all_reduce(Tensor::zeros({n}, t)); });
        check(Collective::broadcast, ring_bytes(1, n, b, N), [&] { g.broadcast(Tensor::zeros({n}, t), 5); });
      }
      for (int64_t S : {1, 7}) {
        check(Collective::reduce_scatter, ring_bytes(1, N * S, b, N),
              [&] { g.reduce_scatter(Tensor::zeros({N * S}, t), Tensor::zeros({S}, t)); });
        check(Collective::all_gather, ring_bytes(1, N * S, b, N),
              [&] { g.all_gather(Tensor::zeros({S}, t), Tensor::zeros({N * S}, t)); });
      }
    }
    check(Collective::all_gather, ring_bytes(1, N * 9, 1, N),  // uint8: ZeRO++'s quantized payloads
          [&] { g.all_gather(Tensor::zeros({9}, DType::u8), Tensor::zeros({N * 9}, DType::u8)); });
    check(Collective::barrier, 0, [&] { g.barrier(); });
    // the world counted every call above
    CHECK(g.counters().calls[static_cast<int>(Collective::all_reduce)] == 9);
    CHECK(g.counters().total() == g.counters().intra_node() + g.counters().inter_node());
    // the shape checks are ProcessGroup's
    CHECK_THROWS_WITH(g.reduce_scatter(Tensor::zeros({10}), Tensor::zeros({1})), Catch::Contains("world size (64)"));
    CHECK_THROWS_WITH(g.all_reduce(Tensor::zeros({4}, DType::u8)), Catch::Contains("uint8"));
  }
}

TEST_CASE("simulated group: an all-to-all counts each block on the link to its rank", "[simulated]") {
  for (int r : kPlayed) {
    SimulatedProcessGroup g(r, topology_of_equal_nodes(kRanks, kNodes, 0));
    CAPTURE(r);
    for (DType t : {DType::f32, DType::u8}) {
      const int64_t S = 3, block = S * static_cast<int64_t>(dtype_size(t));
      const Moved m = moved_by(g, Collective::all_to_all,
                               [&] { g.all_to_all(Tensor::zeros({kRanks * S}, t), Tensor::zeros({kRanks * S}, t)); });
      CHECK(m.bytes == block * (kRanks - 1));
      CHECK(m.calls == 1);
      CHECK(m.intra == block * 7);   // the 7 other ranks of its node
      CHECK(m.inter == block * 56);  // the 7 other nodes' 8 ranks each
    }
  }
}

TEST_CASE("simulated group: the node groups follow the topology and count into the world", "[simulated]") {
  for (int r : kPlayed) {
    SimulatedProcessGroup g(r, topology_of_equal_nodes(kRanks, kNodes, 0));
    CAPTURE(r);
    std::unique_ptr<ProcessGroup> intra = intra_node_group(g);
    std::unique_ptr<ProcessGroup> inter = inter_node_group(g);
    REQUIRE(intra);
    REQUIRE(inter);
    CHECK(g.counters().total() == 0);  // no gather: the topology gave the members
    CHECK((intra->backend() == "simulated" && inter->backend() == "simulated"));
    // the ranks of this node, by rank: one node of 8
    CHECK((intra->size() == 8 && intra->rank() == r % 8));
    CHECK((intra->topology().num_nodes() == 1 && intra->topology().rank == r % 8));
    // local rank r % 8 of every node, by node: 8 nodes of one rank
    CHECK((inter->size() == 8 && inter->rank() == r / 8));
    CHECK((inter->topology().num_nodes() == 8 && inter->topology().node() == r / 8));
    CHECK(inter->topology().local_size() == 1);
    // the node groups of a node group: intra's inter-node group is itself alone
    std::unique_ptr<ProcessGroup> one = inter_node_group(*intra);
    CHECK((one->size() == 1 && one->rank() == 0));

    // intra: every byte stays on the node; inter: every byte crosses. Both land in the world too.
    const int64_t n = 40;  // float32
    g.reset_counters();
    const Moved mi = moved_by(*intra, Collective::all_reduce, [&] { intra->all_reduce(Tensor::zeros({n})); });
    CHECK((mi.bytes == ring_bytes(2, n, 4, 8) && mi.intra == mi.bytes && mi.inter == 0));
    const Moved mx = moved_by(*inter, Collective::all_gather,
                              [&] { inter->all_gather(Tensor::zeros({n}), Tensor::zeros({8 * n})); });
    CHECK((mx.bytes == ring_bytes(1, 8 * n, 4, 8) && mx.inter == mx.bytes && mx.intra == 0));
    CHECK(g.counters().of(Collective::all_reduce) == mi.bytes);
    CHECK(g.counters().of(Collective::all_gather) == mx.bytes);
    CHECK((g.counters().intra_node() == mi.bytes && g.counters().inter_node() == mx.bytes));
    CHECK(g.counters().calls[static_cast<int>(Collective::all_gather)] == 1);
    // an inter-node all-to-all: every other block to another node
    const Moved ma = moved_by(*inter, Collective::all_to_all,
                              [&] { inter->all_to_all(Tensor::zeros({8 * 2}), Tensor::zeros({8 * 2})); });
    CHECK((ma.bytes == 2 * 4 * 7 && ma.inter == ma.bytes));
  }
}

TEST_CASE("simulated group: a general split is refused with nothing counted", "[simulated]") {
  SimulatedProcessGroup g(8, topology_of_equal_nodes(kRanks, kNodes, 0));
  CHECK_THROWS_WITH(g.split(0, 8), Catch::Contains("a simulated group splits only along its topology") &&
                                       Catch::Contains("intra_node_group"));
  CHECK(g.counters().total() == 0);
  CHECK(g.counters().calls[static_cast<int>(Collective::all_gather)] == 0);
  std::unique_ptr<ProcessGroup> intra = intra_node_group(g);
  CHECK_THROWS_WITH(intra->split(1, 0), Catch::Contains("splits only along its topology"));
}

TEST_CASE("simulated group: cpu buffers get the answer of N ranks holding this rank's data", "[simulated]") {
  const int r = 7, N = kRanks;
  SimulatedProcessGroup g(r, topology_of_equal_nodes(kRanks, kNodes, 0));
  auto v = [](int64_t i) { return static_cast<double>(i % 5) - 2.0; };  // exact in bf16 times 64
  for (DType t : {DType::f32, DType::bf16}) {
    CAPTURE(dtype_name(t));
    // all_reduce: N * x
    Tensor x = filled(10, t, v);
    g.all_reduce(x);
    for (int64_t i = 0; i < 10; ++i) REQUIRE(x.to_vector()[static_cast<size_t>(i)] == N * v(i));
    // reduce_scatter: N * this rank's block
    const int64_t S = 3;
    Tensor in = filled(N * S, t, v), out = Tensor::zeros({S}, t);
    g.reduce_scatter(in, out);
    for (int64_t i = 0; i < S; ++i) REQUIRE(out.to_vector()[static_cast<size_t>(i)] == N * v(r * S + i));
    // all_to_all: block r of in in every block
    Tensor a = filled(N * S, t, v), b = Tensor::zeros({N * S}, t);
    g.all_to_all(a, b);
    for (int q = 0; q < N; ++q)
      for (int64_t i = 0; i < S; ++i) REQUIRE(b.to_vector()[static_cast<size_t>(q * S + i)] == v(r * S + i));
  }
  // all_gather of bytes: in in every block; also in place (in = block r of out)
  Tensor mine = filled(5, DType::u8, [](int64_t i) { return 200.0 + i; });
  Tensor all = Tensor::zeros({N * 5}, DType::u8);
  g.all_gather(mine, all);
  for (int64_t i = 0; i < N * 5; ++i) REQUIRE(all.to_vector()[static_cast<size_t>(i)] == 200.0 + i % 5);
  Tensor whole = filled(N * 2, DType::f32, [&](int64_t i) { return i / 2 == r ? 1.5 : 0.0; });
  g.all_gather(whole.flat_view(r * 2, {2}), whole);
  CHECK(whole.to_vector() == std::vector<double>(static_cast<size_t>(N * 2), 1.5));
  // broadcast: the identity, from any root
  Tensor x = filled(6, DType::u8, [](int64_t i) { return 9.0 * i; });
  g.broadcast(x, 0);
  g.broadcast(x, N - 1);
  CHECK(x.to_vector() == std::vector<double>{0, 9, 18, 27, 36, 45});
  // the host scalars of a run
  CHECK(g.all_reduce_sum(0.25) == 16.0);
  CHECK(g.first_error("") == "");
  CHECK(g.first_error("out of memory") == "rank 0: out of memory");
}

TEST_CASE("simulated group: tensors off the cpu are counted and never touched", "[simulated]") {
  // Every access to this memory would fault: the collectives must count and return.
  const int r = 63, N = kRanks;
  SimulatedProcessGroup g(r, topology_of_equal_nodes(kRanks, kNodes, 0));
  const int64_t S = 1024;
  NoBytes mem(static_cast<size_t>(2 * N * S * 4));
  const Tensor in = mem.tensor(0, N * S, DType::f32), out = mem.tensor(N * S * 4, N * S, DType::f32);
  const Tensor shard = mem.tensor(N * S * 4, S, DType::f32);
  g.reset_counters();
  g.all_reduce(in);
  g.reduce_scatter(in, shard);
  g.all_gather(shard, in);
  g.broadcast(in, 0);
  g.all_to_all(in, out);
  g.all_reduce_async(in)->wait();
  CHECK(g.counters().of(Collective::all_reduce) == 2 * ring_bytes(2, N * S, 4, N));
  CHECK(g.counters().of(Collective::reduce_scatter) == ring_bytes(1, N * S, 4, N));
  CHECK(g.counters().of(Collective::all_to_all) == S * 4 * (N - 1));
  // rank 63's ring successor is rank 0, on node 0: the ring kinds cross; the all-to-all's 7 blocks to node 7 stay
  CHECK(g.counters().intra_node() == 7 * S * 4);
  // one buffer off the cpu: the other is not written either
  Tensor host = Tensor::zeros({S});
  g.reduce_scatter(in, host);
  CHECK(host.to_vector() == std::vector<double>(static_cast<size_t>(S), 0.0));
}

TEST_CASE("simulated group: the trace's spans carry the link class and abort throws", "[simulated]") {
  SimulatedProcessGroup g(7, topology_of_equal_nodes(kRanks, kNodes, 0));  // its successor is on node 1
  Tracer tracer(7);
  g.set_tracer(&tracer);
  {
    CommLabel label(g, "block3");
    g.all_reduce(Tensor::zeros({kRanks}));
  }
  g.set_tracer(nullptr);
  int spans = 0;
  for (const auto& e : tracer.events())
    if (e.value("ph", "") == "X" && e.value("cat", "") == "comm") {
      ++spans;
      CHECK(e["name"] == "all_reduce block3");
      CHECK(e["args"]["bytes"] == ring_bytes(2, kRanks, 4, kRanks));
      CHECK(e["args"]["inter_node_bytes"] == e["args"]["bytes"]);
    }
  CHECK(spans == 1);
  CHECK_THROWS_WITH(g.abort("the loss is NaN", 3), Catch::Contains("the loss is NaN") && Catch::Contains("rank 7"));
  CHECK_FALSE(g.set_collective_timeout(30));
  CHECK_THROWS(g.set_collective_timeout(-1));
}
