// defines: make_model (a Model from a config), ModelInit (its deterministic initialization,
//          addressable: any range of any unit's flat buffer drawn alone), init_model (the whole
//          model at once).
//
// The initialization is one stream of a seeded Rng (core/rng.h), drawn in a fixed order: units
// forward, parameters in layout order, elements in row-major order, two draws per Box-Muller
// pair (Rng::fill_normal). Because the order is fixed, the draws before any element are a count
// known from the layout alone, and Rng::jump() reaches them without drawing: rank r of N creates
// elements [r*S, (r+1)*S) of each unit with the values a whole-model initialization would give
// them, bit for bit (tests/test_partitioned_init.cpp). That is ZeRO's partitioned construction
// (DeepSpeed's zero.Init): no rank ever holds the whole model. A tensor-parallel model's slices
// (nn/param_set.h's TensorSlice) take the values of their places in the whole tensors, with the
// same jumps: a model split over tp ranks starts from the one-rank model's values.
#pragma once
#include <memory>
#include <vector>

#include "core/rng.h"
#include "models/init_rule.h"
#include "models/model_config.h"
#include "nn/model.h"
#include "nn/param_source.h"

namespace zt {

// A GPT2 or a Llama by cfg.family (validated; throws zt::Error for an unknown family).
std::unique_ptr<Model> make_model(const ModelConfig& cfg, const ModelOptions& opt = {});

class ModelInit final : public ParamSource {
 public:
  // The initialization of `m` (a GPT2 or Llama: its layout; it need not hold bytes) from rng's
  // current state. rng is advanced past every draw of the whole model, as if the whole model
  // had been drawn.
  ModelInit(Model& m, Rng& rng);
  // Writes dst through float32 (float64 for an f64 dst) chunks of kFillChunk elements, each a
  // Category::workspace tensor on the default device while it is copied (a dry run counts the
  // same staging: train/dry_run.cpp).
  void fill(int unit, int64_t lo, const Tensor& dst) override;
  static constexpr int64_t kFillChunk = int64_t{1} << 14;

 private:
  struct Param {
    int64_t offset = 0, numel = 0;  // in the unit's flat buffer
    Shape shape;                    // this rank's; a slice of the whole tensor under tensor parallelism
    TensorSlice slice;
    int64_t drawn = 0;              // normal: elements drawn (the first rows); the rest are zero
    InitRule rule;
    uint64_t draw0 = 0;             // next_u32() calls of the stream before this parameter's first
  };
  void draw(int unit, int64_t a, int64_t b, double* out) const;  // elements [a, b) of a unit, in float64
  void draw_normal(const Param& p, int64_t g0, int64_t g1, double* out) const;
  std::vector<std::vector<Param>> units_;
  std::vector<int64_t> padded_;  // each unit's padded flat size
  uint64_t start_ = 0;           // the Rng state at draw 0
};

// Every unit's flat buffer (materialized) := ModelInit(m, rng)'s values.
void init_model(Model& m, Rng& rng);

}  // namespace zt
