// defines: make_model, ModelInit (constructor, fill), init_model (models/init.h); file-local: rule_of
#include "models/init.h"

#include <cmath>

#include "models/gpt2.h"
#include "models/llama.h"

namespace zt {

std::unique_ptr<Model> make_model(const ModelConfig& cfg, const ModelOptions& opt) {
  cfg.validate();
  if (cfg.family == "gpt2") return std::make_unique<GPT2>(cfg, opt);
  if (cfg.family == "llama") return std::make_unique<Llama>(cfg, opt);
  ZT_THROW("make_model: unknown family \"", cfg.family, "\" (expected \"gpt2\" or \"llama\")");
}

namespace {
InitRule rule_of(Model& m, const std::string& name) {
  if (auto* g = dynamic_cast<GPT2*>(&m)) return g->init_rule(name);
  if (auto* l = dynamic_cast<Llama*>(&m)) return l->init_rule(name);
  ZT_THROW("ModelInit: model of family \"", m.family(), "\" is neither GPT2 nor Llama");
}
}  // namespace

ModelInit::ModelInit(Model& m, Rng& rng) : start_(rng.state()) {
  uint64_t draws = 0;
  for (Unit* u : m.units()) {
    const ParamSet& ps = u->params();
    std::vector<Param> params;
    for (const ParamInfo& info : ps.infos()) {
      Param p;
      p.offset = info.offset;
      p.numel = info.numel;
      p.rule = rule_of(m, info.name);
      if (p.rule.kind == InitRule::normal) {
        const int64_t R = info.shape.empty() ? 1 : info.shape[0];
        const int64_t rows = p.rule.rows < 0 ? R : p.rule.rows;
        ZT_CHECK(rows <= R, "ModelInit: ", rows, " rows of '", info.name, "' ", shape_str(info.shape));
        p.drawn = rows * (R == 0 ? 0 : info.numel / R);
        p.draw0 = draws;
        draws += 2 * static_cast<uint64_t>((p.drawn + 1) / 2);  // Box-Muller: two draws per pair
      }
      params.push_back(p);
    }
    units_.push_back(std::move(params));
    padded_.push_back(ps.padded_numel());
  }
  rng.jump(draws);
}

// Values are made in float64 and converted as Rng::fill_normal converts them (float64 ->
// float32 -> the destination's dtype; float64 destinations directly), a chunk at a time.
void ModelInit::fill(int unit, int64_t lo, const Tensor& dst) {
  ZT_CHECK(unit >= 0 && unit < static_cast<int>(units_.size()), "ModelInit: no unit ", unit);
  const int64_t n = dst.numel(), hi = lo + n;
  ZT_CHECK(lo >= 0 && hi <= padded_[unit], "ModelInit: elements [", lo, ", ", hi, ") of unit ", unit, " of ",
           padded_[unit]);
  const DType via = dst.dtype() == DType::f64 ? DType::f64 : DType::f32;
  constexpr int64_t kChunk = 1 << 14;
  std::vector<double> v;
  v.reserve(kChunk);
  int64_t written = 0;  // elements of dst done
  auto flush = [&] {
    if (v.empty()) return;
    dst.flat_view(written, {static_cast<int64_t>(v.size())})
        .copy_(Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, via, Category::workspace));
    written += static_cast<int64_t>(v.size());
    v.clear();
  };
  auto push = [&](double x) {
    v.push_back(x);
    if (static_cast<int64_t>(v.size()) == kChunk) flush();
  };

  int64_t pos = lo;
  for (const Param& p : units_[unit]) {
    const int64_t a = std::max(pos, p.offset), b = std::min(hi, p.offset + p.numel);
    if (a >= b) continue;  // (parameters are contiguous, ParamSet::add: here pos == a)
    if (p.rule.kind == InitRule::constant) {
      for (; pos < b; ++pos) push(p.rule.value);
      continue;
    }
    // normal: element k of the parameter is the cos (k even) or sin (k odd) sample of pair k / 2,
    // whose two draws are at p.draw0 + 2 * (k / 2) of the stream.
    const int64_t k0 = a - p.offset, k1 = std::min(b - p.offset, p.drawn);
    Rng rng;
    rng.set_state(start_);
    rng.jump(p.draw0 + 2 * static_cast<uint64_t>(k0 / 2));
    const double mean = 0.0, std = p.rule.value;
    double r = 0, u2 = 0;
    for (int64_t k = k0; k < k1; ++k) {
      if (k == k0 || k % 2 == 0) {  // the pair's draws, as Rng::fill_normal makes them
        const double u1 = (static_cast<double>(rng.next_u32() >> 8) + 1.0) / 16777217.0;
        u2 = static_cast<double>(rng.next_u32() >> 8) / 16777216.0;
        r = std::sqrt(-2.0 * std::log(u1));
      }
      push(k % 2 == 0 ? mean + std * r * std::cos(2.0 * M_PI * u2) : mean + std * r * std::sin(2.0 * M_PI * u2));
    }
    pos = p.offset + std::max(k0, k1);
    for (; pos < b; ++pos) push(0.0);  // rows past the real vocabulary
  }
  for (; pos < hi; ++pos) push(0.0);  // the unit's padding
  flush();
}

void init_model(Model& m, Rng& rng) {
  ModelInit init(m, rng);
  std::vector<Unit*> units = m.units();
  for (size_t i = 0; i < units.size(); ++i) {
    const Tensor& flat = units[i]->params().flat();
    ZT_CHECK(flat.defined() && flat.storage()->resident(), "init_model: unit '", units[i]->name(),
             "' holds no bytes (built with allocate = false or materialize = false)");
    init.fill(static_cast<int>(i), 0, flat);
  }
}

}  // namespace zt
