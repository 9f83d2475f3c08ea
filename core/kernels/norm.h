// defines: layernorm_forward/backward, rmsnorm_forward/backward, residual_layernorm_forward,
//          residual_rmsnorm_forward, norm_backward_chunks — raw-pointer row-norm kernels.
//
// llm.c style: x is N rows of C contiguous elements (N = product of the leading dims), weight
// and bias are (C). T is float or double. Outputs are written (not accumulated): the autograd op
// adds them into the Vars' gradients.
//
// Forward saves per-row statistics for backward: mean (N) and rstd (N) for LayerNorm,
// rstd (N) for RMSNorm. Row statistics are summed in 8 fixed lanes then combined in a fixed
// order (no OpenMP reduction clause), so results are bitwise reproducible.
//
// Backward reduces dweight/dbias over rows deterministically: the rows are split into a fixed
// number of chunks that depends only on N (not on the thread count), each chunk sums its rows in
// order into its own partial, and the partials are added in chunk order. Same inputs, same bits,
// for any number of threads.
#pragma once
#include <cstdint>

namespace zt {

// The row partition of the backward reductions: depends only on N, so dweight / dbias are the
// same bits whatever the thread count. The backward's scratch is its partial sums, (chunks, C) in
// the kernel's dtype (Category::workspace) for dw and again for db, freed on return; declared
// here so the meta device counts them.
inline int64_t norm_backward_chunks(int64_t N) {
  constexpr int64_t kMaxChunks = 64;
  return N < 1 ? 1 : (N < kMaxChunks ? N : kMaxChunks);
}

// LayerNorm (Ba et al. 2016), as torch.nn.LayerNorm:
//   mean = sum(x)/C, var = sum((x - mean)^2)/C (biased), rstd = 1/sqrt(var + eps)
//   out = (x - mean) * rstd * w + b                     (b may be nullptr: no bias)
// x, out: (N, C); w, b: (C); mean, rstd: (N), written.
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b, int64_t N, int64_t C,
                       double eps);

// With xhat = (x - mean) * rstd and g = dout * w (llm.c's layernorm_backward):
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   dw = sum_rows(dout * xhat), db = sum_rows(dout)
// dx: (N, C), dw, db: (C); any of dx, dw, db may be nullptr (not wanted).
template <class T>
void layernorm_backward(T* dx, T* dw, T* db, const T* dout, const T* x, const T* w, const T* mean,
                        const T* rstd, int64_t N, int64_t C);

// Residual + LayerNorm in one pass over the rows (llm.c's fused_residual_forward + layernorm):
// h (N, C) = x + y, then out = layernorm(h) with its mean, rstd (N). Each row of h is written and
// normalized while it is in cache; the row code is layernorm_forward's, so h, out, mean and rstd
// are the bits of the add then layernorm_forward. The backward is layernorm_backward with h as x.
template <class T>
void residual_layernorm_forward(T* h, T* out, T* mean, T* rstd, const T* x, const T* y, const T* w, const T* b,
                                int64_t N, int64_t C, double eps);

// RMSNorm (Zhang & Sennrich 2019), as Llama's: rstd = 1/sqrt(sum(x^2)/C + eps), out = x * rstd * w.
template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, int64_t N, int64_t C, double eps);

// Residual + RMSNorm, the same way: h = x + y, out = rmsnorm(h), rstd (N).
template <class T>
void residual_rmsnorm_forward(T* h, T* out, T* rstd, const T* x, const T* y, const T* w, int64_t N, int64_t C,
                              double eps);

// With xhat = x * rstd and g = dout * w:
//   dx = rstd * (g - xhat * mean(g * xhat)),  dw = sum_rows(dout * xhat)
// dx or dw may be nullptr.
template <class T>
void rmsnorm_backward(T* dx, T* dw, const T* dout, const T* x, const T* w, const T* rstd, int64_t N, int64_t C);

}  // namespace zt
