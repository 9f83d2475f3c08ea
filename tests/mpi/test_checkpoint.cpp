// defines: 1 Catch2 test case tagged [mpi_checkpoint]; helpers: value, shards, shared_dir
//
// ZeRO sharded checkpoints under real MPI ranks (zero/checkpoint.h): save on N ranks and load on
// 1 (rank 0 alone, resharding) and on N; save on 1 and load on N; a corrupted rank file makes
// every rank's load fail. Run as `mpirun -np N zt_mpi_tests "[mpi_checkpoint]"`.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/rng.h"
#include "tests/bitwise.h"
#include "zero/checkpoint.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kTensors = {"param", "exp_avg", "exp_avg_sq"};
const std::vector<std::pair<std::string, int64_t>> kUnits = {{"embed", 1003}, {"h.0", 37}, {"head", 5}};

// Element e of tensor t of unit u: a fixed pseudo-random float (the same on every rank).
float value(size_t u, size_t t, int64_t e) {
  Rng rng((u * 4 + t) * 1000003 + static_cast<uint64_t>(e) + 1);
  return rng.normal();
}

std::vector<CheckpointShard> shards(int N, int r, bool zeros) {
  std::vector<CheckpointShard> out;
  for (size_t u = 0; u < kUnits.size(); ++u) {
    const int64_t P = (kUnits[u].second + 16 * N - 1) / (16 * N) * (16 * N), S = P / N;
    CheckpointShard s{kUnits[u].first, kUnits[u].second, P, {}, {}};
    for (size_t t = 0; t < kTensors.size(); ++t) {
      Tensor x = Tensor::full({S}, zeros ? 42.0 : 0.0, DType::f32, Category::optim);
      if (!zeros)
        for (int64_t i = 0; i < S; ++i)
          if (r * S + i < kUnits[u].second) x.data<float>()[i] = value(u, t, r * S + i);
      s.tensors.emplace_back(kTensors[t], x);
    }
    out.push_back(std::move(s));
  }
  return out;
}

using test::bitwise_equal;

// A scratch directory every rank sees: rank 0's pid names it.
fs::path shared_dir(ProcessGroup& g, const std::string& tag) {
  Tensor pid = Tensor::full({1}, static_cast<double>(::getpid()), DType::f64);
  g.broadcast(pid, 0);
  return fs::temp_directory_path() /
         ("zt_mpi_" + tag + "_" + std::to_string(static_cast<int64_t>(pid.item())));
}

}  // namespace

TEST_CASE("mpi checkpoint: save on N ranks, load on 1 and on N, save on 1, load on N", "[mpi_checkpoint]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size(), r = g.rank();
  const fs::path root = shared_dir(g, "ckpt");
  if (r == 0) fs::remove_all(root);
  g.barrier();

  const std::string dir = (root / "n").string();
  save_sharded_checkpoint(g, dir, 4, {{"world", N}}, shards(N, r, false));
  if (r == 0) {
    SingleProcessGroup one;
    std::vector<CheckpointShard> all = shards(1, 0, true);
    CHECK(load_sharded_checkpoint(one, dir, all)["world"] == N);
    CHECK(bitwise_equal(all, shards(1, 0, false)));
  }
  std::vector<CheckpointShard> mine = shards(N, r, true);
  load_sharded_checkpoint(g, dir, mine);
  CHECK(bitwise_equal(mine, shards(N, r, false)));

  const std::string dir1 = (root / "one").string();
  if (r == 0) {
    SingleProcessGroup one;
    save_sharded_checkpoint(one, dir1, 8, {}, shards(1, 0, false));
  }
  g.barrier();
  mine = shards(N, r, true);
  CHECK(load_sharded_checkpoint(g, dir1, mine)["step"] == 8);
  CHECK(bitwise_equal(mine, shards(N, r, false)));

  // The last rank's file corrupted: every rank's load fails (none is left waiting).
  g.barrier();
  if (r == 0) {
    const fs::path f = fs::path(dir) / "step_00000004" / ("rank_0000" + std::to_string(N - 1) + ".bin");
    std::fstream s(f, std::ios::in | std::ios::out | std::ios::binary);
    s.seekp(17);
    s.put('\x7f');
  }
  g.barrier();
  mine = shards(N, r, true);
  if (r == N - 1 || N == 1)
    CHECK_THROWS_WITH(load_sharded_checkpoint(g, dir, mine), Catch::Contains("is corrupted"));
  else
    CHECK_THROWS_WITH(load_sharded_checkpoint(g, dir, mine),
                      Catch::Contains("failed on rank " + std::to_string(N - 1) + ": ") && Catch::Contains("is corrupted"));
  g.barrier();
  if (r == 0) fs::remove_all(root);
}
