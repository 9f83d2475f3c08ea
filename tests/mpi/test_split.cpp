// defines: 7 Catch2 test cases tagged [split]; helpers: val, filled
//
// ProcessGroup::split and all_to_all on the MPI backend (dist/process_group.h), against values
// every rank can compute by itself and against the flat collectives of the world group: a
// sub-group's all_reduce and all_gather equal the world's restricted to its members, bit for bit
// (exact values); sub-group and world collectives interleaved run in issue order; the node groups
// (intra_node_group, inter_node_group) agree with the topology, and a sum over a node then across
// nodes is the world's sum. On one machine there is one node; the cluster in a box
// (tests/cli/test_cluster_box.sh) runs these cases on 2 nodes x 2 ranks.
#include <catch2/catch.hpp>
#include <functional>
#include <vector>

#include "dist/process_grid.h"
#include "dist/process_group.h"

using namespace zt;

namespace {
// rank q's value at element i: distinct, small, exact in float32 and bfloat16
double val(int q, int64_t i) { return static_cast<double>(q * 16 + i % 16); }

Tensor filled(int64_t n, DType t, const std::function<double(int64_t)>& f) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = f(i);
  return Tensor::from_vector(v, {n}, t, Category::comm);
}
}  // namespace

TEST_CASE("all_to_all sends block q to rank q, counted per link", "[split]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size(), r = g.rank();
  const int64_t S = 5;
  for (DType t : {DType::f32, DType::bf16}) {
    Tensor in = filled(N * S, t, [&](int64_t i) { return val(r, i); });
    Tensor out = Tensor::zeros({N * S}, t, Category::comm);
    g.reset_counters();
    g.all_to_all(in, out);
    const std::vector<double> got = out.to_vector();
    for (int q = 0; q < N; ++q)
      for (int64_t i = 0; i < S; ++i) REQUIRE(got[static_cast<size_t>(q * S + i)] == val(q, r * S + i));
    const int64_t block = S * static_cast<int64_t>(dtype_size(t));
    CHECK(g.counters().of(Collective::all_to_all) == block * (N - 1));
    CHECK(g.counters().calls[static_cast<int>(Collective::all_to_all)] == 1);
    int64_t intra = 0, inter = 0;
    for (int q = 0; q < N; ++q)
      if (q != r) (g.topology().same_node(r, q) ? intra : inter) += block;
    CHECK(g.counters().intra_node() == intra);
    CHECK(g.counters().inter_node() == inter);
  }
  Tensor odd = Tensor::zeros({N * 3 + (N > 1 ? 1 : 0)}, DType::f32, Category::comm);
  if (N > 1) CHECK_THROWS_WITH(g.all_to_all(odd, odd.clone()), Catch::Contains("a multiple of the world size"));
  Tensor same = Tensor::zeros({N * 2}, DType::f32, Category::comm);
  CHECK_THROWS_WITH(g.all_to_all(same, same), Catch::Contains("different buffers"));
}

TEST_CASE("split: a sub-group's collectives are the world's restricted to its ranks", "[split]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size(), r = g.rank();
  // two colors by parity, ranked in reverse (key = -rank); with 3+ ranks, rank 1 joins none
  const int color = (N > 2 && r == 1) ? -1 : r % 2;
  std::unique_ptr<ProcessGroup> sub = g.split(color, -r);
  std::vector<int> members;  // world ranks of this rank's sub-group, in its order
  for (int q = N - 1; q >= 0; --q)
    if (q % 2 == r % 2 && !(N > 2 && q == 1)) members.push_back(q);
  if (color < 0) {
    CHECK(sub == nullptr);
  } else {
    REQUIRE(sub != nullptr);
    const int M = static_cast<int>(members.size());
    REQUIRE(sub->size() == M);
    REQUIRE(members[static_cast<size_t>(sub->rank())] == r);
    CHECK(sub->backend() == g.backend());
    CHECK(sub->topology().size() == M);
    const int64_t n = 33;
    // all_reduce: the sum over the members
    Tensor x = filled(n, DType::f32, [&](int64_t i) { return val(r, i); });
    sub->all_reduce(x);
    for (int64_t i = 0; i < n; ++i) {
      double want = 0;
      for (int q : members) want += val(q, i);
      REQUIRE(x.to_vector()[static_cast<size_t>(i)] == want);
    }
    // all_gather: the world's all_gather, members' blocks in the sub-group's order
    Tensor mine = filled(n, DType::f32, [&](int64_t i) { return val(r, i); });
    Tensor sub_all = Tensor::empty({M * n}, DType::f32, Category::comm);
    sub->all_gather(mine, sub_all);
    for (int k = 0; k < M; ++k)
      for (int64_t i = 0; i < n; ++i)
        REQUIRE(sub_all.to_vector()[static_cast<size_t>(k * n + i)] == val(members[k], i));
  }
  // the flat all_gather, for comparison, after the sub-group's: every rank takes part
  Tensor mine = filled(4, DType::f32, [&](int64_t i) { return val(r, i); });
  Tensor all = Tensor::empty({N * 4}, DType::f32, Category::comm);
  g.all_gather(mine, all);
  for (int q = 0; q < N; ++q) REQUIRE(all.to_vector()[static_cast<size_t>(q * 4)] == val(q, 0));
}

