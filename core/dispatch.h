// defines: DTypeTag, dtype_choices, dtype_in, need_dtype, dispatch_dtype, dispatch_float,
//          dispatch_bool — the one dtype dispatch: a tensor's runtime DType to the compile-time
//          instantiation of a kernel, or a zt::Error naming the op and the dtype.
//
// Every backend op picks its kernel from its tensors' dtype. That choice is written once, here:
//
//   // GPU kernels are templates on the storage dtype (cuda/kernels/dispatch.h wraps this):
//   dispatch_dtype<DType::f32, DType::bf16>(t, "cuda_kernels::", "gelu_forward", [&](auto d) {
//     constexpr DType D = decltype(d)::value;  // DType::f32 or DType::bf16
//     kernel<D><<<grid, threads, 0, s>>>(...);
//   });
//   // CPU kernels are templates on the C++ type (float for float32, double for float64):
//   dispatch_float(x.dtype(), "cpu backend ", "gelu", [&](auto tag) {
//     using T = decltype(tag);  // float or double
//     gelu_forward(out.data<T>(), x.data<T>(), x.numel());
//   });
//
// A dtype outside the list throws zt::Error("<where><op>: dtype <dt>, expected <the list>"), e.g.
// "cuda_kernels::gelu_forward: dtype float64, expected float32 or bfloat16"; the message is built
// only then. f must return the same type for every dtype of the list (usually void); the dispatch
// returns it. Plain C++20: the host code of nvcc (cuda/kernels/*.cu) compiles it too.
#pragma once
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "core/check.h"
#include "core/dtype.h"

namespace zt {

// A dtype as a type: decltype(tag)::value is the DType, usable as a template argument.
template <DType D>
using DTypeTag = std::integral_constant<DType, D>;

// The names of Ds in order, as a message lists them: "float32", "float32 or bfloat16",
// "float32, float64, bfloat16 or float16".
template <DType... Ds>
std::string dtype_choices() {
  static_assert(sizeof...(Ds) >= 1, "a dispatch needs at least one dtype");
  const DType ds[] = {Ds...};
  std::string s;
  for (size_t i = 0; i < sizeof...(Ds); ++i) {
    if (i) s += i + 1 == sizeof...(Ds) ? " or " : ", ";
    s += dtype_name(ds[i]);
  }
  return s;
}

// Whether dt is one of Ds.
template <DType... Ds>
constexpr bool dtype_in(DType dt) {
  return ((dt == Ds) || ...);
}

// The check alone, for an op that refuses a dtype before it checks its other arguments (and
// dispatches later): throws the dispatch's message unless dt is one of Ds.
template <DType... Ds>
void need_dtype(DType dt, const char* where, const char* op) {
  if (!dtype_in<Ds...>(dt))
    ZT_THROW(where, op, ": dtype ", dtype_name(dt), ", expected ", dtype_choices<Ds...>());
}

namespace detail {
// f(DTypeTag<D>{}) for the D of the list equal to dt; dt is known to be in the list, so the last
// one is taken without a comparison.
template <DType D, DType... Rest>
struct DTypeDispatch {
  template <class F>
  static decltype(auto) run(DType dt, F& f) {
    if constexpr (sizeof...(Rest) == 0) {
      (void)dt;
      return f(DTypeTag<D>{});
    } else {
      if (dt == D) return f(DTypeTag<D>{});
      return DTypeDispatch<Rest...>::run(dt, f);
    }
  }
};
}  // namespace detail

// f(DTypeTag<D>{}) for the D of Ds equal to dt; otherwise the zt::Error above.
template <DType... Ds, class F>
decltype(auto) dispatch_dtype(DType dt, const char* where, const char* op, F&& f) {
  need_dtype<Ds...>(dt, where, op);
  return detail::DTypeDispatch<Ds...>::run(dt, f);
}

// The CPU kernels' compute types: f(float{}) for float32, f(double{}) for float64 (bfloat16 runs
// on float32 stand-ins before it gets here: core/cpu_bf16.h); any other dtype is the zt::Error.
template <class F>
decltype(auto) dispatch_float(DType dt, const char* where, const char* op, F&& f) {
  return dispatch_dtype<DType::f32, DType::f64>(dt, where, op, [&](auto d) -> decltype(auto) {
    if constexpr (decltype(d)::value == DType::f32) return f(float{});
    else return f(double{});
  });
}

// f(std::true_type{}) or f(std::false_type{}): a runtime flag (a vector path, a scale to apply)
// as a template argument of the kernel, decltype(b)::value.
template <class F>
decltype(auto) dispatch_bool(bool b, F&& f) {
  if (b) return f(std::true_type{});
  return f(std::false_type{});
}

}  // namespace zt
