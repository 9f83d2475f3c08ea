// defines: Var (a tensor on the autograd tape), GradFn, LeafGroup, NoGradGuard, grad_enabled.
//
// A Var holds a value Tensor and, when it requires grad, either
//   - nothing else (a leaf: an input, or a parameter whose grad is a view into its unit's flat
//     gradient buffer, so backward accumulates straight into that buffer), or
//   - the Vars it was computed from and a GradFn closure (flashlight style): given the gradient
//     of this Var, it adds gradients into its inputs with Var::add_grad.
// backward() sorts the graph topologically from the root and runs each GradFn once, in reverse
// order, after all of that Var's gradient has arrived.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace zt {

class Var;
struct VarImpl;

// inputs: the Vars the op read; grad_out: d(loss)/d(output), same shape as the output.
using GradFn = std::function<void(std::vector<Var>& inputs, const Tensor& grad_out)>;

// A set of leaves whose gradients complete together (a unit's ParamSet). backward() calls
// `before_backward` just before the first node that reads any of its leaves runs, and
// `after_backward` just after the last such node ran: the hooks ZeRO uses to re-gather a
// unit's parameters and to reduce its gradients as soon as they are complete.
struct LeafGroup {
  std::string name;
  std::function<void()> before_backward;
  std::function<void()> after_backward;
};

struct VarImpl {
  Tensor value;
  Tensor grad;              // undefined until some gradient arrives (or pre-bound for parameters)
  bool grad_owned = false;  // true when `grad` may be updated in place
  bool requires_grad = false;
  std::vector<Var> inputs;  // empty for leaves
  GradFn grad_fn;           // empty for leaves
  const char* op = "leaf";
  std::shared_ptr<LeafGroup> group;  // leaves only
};

class Var {
 public:
  Var() = default;
  explicit Var(Tensor value, bool requires_grad = false);

  // A leaf whose gradient accumulates in place into `grad` (a view into a flat gradient buffer).
  static Var parameter(Tensor value, Tensor grad, std::shared_ptr<LeafGroup> group = nullptr);

  // The result of an op. Records `inputs` and `fn` only if grad mode is on and some input
  // requires grad; otherwise the result is a plain constant and nothing is kept alive.
  static Var make(Tensor value, std::vector<Var> inputs, GradFn fn, const char* op);

  bool defined() const { return impl_ != nullptr; }
  const Tensor& value() const;
  const Tensor& grad() const;  // undefined Tensor if no gradient arrived
  bool requires_grad() const { return impl_ && impl_->requires_grad; }
  bool is_leaf() const { return impl_ && !impl_->grad_fn; }
  const char* op() const { return impl_ ? impl_->op : "undefined"; }

  const Shape& shape() const { return value().shape(); }
  int64_t size(int64_t d) const { return value().size(d); }
  int64_t dim() const { return value().dim(); }
  DType dtype() const { return value().dtype(); }

  // Accumulates g (same shape as value) into this Var's gradient. Called by GradFns.
  void add_grad(const Tensor& g) const;
  // For a GradFn that can add this Var's gradient so far to its own contribution while it writes
  // it (the norms' backward: the residual stream's x is read by the norm and by the residual add,
  // so its gradient arrives twice): that gradient, to read (never write), when one has arrived,
  // the Var is not a leaf, and it is a contiguous buffer of the value's shape, dtype `dt` and
  // device; else undefined, and the GradFn calls add_grad as usual.
  Tensor grad_to_fold(DType dt) const;
  // The GradFn wrote sum = grad_to_fold() + its contribution (a new buffer, the same bits as
  // add_grad of that contribution): sum becomes the gradient.
  void set_folded_grad(Tensor sum) const;

  // The same value, cut from the graph.
  Var detach() const { return Var(value(), false); }

  // Backpropagates from this Var: with no argument it must hold one element (seeded with 1).
  void backward() const;
  // run_group_hooks=false: a nested backward (activation checkpointing) whose caller fires them.
  void backward(const Tensor& grad_out, bool retain_graph = false, bool run_group_hooks = true) const;

  VarImpl* impl() const { return impl_.get(); }

 private:
  std::shared_ptr<VarImpl> impl_;
};

// Grad mode (thread-local, as in PyTorch): while a NoGradGuard lives, ops record nothing.
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};
class EnableGradGuard {  // turns grad mode back on (activation checkpointing's recompute)
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace zt
