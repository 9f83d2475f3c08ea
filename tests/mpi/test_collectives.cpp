// defines: 9 Catch2 test cases tagged [collectives]; helpers: value
//
// Collectives of the MPI backend against values every rank can compute by itself, and the byte
// counters against the ring convention (dist/process_group.h).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <string>

#define OMPI_SKIP_MPICXX 1  // the C API only
#include <mpi.h>

#include "dist/process_group.h"

using namespace zt;

namespace {
// rank q's value at element i: distinct per rank and element, exact in float32.
double value(int q, int64_t i) { return static_cast<double>(q * 1000 + i % 977); }
}  // namespace

TEST_CASE("all_reduce sums over ranks in place", "[collectives]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size(), r = g.rank();
  const int64_t n = 1001;
  Tensor x = Tensor::empty({n}, DType::f32, Category::comm);
  for (int64_t i = 0; i < n; ++i) x.data<float>()[i] = static_cast<float>(value(r, i));
  g.reset_counters();
  g.all_reduce(x);
  for (int64_t i = 0; i < n; ++i) {
    double want = 0;
    for (int q = 0; q < N; ++q) want += value(q, i);
    REQUIRE(x.data<float>()[i] == static_cast<float>(want));
  }
  CHECK(g.counters().of(Collective::all_reduce) == 2 * n * 4 * (N - 1) / N);
  CHECK(g.counters().calls[static_cast<int>(Collective::all_reduce)] == 1);
  CHECK(g.all_reduce_sum(r + 0.5) == Approx(N * (N - 1) / 2.0 + 0.5 * N));
}

TEST_CASE("reduce_scatter gives each rank the sum of its chunk", "[collectives]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size(), r = g.rank();
  const int64_t S = 37;
  Tensor in = Tensor::empty({N * S}, DType::f64, Category::comm), out = Tensor::empty({S}, DType::f64, Category::comm);
  for (int64_t i = 0; i < N * S; ++i) in.data<double>()[i] = value(r, i);
  g.reset_counters();
  g.reduce_scatter_async(in, out)->wait();
  for (int64_t i = 0; i < S; ++i) {
    double want = 0;
    for (int q = 0; q < N; ++q) want += value(q, r * S + i);
    REQUIRE(out.data<double>()[i] == want);
  }
  CHECK(g.counters().of(Collective::reduce_scatter) == N * S * 8 * (N - 1) / N);
}

TEST_CASE("2-byte reductions: bfloat16 and float16 sums, all-gather and byte counts", "[collectives]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size(), r = g.rank();
  const int64_t S = 300;
  for (DType dt : {DType::bf16, DType::f16}) {
    INFO(dtype_name(dt));
    // Small integers: every partial sum is exact in both formats, so the result is exact.
    Tensor in = Tensor::empty({N * S}, DType::f32, Category::comm);
    for (int64_t i = 0; i < N * S; ++i) in.data<float>()[i] = static_cast<float>(r + 1 + i % 13 - 6);
    Tensor in2 = in.to(dt);
    Tensor out = Tensor::empty({S}, dt, Category::comm);
    g.reset_counters();
    g.reduce_scatter_async(in2, out)->wait();
    CHECK(g.counters().of(Collective::reduce_scatter) == N * S * 2 * (N - 1) / N);
    const std::vector<double> got = out.to_vector();
    for (int64_t i = 0; i < S; ++i) {
      double want = 0;
      for (int q = 0; q < N; ++q) want += q + 1 + (r * S + i) % 13 - 6;
      REQUIRE(got[i] == want);
    }
    // Values that round: each of the N - 1 additions rounds once, so the error of the N-rank sum
    // is at most (N - 1) x the unit roundoff (2^-8 for bf16, 2^-11 for f16) x the sum.
    Tensor x = Tensor::empty({S}, DType::f32, Category::comm);
    for (int64_t i = 0; i < S; ++i) x.data<float>()[i] = static_cast<float>(1.0 + 0.001 * (r * 7 + i));
    Tensor xh = x.to(dt);
    g.all_reduce(xh);
    const double half_ulp = dt == DType::bf16 ? 1.0 / 256 : 1.0 / 2048;  // unit roundoff 2^-p
    const std::vector<double> sum = xh.to_vector();
    for (int64_t i = 0; i < S; ++i) {
      double want = 0, ulps = 0;
      for (int q = 0; q < N; ++q) want += Tensor::full({1}, 1.0 + 0.001 * (q * 7 + i), DType::f32).to(dt).item();
      ulps = (N - 1) * half_ulp * want;
      REQUIRE(std::abs(sum[i] - want) <= ulps);
    }
    // All-gather moves the 2-byte words unchanged.
    Tensor mine = Tensor::full({S}, 0.15625 * (r + 1), dt, Category::comm);
    Tensor all = Tensor::empty({N * S}, dt, Category::comm);
    g.all_gather(mine, all);
    const std::vector<double> gathered = all.to_vector();
    for (int q = 0; q < N; ++q) REQUIRE(gathered[q * S + 5] == 0.15625 * (q + 1));
  }
}

