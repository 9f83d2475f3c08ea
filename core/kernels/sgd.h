// defines: sgd_update (one fused SGD step on raw contiguous arrays) — the CPU kernel behind the cpu
//          backend's sgd_step (optim/sgd.h's Sgd calls it through the backend).
//
// Semantics: torch.optim.SGD with dampening = 0 (PyTorch's _single_tensor_sgd), with
// lr, mu = momentum, wd = weight_decay of h (core/backend.h's SgdArgs), each rounded once to T:
//
//   d   = g + wd * p                (only where h.decay; L2, coupled to the gradient)
//   buf = mu * buf + d              (mu > 0; buf starts at 0, so step 1 gives buf = d,
//                                    exactly PyTorch's buf = clone(d))
//   d   = d + mu * buf  (nesterov)  or  d = buf  (plain momentum)
//   p   = p - lr * d
//
// Per element, in T, exactly these expressions in this order (the loops of core/kernels/sgd.cpp):
//
//   mu == 0:  p' = p - lr * (g + wd * p)
//   mu > 0:   d = g + wd * p;  b = mu * buf + d;  buf' = b;  p' = p - lr * (nesterov ? d + mu * b : b)
//
// (wd is 0 where !h.decay.) These are plain a * b + c, as optim/sgd.cpp wrote them before the
// update went through the backend, so that training stays bitwise what it was; the compiler may
// contract them into fused multiply-adds (GCC's default -ffp-contract=fast does where the target
// has FMA, as with -march=native on a current x86-64 CPU). The bits are thus those of the build,
// the same for every call and every thread count. The GPU kernel (cuda/kernels/sgd.h) rounds each
// operation on its own, so it can differ from a contracting CPU build in the last bits.
//
// Memory and threads: one pass over memory (p, g, buf each read once, p and buf written once).
// OpenMP static split + SIMD above kParallelMinElements (core/parallel.h): every element takes the
// same operations wherever it lies, so the result is bitwise the same for any thread count and
// any shard boundaries (a rank's shard update equals the full update restricted to it).
#pragma once
#include <cstdint>

#include "core/backend.h"  // SgdArgs

namespace zt {

// n contiguous elements; T is float or double. buf: the momentum buffer (n elements), or nullptr
// when h.momentum == 0. param, grad, buf must not overlap.
template <class T> void sgd_update(T* param, const T* grad, T* buf, int64_t n, const SgdArgs& h);

extern template void sgd_update<float>(float*, const float*, float*, int64_t, const SgdArgs&);
extern template void sgd_update<double>(double*, const double*, double*, int64_t, const SgdArgs&);

}  // namespace zt
