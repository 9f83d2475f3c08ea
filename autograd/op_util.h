// defines: zt::detail::dispatch (dtype -> float/double), need_defined, need_float,
//          need_same_dtype, need_same_shape — the input checks shared by ops_basic.cpp and
//          ops_nn.cpp. Private to autograd/ (not part of the ops.h interface).
//
// Every message starts with "<op>: <arg>" and says what was expected and what came (dtype,
// shape), so a caller can tell which argument of which op was wrong.
#pragma once
#include "autograd/var.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace zt::detail {

// Runs f(T{}) with T = float or double, the compute type of dt; returns what f returns.
// Use: dispatch(dt, [&](auto tag) { using T = decltype(tag); ... });
template <class F>
decltype(auto) dispatch(DType dt, F&& f) {
  if (dt == DType::f32) return f(float{});
  ZT_CHECK(dt == DType::f64, "dispatch: compute dtype expected, got ", dtype_name(dt));
  return f(double{});
}

// "<op>: <arg> is undefined"
inline void need_defined(const char* op, const char* arg, const Var& v) {
  if (!v.defined()) ZT_THROW(op, ": ", arg, " is undefined");
}

// Defined and float32 or float64.
inline void need_float(const char* op, const char* arg, const Var& v) {
  need_defined(op, arg, v);
  const DType d = v.dtype();
  if (d != DType::f32 && d != DType::f64)
    ZT_THROW(op, ": ", arg, ": expected a float32 or float64 tensor, got ", dtype_name(d), shape_str(v.shape()));
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

}  // namespace zt::detail
