// defines: zt::test::simple_profile, zt::test::nano_request — what the step simulator's tests
//          (tests/test_step_time.cpp, tests/test_compare.cpp) run on: a profile of round rates and
//          gpt2-nano's step.
#pragma once
#include "models/model_config.h"
#include "train/device_profile.h"
#include "train/dry_run.h"
#include "zero/engine_config.h"

namespace zt::test {

// Every class (device and host) costs flops at 1 GFLOP/s or bytes at 1 GB/s; both links; compute
// at `pace` beside a collective.
inline DeviceProfile simple_profile(double pace = 1.0) {
  DeviceProfile p;
  p.name = "test";
  for (int c = 0; c < kNumOpClasses; ++c) p.classes[c] = p.host_classes[c] = ClassRate{1e9, 1e9, 0};
  p.intra_node = LinkCost{1e-5, 1e9};
  p.inter_node = LinkCost{1e-4, 1e8};
  p.compute_pace = pace;
  return p;
}

// gpt2-nano at B 2 x T 16 on `world` ranks over `nodes` nodes, at `stage` with DeepSpeed's
// overlap_comm for it, one thread.
inline DryRunRequest nano_request(int world, int stage, int nodes = 1) {
  DryRunRequest r;
  r.model = model_config("gpt2-nano");
  r.run.model = "gpt2-nano";
  r.run.engine.zero.stage = stage;
  r.run.engine.zero.overlap_comm = default_overlap_comm(stage);
  r.run.engine.train_micro_batch_size_per_gpu = 2;
  r.run.seq_len = 16;
  r.world_size = world;
  r.nodes = nodes;
  r.threads = 1;
  return r;
}

}  // namespace zt::test
