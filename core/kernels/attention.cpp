#include "core/kernels/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "core/kernels/gemm.h"
#include "core/kernels/vec_math.h"
#include "core/kernels/softmax.h"
#include "core/tensor.h"

namespace zt {

namespace {

// Row i of a causal softmax in place: s[0..i] -> softmax, s[i+1 .. end) -> 0.
template <class T>
inline void causal_softmax_row(T* s, int64_t i, int64_t end) {
  softmax_row(s, s, i + 1);
  for (int64_t j = i + 1; j < end; ++j) s[j] = T(0);
}

struct Dims {
  int64_t B, T, Hq, Hkv, D, group, ldq, ldk;  // ldq = Hq*D, ldk = Hkv*D
};

}  // namespace

template <class T>
void attention_forward(T* out, T* P, const T* q, const T* k, const T* v, int64_t B, int64_t T_len, int64_t Hq,
                       int64_t Hkv, int64_t D, int64_t block) {
  ZT_CHECK(Hkv > 0 && Hq % Hkv == 0 && block > 0, "attention_forward: Hq ", Hq, " Hkv ", Hkv, " block ", block);
  if (B * T_len * Hq * D == 0) return;
  const Dims d{B, T_len, Hq, Hkv, D, Hq / Hkv, Hq * D, Hkv * D};
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
  const int64_t rows = std::min(block, T_len);
  Tensor scratch;  // (threads, block, T) when P is not kept: one row block of S at a time
  if (!P) scratch = Tensor::empty({omp_get_max_threads(), rows, T_len}, dtype_of<T>::value, Category::workspace);

#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / d.group;
      const T* Q = q + b * T_len * d.ldq + h * D;  // (T, D), row stride ldq
      const T* K = k + b * T_len * d.ldk + hk * D;
      const T* V = v + b * T_len * d.ldk + hk * D;
      T* O = out + b * T_len * d.ldq + h * D;
      T* S = P ? P + (b * Hq + h) * T_len * T_len : nullptr;  // (T, T)
      T* own = P ? nullptr : scratch.data<T>() + static_cast<int64_t>(omp_get_thread_num()) * rows * T_len;
      for (int64_t i0 = 0; i0 < T_len; i0 += block) {
        const int64_t i1 = std::min(T_len, i0 + block), m = i1 - i0;
        T* Sb = P ? S + i0 * T_len : own;  // rows [i0, i1) of S, row stride T
        // S[i0:i1, 0:i1] = scale * Q[i0:i1] K[0:i1]^T
        gemm<T>(false, true, m, i1, D, scale, Q + i0 * d.ldq, d.ldq, K, d.ldk, T(0), Sb, T_len);
        for (int64_t i = i0; i < i1; ++i) causal_softmax_row(Sb + (i - i0) * T_len, i, i1);
        // O[i0:i1] = P[i0:i1, 0:i1] V[0:i1]
        gemm<T>(false, false, m, D, i1, T(1), Sb, T_len, V, d.ldk, T(0), O + i0 * d.ldq, d.ldq);
      }
    }
}

