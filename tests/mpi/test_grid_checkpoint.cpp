// defines: 2 Catch2 test cases tagged [tensor_parallel_zero]
//
// Weights into and out of a grid (docs/parallel.md, "Checkpoints of a grid"): a checkpoint saved on
// one grid resumed on another and consolidated into the whole model, and pretrained weights cut
// into each rank's slices as they are read. Against one rank's run of the same global batch, as
// tests/mpi/test_grid_training.cpp compares training on a grid.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "dist/process_group.h"
#include "formats/hf_weights.h"  // defines: save_hf_weights
#include "models/init.h"
#include "tests/mpi/model_compare.h"  // defines: worst_relative
#include "tests/mpi/small_run.h"      // defines: small_run, trace, max_rel
#include "train/trainer.h"

using namespace zt;
using zt::test::max_rel;
using zt::test::trace;
using zt::test::worst_relative;

// A run saved at step 10 on one grid and resumed on another continues as the uninterrupted run
// does: on the same grid bit for bit (the project's resume guarantee), on another (tp 2 -> 1,
// 1 -> 2, and 2 -> 4 on 4 ranks; llama-nano's shared kv heads 4 -> 1) within the grids' 1e-5 of one rank's run, each slice recut from
// the whole tensors' places (zero/checkpoint_files.h). The checkpoint, consolidated
// (load_trained_model: the whole model, as zt-ckpt consolidate writes it), holds every rank's
// shard at its places, bit for bit, and the one-rank run's weights.
TEST_CASE("tensor parallel checkpoints: resume on the same or another grid, consolidate", "[tensor_parallel_zero]") {
  namespace fs = std::filesystem;
  ProcessGroup& g = init_process_group();
  const int N = g.size();
  if (N % 2 != 0) return;
  const std::string root = "/tmp/zt-tp-ckpt-np" + std::to_string(N);
  if (g.rank() == 0) fs::remove_all(root);
  g.barrier();
  const std::string model = "gpt2-nano";
  SingleProcessGroup one;
  Trainer single(zt::test::small_run(model, 1, 0), one);  // one rank's run, its model kept
  std::vector<double> ref;
  while (!single.done()) ref.push_back(single.step().loss);
  auto grid_run = [&](int tp, const std::string& dir, bool resume) {
    RunConfig c = zt::test::small_run(model, N / tp, 3);  // 20 steps
    c.tensor_parallel_size = tp;
    c.ckpt_dir = dir;
    c.ckpt_interval = 10;
    c.resume = resume;
    return c;
  };
  auto first_half = [&](const RunConfig& c) {  // 10 steps, saved at step 10
    Trainer t(c, g);
    for (int i = 0; i < 10; ++i) t.step();
  };
  auto copy_dir = [&](const std::string& from, const std::string& to) {
    if (g.rank() == 0) fs::copy(from, to, fs::copy_options::recursive);
    g.barrier();
  };
  first_half(grid_run(2, root + "/tp2", false));
  copy_dir(root + "/tp2", root + "/tp2-to-1");
  if (N == 4) copy_dir(root + "/tp2", root + "/tp2-to-4");
  first_half(grid_run(1, root + "/tp1", false));
  const std::vector<double> whole = trace(grid_run(2, "", false), g).loss;  // uninterrupted, tp 2
  struct Resume {
    int tp;
    std::string dir;
  };
  std::vector<Resume> resumes = {{2, root + "/tp2"}, {1, root + "/tp2-to-1"}, {2, root + "/tp1"}};
  if (N == 4) resumes.push_back({4, root + "/tp2-to-4"});
  for (const Resume& r : resumes) {
    Trainer t(grid_run(r.tp, r.dir, true), g);
    REQUIRE(t.step_count() == 10);
    std::vector<double> got;
    while (!t.done()) got.push_back(t.step().loss);  // saves step 20 at the end
    const std::vector<double> want(ref.begin() + 10, ref.end());
    INFO("resumed from " << r.dir << " on tp " << r.tp << " x dp " << N / r.tp << ": losses within "
                         << max_rel(got, want) << " of one rank's");
    CHECK(max_rel(got, want) <= 1e-5);
    if (r.dir == root + "/tp2")
      CHECK(got == std::vector<double>(whole.begin() + 10, whole.end()));  // the same grid: bit for bit
    // the consolidated checkpoint: every element of this rank's shard at its place in the whole
    // model, bit for bit; and the one-rank run's weights after 20 steps, within 1e-3 of each
    // tensor's largest value (Adam's normalized steps turn float32 reorderings in near-zero
    // gradients into differences up to a step's size: measured up to 2.1e-4; a misplaced slice is O(1))
    std::unique_ptr<Model> consolidated = load_trained_model(r.dir);
    const std::vector<CheckpointShard> mine = t.engine().shards();
    const int n = t.data_parallel_size(), d = t.grid() ? t.grid()->dp_rank : g.rank();
    std::vector<Unit*> whole_units = consolidated->units();
    int64_t mismatched = 0;
    for (size_t u = 0; u < mine.size(); ++u) {
      const std::vector<double> shard = mine[u].tensors.at(0).second.to_vector();  // "param"
      REQUIRE(mine[u].tensors.at(0).first == "param");
      const int64_t S = mine[u].padded_numel / n;
      const ParamSet& wp = whole_units[u]->params();
      for (size_t i = 0; i < mine[u].params.size(); ++i) {
        const ParamInfo& p = mine[u].params[i];
        const std::vector<double> full = wp.value(static_cast<int>(i)).to_vector();
        for (int64_t e = std::max(d * S, p.offset); e < std::min((d + 1) * S, p.offset + p.numel); ++e)
          mismatched += shard[static_cast<size_t>(e - d * S)] !=
                        full[static_cast<size_t>(p.slice.full_index(p.shape, e - p.offset))];
      }
    }
    CHECK(mismatched == 0);
    const double w = worst_relative(single.model(), *consolidated, true);
    INFO("consolidated weights within " << w << " of one rank's");
    CHECK(w <= 1e-3);
  }
  if (N != 4) return;
  // llama-nano on tp 4: its 2 kv heads each held by 2 ranks (a slice's "replicas"), saved at step
  // 10, resumed on tp 4 and on tp 1 (each kv head read from the file of its first rank); the
  // consolidated checkpoint holds the one-rank run's weights within the bound above.
  Trainer llama_one(zt::test::small_run("llama-nano", 1, 0), one);
  std::vector<double> llama_ref;
  while (!llama_one.done()) llama_ref.push_back(llama_one.step().loss);
  auto llama_run = [&](int tp, const std::string& dir, bool resume) {
    RunConfig c = zt::test::small_run("llama-nano", N / tp, 3);
    c.tensor_parallel_size = tp;
    c.ckpt_dir = dir;
    c.ckpt_interval = 10;
    c.resume = resume;
    return c;
  };
  first_half(llama_run(4, root + "/llama-tp4", false));
  copy_dir(root + "/llama-tp4", root + "/llama-tp4-to-1");
  for (const Resume& r : {Resume{4, root + "/llama-tp4"}, Resume{1, root + "/llama-tp4-to-1"}}) {
    Trainer t(llama_run(r.tp, r.dir, true), g);
    REQUIRE(t.step_count() == 10);
    std::vector<double> got;
    while (!t.done()) got.push_back(t.step().loss);
    const std::vector<double> want(llama_ref.begin() + 10, llama_ref.end());
    INFO("llama-nano saved on tp 4 (kv heads shared), resumed on tp " << r.tp << ": losses within "
                                                                      << max_rel(got, want));
    CHECK(max_rel(got, want) <= 1e-5);
    const double w = worst_relative(llama_one.model(), *load_trained_model(r.dir), true);
    INFO("consolidated weights within " << w << " of one rank's");
    CHECK(w <= 1e-3);
  }
}

