// defines: make_model, ModelInit (constructor, draw, fill), init_model (models/init.h); file-local: rule_of
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
      p.shape = info.shape;
      p.slice = info.slice;
      if (p.rule.kind == InitRule::normal) {
        // Drawn as the whole tensor is (a tensor-parallel slice takes its elements' own draws).
        const Shape full = info.slice.full_shape(info.shape);
        const int64_t R = full.empty() ? 1 : full[0];
        const int64_t rows = p.rule.rows < 0 ? R : p.rule.rows;
        ZT_CHECK(rows <= R, "ModelInit: ", rows, " rows of '", info.name, "' ", shape_str(full));
        p.drawn = rows * (R == 0 ? 0 : shape_numel(full) / R);
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

// Elements [g0, g1) of parameter p's whole tensor (normal rule) into out[0, g1 - g0): element g is
// the cos (g even) or sin (g odd) sample of pair g / 2, whose two draws are at p.draw0 + 2 (g / 2)
// of the stream; elements past p.drawn (rows past the real vocabulary) are zero.
void ModelInit::draw_normal(const Param& p, int64_t g0, int64_t g1, double* out) const {
  const int64_t k1 = std::min(g1, p.drawn);
  Rng rng;
  rng.set_state(start_);
  rng.jump(p.draw0 + 2 * static_cast<uint64_t>(g0 / 2));
  const double mean = 0.0, std = p.rule.value;
  double r = 0, u2 = 0;
  for (int64_t k = g0; k < k1; ++k) {
    if (k == g0 || k % 2 == 0) {  // the pair's draws, as Rng::fill_normal makes them
      const double u1 = (static_cast<double>(rng.next_u32() >> 8) + 1.0) / 16777217.0;
      u2 = static_cast<double>(rng.next_u32() >> 8) / 16777216.0;
      r = std::sqrt(-2.0 * std::log(u1));
    }
    out[k - g0] = k % 2 == 0 ? mean + std * r * std::cos(2.0 * M_PI * u2) : mean + std * r * std::sin(2.0 * M_PI * u2);
  }
  for (int64_t k = std::max(g0, k1); k < g1; ++k) out[k - g0] = 0.0;
}

// Elements [a, b) of unit `unit` as float64 into out[0, b - a): a function of the positions alone
// (each normal pair's two draws reached by a jump from draw 0), so pieces can be drawn in any
// order and on any thread with the same values. A tensor-parallel slice's elements are drawn at
// their places in the whole tensor, in runs that are consecutive in both.
void ModelInit::draw(int unit, int64_t a_, int64_t b_, double* out) const {
  int64_t pos = a_;
  for (const Param& p : units_[unit]) {
    const int64_t a = std::max(pos, p.offset), b = std::min(b_, p.offset + p.numel);
    if (a >= b) continue;  // (parameters are contiguous, ParamSet::add: here pos == a)
    if (p.rule.kind == InitRule::constant) {
      for (; pos < b; ++pos) out[pos - a_] = p.rule.value;
      continue;
    }
    for (int64_t k = a - p.offset; k < b - p.offset;) {
      const int64_t len = std::min(p.slice.run_length(p.shape, k), b - p.offset - k);
      const int64_t g = p.slice.full_index(p.shape, k);
      draw_normal(p, g, g + len, out + (p.offset + k - a_));
      k += len;
    }
    pos = b;
  }
  for (; pos < b_; ++pos) out[pos - a_] = 0.0;  // the unit's padding
}

// Values are made in float64 and converted as Rng::fill_normal converts them (float64 ->
// float32 -> the destination's dtype; float64 destinations directly), a chunk of 16384 at a time
// (the only buffer it adds: 64 KiB of workspace on dst's allocator), each chunk's pieces drawn on
// every thread: a billion-parameter model's initialization is the cores' work, not one core's.
void ModelInit::fill(int unit, int64_t lo, const Tensor& dst) {
  ZT_CHECK(unit >= 0 && unit < static_cast<int>(units_.size()), "ModelInit: no unit ", unit);
  const int64_t n = dst.numel(), hi = lo + n;
  ZT_CHECK(lo >= 0 && hi <= padded_[unit], "ModelInit: elements [", lo, ", ", hi, ") of unit ", unit, " of ",
           padded_[unit]);
  const DType via = dst.dtype() == DType::f64 ? DType::f64 : DType::f32;
  constexpr int64_t kChunk = ModelInit::kFillChunk, kPiece = 1 << 10;
  std::vector<double> v;
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t len = std::min(kChunk, n - c);
    v.resize(static_cast<size_t>(len));
    const int64_t pieces = (len + kPiece - 1) / kPiece;
#pragma omp parallel for schedule(static) if (pieces > 1)
    for (int64_t q = 0; q < pieces; ++q)
      draw(unit, lo + c + q * kPiece, lo + c + std::min(len, (q + 1) * kPiece), v.data() + q * kPiece);
    dst.flat_view(c, {len}).copy_(Tensor::from_vector(v, {len}, via, Category::workspace));
  }
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
