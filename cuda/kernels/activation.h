// defines: cuda_kernels::gelu_forward, gelu_backward, bias_gelu_forward, bias_gelu_backward,
//          swiglu_forward, swiglu_backward, swiglu_packed_forward, swiglu_packed_backward — the MLP
//          activations on the GPU, float32 or bfloat16 storage, float32 math.
//
// Formulas (the same as the CPU's core/kernels/activation.h, in the same operation order):
// GELU, tanh form (Hendrycks & Gimpel 2016; GPT-2, llm.c), through 0.5 (1 + tanh(u)) = sigmoid(2u):
//   u = sqrt(2/pi) (x + 0.044715 x^3),  s = 1 / (1 + exp(-2u)),  y = x s
//   dx = dout * (s + x * 2 s (1 - s) * sqrt(2/pi) (1 + 3 * 0.044715 x^2))
// SwiGLU (Shazeer 2020, Llama's MLP): y = silu(gate) * up = gate * sigmoid(gate) * up
//   dup = dout * gate * s,  dgate = dout * up * s * (1 + gate (1 - s)),  s = sigmoid(gate)
// exp is CUDA's expf (max 2 ulp; the CPU uses a Cephes polynomial of ~1-2 ulp), so results agree
// with the CPU to ~1e-6 relative, not bit for bit. bfloat16: inputs converted exactly to float32,
// the float32 result rounded to nearest even (core/dtype.h).
//
// bias + GELU (core/kernels/activation.h's bias_gelu): v = float(x) + float(b) (not rounded),
// out = gelu(v); dx = dout * gelu'(v) with the same per-element arithmetic as gelu_backward on v.
// The backward's db sums the float32 dx (before dx's rounding) as cuda_kernels::bias_grad sums dY:
// rows cut into chunks of kBiasGradChunk, thread (chunk, column) adds its chunk's rows in order
// while it writes dx (one pass over x and dout), then bias_grad_combine adds the chunk partials in
// chunk order (+ db's old value when accumulating) and rounds once. Deterministic, no atomics.
//
// Buffers: contiguous device arrays of n elements of dtype t (f32, or bf16 as uint16_t bits);
// outputs are written, not accumulated, and must not overlap the inputs. Asynchronous on s.
// 128-bit accesses (8 elements per thread) when every pointer is 16-byte aligned; otherwise, and
// for the n % 8 tail, element-wise with the same per-element arithmetic (same bits either way).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace zt::cuda_kernels {

// out (n) = gelu(x (n))
void gelu_forward(DType t, void* out, const void* x, int64_t n, cudaStream_t s);
// dx (n) = dout (n) * gelu'(x (n))
void gelu_backward(DType t, void* dx, const void* dout, const void* x, int64_t n, cudaStream_t s);

// out (R, C) = gelu(x (R, C) + b (C) broadcast over the rows). 128-bit accesses when C % 8 == 0
// and every pointer is 16-byte aligned (a pack then lies in one row), else element-wise.
void bias_gelu_forward(DType t, void* out, const void* x, const void* b, int64_t R, int64_t C, cudaStream_t s);
// dx (R, C) = dout * gelu'(x + b), written; db (C) = column sums of dx, written or (accumulate)
// added to db's values. dx or db may be null, not both; workspace (4-byte aligned, >=
// cuda/kernels/bias_grad.h's bias_grad_workspace_bytes(R, C): db's chunk partials, the same
// chunking) may be null when db is. b null: no bias, dx = dout * gelu'(x) (x + 0 = x). dx may be
// dout (in place; GPT-2's MLP backward runs it on c_proj's dX GEMM output this way).
void bias_gelu_backward(DType t, void* dx, void* db, const void* dout, const void* x, const void* b, int64_t R,
                        int64_t C, bool accumulate, void* workspace, cudaStream_t s);

// out (n) = silu(gate (n)) * up (n)
void swiglu_forward(DType t, void* out, const void* gate, const void* up, int64_t n, cudaStream_t s);
// dgate (n), dup (n) from dout (n); either output may be null (that input needs no gradient),
// not both.
void swiglu_backward(DType t, void* dgate, void* dup, const void* dout, const void* gate, const void* up, int64_t n,
                     cudaStream_t s);
// The same over a packed gu (N, 2F) = [gate | up] (row-major): out (N, F) = silu(gate) * up;
// dgu (N, 2F) = [dgate | dup] from dout (N, F). The bits of swiglu_forward / swiglu_backward.
void swiglu_packed_forward(DType t, void* out, const void* gu, int64_t N, int64_t F, cudaStream_t s);
void swiglu_packed_backward(DType t, void* dgu, const void* dout, const void* gu, int64_t N, int64_t F, cudaStream_t s);

}  // namespace zt::cuda_kernels
