// defines: gelu (tanh approximation), bias_gelu (fused bias + GELU), silu, swiglu — forward and
//          backward on raw buffers.
//
// GELU, tanh form (Hendrycks & Gimpel 2016; GPT-2, llm.c):
//   y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
// computed through the identity 0.5 (1 + tanh(u)) = sigmoid(2u), so only exp is needed (and it
// vectorizes, see vec_math.h):  y = x s,  s = sigmoid(2u),
//   dy/dx = s + x * 2 s (1 - s) * sqrt(2/pi) (1 + 3 * 0.044715 x^2).
// SiLU: y = x sigmoid(x), dy/dx = sigmoid(x) (1 + x (1 - sigmoid(x))).
// SwiGLU (Shazeer 2020, Llama's MLP): y = silu(gate) * up.
// All buffers are contiguous of n elements; dx/dgate/dup are written (not accumulated).
//
// bias + GELU (GPT-2's MLP: c_fc's GEMM without its bias, then this): x (R, C), b (C) broadcast
// over the rows, v = x + b, out = gelu(v), one pass (x and b read once, out written once), each
// element with gelu_forward's arithmetic on v. The backward, one pass as well: dx = dout * gelu'(v)
// and db = column sums of dx, in strips of 64 columns, each strip one thread's, sweeping the rows
// in order r = 0..R-1 (col_sum's order, core/kernels/elementwise.h): the same bits for any thread
// count, and the bits of gelu_backward + col_sum run on the same v.
#pragma once
#include <cstdint>

namespace zt {

template <class T> void gelu_forward(T* out, const T* x, int64_t n);
template <class T> void gelu_backward(T* dx, const T* dout, const T* x, int64_t n);

// out (R, C) = gelu(x (R, C) + b (C)).
template <class T> void bias_gelu_forward(T* out, const T* x, const T* b, int64_t R, int64_t C);
// dx (R, C) = dout * gelu'(x + b) (written); db (C) = sum over rows of dx, written, or added to what
// db holds when accumulate (db[c] starts the column's sum). dx or db may be null (not wanted).
template <class T>
void bias_gelu_backward(T* dx, T* db, const T* dout, const T* x, const T* b, int64_t R, int64_t C, bool accumulate);

template <class T> void silu_forward(T* out, const T* x, int64_t n);
template <class T> void silu_backward(T* dx, const T* dout, const T* x, int64_t n);

// dgate / dup may be null (that input needs no gradient).
template <class T> void swiglu_forward(T* out, const T* gate, const T* up, int64_t n);
template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n);

}  // namespace zt
