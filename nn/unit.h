// defines: Module, Unit, Residency, LocalResidency, run_unit — the unit boundary.
//
// A model is a sequence of units (the embedding, each transformer block, the final norm + head);
// each owns one ParamSet. A unit's forward runs inside its residency scope (llm.q style, in plain
// sight in the model's loop):
//
//   residency.acquire(unit)   // ZeRO-3: all-gather the unit's flat buffer (or wait for a prefetch)
//   y = unit.forward(x)       // or recompute(forward) when activation checkpointing is on
//   residency.release(unit)   // ZeRO-3: free the gathered buffer unless persistent
//
// nn knows nothing of ranks: Residency is the small interface nn defines and zero/ implements.
// It also names where a checkpointed unit's input waits for the backward
// (checkpoint_store(): autograd/recompute.h's CheckpointStore; the engine's moves it to the host
// tier with activation_checkpointing.cpu_checkpointing, zero/activation_offload.h).
// Single process, everything is resident: LocalResidency does nothing.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/recompute.h"
#include "nn/param_set.h"

namespace zt {

// A named piece of a model that reads parameters of a ParamSet (layers hold parameter indices,
// and every parameter Var is a view into the set's one flat buffer). ZeRO-3 never swaps that
// buffer: it frees and refills the flat buffer's Storage in place (Storage::release() and
// materialize(), core/tensor.h; zero/sharded_parameters.cpp), so every view, in layers and in saved
// autograd closures alike, sees the gathered bytes again after each acquire.
class Module {
 public:
  Module(ParamSet& ps, std::string prefix) : ps_(&ps), prefix_(std::move(prefix)) {}
  virtual ~Module() = default;
  const std::string& prefix() const { return prefix_; }
  // How forward reads this module's parameters: as they are (empty), or through the caller's op
  // on each leaf. Megatron's sequence parallelism sets it on the norms: a norm that sees one
  // rank's tokens has a partial gradient, which parallel/'s op sums over the tensor group. nn
  // knows no ranks.
  std::function<Var(const Var&)> read;

 protected:
  int add_param(const std::string& name, const Shape& shape, bool decay) {
    return ps_->add(prefix_.empty() ? name : prefix_ + "." + name, shape, decay);
  }
  Var p(int i) const { return read ? read(ps_->var(i)) : ps_->var(i); }
  // Parameters i .. i + count - 1 stacked by rows as one leaf (ParamSet::var_span).
  Var p_span(int i, int count) const { return ps_->var_span(i, count); }
  ParamSet* ps_;
  std::string prefix_;
};

class Unit {
 public:
  explicit Unit(std::string name, DType dtype = DType::f32) : params_(std::move(name), dtype) {}
  virtual ~Unit() = default;
  const std::string& name() const { return params_.unit_name(); }
  ParamSet& params() { return params_; }
  const ParamSet& params() const { return params_; }
  bool recompute_forward = false;  // activation checkpointing: recompute this unit's forward in backward

 protected:
  ParamSet params_;
};

class Residency {
 public:
  virtual ~Residency() = default;
  virtual void acquire(Unit& u) = 0;
  virtual void release(Unit& u) = 0;
  // Where recompute() keeps a checkpointed unit's input; null: on the device, as it is.
  virtual CheckpointStore* checkpoint_store() { return nullptr; }
};

class LocalResidency final : public Residency {
 public:
  void acquire(Unit&) override {}
  void release(Unit&) override {}
};
LocalResidency& local_residency();

// Runs fn(x) as unit u's forward inside its residency scope, through recompute() (activation
// checkpointing) if the unit says so.
// `also`: other units whose parameters fn reads (GPT-2's head reads the embedding's wte).
Var run_unit(Residency& r, Unit& u, const Var& x, const std::function<Var(const Var&)>& fn,
             const std::vector<Unit*>& also = {});

}  // namespace zt
