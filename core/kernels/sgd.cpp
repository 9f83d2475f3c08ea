// defines: sgd_update (core/kernels/sgd.h)
//
// The fused SGD kernel: the header's expressions, one OpenMP-parallel SIMD loop per case.
#include "core/kernels/sgd.h"

#include "core/check.h"
#include "core/parallel.h"  // kParallelMinElements

namespace zt {

template <class T>
void sgd_update(T* __restrict param, const T* __restrict grad, T* __restrict buf, int64_t n, const SgdArgs& h) {
  ZT_CHECK(n >= 0, "sgd_update: n = ", n);
  ZT_CHECK(buf != nullptr || h.momentum == 0, "sgd_update: momentum ", h.momentum, " needs a buffer");
  const T lr = static_cast<T>(h.lr), mu = static_cast<T>(h.momentum);
  const T wd = h.decay ? static_cast<T>(h.weight_decay) : T(0);
  const bool nesterov = h.nesterov;
  if (h.momentum == 0) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) param[i] = param[i] - lr * (grad[i] + wd * param[i]);
    return;
  }
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) {
    const T d = grad[i] + wd * param[i];
    const T b = mu * buf[i] + d;
    buf[i] = b;
    const T u = nesterov ? d + mu * b : b;
    param[i] = param[i] - lr * u;
  }
}

template void sgd_update<float>(float*, const float*, float*, int64_t, const SgdArgs&);
template void sgd_update<double>(double*, const double*, double*, int64_t, const SgdArgs&);

}  // namespace zt
