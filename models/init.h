// defines: make_model (a Model from a config), init_model (its deterministic initialization),
//          init_normal_rows (the fill both families use).
#pragma once
#include <memory>

#include "core/rng.h"
#include "models/model_config.h"
#include "nn/model.h"

namespace zt {

// A GPT2 or a Llama by cfg.family (validated; throws zt::Error for an unknown family).
std::unique_ptr<Model> make_model(const ModelConfig& cfg, const ModelOptions& opt = {});

// GPT2::init or Llama::init, whichever `m` is (throws for another Model).
void init_model(Model& m, Rng& rng);

// w (R, ...): rows [0, rows) ~ N(0, std) drawn in row-major order from rng, rows [rows, R) zero
// (rows < 0: all rows). The zero rows are the padded vocabulary: no token ever reads them.
void init_normal_rows(Tensor w, double std, Rng& rng, int64_t rows = -1);

}  // namespace zt
