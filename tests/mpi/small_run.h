// defines: small_run, losses, Trace, trace, max_rel, dry_run_of — the small training runs the
//          multi-rank ZeRO tests compare (tests/mpi/test_zero.cpp, tests/mpi/test_zeropp.cpp, the
//          grid tests), how they compare them, and their dry runs (tests/mpi/test_dry_run.cpp,
//          tests/mpi/test_zeropp.cpp, tests/mpi/test_offload.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <omp.h>

#include "train/dry_run.h"
#include "train/trainer.h"

namespace zt::test {

// `model` at ZeRO `stage`, global batch 8 x 32 tokens split over world_size ranks, 20 steps, with
// buckets small enough that every unit is reduced and gathered in several chunks.
inline RunConfig small_run(const std::string& model, int world_size, int stage) {
  RunConfig c;
  c.model = model;
  c.train_data = std::string(ZT_SOURCE_DIR) + "/data/corpus/train.txt";
  c.engine.train_micro_batch_size_per_gpu = 8 / world_size;
  c.seq_len = 32;
  c.steps = 20;
  c.engine.optimizer.lr = 3e-3;
  c.engine.scheduler = SchedulerConfig::defaults(SchedulerType::cosine);  // llm.c\'s, floor 0.1
  c.engine.scheduler.warmup_num_steps = 2;
  c.engine.gradient_clipping = 1.0;  // the norm is computed across shards: part of what must agree
  c.engine.zero.stage = stage;
  c.engine.zero.overlap_comm = true;
  c.engine.zero.reduce_bucket_size = 1000;  // several chunks per unit: the packing paths
  c.engine.zero.allgather_bucket_size = 1500;
  c.engine.zero.stage3_param_persistence_threshold = 100;  // GPT-2's head (ln_f, 64 values) stays gathered
  c.engine.zero.stage3_prefetch_bucket_size = 20000;
  c.engine.zero.stage3_max_live_parameters = 100000;
  c.engine.zero.stage3_max_reuse_distance = 0;
  return c;
}

// Every step's loss of a run on g.
inline std::vector<double> losses(const RunConfig& c, ProcessGroup& g) {
  Trainer t(c, g);
  std::vector<double> out;
  while (!t.done()) out.push_back(t.step().loss);
  return out;
}

// Every step's loss and gradient norm (before clipping) of a run on g.
struct Trace {
  std::vector<double> loss, norm;
};
inline Trace trace(const RunConfig& c, ProcessGroup& g) {
  Trainer t(c, g);
  Trace out;
  while (!t.done()) {
    const StepStats s = t.step();
    out.loss.push_back(s.loss);
    out.norm.push_back(s.grad_norm);
  }
  return out;
}

// The largest |got - ref| / |ref| over the steps (the two runs the same length).
inline double max_rel(const std::vector<double>& got, const std::vector<double>& ref) {
  REQUIRE(got.size() == ref.size());
  double d = 0;
  for (size_t k = 0; k < ref.size(); ++k) d = std::max(d, std::abs(got[k] - ref[k]) / std::abs(ref[k]));
  return d;
}

// The run `c` of `model` (its ModelConfig; default: c.model's), as this rank of g plays it on the
// meta device (train/dry_run.h): the job's world, its nodes, this rank, its threads, `steps` steps.
inline DryRun dry_run_of(const RunConfig& c, ProcessGroup& g, int steps, const ModelConfig* model = nullptr) {
  DryRunRequest r = dry_run_of_rank(c, model ? *model : model_config(c.model), g, omp_get_max_threads());
  r.steps = steps;
  return dry_run(r);
}

}  // namespace zt::test
