// defines: attention_forward, attention_backward (core/kernels/attention.h); file-local: Dims, check_dims,
//          visible
#include "core/kernels/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "core/kernels/gemm.h"
#include "core/kernels/vec_math.h"
#include "core/tensor.h"

namespace zt {

namespace {

struct Dims {
  int64_t B, T, Hq, Hkv, D, group, ldq, ldk;  // ldq = Hq*D, ldk = Hkv*D
};

Dims check_dims(const char* who, int64_t B, int64_t T_len, int64_t Hq, int64_t Hkv, int64_t D,
                AttentionTiles tiles) {
  ZT_CHECK(B >= 0 && T_len >= 0 && D >= 0 && Hkv > 0 && Hq % Hkv == 0 && tiles.q > 0 && tiles.k > 0, who,
           ": B ", B, " T ", T_len, " Hq ", Hq, " Hkv ", Hkv, " D ", D, " tiles ", tiles.q, "x", tiles.k);
  return Dims{B, T_len, Hq, Hkv, D, Hq / Hkv, Hq * D, Hkv * D};
}

// Keys of tile [j0, j0 + cols) that query row i may see (j <= i): 0 .. cols.
inline int64_t visible(int64_t i, int64_t j0, int64_t cols) { return std::clamp<int64_t>(i - j0 + 1, 0, cols); }

}  // namespace

template <class T>
void attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, int64_t B, int64_t T_len, int64_t Hq,
                       int64_t Hkv, int64_t D, AttentionTiles tiles) {
  const Dims d = check_dims("attention_forward", B, T_len, Hq, Hkv, D, tiles);
  if (B * T_len * Hq * D == 0) return;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
  const int64_t br = std::min(tiles.q, T_len), bc = std::min(tiles.k, T_len);
  const int64_t per_thread = attention_forward_scratch(T_len, tiles);
  Tensor scratch = Tensor::empty({omp_get_max_threads(), per_thread}, dtype_of<T>::value, Category::workspace);

#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / d.group;
      const T* Q = q + b * T_len * d.ldq + h * D;  // (T, D), row stride ldq
      const T* K = k + b * T_len * d.ldk + hk * D;  // (T, D), row stride ldk
      const T* V = v + b * T_len * d.ldk + hk * D;
      T* O = out + b * T_len * d.ldq + h * D;  // (T, D), row stride ldq: the accumulator too
      T* L = lse ? lse + (b * Hq + h) * T_len : nullptr;  // (T)
      T* S = scratch.data<T>() + static_cast<int64_t>(omp_get_thread_num()) * per_thread;  // (Br, Bc)
      T* m = S + br * bc;                                                                  // (Br) running max
      T* l = m + br;                                                                       // (Br) running sum

      for (int64_t i0 = 0; i0 < T_len; i0 += br) {  // query tile Q_i = rows [i0, i1)
        const int64_t i1 = std::min(T_len, i0 + br), rows = i1 - i0;
        T* Oi = O + i0 * d.ldq;
        // Key tiles [j0, j1) up to the tile's last row i1 - 1 (causal: later tiles are all masked).
        for (int64_t j0 = 0; j0 < i1; j0 += bc) {
          const int64_t j1 = std::min(i1, j0 + bc), cols = j1 - j0;
          // line 9: S = scale Q_i K_j^T (rows, cols), row stride bc
          gemm<T>(false, true, rows, cols, D, scale, Q + i0 * d.ldq, d.ldq, K + j0 * d.ldk, d.ldk, T(0), S, bc);
          // line 10: online softmax. Row i sees keys j <= i only; the first key tile (j0 = 0)
          // always has at least key 0, so it starts m and l (no -inf arithmetic anywhere).
          for (int64_t r = 0; r < rows; ++r) {
            T* s = S + r * bc;
            const int64_t n = visible(i0 + r, j0, cols);
            if (n == 0) {  // a row above this whole tile (Br > Bc): P = 0, O, m, l unchanged
              std::fill(s, s + cols, T(0));
              continue;
            }
            const T tile_max = vm::lane_max(s, n);
            const T m_new = j0 == 0 ? tile_max : std::max(m[r], tile_max);
#pragma omp simd
            for (int64_t j = 0; j < n; ++j) s[j] = vm::vexp(s[j] - m_new);
            std::fill(s + n, s + cols, T(0));
            const T rowsum = vm::lane_sum(s, n);
            if (j0 == 0) {
              l[r] = rowsum;
            } else {  // rescale what earlier tiles accumulated by exp(m_old - m_new) <= 1
              const T alpha = vm::vexp(m[r] - m_new);
              l[r] = alpha * l[r] + rowsum;
              T* o = Oi + r * d.ldq;
#pragma omp simd
              for (int64_t e = 0; e < D; ++e) o[e] *= alpha;
            }
            m[r] = m_new;
          }
          // line 11: O_i += P V_j (the first key tile overwrites whatever `out` held)
          gemm<T>(false, false, rows, D, cols, T(1), S, bc, V + j0 * d.ldk, d.ldk, j0 == 0 ? T(0) : T(1), Oi,
                  d.ldq);
        }
        // lines 13-14: O_i = diag(l)^-1 O_i, lse_i = m + log l
        for (int64_t r = 0; r < rows; ++r) {
          const T inv = T(1) / l[r];
          T* o = Oi + r * d.ldq;
#pragma omp simd
          for (int64_t e = 0; e < D; ++e) o[e] *= inv;
          if (L) L[i0 + r] = m[r] + std::log(l[r]);
        }
      }
    }
}

