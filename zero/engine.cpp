// defines: Engine's schedule (zero/engine.h): setup, the forward and backward hooks, the step.
//
// What each call does is the policies' (zero/stage.h, zero/precision.h, zero/tiers.h,
// zero/shard_optimizer.h); here is only when.
#include "zero/engine.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/backend.h"         // defines: default_device

#include "optim/clip.h"            // defines: clip_coefficient
#include "zero/activation_offload.h"  // defines: ActivationOffload
#include "zero/precision.h"        // defines: PrecisionPolicy
#include "zero/shard_optimizer.h"  // defines: ShardOptimizer
#include "zero/stage.h"            // defines: ZeroStage
#include "zero/tiers.h"            // defines: StorageTiers, ParamTier

namespace zt {

// ---------------------------------------------------------------------------------------------
// Setup: the policies, then every unit placed as its stage says

Engine::Engine(Model& model, const EngineConfig& cfg, ProcessGroup& group, ParamSource* initial,
               ProcessGroup* tensor_parallel)
    : model_(model), cfg_(cfg), cx_(cfg_, group), tensor_parallel_(tensor_parallel) {
  const std::vector<Unit*>& units = model_.units();
  const DType model_dtype = units.empty() ? DType::f32 : units.front()->params().dtype();
  const Device device = units.empty() ? default_device() : units.front()->params().flat().device();
  precision_ = std::make_unique<PrecisionPolicy>(cx_, model_dtype);
  // The tiers, then the parameters' swap-file regions, then the optimizer's (which allocates the files).
  tiers_ = std::make_unique<StorageTiers>(cx_, device);
  param_tier_ = make_param_tier(cx_, *tiers_, precision_->working(), units);
  optimizer_ = make_shard_optimizer(cx_, *precision_, *tiers_, *param_tier_, units_, units);
  stage_ = make_stage(cx_, *precision_, *param_tier_, *optimizer_, units_);
  for (Unit* u : units) {
    auto s = std::make_unique<ShardedUnit>();
    s->index = static_cast<int>(units_.size());
    s->unit = u;
    s->ps = &u->params();
    s->P = s->ps->padded_numel();
    ZT_CHECK(s->ps->finalized() && s->P % cx_.N == 0, "unit '", u->name(), "': flat buffer of ", s->P,
             " elements does not split into ", cx_.N, " shards; build the model with ModelOptions{world_size = ",
             cx_.N, "}");
    precision_->check(*s);
    s->S = s->P / cx_.N;
    s->lo = cx_.r * s->S;
    const auto [lo, hi] = stage_->optimizer_range(*s);
    InitialValues init = load_initial(*s, initial);
    optimizer_->begin_unit(*s, init, lo, hi);
    stage_->place(*s, init);
    optimizer_->add_unit(*s, lo, hi, stage_->parameters().for_update(*s), stage_->gradients().for_update(*s));
    init = InitialValues();  // stage 3's setup buffer goes now: one unit's shard at a time
    ShardedUnit* raw = s.get();
    s->ps->group()->before_backward = [this, raw] { before_backward(*raw); };
    s->ps->group()->after_backward = [this, raw] { after_backward(*raw); };
    units_.push_back(std::move(s));
  }
  trace_.resize(units_.size());
  for (auto& s : units_)
    model_state_ += model_state(s->P, cx_.N, stage_->kept(), cfg_.precision, cfg_.zero, cfg_.optimizer);
  optimizer_->finish_setup();
  stage_->parameters().setup_done();
  model_.set_residency(*this);
  model_.set_activation_checkpointing(cfg_.activation_checkpointing);
  if (cfg_.cpu_checkpointing) checkpoints_ = std::make_unique<ActivationOffload>(cx_, tiers_->activation_host());
}

Engine::~Engine() {
  // Nothing may be left in flight when the buffers go.
  checkpoints_.reset();  // waits for its copies
  stage_->abandon_in_flight();
  for (auto& s : units_) {
    param_tier_->wait(*s);
    s->ps->group()->before_backward = nullptr;
    s->ps->group()->after_backward = nullptr;
  }
  model_.set_residency(local_residency());
}

std::unique_ptr<Engine> initialize(Model& model, const EngineConfig& cfg, ProcessGroup& group, ParamSource* initial,
                                   ProcessGroup* tensor_parallel) {
  return std::make_unique<Engine>(model, cfg, group, initial, tensor_parallel);
}

// Partitioned construction (DeepSpeed's zero.Init): the unit's initial values come from `source`,
// only as much as its parameter policy keeps (ParameterPolicy::initial_range). Stages 0-2: the whole unit, in the
// model's own buffer (created here). Stage 3: this rank's shard in a setup buffer where the
// parameter tier makes its shards (ParamTier::shard_memory: the host tier with offload_param, so
// the device never holds it), and nothing else of the unit. Without a source the model was built
// and filled in memory (ModelOptions{materialize = true}) and is its own source.
InitialValues Engine::load_initial(const ShardedUnit& s, ParamSource* source) {
  const Tensor& flat = s.ps->flat();
  InitialValues init;
  if (!source) {
    ZT_CHECK(s.ps->holds_values(), "unit '", s.unit->name(), "': the model holds no parameter values (built ",
             "without bytes, ModelOptions{materialize = false}, or released by an earlier engine), so the engine ",
             "needs a ParamSource for its initial values (zero/engine.h)");
    init.values = flat;
    init.in_model_buffer = true;
    return init;
  }
  const auto [a, b] = stage_->parameters().initial_range(s);
  if (a == 0 && b == s.P) {
    flat.storage()->materialize();
    init.values = flat;
    init.in_model_buffer = true;
  } else {
    init.values = Tensor::empty({b - a}, flat.dtype(), Category::params, param_tier_->shard_memory());
    init.lo = a;
  }
  source->fill(s.index, a, init.values);
  return init;
}

ShardedUnit& Engine::state_of(Unit& u) {
  for (auto& s : units_)
    if (s->unit == &u) return *s;
  ZT_THROW("unit '", u.name(), "' is not a unit of the engine's model");
}

// ---------------------------------------------------------------------------------------------
// Forward: the unit scopes (Residency)

Var Engine::forward(const Tensor& idx, const Tensor& targets) {
  ZT_CHECK(!in_backward_, "forward() during backward()");
  stage_->parameters().forward_begins();
  return model_.loss(idx, targets);
}

void Engine::acquire(Unit& u) {
  ShardedUnit& s = state_of(u);
  UnitTrace& tr = trace_[s.index];
  if (!backward_scope_ && !tr.fwd_open) {  // the model's forward scope (a recompute inside a backward)
    tr.fwd_open = true;
    tr.fwd_in_backward = in_backward_;
    tr.fwd_t0 = Tracer::Clock::now();
  }
  stage_->parameters().acquire(s, evaluating_);
}

void Engine::release(Unit& u) {
  ShardedUnit& s = state_of(u);
  UnitTrace& tr = trace_[s.index];
  const bool scope_end = !backward_scope_ && tr.fwd_open;
  stage_->parameters().release(s, evaluating_);
  if (!scope_end) return;
  tr.fwd_open = false;
  if (Tracer* t = cx_.active_tracer()) {
    const char* kind = evaluating_ ? "eval" : tr.fwd_in_backward ? "recompute" : "forward";
    t->span(TraceTrack::compute, std::string(kind) + " " + u.name(), kind, tr.fwd_t0, Tracer::Clock::now());
    trace_memory();
  }
}

CheckpointStore* Engine::checkpoint_store() { return checkpoints_.get(); }

// ---------------------------------------------------------------------------------------------
// Backward: the hooks autograd calls around each unit's backward (nn/param_set.h's LeafGroup)

void Engine::before_backward(ShardedUnit& s) {
  // overlap_comm with accumulation: this unit's reduction of the previous micro-step may still be
  // in flight, reading (and then freeing) the gradient buffer this backward is about to refill.
  stage_->gradients().finish_reduction(s);
  // cpu_checkpointing: the checkpoint of the next recompute starts back from the host now.
  if (checkpoints_) checkpoints_->prefetch();
  trace_[s.index].bwd_t0 = Tracer::Clock::now();
  backward_scope_ = true;
  acquire(*s.unit);
  backward_scope_ = false;
  stage_->parameters().backward_opens(s);  // hpZ: the unit's secondary shard has served
  stage_->gradients().open(s);             // the compute gradient this backward accumulates into
}

void Engine::after_backward(ShardedUnit& s) {
  const bool boundary = micro_ + 1 == cfg_.gradient_accumulation_steps;
  stage_->gradients().ready(s, boundary, micro_);
  stage_->parameters().release(s, evaluating_);  // the backward's scope ends
  if (Tracer* t = cx_.active_tracer()) {
    t->span(TraceTrack::compute, "backward " + s.unit->name(), "backward", trace_[s.index].bwd_t0,
            Tracer::Clock::now());
    trace_memory();
  }
}

void Engine::backward(const Var& loss) {
  ZT_CHECK(micro_ < cfg_.gradient_accumulation_steps, "backward(): ", micro_,
           " micro-steps done already; call step() after gradient_accumulation_steps = ",
           cfg_.gradient_accumulation_steps);
  loss_sum_ += loss.value().item();
  in_backward_ = true;
  stage_->parameters().backward_begins();
  // d(mean over all micro-batches)/d(loss of this one) = 1 / gradient_accumulation_steps; fp16
  // scales it by the loss scale, so that small gradients survive the rounding to float16.
  loss.backward(Tensor::full({}, loss_scale() / static_cast<double>(cfg_.gradient_accumulation_steps), loss.dtype()));
  in_backward_ = false;
  ++micro_;
  stage_->parameters().micro_step_done();
}

void Engine::finish_reductions() { stage_->gradients().finish_reductions(); }

// ---------------------------------------------------------------------------------------------
// The step

StepResult Engine::step(double lr) {
  ZT_CHECK(micro_ == cfg_.gradient_accumulation_steps, "step() after ", micro_, " micro-steps; expected ",
           cfg_.gradient_accumulation_steps, " (gradient_accumulation_steps)");
  TraceScope scope(cx_.active_tracer(), TraceTrack::compute, "optimizer step", "optimizer");
  StepResult res = step_inner(lr);
  if (cx_.active_tracer()) trace_memory();
  return res;
}

StepResult Engine::step_inner(double lr) {
  {
    TraceScope finish(cx_.active_tracer(), TraceTrack::compute, "finish reductions", "optimizer");
    finish_reductions();
  }
  StepResult res;
  res.loss = cx_.group.all_reduce_sum(loss_sum_) / static_cast<double>(cx_.N * cfg_.gradient_accumulation_steps);
  res.loss_scale = loss_scale();

  // The global gradient norm (fp16: of the scaled gradients, unscaled here).
  std::vector<Tensor> grads, params;
  for (auto& s : units_) {
    grads.push_back(stage_->gradients().for_update(*s));
    params.push_back(stage_->parameters().for_update(*s));
  }
  const double sq = tensor_parallel_ ? tensor_parallel_sum_of_squares(grads) : stage_->global_sum_of_squares(grads);
  const double unscale = 1.0 / res.loss_scale;
  res.grad_norm = std::sqrt(sq) * unscale;

  // fp16: an inf or NaN anywhere makes the all-reduced sum of squares non-finite on every rank,
  // so every rank skips together; the scaler lowers the scale (optim/loss_scaler.h).
  if (precision_->skip_step(!std::isfinite(sq))) {
    res.skipped = true;
    zero_gradients();
    return res;
  }
  const double coef = cfg_.gradient_clipping > 0 ? clip_coefficient(res.grad_norm, cfg_.gradient_clipping) : 1.0;
  optimizer_->step(lr, coef, unscale, grads, params);
  {
    TraceScope publish(cx_.active_tracer(), TraceTrack::compute, "publish parameters", "optimizer");
    stage_->parameters().publish();
  }
  zero_gradients();
  return res;
}

double Engine::tensor_parallel_sum_of_squares(const std::vector<Tensor>& grads) {
  // The parameters' pieces within each unit's optimizer range [lo, hi), by how many tensor ranks
  // hold the same values: 1 (a slice), r (a slice held by r ranks), or all of them (whole, key 0).
  std::map<int64_t, std::vector<Tensor>> held_by;
  for (size_t i = 0; i < units_.size(); ++i) {
    const auto [lo, hi] = stage_->optimizer_range(*units_[i]);
    for (const ParamInfo& p : units_[i]->ps->infos()) {
      const int64_t a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.numel);
      if (a < b) held_by[p.slice.whole() ? 0 : p.slice.replicas].push_back(grads[i].flat_view(a - lo, {b - a}));
    }
  }
  double sliced_sq = 0, whole_sq = 0;
  for (const int64_t r : {int64_t{1}, int64_t{0}}) held_by.try_emplace(r);  // every rank calls the same collectives
  for (const auto& [r, g] : held_by) {
    const double sq = stage_->global_sum_of_squares(g);  // over the replica group, when sharded
    if (r == 0) whole_sq = sq;
    else sliced_sq += sq / static_cast<double>(r);  // summed over the tensor group below: each copy once
  }
  return tensor_parallel_->all_reduce_sum(sliced_sq) + whole_sq;
}

void Engine::zero_gradients() {
  for (auto& s : units_) stage_->gradients().zero(*s);
  micro_ = 0;
  loss_sum_ = 0;
}

double Engine::eval_loss(const Tensor& idx, const Tensor& targets) {
  NoGradGuard no_grad;
  evaluating_ = true;
  double loss = 0;
  try {
    loss = model_.loss(idx, targets).value().item();
  } catch (...) {
    evaluating_ = false;
    throw;
  }
  evaluating_ = false;
  return loss;
}

}  // namespace zt
