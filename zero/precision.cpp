// defines: PrecisionPolicy's conversions (zero/precision.h) — every conversion between the
//          compute, working and master representations of a unit's parameters and gradient.
#include "zero/precision.h"

#include "core/json.h"  // defines: json_integer
#include "core/kernels/accumulate.h"  // defines: accumulate_ (dst += alpha * src)
#include "core/kernels/cast.h"        // defines: cast_, accumulate_cast_
#include "core/kernels/shard_norm.h"  // defines: scale_

namespace zt {

namespace {

LossScalerOptions scaler_options(const Fp16Config& c) {
  LossScalerOptions o;
  o.dynamic = c.loss_scale == 0;
  o.static_scale = c.loss_scale > 0 ? c.loss_scale : 1;
  o.initial_scale_power = c.initial_scale_power;
  o.scale_window = c.loss_scale_window;
  o.hysteresis = c.hysteresis;
  o.min_scale = c.min_loss_scale;
  return o;
}

}  // namespace

PrecisionPolicy::PrecisionPolicy(ZeroContext& cx, DType model_dtype)
    : model_dtype_(model_dtype), precision_(cx.cfg.precision), cx_(cx) {
  const EngineConfig& cfg = cx.cfg;
  mixed_ = cfg.precision != Precision::f32;
  half_ = cfg.precision == Precision::bf16 ? DType::bf16 : cfg.precision == Precision::f16 ? DType::f16 : DType::f32;
  // The compute dtype is the model's: float32, or the precision's 2-byte dtype (bf16 compute).
  compute_half_ = mixed_ && model_dtype == half_;
  if (cfg.precision == Precision::f16) scaler_ = std::make_unique<LossScaler>(scaler_options(cfg.fp16));
}

void PrecisionPolicy::check(const ShardedUnit& s) const {
  if (s.ps->dtype() != model_dtype_ || (model_dtype_ != DType::f32 && !compute_half_))
    ZT_THROW("unit '", s.unit->name(), "': parameters are ", dtype_name(s.ps->dtype()), " with precision ",
             precision_name(precision_), "; the ZeRO engine trains float32 models, or models built in ",
             "bfloat16 with bf16.enabled (bf16 compute), all units in one dtype");
}

void PrecisionPolicy::make_master(const ShardedUnit& s, const InitialValues& init, int64_t lo, int64_t n) {
  if (masters_.size() <= static_cast<size_t>(s.index)) masters_.resize(s.index + 1);
  if (!mixed_) return;
  Tensor& master = masters_[s.index];
  master = Tensor::empty({n}, DType::f32, Category::optim);
  master.copy_(init.slice(lo, n));
}

Tensor PrecisionPolicy::full_params(ShardedUnit& s) const {
  if (!separate_compute_copy()) return s.ps->flat();
  Tensor half = Tensor::empty({s.P}, half_, Category::params);
  cast_(half, s.ps->flat());
  return half;
}

Tensor PrecisionPolicy::full_grads(ShardedUnit& s) const {
  if (mixed_) return Tensor::zeros({s.P}, half_, Category::grads);
  s.ps->flat_grad().storage()->materialize();  // partitioned construction: created here
  s.ps->zero_grad();
  return s.ps->flat_grad();
}

void PrecisionPolicy::to_working(const Tensor& dst, const Tensor& src) const {
  if (dst.dtype() == src.dtype()) Tensor(dst).copy_(src);
  else cast_(dst, src);
}

bool PrecisionPolicy::release_compute_buffers(ShardedUnit& s) {
  if (compute_refs_.size() <= static_cast<size_t>(s.index)) {
    compute_refs_.resize(s.index + 1, 0);
    compute_present_.resize(s.index + 1, false);
  }
  if (!mixed_) return false;  // fp32: the model's buffers are the working parameters and gradient
  const Tensor& flat = s.ps->flat();
  const Tensor& flat_grad = s.ps->flat_grad();
  for (const Tensor* t : {&flat, &flat_grad}) {
    if (compute_half_ && t == &flat) continue;  // bf16 compute: the model's buffer is the 2-byte parameters
    t->storage()->release();
    t->storage()->set_category(Category::workspace);
  }
  return separate_compute_copy();
}

void PrecisionPolicy::acquire_compute(const ShardedUnit& s, const Tensor& working_full) {
  if (!separate_compute_copy()) return;
  ++compute_refs_.at(s.index);
  if (compute_present_[s.index]) return;
  s.ps->flat().storage()->materialize();
  compute_present_[s.index] = true;
  if (Tracer* t = cx_.active_tracer())
    t->instant(TraceTrack::compute, "gather " + s.unit->name(), "gather",
               {{"unit", s.unit->name()}, {"elements", s.P}, {"prefetch", false}});
  fill_compute(s.ps->flat(), working_full);
}

void PrecisionPolicy::release_compute(const ShardedUnit& s) {
  if (!separate_compute_copy()) return;
  ZT_CHECK(compute_refs_.at(s.index) > 0, "release of unit '", s.unit->name(), "' without an acquire");
  if (--compute_refs_[s.index] > 0 || !compute_present_[s.index]) return;
  s.ps->flat().storage()->release();
  compute_present_[s.index] = false;
  if (Tracer* t = cx_.active_tracer())
    t->instant(TraceTrack::compute, "release " + s.unit->name(), "gather", {{"unit", s.unit->name()}});
}

Tensor PrecisionPolicy::gather_target(const ShardedUnit& s) const {
  if (!separate_compute_copy()) return s.ps->flat();
  return Tensor::empty({s.P}, half_, Category::params);
}

void PrecisionPolicy::gathered(const ShardedUnit& s, const Tensor& target, std::deque<Pending>& q) const {
  if (!separate_compute_copy()) return;
  const Tensor& flat = s.ps->flat();
  q.push_back({completed_work(), [this, flat, target] { fill_compute(flat, target); }});
}

void PrecisionPolicy::open_gradient(ShardedUnit& s) const {
  if (!mixed_) return;  // fp32: the compute gradient is the full working gradient, kept
  s.ps->fresh_grad();
}

Tensor PrecisionPolicy::fold_gradient(ShardedUnit& s, const Tensor& grads_full, int N) const {
  const Tensor& grad = s.ps->flat_grad();
  if (!mixed_) return grad;
  // Round the unit's gradient into the 2-byte gradient, summed over micro-steps: bf16 compute
  // adds grad / N in float32 and rounds once; float32 compute divides, then rounds the sum.
  const double inv_n = 1.0 / static_cast<double>(N);
  if (compute_half_) {
    Tensor acc = grads_full;
    accumulate_(acc, grad, inv_n);
  } else {
    if (N > 1) scale_(grad, inv_n);
    accumulate_cast_(grads_full, grad);
  }
  grad.storage()->release();
  return grads_full;
}

Tensor PrecisionPolicy::gradient_for_reduction(ShardedUnit& s, int N) const {
  const Tensor& grad = s.ps->flat_grad();
  if (!mixed_) return grad;
  Tensor h = Tensor::empty({s.P}, half_, Category::comm);  // freed once its reduction is done
  cast_(h, grad, 1.0 / static_cast<double>(N));  // the division folded into the conversion: one pass
  grad.storage()->release();
  return h;
}

void PrecisionPolicy::land(const Tensor& dst, const Tensor& got, bool accumulate, double scale) const {
  Tensor d = dst;
  if (accumulate && mixed_) accumulate_cast_(d, got);
  else if (accumulate) accumulate_(d, got, scale);
  else if (scale != 1.0) { d.copy_(got); scale_(d, scale); }
  else d.copy_(got);
}

void PrecisionPolicy::fill_compute(const Tensor& compute, const Tensor& working_full) const {
  cast_(compute, working_full);
}

void PrecisionPolicy::update(Optimizer& opt, double lr, double clip, double unscale, const std::vector<Tensor>& update_grads,
                             const std::vector<Tensor>& update_params,
                             const std::vector<std::unique_ptr<ShardedUnit>>& units) const {
  opt.set_lr(lr);
  // Unit by unit: only one unit's float32 gradient (workspace) exists at a time.
  const double factor = clip * unscale;  // one rounding for the loss unscale and the clipping
  opt.begin_step();
  for (size_t i = 0; i < units.size(); ++i) {
    opt.update_shard(units[i]->index, float32_gradient(update_grads[i], factor, default_allocator()));
    if (mixed_) cast_(update_params[i], masters_.at(units[i]->index));
  }
}

Tensor PrecisionPolicy::float32_gradient(const Tensor& g, double factor, Allocator& a) {
  if (g.dtype() == DType::f32) {
    if (factor != 1.0) scale_(g, factor);
    return g;
  }
  Tensor g32 = Tensor::empty({g.numel()}, DType::f32, Category::workspace, a);
  cast_(g32, g, factor);
  return g32;
}

void PrecisionPolicy::round_master(const ShardedUnit& s, const Tensor& working) const {
  if (mixed_) cast_(working, masters_.at(s.index));
}

bool PrecisionPolicy::skip_step(bool overflow) {
  if (!scaler_) return false;
  scaler_->update(overflow);
  return overflow;
}

nlohmann::json PrecisionPolicy::state_meta() const {
  nlohmann::json j = nlohmann::json::object();
  if (scaler_) {
    const LossScaler::State st = scaler_->state();
    j["loss_scaler"] = {{"scale", st.scale}, {"iter", st.iter}, {"last_overflow_iter", st.last_overflow_iter},
                        {"hysteresis_left", st.hysteresis_left}, {"skipped", st.skipped}};
  }
  return j;
}

void PrecisionPolicy::load_state_meta(const nlohmann::json& j) {
  if (!scaler_ || !j.contains("loss_scaler")) return;
  const nlohmann::json& l = j.at("loss_scaler");
  LossScaler::State st;
  st.scale = l.at("scale").get<double>();
  st.iter = json_integer(l.at("iter"), "checkpoint loss_scaler.iter");
  st.last_overflow_iter = json_integer(l.at("last_overflow_iter"), "checkpoint loss_scaler.last_overflow_iter");
  st.hysteresis_left = static_cast<int>(json_integer(l.at("hysteresis_left"), "checkpoint loss_scaler.hysteresis_left", INT32_MIN, INT32_MAX));
  st.skipped = json_integer(l.at("skipped"), "checkpoint loss_scaler.skipped");
  scaler_->load_state(st);
}

}  // namespace zt