TEST_CASE("all_gather concatenates the ranks' inputs and works in place", "[collectives]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size(), r = g.rank();
  const int64_t S = 53;
  Tensor in = Tensor::empty({S}, DType::f32, Category::comm), out = Tensor::zeros({N * S}, DType::f32, Category::comm);
  for (int64_t i = 0; i < S; ++i) in.data<float>()[i] = static_cast<float>(value(r, i));
  g.reset_counters();
  WorkPtr w = g.all_gather_async(in, out);
  w->wait();
  for (int q = 0; q < N; ++q)
    for (int64_t i = 0; i < S; ++i) REQUIRE(out.data<float>()[q * S + i] == static_cast<float>(value(q, i)));
  CHECK(g.counters().of(Collective::all_gather) == N * S * 4 * (N - 1) / N);

  // In place: this rank's part already sits at its place in the output (ZeRO publishing).
  Tensor full = Tensor::zeros({N * S}, DType::f32, Category::comm);
  Tensor mine = full.flat_view(r * S, {S});
  mine.copy_(in);
  g.all_gather(mine, full);
  CHECK(std::equal(out.data<float>(), out.data<float>() + N * S, full.data<float>()));
}

TEST_CASE("broadcast copies the root's buffer and barrier returns", "[collectives]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size(), r = g.rank();
  Tensor x = Tensor::full({17}, r == N - 1 ? 7.0 : -1.0, DType::f32, Category::comm);
  g.broadcast(x, N - 1);
  for (int64_t i = 0; i < 17; ++i) REQUIRE(x.data<float>()[i] == 7.0f);
  g.barrier();
  CHECK_THROWS_WITH(g.broadcast(x, N), Catch::Contains("root"));
}

TEST_CASE("async collectives complete in issue order while the caller computes", "[collectives]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size();
  std::vector<Tensor> xs;
  std::vector<WorkPtr> ws;
  for (int k = 0; k < 8; ++k) {
    xs.push_back(Tensor::full({4096}, k + 1.0, DType::f32, Category::comm));
    ws.push_back(g.all_reduce_async(xs.back()));
  }
  double busy = 0;  // the caller computes while the communication thread works
  for (int i = 0; i < 100000; ++i) busy += 1e-9 * i;
  for (int k = 7; k >= 0; --k) ws[k]->wait();  // waiting out of order is fine
  for (int k = 0; k < 8; ++k) REQUIRE(xs[k].data<float>()[4095] == static_cast<float>((k + 1) * N));
  CHECK(busy > 0);
}

TEST_CASE("collectives reject mismatched buffers with a clear error", "[collectives]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size();
  Tensor in = Tensor::zeros({N * 4 + 1}, DType::f32, Category::comm), out = Tensor::zeros({4}, DType::f32, Category::comm);
  CHECK_THROWS_WITH(g.reduce_scatter(in, out), Catch::Contains("world size"));
  if (g.backend() == "mpi") {
    Tensor buf = Tensor::zeros({N * 4}, DType::f32, Category::comm);
    CHECK_THROWS_WITH(g.reduce_scatter(buf, buf.flat_view(0, {4})), Catch::Contains("overlaps the input"));
  }
  Tensor ints = Tensor::zeros({4}, DType::i32, Category::comm);
  CHECK_THROWS_WITH(g.all_reduce(ints), Catch::Contains("float32, float64, bfloat16 or float16"));
}

