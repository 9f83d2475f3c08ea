// defines: accumulate_ (dst += alpha * src), the one kernel autograd itself needs.
#pragma once
#include "core/tensor.h"

namespace zt {

// dst += alpha * src. Same shape and dtype (float32/float64); any strides (contiguous is fast).
void accumulate_(Tensor& dst, const Tensor& src, double alpha = 1.0);

}  // namespace zt
