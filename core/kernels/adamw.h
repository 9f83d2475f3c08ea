// defines: adamw_update (one fused AdamW step on raw contiguous arrays) — the CPU kernel behind
//          the cpu backend's adamw_step (optim/adamw.h's AdamW calls it through the backend).
//
// Semantics: exactly torch.optim.AdamW (Loshchilov & Hutter 2019, "Decoupled Weight Decay
// Regularization", Algorithm 2; PyTorch's _single_tensor_adamw, amsgrad=False, maximize=False).
// With t = h.step (1-based):
//
//   p  = p * (1 - lr * wd)                       (only where h.decay; decoupled from the gradient)
//   m  = b1 * m + (1 - b1) * g
//   v  = b2 * v + (1 - b2) * g^2
//   denom = sqrt(v) / sqrt(1 - b2^t) + eps
//   p  = p - (lr / (1 - b1^t)) * m / denom
//
// The bias corrections 1 - b^t are computed in double (b2^t for b2 = 0.999 loses digits in
// float), the per-element arithmetic in T. One pass over memory: p, g, m, v are each read once
// and p, m, v written once; the loop is OpenMP-parallel (static split) and SIMD (float: AVX
// intrinsics, 8 lanes, the tail through the same vector code). Every element takes the same
// instructions wherever it lies, so the result is bitwise the same for any thread count and for
// any shard boundaries (a rank's shard update equals the full update restricted to it).
#pragma once
#include <cstdint>

#include "core/backend.h"  // AdamWArgs

namespace zt {

// n contiguous elements; T is float or double; param, grad, m, v must not overlap.
template <class T>
void adamw_update(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWArgs& h);

extern template void adamw_update<float>(float*, const float*, float*, float*, int64_t, const AdamWArgs&);
extern template void adamw_update<double>(double*, const double*, double*, double*, int64_t, const AdamWArgs&);

}  // namespace zt
