// defines: layernorm_forward, residual_layernorm_forward, layernorm_backward, rmsnorm_forward,
//          residual_rmsnorm_forward, rmsnorm_backward (core/kernels/norm.h); file-local: num_chunks,
//          chunk_begin, combine_partials, layernorm_row, rmsnorm_row, residual_row
#include "core/kernels/norm.h"

#include <algorithm>
#include <cmath>

#include "core/kernels/vec_math.h"
#include "core/tensor.h"

namespace zt {

namespace {

inline int64_t num_chunks(int64_t N) { return norm_backward_chunks(N); }
inline int64_t chunk_begin(int64_t c, int64_t N, int64_t nch) { return c * N / nch; }

// out[i] = sum over chunks k (in order) of partial[k*C + i].
template <class T>
void combine_partials(T* out, const T* partial, int64_t nch, int64_t C) {
#pragma omp parallel for schedule(static) if (nch * C > 65536)
  for (int64_t i = 0; i < C; ++i) {
    T s = 0;
    for (int64_t k = 0; k < nch; ++k) s += partial[k * C + i];
    out[i] = s;
  }
}

// One row of LayerNorm: outr (C) from xr (C); its mean and rstd. layernorm_forward and
// residual_layernorm_forward both run it, so their rows are the same bits.
template <class T>
inline void layernorm_row(T* outr, T& mean, T& rstd, const T* xr, const T* w, const T* b, int64_t C, T eps) {
  const T inv_c = T(1) / static_cast<T>(C);
  const T m = vm::lane_sum<T>(C, [&](int64_t i) { return xr[i]; }) * inv_c;
  const T v = vm::lane_sum<T>(C, [&](int64_t i) { const T d = xr[i] - m; return d * d; }) * inv_c;
  const T s = T(1) / std::sqrt(v + eps);
  if (b) {
#pragma omp simd
    for (int64_t i = 0; i < C; ++i) outr[i] = (xr[i] - m) * s * w[i] + b[i];
  } else {
#pragma omp simd
    for (int64_t i = 0; i < C; ++i) outr[i] = (xr[i] - m) * s * w[i];
  }
  mean = m;
  rstd = s;
}

// One row of RMSNorm (rmsnorm_forward and residual_rmsnorm_forward).
template <class T>
inline void rmsnorm_row(T* outr, T& rstd, const T* xr, const T* w, int64_t C, T eps) {
  const T inv_c = T(1) / static_cast<T>(C);
  const T ms = vm::lane_sum<T>(C, [&](int64_t i) { return xr[i] * xr[i]; }) * inv_c;
  const T s = T(1) / std::sqrt(ms + eps);
#pragma omp simd
  for (int64_t i = 0; i < C; ++i) outr[i] = xr[i] * s * w[i];
  rstd = s;
}

// hr (C) = xr + yr: the residual row, written before its norm reads it (still in L1).
template <class T>
inline void residual_row(T* hr, const T* xr, const T* yr, int64_t C) {
#pragma omp simd
  for (int64_t i = 0; i < C; ++i) hr[i] = xr[i] + yr[i];
}

}  // namespace

template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b, int64_t N, int64_t C,
                       double eps) {
  const T teps = static_cast<T>(eps);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < N; ++r) layernorm_row(out + r * C, mean[r], rstd[r], x + r * C, w, b, C, teps);
}

template <class T>
void residual_layernorm_forward(T* h, T* out, T* mean, T* rstd, const T* x, const T* y, const T* w, const T* b,
                                int64_t N, int64_t C, double eps) {
  const T teps = static_cast<T>(eps);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < N; ++r) {
    residual_row(h + r * C, x + r * C, y + r * C, C);
    layernorm_row(out + r * C, mean[r], rstd[r], h + r * C, w, b, C, teps);
  }
}