TEST_CASE("split: sub-group and world collectives interleaved run in issue order", "[split]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size(), r = g.rank();
  std::unique_ptr<ProcessGroup> sub = g.split(r % 2, r);
  std::vector<Tensor> xs, ys;
  std::vector<WorkPtr> ws;
  for (int k = 0; k < 6; ++k) {  // world, sub, world, sub, ... all in flight at once
    xs.push_back(Tensor::full({8}, r + k, DType::f64, Category::comm));
    ws.push_back(k % 2 == 0 ? g.all_reduce_async(xs.back()) : sub->all_reduce_async(xs.back()));
  }
  for (WorkPtr& w : ws) w->wait();
  for (int k = 0; k < 6; ++k) {
    double want = 0;
    for (int q = 0; q < N; ++q)
      if (k % 2 == 0 || q % 2 == r % 2) want += q + k;
    CHECK(xs[static_cast<size_t>(k)].to_vector()[0] == want);
  }
}

TEST_CASE("node groups: intra-node and inter-node follow the topology; a sum over both is the world's", "[split]") {
  ProcessGroup& g = init_process_group();
  const Topology& t = g.topology();
  const int N = g.size(), r = g.rank();
  std::unique_ptr<ProcessGroup> intra = intra_node_group(g);
  std::unique_ptr<ProcessGroup> inter = inter_node_group(g);
  REQUIRE(intra);
  REQUIRE(inter);
  CHECK(intra->size() == t.local_size());
  CHECK(intra->rank() == t.local_rank());
  CHECK(intra->topology().num_nodes() == 1);
  CHECK(inter->rank() == t.node());
  CHECK(inter->topology().num_nodes() == inter->size());  // one rank per node
  // the world ranks of this node, summed in the intra-node group
  double node_sum = 0;
  for (int q = 0; q < N; ++q)
    if (t.same_node(q, r)) node_sum += q;
  CHECK(intra->all_reduce_sum(r) == node_sum);
  // a hierarchical all-reduce (a node, then across nodes among the local ranks 0) equals the flat one
  Tensor x = filled(16, DType::f64, [&](int64_t i) { return val(r, i); });
  Tensor flat = x.clone();
  g.all_reduce(flat);
  intra->all_reduce(x);
  if (t.local_rank() == 0) {
    inter->all_reduce(x);
    CHECK(x.to_vector() == flat.to_vector());
  } else {
    inter->barrier();  // the other local ranks' inter-node groups meet too
  }
}

TEST_CASE("split: a sub-group's bytes and calls count in the world's counters too", "[split]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size(), r = g.rank();
  std::unique_ptr<ProcessGroup> sub = g.split(r % 2, r);
  REQUIRE(sub != nullptr);
  g.reset_counters();
  sub->reset_counters();
  Tensor x = filled(8 * sub->size(), DType::f32, [&](int64_t i) { return val(r, i); });
  sub->all_reduce(x);
  const CommCounters s = sub->counters(), w = g.counters();
  CHECK(s.of(Collective::all_reduce) == 2 * 8 * 4 * (sub->size() - 1));
  CHECK(w.of(Collective::all_reduce) == s.of(Collective::all_reduce));
  CHECK(w.calls[static_cast<int>(Collective::all_reduce)] == 1);
  CHECK(w.intra_node() == s.intra_node());
  CHECK(w.inter_node() == s.inter_node());
  g.all_gather(Tensor::zeros({1}, DType::f32, Category::comm), Tensor::empty({N}, DType::f32, Category::comm));
  CHECK(sub->counters().total() == s.total());  // the world's own collectives are not the sub-group's
}

