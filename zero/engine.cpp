#include "zero/engine.h"

#include "zero/engine_unit.h"  // defines: Engine::UnitState

#include <cctype>
#include <cmath>
#include <deque>
#include <functional>

#include "core/kernels/accumulate.h"  // defines: accumulate_ (dst += alpha * src)
#include "core/kernels/cast.h"        // defines: cast_, accumulate_cast_
#include "optim/adamw.h"              // defines: AdamW
#include "optim/clip.h"               // defines: sum_of_squares, scale_, clip_coefficient
#include "optim/loss_scaler.h"        // defines: LossScaler
#include "optim/sgd.h"                // defines: Sgd
#include "zero/aio.h"                 // defines: SwapFile (complete for the destructor)
#include "zero/offload.h"             // defines: OffloadedAdamW

namespace zt {

namespace {

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, std::vector<FlatShard> shards) {
  std::string type = c.type;
  for (char& ch : type) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (type == "sgd") {
    SgdHyper h;
    h.lr = c.lr; h.momentum = c.momentum; h.weight_decay = c.weight_decay;
    return std::make_unique<Sgd>(std::move(shards), h);
  }
  AdamWHyper h;  // "AdamW" and "Adam" (DeepSpeed's adam_w_mode: decoupled decay)
  h.lr = c.lr; h.beta1 = c.beta1; h.beta2 = c.beta2; h.eps = c.eps; h.weight_decay = c.weight_decay;
  return std::make_unique<AdamW>(std::move(shards), h);
}

// A tensor of n float32 elements whose storage holds no memory (mixed precision: the optimizer's
// gradient slot, filled per shard by update_shard).
Tensor released(int64_t n) {
  Tensor t = Tensor::empty({n}, DType::f32, Category::workspace);
  t.storage()->release();
  return t;
}

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

// ---------------------------------------------------------------------------------------------
// Setup: shard every unit as its stage says

Engine::Engine(Model& model, const EngineConfig& cfg, ProcessGroup& group)
    : model_(model), cfg_(cfg), group_(group), N_(group.size()), r_(group.rank()) {
  const int stage = cfg_.zero.stage;
  mixed_ = cfg_.precision != Precision::f32;
  half_ = cfg_.precision == Precision::bf16 ? DType::bf16 : cfg_.precision == Precision::f16 ? DType::f16 : DType::f32;
  // The compute dtype is the model's: float32, or the precision's 2-byte dtype (bf16 compute).
  const DType model_dtype = model_.units().empty() ? DType::f32 : model_.units().front()->params().dtype();
  compute_half_ = mixed_ && model_dtype == half_;
  gathers_ = stage == 3 || (mixed_ && !compute_half_);
  if (cfg_.precision == Precision::f16) scaler_ = std::make_unique<LossScaler>(scaler_options(cfg_.fp16));
  if (cfg_.zero.offload_optimizer.enabled()) setup_offload();  // before the loop: it reserves the swap files
  std::vector<FlatShard> shards;
  std::vector<UnitState*> persistent;
  for (Unit* u : model_.units()) {
    auto s = std::make_unique<UnitState>();
    s->index = static_cast<int>(units_.size());
    s->unit = u;
    s->ps = &u->params();
    s->P = s->ps->padded_numel();
    ZT_CHECK(s->ps->finalized() && s->P % N_ == 0, "unit '", u->name(), "': flat buffer of ", s->P,
             " elements does not split into ", N_, " shards; build the model with ModelOptions{world_size = ", N_, "}");
    if (s->ps->dtype() != model_dtype || (model_dtype != DType::f32 && !compute_half_))
      ZT_THROW("unit '", u->name(), "': parameters are ", dtype_name(s->ps->dtype()), " with precision ",
               precision_name(cfg_.precision), "; the ZeRO engine trains float32 models, or models built in ",
               "bfloat16 with bf16.enabled (bf16 compute), all units in one dtype");
    s->S = s->P / N_;
    const int64_t lo = r_ * s->S;
    const Tensor& flat = s->ps->flat();
    const Tensor& flat_grad = s->ps->flat_grad();
    s->persistent = stage == 3 && s->ps->numel() <= cfg_.zero.stage3_param_persistence_threshold;
    FlatShard fs;
    fs.name = u->name();
    fs.infos = s->ps->infos();
    fs.lo = stage == 0 ? 0 : lo;
    fs.hi = stage == 0 ? s->P : lo + s->S;
    if (offload_) offload_->init(s->index, range(flat, lo, s->S));  // the master, before flat goes
    if (!mixed_) {
      if (stage == 3) {
        s->param_shard = new_param_shard(*s);
        s->param_shard.copy_(range(flat, lo, s->S));
        park_param_shard(*s);
        if (!s->persistent) {
          flat.storage()->release();
          s->gathered = false;
        }
      } else {
        s->param_shard = range(flat, lo, s->S);
      }
      if (stage >= 2) {
        // offload: the shard is the host's (ZeRO-Offload's gradients in host memory): the
        // reduction lands and accumulates there, and the device keeps no gradient at rest
        s->grad_shard = offload_ ? offload_->grad(s->index) : Tensor::zeros({s->S}, DType::f32, Category::grads);
        flat_grad.storage()->release();
      } else {
        s->grad_shard = range(flat_grad, lo, s->S);
        s->ps->zero_grad();
      }
      fs.param = stage == 0 ? flat : s->param_shard;
      fs.grad = stage == 0 ? flat_grad : s->grad_shard;
    } else {
      // float32 master <- the initial parameters (offload: on the host, above); the 2-byte
      // parameters <- the master, rounded.
      if (!offload_) {
        s->master = Tensor::empty({fs.hi - fs.lo}, DType::f32, Category::optim);
        s->master.copy_(range(flat, fs.lo, fs.hi - fs.lo));
      }
      if (compute_half_ && stage == 3) {  // the shard kept; the full buffer gathered into when used
        s->param_shard = new_param_shard(*s);
        s->param_shard.copy_(range(flat, lo, s->S));
        park_param_shard(*s);
        if (!s->persistent) {
          flat.storage()->release();
          s->gathered = false;
        }
      } else if (compute_half_) {  // the model's own buffer is the 2-byte parameters
        s->half = flat;
        s->param_shard = range(flat, lo, s->S);
      } else if (stage == 3) {
        s->param_shard = new_param_shard(*s);
        cast_(s->param_shard, range(flat, lo, s->S));  // = the master, rounded
        park_param_shard(*s);
      } else {
        s->half = Tensor::empty({s->P}, half_, Category::params);
        cast_(s->half, flat);
        s->param_shard = range(s->half, lo, s->S);
      }
      if (stage >= 2) {
        s->grad_shard = offload_ ? offload_->grad(s->index) : Tensor::zeros({s->S}, half_, Category::grads);
      } else {
        s->half_grad = Tensor::zeros({s->P}, half_, Category::grads);
        s->grad_shard = range(s->half_grad, lo, s->S);
      }
      // The compute gradient (and, computing in float32, the float32 parameters) become
      // workspaces that exist while the unit computes.
      for (const Tensor* t : {&flat, &flat_grad}) {
        if (compute_half_ && t == &flat) continue;
        t->storage()->release();
        t->storage()->set_category(Category::workspace);
      }
      if (!compute_half_) {
        s->gathered = false;
        if (s->persistent) persistent.push_back(s.get());
      }
      fs.param = s->master;
      fs.grad = released(fs.hi - fs.lo);
    }
    if (!offload_) shards.push_back(std::move(fs));
    UnitState* raw = s.get();
    s->ps->group()->before_backward = [this, raw] { before_backward(*raw); };
    s->ps->group()->after_backward = [this, raw] { after_backward(*raw); };
    units_.push_back(std::move(s));
  }
  if (!offload_) opt_ = make_optimizer(cfg_.optimizer, std::move(shards));
  for (UnitState* s : persistent) gather(*s, /*wait=*/true);  // mixed stage 3: the compute copy stays
  model_.set_residency(*this);
  model_.set_activation_checkpointing(cfg_.activation_checkpointing);
}

Engine::~Engine() {
  // Nothing may be left in flight when the buffers go.
  for (auto& s : units_) {
    for (Pending& p : s->gathers) p.work->wait();
    for (Pending& p : s->reduces) p.work->wait();
    if (s->param_write) {
      try {
        s->param_write->wait();
      } catch (const std::exception&) {  // a destructor does not throw; the run failed already
      }
    }
    s->ps->group()->before_backward = nullptr;
    s->ps->group()->after_backward = nullptr;
  }
  model_.set_residency(local_residency());
}

std::unique_ptr<Engine> initialize(Model& model, const EngineConfig& cfg, ProcessGroup& group) {
  return std::make_unique<Engine>(model, cfg, group);
}

Engine::UnitState& Engine::state_of(Unit& u) {
  for (auto& s : units_)
    if (s->unit == &u) return *s;
  ZT_THROW("unit '", u.name(), "' is not a unit of the engine's model");
}

// ---------------------------------------------------------------------------------------------
// Forward and backward

Var Engine::forward(const Tensor& idx, const Tensor& targets) {
  ZT_CHECK(!in_backward_, "forward() during backward()");
  trace_pos_ = 0;
  Var loss = model_.loss(idx, targets);
  return loss;
}

void Engine::before_backward(UnitState& s) {
  // overlap_comm with accumulation: this unit's reduction of the previous micro-step may still be
  // in flight, reading (and then freeing) the gradient buffer this backward is about to refill.
  drain(s.reduces);
  s.bwd_t0 = Tracer::Clock::now();
  if (gathers_) {
    backward_scope_ = true;
    acquire(*s.unit);
    backward_scope_ = false;
  }
  if (cfg_.zero.stage >= 2 || mixed_) {  // a fresh full gradient buffer for this unit's backward
    const Tensor& g = s.ps->flat_grad();
    g.storage()->materialize();
    Tensor(g).zero_();
  }
}

void Engine::after_backward(UnitState& s) {
  const bool boundary = micro_ + 1 == cfg_.gradient_accumulation_steps;
  const Tensor& grad = s.ps->flat_grad();
  // Mixed precision divides by N in float32 before rounding to 2 bytes (PyTorch DDP's
  // pre-division): the reduction then sums averages, so an fp16 sum cannot overflow where the
  // average would not, and the shards hold averages as in fp32.
  const double inv_n = 1.0 / static_cast<double>(N_);
  if (!mixed_) {
    if (cfg_.zero.stage >= 2 || boundary) reduce_gradients(s, grad);
  } else if (cfg_.zero.stage <= 1) {
    // Round the unit's gradient into the 2-byte gradient, summed over micro-steps: bf16 compute
    // adds grad / N in float32 and rounds once; float32 compute divides, then rounds the sum.
    if (compute_half_) {
      Tensor acc = s.half_grad;
      accumulate_(acc, grad, inv_n);
    } else {
      if (N_ > 1) scale_(grad, inv_n);
      accumulate_cast_(s.half_grad, grad);
    }
    grad.storage()->release();
    if (boundary) reduce_gradients(s, s.half_grad);
  } else {
    Tensor h = Tensor::empty({s.P}, half_, Category::comm);  // freed once its reduction is done
    cast_(h, grad, inv_n);  // the division folded into the conversion: one pass
    grad.storage()->release();
    reduce_gradients(s, h);
  }
  if (gathers_) release_params(s);
  if (Tracer* t = active_tracer()) {
    t->span(TraceTrack::compute, "backward " + s.unit->name(), "backward", s.bwd_t0, Tracer::Clock::now());
    trace_memory();
  }
}

// Stage 0: all-reduce the full gradient in place, then average. Stages 1-3: reduce-scatter it,
// this rank's averaged shard into grad_shard (stage 1: a view of the full buffer; stages 2-3:
// accumulated over micro-steps, then the full buffer is freed). Chunks of reduce_bucket_size.
// Mixed precision: `grad` is 2-byte and divided by N already (after_backward).
void Engine::reduce_gradients(UnitState& s, const Tensor& grad) {
  // overlap_comm: the previous unit's reduction may still run while this unit's backward ran;
  // finish it now, so at most two units' reductions (and full gradients) are alive.
  if (cfg_.zero.overlap_comm) {
    for (auto& u : units_)
      if (u.get() != &s) drain(u->reduces);
  }
  CommLabel label(group_, s.unit->name());
  const int64_t S = s.S, N = N_, chunk = std::max<int64_t>(1, cfg_.zero.reduce_bucket_size);
  const double inv_n = mixed_ ? 1.0 : 1.0 / static_cast<double>(N_);
  if (cfg_.zero.stage == 0) {
    for (int64_t a = 0; a < s.P; a += chunk) {
      const Tensor part = range(grad, a, std::min(chunk, s.P - a));
      s.reduces.push_back({group_.all_reduce_async(part), [part, inv_n, N] {
                             if (N > 1 && inv_n != 1.0) scale_(part, inv_n);
                           }});
    }
  } else {
    const bool accumulate = cfg_.zero.stage >= 2 && micro_ > 0;
    const Tensor shard = s.grad_shard;
    for (int64_t a = 0; a < S; a += chunk) {
      const int64_t n = std::min(chunk, S - a);
      Tensor in = grad;
      if (n < S) {  // pack rank q's part [q*S + a, q*S + a + n) of every rank's range
        in = Tensor::empty({N * n}, grad.dtype(), Category::comm);
        for (int64_t q = 0; q < N; ++q) range(in, q * n, n).copy_(range(grad, q * S + a, n));
      }
      Tensor out = Tensor::empty({n}, grad.dtype(), Category::comm);
      WorkPtr w = group_.reduce_scatter_async(in, out);
      const bool mixed = mixed_;
      s.reduces.push_back({w, [in, out, shard, a, n, inv_n, accumulate, mixed] {
                             Tensor dst = range(shard, a, n);
                             // offload (stages 2-3): the shard is in host memory; on a GPU the
                             // chunk comes over first, and the arithmetic runs on the host
                             const Tensor got = out.device() == dst.device() ? out : out.to(dst.device(), Category::comm);
                             if (accumulate && mixed) accumulate_cast_(dst, got);
                             else if (accumulate) accumulate_(dst, got, inv_n);
                             else if (inv_n != 1.0) { dst.copy_(got); scale_(dst, inv_n); }
                             else dst.copy_(got);
                           }});
    }
    if (cfg_.zero.stage >= 2) {  // the full gradient goes once every chunk has left it
      s.reduces.back().then = [prev = s.reduces.back().then, grad] {
        prev();
        grad.storage()->release();
      };
    }
  }
  // Offload, stage 1: the shard (a view of the device's full gradient) is complete once the
  // chunks landed; to the host then. (Stages 2-3 reduce into the host shard directly.)
  if (offload_ && cfg_.zero.stage == 1) {
    UnitState* sp = &s;
    s.reduces.back().then = [prev = s.reduces.back().then, this, sp] {
      if (prev) prev();
      grad_to_host(*sp);
    };
  }
  if (!cfg_.zero.overlap_comm) drain(s.reduces);
}

void Engine::finish_reductions() {
  for (auto& s : units_) drain(s->reduces);
}

void Engine::backward(const Var& loss) {
  ZT_CHECK(micro_ < cfg_.gradient_accumulation_steps, "backward(): ", micro_,
           " micro-steps done already; call step() after gradient_accumulation_steps = ",
           cfg_.gradient_accumulation_steps);
  loss_sum_ += loss.value().item();
  in_backward_ = true;
  // d(mean over all micro-batches)/d(loss of this one) = 1 / gradient_accumulation_steps; fp16
  // scales it by the loss scale, so that small gradients survive the rounding to float16.
  loss.backward(Tensor::full({}, loss_scale() / static_cast<double>(cfg_.gradient_accumulation_steps), loss.dtype()));
  in_backward_ = false;
  ++micro_;
  if (tracing_ && cfg_.zero.stage == 3) tracing_ = false;  // the first micro-step's order is the trace
}

// ---------------------------------------------------------------------------------------------
// The update

StepResult Engine::step(double lr) {
  ZT_CHECK(micro_ == cfg_.gradient_accumulation_steps, "step() after ", micro_, " micro-steps; expected ",
           cfg_.gradient_accumulation_steps, " (gradient_accumulation_steps)");
  TraceScope scope(active_tracer(), TraceTrack::compute, "optimizer step", "optimizer");
  StepResult res = step_inner(lr);
  if (active_tracer()) trace_memory();
  return res;
}

// finish the reductions, the global norm, the update, the publication (step()).
StepResult Engine::step_inner(double lr) {
  {
    TraceScope finish(active_tracer(), TraceTrack::compute, "finish reductions", "optimizer");
    finish_reductions();
  }
  StepResult res;
  res.loss = group_.all_reduce_sum(loss_sum_) / static_cast<double>(N_ * cfg_.gradient_accumulation_steps);
  res.loss_scale = loss_scale();

  // Global gradient norm. Stage 0: every rank holds the whole averaged gradient. Stages 1-3: each
  // rank's shard, one all-reduced double (the padding is zero and adds nothing). fp16 gradients
  // are scaled by the loss scale.
  std::vector<Tensor> grads;
  for (auto& s : units_)
    grads.push_back(cfg_.zero.stage > 0 ? s->grad_shard : mixed_ ? s->half_grad : s->ps->flat_grad());
  double sq = sum_of_squares(grads);
  if (cfg_.zero.stage > 0) sq = group_.all_reduce_sum(sq);
  const double unscale = 1.0 / res.loss_scale;
  res.grad_norm = std::sqrt(sq) * unscale;

  // fp16: an inf or NaN anywhere makes the all-reduced sum of squares non-finite on every rank,
  // so every rank skips together; the scaler lowers the scale (optim/loss_scaler.h).
  if (scaler_) {
    const bool overflow = !std::isfinite(sq);
    scaler_->update(overflow);
    if (overflow) {
      res.skipped = true;
      zero_gradients();
      return res;
    }
  }
  const double coef = cfg_.gradient_clipping > 0 ? clip_coefficient(res.grad_norm, cfg_.gradient_clipping) : 1.0;
  if (offload_) {  // the CPU AdamW on the host copies (zero/offload.h), new parameters published per sub-group
    TraceScope scope(active_tracer(), TraceTrack::compute, "offloaded AdamW (host)", "offload");
    const auto t0 = Tracer::Clock::now();
    offload_->step(lr, coef * unscale, [this](int i, int64_t a, const Tensor& master, bool last) {
      publish_piece(*units_[i], a, master, last);
    });
    finish_param_writes();  // nvme: the shards on disk, their host buffers gone
    times_.offload_step_s += std::chrono::duration<double>(Tracer::Clock::now() - t0).count();
  } else if (mixed_) {
    opt_->set_lr(lr);
    update_mixed(coef * unscale);
  } else {
    opt_->set_lr(lr);
    if (coef < 1.0) scale_(grads, coef);
    opt_->step();
  }
  {
    TraceScope publish(active_tracer(), TraceTrack::compute, "publish parameters", "optimizer");
    publish_parameters();
  }
  zero_gradients();
  return res;
}

// Mixed precision, unit by unit: the 2-byte gradient shard -> float32 (times `factor`: the loss
// unscale and the clipping coefficient in one rounding), the optimizer's update
// of the float32 master, the master rounded back into the 2-byte parameters this rank publishes.
// Only one unit's float32 gradient (workspace) exists at a time.
void Engine::update_mixed(double factor) {
  opt_->begin_step();
  for (auto& s : units_) {
    const int stage = cfg_.zero.stage;
    const Tensor& g = stage == 0 ? s->half_grad : s->grad_shard;
    Tensor g32 = Tensor::empty({g.numel()}, DType::f32, Category::workspace);
    cast_(g32, g, factor);
    opt_->update_shard(s->index, g32);
    cast_(stage == 0 ? s->half : s->param_shard, s->master);
  }
}

void Engine::zero_gradients() {
  for (auto& s : units_) {
    if (mixed_ && cfg_.zero.stage <= 1) s->half_grad.zero_();
    else if (cfg_.zero.stage >= 2) s->grad_shard.zero_();
    else s->ps->zero_grad();
  }
  micro_ = 0;
  loss_sum_ = 0;
}

// Stages 1-2: every rank updated its shard of the full parameters; all-gather them in place.
// Stage 3: only the shard exists; gathered copies (persistent units, and units kept for reuse)
// are now stale: persistent ones are refreshed, the others freed. Mixed stages 0-2: the compute
// copies were freed at each unit's release, so the next acquire converts the new parameters.
void Engine::publish_parameters() {
  const int stage = cfg_.zero.stage;
  if (stage == 0) return;
  std::deque<Pending> pending;
  for (auto& s : units_) {
    CommLabel label(group_, s->unit->name());
    if (stage == 3 && !s->persistent) free_full_params(*s);
    else if (stage == 3) fill_compute_copy(*s, pending);
    else all_gather_chunked(group_, s->param_shard, mixed_ ? s->half : s->ps->flat(), cfg_.zero.allgather_bucket_size,
                            pending);
  }
  drain(pending);
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
