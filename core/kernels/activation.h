// defines: gelu (tanh approximation), silu, swiglu — forward and backward on raw buffers.
//
// GELU, tanh form (Hendrycks & Gimpel 2016; GPT-2, llm.c):
//   y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
// computed through the identity 0.5 (1 + tanh(u)) = sigmoid(2u), so only exp is needed (and it
// vectorizes, see vec_math.h):  y = x s,  s = sigmoid(2u),
//   dy/dx = s + x * 2 s (1 - s) * sqrt(2/pi) (1 + 3 * 0.044715 x^2).
// SiLU: y = x sigmoid(x), dy/dx = sigmoid(x) (1 + x (1 - sigmoid(x))).
// SwiGLU (Shazeer 2020, Llama's MLP): y = silu(gate) * up.
// All buffers are contiguous of n elements; dx/dgate/dup are written (not accumulated).
#pragma once
#include <cstdint>

namespace zt {

template <class T> void gelu_forward(T* out, const T* x, int64_t n);
template <class T> void gelu_backward(T* dx, const T* dout, const T* x, int64_t n);

template <class T> void silu_forward(T* out, const T* x, int64_t n);
template <class T> void silu_backward(T* dx, const T* dout, const T* x, int64_t n);

// dgate / dup may be null (that input needs no gradient).
template <class T> void swiglu_forward(T* out, const T* gate, const T* up, int64_t n);
template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n);

}  // namespace zt
