// defines: zt::detail::op_backend (the one device of an op's inputs and its backend),
//          need_defined, need_compute, need_same_dtype, need_same_shape, new_output, direct_grad,
//          GradSlot, grad_slot, add_grad_unless_direct, linear_backward_slots, drop_last, Indices,
//          indices_for — the input checks, output allocation and gradient slots shared by
//          autograd/ops_*.cpp. Private to autograd/ (not part of the ops.h interface).
//
// Every message starts with "<op>: <arg>" and says what was expected and what came (device,
// dtype, shape), so a caller can tell which argument of which op was wrong. Device checks run
// before anything reads a tensor's memory.
#pragma once
#include <initializer_list>
#include <string>
#include <utility>

#include "autograd/var.h"
#include "core/backend.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace zt::detail {

// "<op>: <arg> is undefined"
inline void need_defined(const char* op, const char* arg, const Var& v) {
  if (!v.defined()) ZT_THROW(op, ": ", arg, " is undefined");
}

// The device of the op's tensor inputs (named Vars; undefined ones, an absent bias, are skipped):
// every one must be on the device of the first, else "<op>: <arg> is on <d> but <first> is on
// <d0>". Returns that device's backend (a zt::Error when the device has none). cpu when no input
// is defined (need_defined / need_compute then say which).
inline Backend& op_backend(const char* op, std::initializer_list<std::pair<const char*, const Var*>> inputs) {
  const char* first = nullptr;
  Device dev = Device::cpu();
  for (const auto& [name, v] : inputs) {
    if (!v->defined()) continue;
    const Device d = v->value().device();
    if (!first) {
      first = name;
      dev = d;
    } else if (d != dev) {
      ZT_THROW(op, ": ", name, " is on ", d.str(), " but ", first, " is on ", dev.str(),
               " (the tensors of one op must be on one device; move them with Tensor::to)");
    }
  }
  return backend(dev);
}

// "float32 or float64" (cpu), "float32 or bfloat16" (cuda): the compute dtypes of a backend.
inline std::string compute_dtype_names(const Backend& be) {
  std::string names;
  int count = 0, total = 0;
  const DType all[] = {DType::f32, DType::f64, DType::bf16, DType::f16};
  for (DType d : all) total += be.computes(d) ? 1 : 0;
  for (DType d : all) {
    if (!be.computes(d)) continue;
    if (count) names += count + 1 == total ? " or " : ", ";
    names += dtype_name(d);
    ++count;
  }
  return names;
}

// Defined, and of a dtype the backend's kernels compute in:
// "<op>: <arg>: expected a float32 or float64 tensor on cpu, got bfloat16(2, 3)".
inline void need_compute(const char* op, const char* arg, const Var& v, const Backend& be) {
  need_defined(op, arg, v);
  const DType d = v.dtype();
  if (!be.computes(d))
    ZT_THROW(op, ": ", arg, ": expected a ", compute_dtype_names(be), " tensor on ", be.device().str(), ", got ",
             dtype_name(d), shape_str(v.shape()));
}

// v (named arg) must have the dtype of ref (named ref_arg).
inline void need_same_dtype(const char* op, const char* arg, const Var& v, const char* ref_arg, const Var& ref) {
  if (v.dtype() != ref.dtype())
    ZT_THROW(op, ": ", arg, ": expected ", dtype_name(ref.dtype()), " (the same dtype as ", ref_arg, "), got ",
             dtype_name(v.dtype()));
}

// a and b must have the same shape.
inline void need_same_shape(const char* op, const char* an, const Var& a, const char* bn, const Var& b) {
  if (a.shape() != b.shape())
    ZT_THROW(op, ": ", an, " ", shape_str(a.shape()), " and ", bn, " ", shape_str(b.shape()),
             " must have the same shape");
}

// An op's output (or a gradient) on the backend's device: contiguous, Category::activations.
inline Tensor new_output(Backend& be, const Shape& s, DType dt) {
  return Tensor::empty(s, dt, Category::activations, be.allocator());
}

// The gradient buffer a GradFn may accumulate into directly, with exactly the effect of
// v.add_grad(g) (which, for a leaf whose gradient already exists and is owned, does grad += g):
// a parameter's pre-bound view into its unit's flat gradient buffer, for instance. Returns null
// when add_grad must be used (intermediate Var, first gradient of a plain leaf, odd layout).
// Saves a temporary the size of a weight (e.g. the 50257 x 768 token embedding) per backward.
inline Tensor* direct_grad(const Var& v, DType dt) {
  VarImpl* p = v.impl();
  if (!p || !p->requires_grad || p->grad_fn || !p->grad_owned || !p->grad.defined()) return nullptr;
  if (!p->grad.is_contiguous() || p->grad.dtype() != dt || p->grad.shape() != p->value.shape()) return nullptr;
  if (p->grad.device() != p->value.device()) return nullptr;
  return &p->grad;
}

// A parameter-like input's gradient in a backward: its buffer when direct_grad allows (the op
// adds into it), else a new tensor of `shape` handed to add_grad after; undefined when v wants none.
struct GradSlot {
  Tensor t;
  bool direct = false;
};
inline GradSlot grad_slot(Backend& be, const Var& v, const Shape& shape, DType dt) {
  if (!v.requires_grad()) return {};
  if (Tensor* d = direct_grad(v, dt)) return {*d, true};
  return {new_output(be, shape, dt), false};
}
inline void add_grad_unless_direct(Var& v, const GradSlot& s) {
  if (s.t.defined() && !s.direct) v.add_grad(s.t);
}

// Backend::linear_backward into slots: dx written, dw and db each written or added as their slot
// says (two calls when one is added and the other written: the entry takes one flag).
inline void linear_backward_slots(Backend& be, const Tensor& dx, const GradSlot& dw, const GradSlot& db,
                                  const Tensor& g, const Tensor& X, const Tensor& W) {
  if (dw.t.defined() && db.t.defined() && dw.direct != db.direct) {
    be.linear_backward(dx, dw.t, Tensor(), g, X, W, dw.direct);
    be.linear_backward(Tensor(), Tensor(), db.t, g, X, W, db.direct);
  } else if (dx.defined() || dw.t.defined() || db.t.defined()) {
    be.linear_backward(dx, dw.t, db.t, g, X, W, dw.direct || db.direct);
  }
}

inline Shape drop_last(const Shape& s) { return Shape(s.begin(), s.end() - 1); }

// An int32 index tensor (embedding ids, cross-entropy targets) as the host sees it (contiguous,
// on the cpu: validated there) and as the kernels need it (contiguous, on `dev`).
struct Indices {
  Tensor host, dev;
};
inline Indices indices_for(const Tensor& ids, const Device& dev) {
  Indices r;
  r.host = ids.device().is_cpu() ? ids.contiguous() : ids.to(Device::cpu(), Category::workspace);
  r.dev = ids.device() == dev ? ids.contiguous() : r.host.to(dev, Category::activations);
  return r;
}

}  // namespace zt::detail
