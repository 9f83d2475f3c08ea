#include "models/init.h"

#include "models/gpt2.h"
#include "models/llama.h"

namespace zt {

std::unique_ptr<Model> make_model(const ModelConfig& cfg, const ModelOptions& opt) {
  cfg.validate();
  if (cfg.family == "gpt2") return std::make_unique<GPT2>(cfg, opt);
  if (cfg.family == "llama") return std::make_unique<Llama>(cfg, opt);
  ZT_THROW("make_model: unknown family \"", cfg.family, "\" (expected \"gpt2\" or \"llama\")");
}

void init_model(Model& m, Rng& rng) {
  if (auto* g = dynamic_cast<GPT2*>(&m)) return g->init(rng);
  if (auto* l = dynamic_cast<Llama*>(&m)) return l->init(rng);
  ZT_THROW("init_model: model of family \"", m.family(), "\" is neither GPT2 nor Llama");
}

void init_normal_rows(Tensor w, double std, Rng& rng, int64_t rows) {
  ZT_CHECK(w.dim() >= 1, "init_normal_rows: needs at least one dimension, got ", w.str());
  const int64_t R = w.size(0);
  if (rows < 0) rows = R;
  ZT_CHECK(rows <= R, "init_normal_rows: ", rows, " rows of ", w.str());
  Tensor head = w.slice(0, 0, rows);
  rng.fill_normal(head, 0.0, std);
  if (rows < R) w.slice(0, rows, R).zero_();
}

}  // namespace zt
