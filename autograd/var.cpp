// defines: grad_enabled, NoGradGuard (constructor, destructor), EnableGradGuard (constructor, destructor),
//          Var (constructor, parameter, make, value, grad, add_grad, grad_to_fold, set_folded_grad)
//          (autograd/var.h); file-local: check_grad_dtype
#include "autograd/var.h"

#include "core/backend.h"
#include "core/kernels/accumulate.h"

namespace zt {

namespace {
thread_local bool g_grad_enabled = true;

// A value that can carry a gradient: a compute dtype of its backend (cpu: float32, float64,
// bfloat16; cuda: float32, bfloat16).
void check_grad_dtype(const Tensor& value, const char* what) {
  if (!backend_of(value).computes(value.dtype()))
    ZT_THROW(what, ": ", value.str(), " on ", value.device().str(), " has dtype ", dtype_name(value.dtype()),
             ", which that device's kernels do not compute in");
}
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }
EnableGradGuard::EnableGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = true; }
EnableGradGuard::~EnableGradGuard() { g_grad_enabled = prev_; }

Var::Var(Tensor value, bool requires_grad) : impl_(std::make_shared<VarImpl>()) {
  ZT_CHECK(value.defined(), "Var from an undefined tensor");
  if (requires_grad) check_grad_dtype(value, "a Var that requires grad");
  impl_->value = std::move(value);
  impl_->requires_grad = requires_grad;
}

Var Var::parameter(Tensor value, Tensor grad, std::shared_ptr<LeafGroup> group) {
  check_shape(grad, value.shape(), "Var::parameter: gradient buffer");
  ZT_CHECK(grad.dtype() == value.dtype(), "Var::parameter: gradient dtype differs from value dtype");
  ZT_CHECK(grad.device() == value.device(), "Var::parameter: gradient on ", grad.device().str(), ", value on ",
           value.device().str());
  Var v(std::move(value), true);
  v.impl_->grad = std::move(grad);
  v.impl_->grad_owned = true;
  v.impl_->group = std::move(group);
  v.impl_->op = "parameter";
  return v;
}

Var Var::make(Tensor value, std::vector<Var> inputs, GradFn fn, const char* op) {
  bool any = false;
  if (g_grad_enabled)
    for (const Var& in : inputs) any = any || in.requires_grad();
  Var v(std::move(value), false);
  v.impl_->op = op;
  if (any) {
    v.impl_->requires_grad = true;
    v.impl_->inputs = std::move(inputs);
    v.impl_->grad_fn = std::move(fn);
  }
  return v;
}

const Tensor& Var::value() const {
  ZT_CHECK(impl_, "value() of an undefined Var");
  return impl_->value;
}

const Tensor& Var::grad() const {
  ZT_CHECK(impl_, "grad() of an undefined Var");
  return impl_->grad;
}

void Var::add_grad(const Tensor& g) const {
  if (!requires_grad()) return;
  VarImpl& v = *impl_;
  check_shape(g, v.value.shape(), v.op);
  if (g.device() != v.value.device())
    ZT_THROW(v.op, ": gradient on ", g.device().str(), " for a value on ", v.value.device().str(),
             " (a gradient lives on its value's device)");
  if (!v.grad.defined()) {
    // First contribution. A leaf's gradient is user-visible: copy it. An intermediate's is
    // only read by its own GradFn: keep g as it is (no copy), but never write into it.
    if (is_leaf()) {
      v.grad = g.clone(Category::activations);  // same device; parameters never get here: their grads are pre-bound
      v.grad_owned = true;
    } else {
      v.grad = g;
      v.grad_owned = false;
    }
    return;
  }
  if (!v.grad_owned) {  // second contribution to a borrowed gradient: make it ours first
    // Contiguous (the usual case: two ops' input gradients): the sum straight into a new buffer,
    // one pass over both — the bits of the copy then the add below, without the copy's pass.
    Backend& be = backend_of(g);
    if (v.grad.is_contiguous() && g.is_contiguous() && g.dtype() == v.grad.dtype() && be.computes(g.dtype())) {
      Tensor sum = Tensor::empty(v.grad.shape(), g.dtype(), Category::activations, be.allocator());
      be.binary(BinaryOp::add, sum, v.grad, g);
      v.grad = std::move(sum);
      v.grad_owned = true;
      return;
    }
    v.grad = v.grad.clone(Category::activations);
    v.grad_owned = true;
  }
  accumulate_(v.grad, g);  // on the gradient's device (core/kernels/accumulate.h)
}

Tensor Var::grad_to_fold(DType dt) const {
  if (!requires_grad() || is_leaf()) return Tensor();
  const VarImpl& v = *impl_;
  const Tensor& g = v.grad;
  if (!g.defined() || !g.is_contiguous() || g.dtype() != dt || g.shape() != v.value.shape() ||
      g.device() != v.value.device())
    return Tensor();
  return g;
}

void Var::set_folded_grad(Tensor sum) const {
  VarImpl& v = *impl_;
  check_shape(sum, v.value.shape(), v.op);
  ZT_CHECK(v.grad.defined() && !is_leaf(), v.op, ": set_folded_grad without a gradient to fold into");
  v.grad = std::move(sum);
  v.grad_owned = true;
}

}  // namespace zt
