// defines: cuda_kernels::check_compute, dispatch_compute, dispatch_compute_vec,
//          dispatch_storage_pair — core/dispatch.h
//          for the GPU kernels: the compute dtypes float32 and bfloat16 (float32 math), and the
//          kernels' messages "cuda_kernels::<who>: dtype <dt>, expected float32 or bfloat16".
//
// A kernel of cuda/kernels is a template on its storage dtype D (dev::Io<D>: float, or bfloat16
// bits in uint16_t). A launcher checks its arguments, then instantiates it for the runtime dtype:
//
//   check_compute(who, t);                 // first, as every launcher refuses a dtype first
//   ...                                    // the launcher's other checks
//   dispatch_compute(t, who, [&](auto d) {
//     constexpr DType D = decltype(d)::value;
//     kernel<D><<<grid, kThreads, 0, s>>>(static_cast<typename dev::Io<D>::T*>(out), ...);
//   });
//
// Conversions between the storage dtypes (casts, copies) take a pair: dispatch_storage_pair. Other
// lists call dispatch_dtype<...>(t, "cuda_kernels::", who, f) of core/dispatch.h directly.
// Host code only (the kernels are launched from the lambda); nvcc and the C++ compiler both take it.
#pragma once
#include <type_traits>
#include <utility>

#include "core/dispatch.h"

namespace zt::cuda_kernels {

// Throws unless t is float32 or bfloat16.
inline void check_compute(const char* who, DType t) { need_dtype<DType::f32, DType::bf16>(t, "cuda_kernels::", who); }

// f(DTypeTag<DType::f32>{}) or f(DTypeTag<DType::bf16>{}) by t; another dtype throws.
template <class F>
decltype(auto) dispatch_compute(DType t, const char* who, F&& f) {
  return dispatch_dtype<DType::f32, DType::bf16>(t, "cuda_kernels::", who, std::forward<F>(f));
}

// f(dtype tag, std::bool_constant<vec>): the row kernels' vector path (16-byte packs) as a
// template argument too.
template <class F>
void dispatch_compute_vec(DType t, bool vec, const char* who, F&& f) {
  dispatch_compute(t, who, [&](auto d) { dispatch_bool(vec, [&](auto v) { f(d, v); }); });
}

// f(source tag, destination tag) for src_t, dst_t each float32, bfloat16 or float16 (the float
// storage dtypes that casts and copies convert between: 9 pairs); another dtype throws.
template <class F>
void dispatch_storage_pair(DType src_t, DType dst_t, const char* who, F&& f) {
  dispatch_dtype<DType::f32, DType::bf16, DType::f16>(src_t, "cuda_kernels::", who, [&](auto sd) {
    dispatch_dtype<DType::f32, DType::bf16, DType::f16>(dst_t, "cuda_kernels::", who, [&](auto dd) { f(sd, dd); });
  });
}

}  // namespace zt::cuda_kernels