template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* P,
                        int64_t B, int64_t T_len, int64_t Hq, int64_t Hkv, int64_t D, int64_t block) {
  ZT_CHECK(Hkv > 0 && Hq % Hkv == 0 && block > 0, "attention_backward: Hq ", Hq, " Hkv ", Hkv, " block ", block);
  if (B * T_len * Hq * D == 0) return;
  const Dims d{B, T_len, Hq, Hkv, D, Hq / Hkv, Hq * D, Hkv * D};
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
  Tensor scratch = Tensor::empty({omp_get_max_threads(), T_len, T_len}, dtype_of<T>::value, Category::workspace);
  // GQA: each query head writes its own dK/dV (B, Hq, T, D); the group's heads are summed below
  // in head order. MHA writes straight into dk/dv.
  Tensor dkh, dvh;
  if (d.group > 1) {
    dkh = Tensor::empty({B, Hq, T_len, D}, dtype_of<T>::value, Category::workspace);
    dvh = Tensor::empty({B, Hq, T_len, D}, dtype_of<T>::value, Category::workspace);
  }

#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / d.group;
      const T* Q = q + b * T_len * d.ldq + h * D;
      const T* K = k + b * T_len * d.ldk + hk * D;
      const T* V = v + b * T_len * d.ldk + hk * D;
      const T* dO = dout + b * T_len * d.ldq + h * D;
      T* dQ = dq + b * T_len * d.ldq + h * D;
      T *dK, *dV;
      int64_t ldkv;
      if (d.group > 1) {
        dK = dkh.data<T>() + (b * Hq + h) * T_len * D;
        dV = dvh.data<T>() + (b * Hq + h) * T_len * D;
        ldkv = D;
      } else {
        dK = dk + b * T_len * d.ldk + hk * D;
        dV = dv + b * T_len * d.ldk + hk * D;
        ldkv = d.ldk;
      }
      const T* Pb = P + (b * Hq + h) * T_len * T_len;  // (T, T)
      T* dS = scratch.data<T>() + static_cast<int64_t>(omp_get_thread_num()) * T_len * T_len;

      for (int64_t i0 = 0; i0 < T_len; i0 += block) {
        const int64_t i1 = std::min(T_len, i0 + block), m = i1 - i0;
        // dP[i0:i1, 0:i1] = dO[i0:i1] V[0:i1]^T
        gemm<T>(false, true, m, i1, D, T(1), dO + i0 * d.ldq, d.ldq, V, d.ldk, T(0), dS + i0 * T_len, T_len);
        // dS = P * (dP - rowsum(dP * P)) * scale on j <= i, 0 above the diagonal
        for (int64_t i = i0; i < i1; ++i) {
          const T* pr = Pb + i * T_len;
          T* sr = dS + i * T_len;
          const int64_t n = i + 1;
          const T c = vm::lane_dot(sr, pr, n);
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) sr[j] = pr[j] * (sr[j] - c) * scale;
          for (int64_t j = n; j < i1; ++j) sr[j] = T(0);
        }
        // dQ[i0:i1] = dS[i0:i1, 0:i1] K[0:i1]
        gemm<T>(false, false, m, D, i1, T(1), dS + i0 * T_len, T_len, K, d.ldk, T(0), dQ + i0 * d.ldq, d.ldq);
      }
      // Key block [j0, j1) receives from query rows [j0, T) only.
      for (int64_t j0 = 0; j0 < T_len; j0 += block) {
        const int64_t j1 = std::min(T_len, j0 + block), m = j1 - j0, r = T_len - j0;
        // dV[j0:j1] = P[j0:T, j0:j1]^T dO[j0:T]
        gemm<T>(true, false, m, D, r, T(1), Pb + j0 * T_len + j0, T_len, dO + j0 * d.ldq, d.ldq, T(0),
                dV + j0 * ldkv, ldkv);
        // dK[j0:j1] = dS[j0:T, j0:j1]^T Q[j0:T]
        gemm<T>(true, false, m, D, r, T(1), dS + j0 * T_len + j0, T_len, Q + j0 * d.ldq, d.ldq, T(0),
                dK + j0 * ldkv, ldkv);
      }
    }

  if (d.group > 1) {
    // dk[b, t, hk] = sum over g in order of dkh[b, hk*group + g, t] (same for dv).
    const T* pk = dkh.data<T>();
    const T* pv = dvh.data<T>();
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T_len; ++t)
        for (int64_t hk = 0; hk < Hkv; ++hk) {
          T* ok = dk + ((b * T_len + t) * Hkv + hk) * D;
          T* ov = dv + ((b * T_len + t) * Hkv + hk) * D;
          const int64_t h0 = hk * d.group;
          const T* sk = pk + ((b * Hq + h0) * T_len + t) * D;
          const T* sv = pv + ((b * Hq + h0) * T_len + t) * D;
#pragma omp simd
          for (int64_t e = 0; e < D; ++e) {
            ok[e] = sk[e];
            ov[e] = sv[e];
          }
          for (int64_t g = 1; g < d.group; ++g) {
            const int64_t off = g * T_len * D;
#pragma omp simd
            for (int64_t e = 0; e < D; ++e) {
              ok[e] += sk[off + e];
              ov[e] += sv[off + e];
            }
          }
        }
  }
}

template void attention_forward<float>(float*, float*, const float*, const float*, const float*, int64_t, int64_t,
                                       int64_t, int64_t, int64_t, int64_t);
template void attention_forward<double>(double*, double*, const double*, const double*, const double*, int64_t,
                                        int64_t, int64_t, int64_t, int64_t, int64_t);
template void attention_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                        const float*, const float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                        int64_t);
template void attention_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                         const double*, const double*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                         int64_t);

}  // namespace zt