template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                        const T* lse, int64_t B, int64_t T_len, int64_t Hq, int64_t Hkv, int64_t D,
                        AttentionTiles tiles) {
  const Dims d = check_dims("attention_backward", B, T_len, Hq, Hkv, D, tiles);
  if (B * T_len * Hq * D == 0) return;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
  const int64_t br = std::min(tiles.q, T_len), bc = std::min(tiles.k, T_len);
  const int64_t per_thread = attention_backward_scratch(T_len, tiles);
  Tensor scratch = Tensor::empty({omp_get_max_threads(), per_thread}, dtype_of<T>::value, Category::workspace);
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
      const T* Q = q + b * T_len * d.ldq + h * D;  // (T, D), row stride ldq
      const T* K = k + b * T_len * d.ldk + hk * D;  // (T, D), row stride ldk
      const T* V = v + b * T_len * d.ldk + hk * D;
      const T* O = out + b * T_len * d.ldq + h * D;
      const T* dO = dout + b * T_len * d.ldq + h * D;
      const T* L = lse + (b * Hq + h) * T_len;  // (T)
      T* dQ = dq + b * T_len * d.ldq + h * D;
      T *dK, *dV;  // (T, D), row stride ldkv
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
      T* P = scratch.data<T>() + static_cast<int64_t>(omp_get_thread_num()) * per_thread;  // (Br, Bc)
      T* dS = P + br * bc;                                                                 // (Br, Bc)
      T* Dl = dS + br * bc;                                                                // (T)

      // line 5: Dl_i = rowsum(dO_i * O_i)
      for (int64_t i = 0; i < T_len; ++i) Dl[i] = vm::lane_dot(dO + i * d.ldq, O + i * d.ldq, D);

      for (int64_t j0 = 0; j0 < T_len; j0 += bc) {  // line 6: key tile K_j, V_j = rows [j0, j1)
        const int64_t j1 = std::min(T_len, j0 + bc), cols = j1 - j0;
        T* dKj = dK + j0 * ldkv;
        T* dVj = dV + j0 * ldkv;
        // line 9: query tiles of rows [j0, T) (rows before j0 see none of these keys), starting
        // at row j0. The first of them overwrites dK_j, dV_j; the key tile j0 = 0 visits every
        // row and overwrites dQ.
        for (int64_t i0 = j0; i0 < T_len; i0 += br) {
          const int64_t i1 = std::min(T_len, i0 + br), rows = i1 - i0;
          const T* Qi = Q + i0 * d.ldq;
          const T* dOi = dO + i0 * d.ldq;
          const T first_j = i0 == j0 ? T(0) : T(1);  // beta for dK_j, dV_j
          // lines 11-12: P = exp(scale Q_i K_j^T - lse_i) on j <= i, 0 above the diagonal
          gemm<T>(false, true, rows, cols, D, scale, Qi, d.ldq, K + j0 * d.ldk, d.ldk, T(0), P, bc);
          for (int64_t r = 0; r < rows; ++r) {
            T* p = P + r * bc;
            const int64_t n = visible(i0 + r, j0, cols);
            const T li = L[i0 + r];
#pragma omp simd
            for (int64_t j = 0; j < n; ++j) p[j] = vm::vexp(p[j] - li);
            std::fill(p + n, p + cols, T(0));
          }
          // line 13: dV_j += P^T dO_i (cols, D)
          gemm<T>(true, false, cols, D, rows, T(1), P, bc, dOi, d.ldq, first_j, dVj, ldkv);
          // line 14: dP = dO_i V_j^T (rows, cols), into dS
          gemm<T>(false, true, rows, cols, D, T(1), dOi, d.ldq, V + j0 * d.ldk, d.ldk, T(0), dS, bc);
          // line 15: dS = P * (dP - Dl_i); 0 above the diagonal
          for (int64_t r = 0; r < rows; ++r) {
            const T* p = P + r * bc;
            T* s = dS + r * bc;
            const int64_t n = visible(i0 + r, j0, cols);
            const T di = Dl[i0 + r];
#pragma omp simd
            for (int64_t j = 0; j < n; ++j) s[j] = p[j] * (s[j] - di);
            std::fill(s + n, s + cols, T(0));
          }
          // line 16: dQ_i += scale dS K_j (rows, D)
          gemm<T>(false, false, rows, D, cols, scale, dS, bc, K + j0 * d.ldk, d.ldk, j0 == 0 ? T(0) : T(1),
                  dQ + i0 * d.ldq, d.ldq);
          // line 17: dK_j += scale dS^T Q_i (cols, D)
          gemm<T>(true, false, cols, D, rows, scale, dS, bc, Qi, d.ldq, first_j, dKj, ldkv);
        }
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
                                       int64_t, int64_t, int64_t, AttentionTiles);
template void attention_forward<double>(double*, double*, const double*, const double*, const double*, int64_t,
                                        int64_t, int64_t, int64_t, int64_t, AttentionTiles);
template void attention_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                        const float*, const float*, const float*, int64_t, int64_t, int64_t,
                                        int64_t, int64_t, AttentionTiles);
template void attention_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                         const double*, const double*, const double*, int64_t, int64_t, int64_t,
                                         int64_t, int64_t, AttentionTiles);

}  // namespace zt
