// defines: accumulate_ (dst += alpha * src), the one kernel autograd itself needs.
#pragma once
#include "core/tensor.h"

namespace zt {

// dst += alpha * src. Same shape, dtype and device; any strides (contiguous is fast). On the cpu
// float32/float64; a tensor on another device runs on its backend (Backend::accumulate).
void accumulate_(Tensor& dst, const Tensor& src, double alpha = 1.0);

}  // namespace zt
