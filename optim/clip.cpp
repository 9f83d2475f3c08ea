// defines: global_norm, clip_coefficient, clip_grad_norm (optim/clip.h)
#include "optim/clip.h"

#include <algorithm>
#include <cmath>

#include "core/kernels/shard_norm.h"  // defines: sum_of_squares, scale_

namespace zt {

double global_norm(const std::vector<Tensor>& grads) { return std::sqrt(sum_of_squares(grads)); }

double clip_coefficient(double norm, double max_norm) {
  if (!std::isfinite(norm)) return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

double clip_grad_norm(const std::vector<Tensor>& grads, double max_norm) {
  if (!(max_norm > 0)) ZT_THROW("clip_grad_norm: max_norm = ", max_norm, ", expected > 0");
  const double norm = global_norm(grads);
  const double coef = clip_coefficient(norm, max_norm);
  if (coef < 1.0) scale_(grads, coef);
  return norm;
}

}  // namespace zt
