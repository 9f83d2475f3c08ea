// defines: main (bench_collectives)
//
// bench_collectives — one collective kind, repeated, on float32 buffers: how long it takes and how
// many bytes the ring convention says each rank moved (dist/process_group.h). Run under
// scripts/cluster.sh, the box's eth0 counters then say what really crossed each node's link;
// bench/collectives_wire.sh does that for every kind and layout and prints both side by side.
//
//   mpirun -np N bench_collectives --kind reduce_scatter --elements 4194304 --iters 10
//
// --elements is the full buffer (the reduce-scatter's input, the all-gather's output, the
// all-reduce's buffer), rounded down to a multiple of N. --iters 0 runs only the setup (MPI's
// wire-up, the process group's topology exchange): the baseline a wire measurement subtracts.
// Rank 0 prints one line: kind, N, elements, iterations, median ms per call, ring bytes per rank.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_util.h"    // defines: bench::median
#include "dist/process_group.h"  // defines: ProcessGroup, Collective, init_process_group

using namespace zt;

int main(int argc, char** argv) {
  CLI::App app{"bench_collectives: one collective kind repeated, timed and counted"};
  std::string kind = "reduce_scatter";
  int64_t elements = int64_t{1} << 22;
  int iters = 10;
  app.add_option("--kind", kind, "reduce_scatter | all_gather | all_reduce")
      ->check(CLI::IsMember({"reduce_scatter", "all_gather", "all_reduce"}));
  app.add_option("--elements", elements, "float32 elements of the full buffer")->check(CLI::PositiveNumber);
  app.add_option("--iters", iters, "calls to time (0: the setup alone)")->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  ProcessGroup& g = init_process_group();
  const int N = g.size(), r = g.rank();
  const int64_t S = elements / N, n = S * N;  // S: one rank's chunk
  Tensor full = Tensor::empty({n}, DType::f32, Category::comm), chunk = Tensor::empty({S}, DType::f32, Category::comm);
  for (int64_t i = 0; i < n; ++i) full.data<float>()[i] = static_cast<float>((r + 1) * (i % 251));
  for (int64_t i = 0; i < S; ++i) chunk.data<float>()[i] = static_cast<float>(r + i % 7);

  g.barrier();
  g.reset_counters();
  std::vector<double> ms;
  for (int it = 0; it < iters; ++it) {
    const auto t0 = std::chrono::steady_clock::now();
    if (kind == "reduce_scatter") g.reduce_scatter(full, chunk);
    else if (kind == "all_gather") g.all_gather(chunk, full);
    else g.all_reduce(full);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const CommCounters c = g.counters();
  const int64_t per_call = iters ? c.total() / iters : 0;
  g.barrier();
  if (r == 0)
    std::printf("kind %s ranks %d elements %lld iters %d ms_per_call %.3f ring_bytes_per_rank_per_call %lld\n",
                kind.c_str(), N, static_cast<long long>(n), iters, bench::median(ms), static_cast<long long>(per_call));
  return 0;
}