template <class T>
void layernorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w, const T* mean,
                        const T* rstd, int64_t N, int64_t C) {
  if (N == 0 || C == 0) {
    if (dw) std::fill(dw, dw + C, T(0));
    if (db) std::fill(db, db + C, T(0));
    return;
  }
  const int64_t nch = num_chunks(N);
  Tensor pw, pb;  // per-chunk partial sums (nch, C)
  if (dw) pw = Tensor::empty({nch, C}, dtype_of<T>::value, Category::workspace);
  if (db) pb = Tensor::empty({nch, C}, dtype_of<T>::value, Category::workspace);
  T* pdw_all = dw ? pw.data<T>() : nullptr;
  T* pdb_all = db ? pb.data<T>() : nullptr;
  const T inv_c = T(1) / static_cast<T>(C);

#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < nch; ++k) {
    T* pdw = pdw_all ? pdw_all + k * C : nullptr;
    T* pdb = pdb_all ? pdb_all + k * C : nullptr;
    if (pdw) std::fill(pdw, pdw + C, T(0));
    if (pdb) std::fill(pdb, pdb + C, T(0));
    for (int64_t r = chunk_begin(k, N, nch); r < chunk_begin(k + 1, N, nch); ++r) {
      const T* xr = x + r * C;
      const T* gr = dout + r * C;
      const T m = mean[r], s = rstd[r];
      if (dx) {
        // mean(g) and mean(g * xhat), g = dout * w
        const T gm = vm::lane_sum<T>(C, [&](int64_t i) { return gr[i] * w[i]; }) * inv_c;
        const T gxm = vm::lane_sum<T>(C, [&](int64_t i) { return gr[i] * w[i] * ((xr[i] - m) * s); }) * inv_c;
        T* dxr = dx + r * C;
#pragma omp simd
        for (int64_t i = 0; i < C; ++i) {
          const T xhat = (xr[i] - m) * s;
          dxr[i] = s * (gr[i] * w[i] - gm - xhat * gxm);
        }
      }
      if (pdw) {
#pragma omp simd
        for (int64_t i = 0; i < C; ++i) pdw[i] += gr[i] * ((xr[i] - m) * s);
      }
      if (pdb) {
#pragma omp simd
        for (int64_t i = 0; i < C; ++i) pdb[i] += gr[i];
      }
    }
  }
  if (dw) combine_partials(dw, pdw_all, nch, C);
  if (db) combine_partials(db, pdb_all, nch, C);
}

template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, int64_t N, int64_t C, double eps) {
  const T teps = static_cast<T>(eps);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < N; ++r) rmsnorm_row(out + r * C, rstd[r], x + r * C, w, C, teps);
}

template <class T>
void residual_rmsnorm_forward(T* h, T* out, T* rstd, const T* x, const T* y, const T* w, int64_t N, int64_t C,
                              double eps) {
  const T teps = static_cast<T>(eps);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < N; ++r) {
    residual_row(h + r * C, x + r * C, y + r * C, C);
    rmsnorm_row(out + r * C, rstd[r], h + r * C, w, C, teps);
  }
}

template <class T>
void rmsnorm_backward(T* dx, T* dw, const T* dout, const T* x, const T* w, const T* rstd, int64_t N, int64_t C) {
  if (N == 0 || C == 0) {
    if (dw) std::fill(dw, dw + C, T(0));
    return;
  }
  const int64_t nch = num_chunks(N);
  Tensor pw;
  if (dw) pw = Tensor::empty({nch, C}, dtype_of<T>::value, Category::workspace);
  T* pdw_all = dw ? pw.data<T>() : nullptr;
  const T inv_c = T(1) / static_cast<T>(C);

#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < nch; ++k) {
    T* pdw = pdw_all ? pdw_all + k * C : nullptr;
    if (pdw) std::fill(pdw, pdw + C, T(0));
    for (int64_t r = chunk_begin(k, N, nch); r < chunk_begin(k + 1, N, nch); ++r) {
      const T* xr = x + r * C;
      const T* gr = dout + r * C;
      const T s = rstd[r];
      if (dx) {
        const T gxm = vm::lane_sum<T>(C, [&](int64_t i) { return gr[i] * w[i] * (xr[i] * s); }) * inv_c;
        T* dxr = dx + r * C;
#pragma omp simd
        for (int64_t i = 0; i < C; ++i) dxr[i] = s * (gr[i] * w[i] - (xr[i] * s) * gxm);
      }
      if (pdw) {
#pragma omp simd
        for (int64_t i = 0; i < C; ++i) pdw[i] += gr[i] * (xr[i] * s);
      }
    }
  }
  if (dw) combine_partials(dw, pdw_all, nch, C);
}

#define ZT_NORM_INSTANTIATE(T)                                                                             \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t, double);  \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, int64_t, \
                                      int64_t);                                                            \
  template void rmsnorm_forward<T>(T*, T*, const T*, const T*, int64_t, int64_t, double);                  \
  template void residual_layernorm_forward<T>(T*, T*, T*, T*, const T*, const T*, const T*, const T*, int64_t,   \
                                              int64_t, double);                                            \
  template void residual_rmsnorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t, double); \
  template void rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const T*, int64_t, int64_t);
ZT_NORM_INSTANTIATE(float)
ZT_NORM_INSTANTIATE(double)
#undef ZT_NORM_INSTANTIATE

}  // namespace zt
