// defines: opt, need_contiguous, rows_cols — the small helpers of the cpu backend's kernel entries
//          (core/cpu_backend_ops.cpp, core/cpu_backend_fused.cpp, core/cpu_backend_attention.cpp).
//          Private to core/cpu_backend*.cpp.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "core/check.h"
#include "core/tensor.h"

namespace zt::cpu_detail {

// The data of an optional output (null when undefined: not wanted). data<T>() checks the dtype.
template <class T>
T* opt(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// Every defined tensor contiguous (the table's convention; views would be read wrongly).
inline void need_contiguous(const char* entry, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    ZT_CHECK(!t->defined() || t->is_contiguous(), "cpu backend ", entry, ": ", t->str(), " is not contiguous");
}

// (R, N) of a row layout: N the last dimension, R the rows (0 when N == 0: nothing to do).
// Callers copy the pair into named ints, not a structured binding: the kernels' lambdas capture
// them, which clang before 16 refuses for bindings (the fuzz build, scripts/fuzz.sh, is clang 14).
inline std::pair<int64_t, int64_t> rows_cols(const Tensor& t) {
  const int64_t N = t.dim() ? t.size(-1) : 1;
  return {N ? t.numel() / N : 0, N};
}

}  // namespace zt::cpu_detail
