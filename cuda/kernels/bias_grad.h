// defines: cuda_kernels::bias_grad, bias_grad_combine, bias_grad_workspace_bytes, kBiasGradChunk —
//          the bias gradient
//          of a linear layer, db (N) (+)= column sums of dY (M, N), deterministic, for the cases
//          cuBLASLt's BGRADB epilogue cannot serve (it writes db, never adds to it, and it needs a
//          dW GEMM to ride on): CudaBackend::linear_backward with accumulate, or without dW.
//
// Order of summation, independent of the launch configuration: rows are cut into chunks of
// kBiasGradChunk; pass 1 sums each chunk's rows in increasing order into a float32 partial
// (chunk, n); pass 2 adds the partials in chunk order starting from 0, then (accumulate) adds that
// sum to float(db[n]), and rounds once to db's dtype. float32 math, float32 or bfloat16 storage.
// Cost: one read of dY (memory bound) plus 4 N ceil(M / kBiasGradChunk) bytes of workspace.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace zt::cuda_kernels {

inline constexpr int64_t kBiasGradChunk = 64;

int64_t bias_grad_workspace_bytes(int64_t M, int64_t N);

// Pass 2 alone, for a kernel that wrote pass 1's partials itself (cuda_kernels::bias_gelu_backward
// sums its float32 dx by the same chunks, cuda/kernels/activation.h): db (N) = [float(db) +] the
// sum over chunks c = 0..ceil(M / kBiasGradChunk) - 1, in order, of partial (chunks, N) float32,
// rounded once to t.
void bias_grad_combine(DType t, void* db, const float* partial, int64_t M, int64_t N, bool accumulate, cudaStream_t s);

// db (N) = sum over m of dy (M, N) [+ db when accumulate]. dy, db of dtype t (f32 or bf16);
// workspace: bias_grad_workspace_bytes(M, N) device bytes, 4-byte aligned. M == 0 gives db = 0
// (or leaves it, with accumulate).
void bias_grad(DType t, void* db, const void* dy, int64_t M, int64_t N, bool accumulate, void* workspace,
               cudaStream_t s);

}  // namespace zt::cuda_kernels
