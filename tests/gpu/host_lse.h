// defines: zt::test::host_lse — the float64 row log-sum-exp of causal attention scores, the
//          reference for the `saved` statistics of the GPU attention kernels (ours and cuDNN's).
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/tensor.h"

namespace zt::test {

// q (B, T, Hq, D), k (B, T, Hkv, D) on the host -> lse (B, Hq, T):
// lse_t = log sum_{j <= t} exp(q_t . k_j / sqrt(D)), query head h reading kv head h / (Hq / Hkv).
inline std::vector<double> host_lse(int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D, const Tensor& q,
                                    const Tensor& k) {
  const auto qv = q.to_vector(), kv = k.to_vector();
  const int64_t G = Hq / Hkv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> lse(static_cast<size_t>(B * Hq * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(static_cast<size_t>(t + 1));
        double mx = -INFINITY;
        for (int64_t j = 0; j <= t; ++j) {
          double a = 0;
          for (int64_t d = 0; d < D; ++d)
            a += qv[static_cast<size_t>(((b * T + t) * Hq + h) * D + d)] *
                 kv[static_cast<size_t>(((b * T + j) * Hkv + h / G) * D + d)];
          s[static_cast<size_t>(j)] = a * scale;
          mx = std::max(mx, a * scale);
        }
        double sum = 0;
        for (double x : s) sum += std::exp(x - mx);
        lse[static_cast<size_t>((b * Hq + h) * T + t)] = mx + std::log(sum);
      }
  return lse;
}

}  // namespace zt::test
