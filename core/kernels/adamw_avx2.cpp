// defines: range_avx2_fma; file-local: adamw8
//
// The avx2_fma path of the fused AdamW kernel (core/kernels/adamw.h): 8 float lanes of AVX2 + FMA
// intrinsics in functions compiled with target("avx2,fma"), so the path exists whatever -march
// the build uses; adamw.cpp calls it only after __builtin_cpu_supports("avx2") and ("fma").
#include "core/kernels/adamw.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstring>

namespace zt::adamw_detail {

namespace {

// 8 elements, the header's operations in its order (the portable path in adamw.cpp mirrors
// this line by line: _mm256_fmadd_ps / _mm256_fmsub_ps <-> std::fma). Intrinsics rather than
// auto-vectorization because GCC keeps a scalar errno path for std::sqrt (no -fno-math-errno).
__attribute__((target("avx2,fma"))) inline void adamw8(float* p, const float* g, float* m, float* v,
                                                       const Scalars<float>& s) {
  const __m256 gi = _mm256_loadu_ps(g);
  const __m256 mi = _mm256_fmadd_ps(_mm256_set1_ps(s.b1), _mm256_loadu_ps(m), _mm256_mul_ps(_mm256_set1_ps(s.c1), gi));
  const __m256 vi =
      _mm256_fmadd_ps(_mm256_set1_ps(s.b2), _mm256_loadu_ps(v), _mm256_mul_ps(_mm256_set1_ps(s.c2), _mm256_mul_ps(gi, gi)));
  _mm256_storeu_ps(m, mi);
  _mm256_storeu_ps(v, vi);
  const __m256 denom =
      _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), _mm256_set1_ps(s.bc2_sqrt)), _mm256_set1_ps(s.eps));
  const __m256 upd = _mm256_div_ps(_mm256_mul_ps(_mm256_set1_ps(s.step_size), mi), denom);
  // p * keep - upd in one rounding: fma(p, keep, -upd) (negation is exact).
  _mm256_storeu_ps(p, _mm256_fmsub_ps(_mm256_loadu_ps(p), _mm256_set1_ps(s.keep), upd));
}

}  // namespace

// 8 at a time, then the tail (< 8) through the same vector code on a zero-padded copy (the padded
// lanes compute on zeros and are dropped).
__attribute__((target("avx2,fma"))) void range_avx2_fma(float* __restrict param, const float* __restrict grad,
                                                        float* __restrict m, float* __restrict v, int64_t b, int64_t e,
                                                        const Scalars<float>& s) {
  int64_t i = b;
  for (; i + 8 <= e; i += 8) adamw8(param + i, grad + i, m + i, v + i, s);
  if (i < e) {
    const size_t k = static_cast<size_t>(e - i);
    float tp[8] = {}, tg[8] = {}, tm[8] = {}, tv[8] = {};
    std::memcpy(tp, param + i, k * sizeof(float));
    std::memcpy(tg, grad + i, k * sizeof(float));
    std::memcpy(tm, m + i, k * sizeof(float));
    std::memcpy(tv, v + i, k * sizeof(float));
    adamw8(tp, tg, tm, tv, s);
    std::memcpy(param + i, tp, k * sizeof(float));
    std::memcpy(m + i, tm, k * sizeof(float));
    std::memcpy(v + i, tv, k * sizeof(float));
  }
}

}  // namespace zt::adamw_detail

#endif  // x86
