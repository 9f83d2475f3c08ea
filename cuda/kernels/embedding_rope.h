// defines: cuda_kernels::embedding_forward, embedding_backward (row gather and its deterministic
//          scatter-add) and rope_tables, rope_forward, rope_backward (rotary position embedding,
//          Hugging Face rotate_half layout) on the GPU, float32 or bfloat16 storage, float32 math.
//
// Embedding — core/kernels/embedding.h's semantics: ids (n) int32 in [0, V), table (V, C),
//   out[i, :] = table[ids[i], :];   backward: dtable[ids[i], :] += dout[i, :] for i = 0..n-1 in
//   token order, accumulated into dtable (zero it first for a fresh gradient).
//   An id of -1 gives a zero row and no gradient (another rank's id under vocabulary parallelism).
//   Other ids outside [0, V) are the caller's error (the autograd op checks them): the forward
//   writes a NaN row for them and the backward ignores them; nothing is read or written out of bounds.
//   Backward, deterministic without atomics: the ids are sorted with their token indices (CUB's
//   radix sort, stable, so equal ids keep token order), then one 256-thread block per run of
//   equal ids v adds the run's dout rows into float32 accumulators that start from dtable[v, :];
//   thread g owns the columns g, g + 256, ...; rows that no token hits are not touched. float32:
//   the same additions in the same order as the CPU, so bit-identical to it. bfloat16: accumulated
//   in float32 and rounded once. Cost: one sort of n ids plus n C reads (the earlier kernel, one
//   block per vocabulary row scanning all ids, read V n ids: about 10 ms per GPT-2 step at
//   B 64 x T 1024, gpu-preflight.md #6). The workspace (embedding_backward_workspace_bytes(n))
//   holds the sorted ids, the token indices and CUB's scratch.
//
// RoPE — core/kernels/rope.h's semantics (Su et al. 2021; HF Llama's rotate_half): within a head
//   of D elements the pair (x[d], x[d + D/2]), d < D/2, at position t in [0, T) rotates by
//   angle(t, d) = t theta^(-2d/D):
//     out[d] = x[d] cos - x[d + D/2] sin,   out[d + D/2] = x[d + D/2] cos + x[d] sin
//   backward: the inverse rotation (sin -> -sin) of dout. Tables cos_t, sin_t (T, D/2) float32,
//   computed (rope_tables) in double then rounded, as the CPU's rope_tables<float>: angle in double
//   from pow(theta, -2d/D), cos / sin in double (CUDA's are within 2 ulp of double, so the float
//   tables equal the CPU's except at the rare rounding boundary: 1 float ulp).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/rope.h"  // RopeParams, rope_inv_freq

namespace zt::cuda_kernels {


// out (n, C) = table (V, C) [ids (n)]. 128-bit copies when out, table are 16-byte aligned and
// C % 8 == 0.
void embedding_forward(DType t, void* out, const int32_t* ids, const void* table, int64_t n, int64_t V, int64_t C,
                       cudaStream_t s);
// dtable (V, C) += scatter of dout (n, C) by ids (n), n < 2^31. workspace: device memory of
// embedding_backward_workspace_bytes(n) bytes, 256-byte aligned.
int64_t embedding_backward_workspace_bytes(int64_t n);
void embedding_backward(DType t, void* dtable, const void* dout, const int32_t* ids, int64_t n, int64_t V, int64_t C,
                        void* workspace, cudaStream_t s);

// cos_t, sin_t (T, D/2) float32 device tables for positions 0..T-1 (core/rope.h's
// rope_inv_freq, in double); D even >= 2, theta > 0, a valid scaling.
void rope_tables(float* cos_t, float* sin_t, int64_t T, int64_t D, const RopeParams& p, cudaStream_t s);
// out (B, T, H, D) = rotate(x (B, T, H, D)) for heads [0, rot_heads), heads [rot_heads, H) copied;
// out may be x (in place).
void rope_forward(DType t, void* out, const void* x, const float* cos_t, const float* sin_t, int64_t B, int64_t T,
                  int64_t H, int64_t D, int64_t rot_heads, cudaStream_t s);
// dx (B, T, H, D) = inverse rotation of dout (heads [0, rot_heads)); dx may be dout.
void rope_backward(DType t, void* dx, const void* dout, const float* cos_t, const float* sin_t, int64_t B, int64_t T,
                   int64_t H, int64_t D, int64_t rot_heads, cudaStream_t s);

}  // namespace zt::cuda_kernels
