// defines: MemoryTier, Footprint, model_state — what the ZeRO policies keep of one unit at rest, by
//          tier and category: the one question every policy answers, summed by the engine's
//          memory report (zero/engine.h's MemoryReport::model_state), the host tier's check
//          before setup (train/trainer.cpp) and zt-estimate --params.
//
// A unit of P elements on N ranks (S = P / N). Each policy answers for its part, next to the code
// that allocates it:
//
//   policy                            answers                                   where
//   the stage                         what is sharded (StageKeeps)              zero/stage.h (stage_keeps)
//   the precision                     bytes per working element; the master     zero/precision.h
//   the parameter tier                where stage 3's parameter shard lives     zero/tiers.h
//   the optimizer placement           optimizer state, the gradient shard's     zero/shard_optimizer.h
//                                     buffer (device, or the host's)
//   activation offload                the checkpoints in the host tier          zero/activation_offload.h
//                                     (per checkpointed unit; the estimator)
//
// model_state() puts the answers together; nothing else writes down what a stage keeps.
#pragma once
#include <array>
#include <cstdint>

#include "core/memory.h"
#include "zero/engine_config.h"

namespace zt {

enum class MemoryTier : int { device = 0, host = 1, nvme = 2 };
inline constexpr int kNumMemoryTiers = 3;

// Bytes times N, per tier and category: exact for a model's units (P = N * S) and for a bare
// parameter count that N does not divide (the paper's tables). bytes() divides, rounding up.
struct Footprint {
  std::array<std::array<int64_t, kNumCategories>, kNumMemoryTiers> x_n{};
  void add(MemoryTier t, Category c, int64_t bytes_x_n) { x_n[static_cast<int>(t)][static_cast<int>(c)] += bytes_x_n; }
  int64_t at_x_n(MemoryTier t, Category c) const { return x_n[static_cast<int>(t)][static_cast<int>(c)]; }
  int64_t bytes(MemoryTier t, Category c, int64_t N) const { return (at_x_n(t, c) + N - 1) / N; }
  Footprint& operator+=(const Footprint& o);
};

struct StageKeeps;

// The model states one rank keeps of a unit of P elements (or of a bare parameter count P) on N
// ranks, by the stage's answer `k`, the precision `p`, the offload tiers of `z` and the optimizer `o`.
Footprint model_state(int64_t P, int64_t N, const StageKeeps& k, Precision p, const ZeroOptimization& z,
                      const OptimizerConfig& o);

}  // namespace zt