// The MPI backend's rings (dist/mpi_ring.h) add in a fixed order: chunk c's sum starts at rank
// c + 1 and ends at rank c. With values whose float32 sums depend on the order, the results must
// equal that order's sums bitwise: the same every run, and the order the header documents.
TEST_CASE("reductions add in the ring's documented order", "[collectives]") {
  ProcessGroup& g = init_process_group();
  if (g.backend() != "mpi") return;
  const int N = g.size(), r = g.rank();
  // rank q's element i: magnitudes spread over 2^-20 .. 2^20, so sums round differently by order
  auto v = [](int q, int64_t i) {
    const double e = static_cast<double>(((q * 7 + i * 13) % 41) - 20);
    return static_cast<float>(std::ldexp(1.0 + 0.1234567 * q + 0.0007 * (i % 101), static_cast<int>(e)));
  };
  auto ring_sum = [&](int c, int64_t element) {  // chunk c's order: c+1, c+2, ..., c
    float s = v((c + 1) % N, element);
    for (int k = 2; k <= N; ++k) s = s + v((c + k) % N, element);
    return s;
  };
  const int64_t S = 257;
  Tensor in = Tensor::empty({N * S}, DType::f32, Category::comm), out = Tensor::empty({S}, DType::f32, Category::comm);
  for (int64_t i = 0; i < N * S; ++i) in.data<float>()[i] = v(r, i);
  g.reduce_scatter(in, out);
  for (int64_t i = 0; i < S; ++i) REQUIRE(out.data<float>()[i] == ring_sum(r, r * S + i));

  // all-reduce: the same order per chunk, chunks of n / N (the first n mod N one longer); n = 3
  // leaves an empty chunk when N = 4.
  for (int64_t n : {int64_t{1003}, int64_t{3}}) {
    INFO("n = " << n);
    Tensor x = Tensor::empty({n}, DType::f32, Category::comm);
    for (int64_t i = 0; i < n; ++i) x.data<float>()[i] = v(r, i);
    g.all_reduce(x);
    const int64_t base = n / N, extra = n % N;
    for (int c = 0, i = 0; c < N; ++c)
      for (int64_t j = 0; j < base + (c < extra ? 1 : 0); ++j, ++i) REQUIRE(x.data<float>()[i] == ring_sum(c, i));
  }
}

#ifdef OPEN_MPI
// The communication thread's waits yield the core to the compute threads (dist/mpi_process_group.cpp):
// OpenMPI's own setting read back through its tool interface, so a world made without it fails here.
TEST_CASE("waiting ranks yield their core: OpenMPI's mpi_yield_when_idle is on", "[collectives]") {
  init_process_group();
  if (const char* user = std::getenv("OMPI_MCA_mpi_yield_when_idle"); user && std::string(user) != "1") {
    WARN("the user chose mpi_yield_when_idle=" << user << ": the backend keeps it, nothing to check");
    return;
  }
  int provided = 0;
  REQUIRE(MPI_T_init_thread(MPI_THREAD_SERIALIZED, &provided) == MPI_SUCCESS);
  int index = -1;
  REQUIRE(MPI_T_cvar_get_index("mpi_yield_when_idle", &index) == MPI_SUCCESS);
  MPI_T_cvar_handle handle;
  int count = 0;
  REQUIRE(MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS);
  int on = 0;  // OpenMPI 4.1 writes this bool as one byte; zeroed first, the int reads 1 (little-endian)
  REQUIRE(MPI_T_cvar_read(handle, &on) == MPI_SUCCESS);
  MPI_T_cvar_handle_free(&handle);
  MPI_T_finalize();
  CHECK(on == 1);
}
#endif