// Pretrained weights (a Hugging Face directory) cut into each rank's slices as they are read
// (parallel/sliced_params.h): 20 steps from them equal one rank's 20 steps from the same files.
TEST_CASE("tensor parallel from pretrained weights: --init-from cut into slices", "[tensor_parallel_zero]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size();
  if (N % 2 != 0) return;
  for (const char* model : {"gpt2-nano", "llama-nano"}) {
    const std::string dir = "/tmp/zt-tp-hf-np" + std::to_string(N) + "-" + model;
    if (g.rank() == 0) {
      std::filesystem::remove_all(dir);
      std::unique_ptr<Model> m = make_model(model_config(model));
      Rng rng(99);  // not the runs' seed: the values must come from the files
      init_model(*m, rng);
      save_hf_weights(dir, *m);
    }
    g.barrier();
    SingleProcessGroup one;
    RunConfig c1 = zt::test::small_run(model, 1, 0);
    c1.init_from = dir;
    const std::vector<double> ref = trace(c1, one).loss;
    RunConfig c = zt::test::small_run(model, N / 2, 3);
    c.init_from = dir;
    c.tensor_parallel_size = 2;
    const std::vector<double> got = trace(c, g).loss;
    INFO(model << " from " << dir << ", tp 2 x dp " << N / 2 << ": losses within " << max_rel(got, ref));
    CHECK(max_rel(got, ref) <= 1e-5);
  }
}
