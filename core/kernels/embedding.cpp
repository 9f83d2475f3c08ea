// defines: embedding_forward, embedding_backward (core/kernels/embedding.h)
#include "core/kernels/embedding.h"

#include <cstring>

#include "core/parallel.h"

namespace zt {

template <class T>
void embedding_forward(T* out, const int32_t* ids, const T* table, int64_t n, int64_t C) {
#pragma omp parallel for schedule(static) if (n * C > kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0) {  // -1: another rank's row (vocabulary parallelism)
      std::memset(out + i * C, 0, static_cast<size_t>(C) * sizeof(T));
      continue;
    }
    std::memcpy(out + i * C, table + static_cast<int64_t>(ids[i]) * C, static_cast<size_t>(C) * sizeof(T));
  }
}

template <class T>
void embedding_backward(T* dtable, const T* dout, const int32_t* ids, int64_t n, int64_t C) {
  constexpr int64_t kCols = 32;  // columns per task
  const int64_t nt = (C + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (n * C > kParallelMinElements && nt > 1)
  for (int64_t t = 0; t < nt; ++t) {
    const int64_t c0 = t * kCols, c1 = c0 + kCols < C ? c0 + kCols : C;
    for (int64_t i = 0; i < n; ++i) {
      if (ids[i] < 0) continue;  // -1: another rank's row
      T* dst = dtable + static_cast<int64_t>(ids[i]) * C;
      const T* src = dout + i * C;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  }
}

template void embedding_forward<float>(float*, const int32_t*, const float*, int64_t, int64_t);
template void embedding_forward<double>(double*, const int32_t*, const double*, int64_t, int64_t);
template void embedding_backward<float>(float*, const float*, const int32_t*, int64_t, int64_t);
template void embedding_backward<double>(double*, const double*, const int32_t*, int64_t, int64_t);

}  // namespace zt
