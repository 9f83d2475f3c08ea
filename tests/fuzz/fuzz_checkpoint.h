// defines: write_toy_checkpoint (the fuzz_ckpt_meta fixture).
//
// The sharded-checkpoint fuzz target's fixture (tests/fuzz/fuzz_ckpt_meta.cpp), shared with
// make_seeds: a one-rank ZeRO checkpoint of a toy three-unit layout (param, exp_avg, exp_avg_sq),
// written by save_sharded_checkpoint. The target keeps its rank file and replaces meta.json with
// the fuzzed bytes; make_seeds copies the real meta.json as the seed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/process_group.h"
#include "zero/checkpoint.h"

namespace zt::fuzz {

// Writes <root>/step_00000001/{meta.json, rank_00000.bin} and <root>/latest; returns the step dir.
inline std::string write_toy_checkpoint(const std::string& root) {
  const std::vector<std::pair<std::string, int64_t>> units = {{"embed", 1000}, {"h.0", 37}, {"head", 5}};
  std::vector<CheckpointShard> shards;
  nlohmann::json layout = nlohmann::json::array();
  for (size_t u = 0; u < units.size(); ++u) {
    CheckpointShard s{units[u].first, units[u].second, units[u].second, {}, {}};
    for (const char* t : {"param", "exp_avg", "exp_avg_sq"}) {
      std::vector<double> v(static_cast<size_t>(s.numel));
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.001 * static_cast<double>(i) - static_cast<double>(u);
      s.tensors.emplace_back(t, Tensor::from_vector(v, {s.numel}, DType::f32, Category::workspace));
    }
    layout.push_back({{"name", s.unit}, {"numel", s.numel}, {"padded_numel", s.padded_numel},
                      {"params", {{{"name", s.unit + ".w"}, {"shape", {s.numel}}, {"offset", 0}, {"decay", true}}}}});
    shards.push_back(std::move(s));
  }
  SingleProcessGroup one;
  return save_sharded_checkpoint(one, root, 1, {{"model", "toy"}, {"units", layout}}, shards);
}

}  // namespace zt::fuzz
