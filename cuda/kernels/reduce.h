// defines: cuda_kernels::kCudaSumChunk, sum_of_squares_workspace_bytes, sum_of_squares_async,
//          sum_of_squares — the deterministic sum of squares (in double) of a float32 / bfloat16 /
//          float16 device buffer, for gradient clipping by global norm (core/kernels/shard_norm.h).
//
// Order of summation — the CPU's (core/kernels/reduce.cpp), independent of any launch configuration:
//   the buffer is cut into fixed chunks of kCudaSumChunk (= core/kernels/reduce.h's kSumChunk) elements;
//   within a chunk, element i (chunk-relative) goes to lane i % 8, each lane adds its elements'
//   squares in increasing i as acc = fma(v, v, acc) in double (v = the element converted exactly
//   to float32, then double); the 8 lanes combine as ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7));
//   the chunk partials are added one after another in chunk order, starting from 0.
// So the result is bitwise the same on every run, and equals the CPU's sum_of_squares wherever
// the CPU build contracts `acc += v * v` into an FMA (gcc -march=native on an FMA machine does);
// otherwise the two differ in the last bits only (relative ~1e-16 per chunk).
//
// GPU mapping: one block per chunk — its threads copy the chunk to shared memory with 16-byte
// loads, then 8 of them (the lanes) add from there, combined by __shfl_xor_sync in exactly the
// tree above — writing one double per chunk to the workspace; then one thread adds the partials
// in order (a serial chain of n / 16384 adds).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace zt::cuda_kernels {

inline constexpr int64_t kCudaSumChunk = int64_t(1) << 14;

// Bytes of device workspace sum_of_squares_async needs for n elements (one double per chunk).
int64_t sum_of_squares_workspace_bytes(int64_t n);

// *result_dev = sum of x_i^2 (double), asynchronous on s. x: n device elements of dtype t
// (f32, or bf16 / f16 as uint16_t bits); result_dev: one device double; workspace: at least
// sum_of_squares_workspace_bytes(n) device bytes, 8-byte aligned, not touched by others until
// the launch completes. n == 0 gives 0.
void sum_of_squares_async(const void* x, DType t, int64_t n, double* result_dev, void* workspace, cudaStream_t s);

// The same, returned to the host: allocates the workspace stream-ordered (cudaMallocAsync),
// launches, copies the result back and synchronizes `s`; *result_host receives the sum.
void sum_of_squares(const void* x, DType t, int64_t n, double* result_host, cudaStream_t s);

}  // namespace zt::cuda_kernels