TEST_CASE("uint8 bytes move through all_gather and broadcast and all_to_all and sums refuse them", "[split]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size(), r = g.rank();
  const int64_t n = 7;
  auto byte = [](int q, int64_t i) { return static_cast<double>((q * 37 + i * 11) % 256); };
  Tensor mine = filled(n, DType::u8, [&](int64_t i) { return byte(r, i); });
  Tensor all = Tensor::empty({N * n}, DType::u8, Category::comm);
  g.reset_counters();
  g.all_gather(mine, all);
  CHECK(g.counters().of(Collective::all_gather) == N * n * (N - 1) / N);
  for (int q = 0; q < N; ++q)
    for (int64_t i = 0; i < n; ++i) REQUIRE(all.to_vector()[static_cast<size_t>(q * n + i)] == byte(q, i));
  Tensor in = filled(N * n, DType::u8, [&](int64_t i) { return byte(r, i); });
  Tensor out = Tensor::empty({N * n}, DType::u8, Category::comm);
  g.all_to_all(in, out);
  for (int q = 0; q < N; ++q)
    for (int64_t i = 0; i < n; ++i) REQUIRE(out.to_vector()[static_cast<size_t>(q * n + i)] == byte(q, r * n + i));
  Tensor b = filled(n, DType::u8, [&](int64_t i) { return byte(r, i); });
  g.broadcast(b, N - 1);
  for (int64_t i = 0; i < n; ++i) REQUIRE(b.to_vector()[static_cast<size_t>(i)] == byte(N - 1, i));
  CHECK_THROWS_WITH(g.all_reduce(b), Catch::Contains("all_reduce: x must be float32, float64, bfloat16 or float16") &&
                                         Catch::Contains("uint8"));
}

TEST_CASE("process grid: tensor fastest, then sequence, then data; each group's ranks and sums", "[split]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size(), w = g.rank();
  for (int tp : {1, 2, 4})
    for (int sp : {1, 2}) {
      if (N % (tp * sp) != 0) {
        CHECK_THROWS_WITH(make_process_grid(g, tp, sp),
                          Catch::Contains("does not divide the " + std::to_string(N) + " rank"));
        continue;
      }
      ProcessGrid pg = make_process_grid(g, tp, sp);
      INFO("tp " << tp << " sp " << sp << ": " << pg.describe());
      CHECK(pg.dp == N / (tp * sp));
      CHECK(w == (pg.dp_rank * sp + pg.sp_rank) * tp + pg.tp_rank);
      CHECK(pg.tensor->size() == tp);
      CHECK(pg.tensor->rank() == pg.tp_rank);
      CHECK(pg.sequence->size() == sp);
      CHECK(pg.sequence->rank() == pg.sp_rank);
      CHECK(pg.data->size() == pg.dp);
      CHECK(pg.data->rank() == pg.dp_rank);
      CHECK(pg.replica->size() == pg.dp * sp);
      // each group sums exactly its members' world ranks
      auto members_sum = [&](ProcessGroup& grp) { return grp.all_reduce_sum(static_cast<double>(w)); };
      double want_t = 0, want_s = 0, want_d = 0, want_r = 0;
      for (int q = 0; q < N; ++q) {
        const int qt = q % tp, qs = (q / tp) % sp, qd = q / (tp * sp);
        if (qd == pg.dp_rank && qs == pg.sp_rank) want_t += q;
        if (qd == pg.dp_rank && qt == pg.tp_rank) want_s += q;
        if (qs == pg.sp_rank && qt == pg.tp_rank) want_d += q;
        if (qt == pg.tp_rank) want_r += q;
      }
      CHECK(members_sum(*pg.tensor) == want_t);
      CHECK(members_sum(*pg.sequence) == want_s);
      CHECK(members_sum(*pg.data) == want_d);
      CHECK(members_sum(*pg.replica) == want_r);
      // inside a node exactly when every tensor x sequence block's ranks share a node
      bool inside = true;
      for (int q = 0; q < N; ++q) inside = inside && g.topology().same_node(q, q / (tp * sp) * (tp * sp));
      CHECK(pg.inside_node == inside);
    }
  CHECK_THROWS_WITH(make_process_grid(g, 0, 1), Catch::Contains("tensor_parallel_size 0: expected 1 or more"));
  CHECK_THROWS_WITH(make_process_grid(g, 1, -1), Catch::Contains("sequence_parallel_size -1: expected 1 or more"));
}
