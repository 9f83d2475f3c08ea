// defines: rope_tables, rope_apply (core/kernels/rope.h)
#include "core/kernels/rope.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace zt {

template <class T>
void rope_tables(T* cos_t, T* sin_t, int64_t T_len, int64_t D, const RopeParams& p) {
  const int64_t half = D / 2;
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t d = 0; d < half; ++d) inv_freq[d] = rope_inv_freq(d, D, p);
#pragma omp parallel for schedule(static) if (T_len * half > 4096)
  for (int64_t t = 0; t < T_len; ++t) {
    for (int64_t d = 0; d < half; ++d) {
      const double a = static_cast<double>(t) * inv_freq[d];
      cos_t[t * half + d] = static_cast<T>(std::cos(a));
      sin_t[t * half + d] = static_cast<T>(std::sin(a));
    }
  }
}

template <class T>
void rope_apply(T* out, const T* x, const T* cos_t, const T* sin_t, int64_t B, int64_t T_len, int64_t H, int64_t D,
                bool inverse, int64_t rot_heads) {
  const int64_t half = D / 2;
  const T sign = inverse ? T(-1) : T(1);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T_len; ++t) {
      const T* c = cos_t + t * half;
      const T* s = sin_t + t * half;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t off = ((b * T_len + t) * H + h) * D;
        const T* xr = x + off;
        T* o = out + off;
        if (h >= rot_heads) {
          if (o != xr) std::copy(xr, xr + D, o);
          continue;
        }
#pragma omp simd
        for (int64_t d = 0; d < half; ++d) {
          const T x0 = xr[d], x1 = xr[d + half], sn = sign * s[d];
          o[d] = x0 * c[d] - x1 * sn;
          o[d + half] = x1 * c[d] + x0 * sn;
        }
      }
    }
}

template void rope_tables<float>(float*, float*, int64_t, int64_t, const RopeParams&);
template void rope_tables<double>(double*, double*, int64_t, int64_t, const RopeParams&);
template void rope_apply<float>(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t,
                                bool, int64_t);
template void rope_apply<double>(double*, const double*, const double*, const double*, int64_t, int64_t, int64_t,
                                 int64_t, bool, int64_t);

}  // namespace zt
