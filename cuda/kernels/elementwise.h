// defines: cuda_kernels::binary (add / sub / mul), scale, scale_by, mul_backward, silu_forward,
//          silu_backward, accumulate, accumulate_cast, fill_scaled, sum_all (+ its workspace size),
//          sum_last_forward, sum_last_backward, all_finite_async — the elementwise ops and small
//          reductions of the backend table (core/backend.h) on the GPU.
//
// Dtypes: float32 and bfloat16 storage with float32 math (scale also takes float16, for the
// in-place scale_ of 2-byte gradient buffers); bf16 inputs are read exactly into float32 and every
// output rounded to nearest even once (core/dtype.h). Every float operation is rounded on its own
// (__fadd_rn / __fmul_rn ...: no FMA contraction) unless stated, so the 128-bit and the scalar
// paths give the same bits, and float32 results equal the CPU's where the CPU is exact:
//   binary, scale, scale_by, mul_backward:  out = a op b, s x (float(s)), dout b / dout a — bit-exact;
//   accumulate: dst = fma(float(alpha), src, dst) — the CPU's `dst += alpha * src` as gcc
//     contracts it with -march=native on an FMA machine (the default build); without
//     contraction the two differ by <= 1 ulp per element;
//   accumulate_cast: dst = round(float(dst) + float(src)) (core/kernels/cast.h) — bit-exact;
//   silu (core/kernels/activation.h): y = x s, dx = dout s (1 + x (1 - s)), s = 1 / (1 + exp(-x))
//     with CUDA's expf (<= 2 ulp; the CPU's Cephes polynomial ~1-2 ulp): ~1e-6 relative;
//   fill_scaled: dx[i] = round(double(g[0]) * factor) — g read on the device — bit-exact;
//   sum_all: exactly the CPU's order (core/kernels/elementwise.cpp): blocks of kSumBlock = 8192
//     elements; in a block element i goes to lane i % 16 (acc += double(x), in increasing i); the
//     16 lanes combine in vm::lane_combine's tree ((l + 8), then + 4, + 2, + 1); block sums added
//     in block order from 0; out = round(factor * sum) — bit-exact for float32 inputs;
//   sum_last: the CPU's vm::lane_sum in float32 (16 lanes by i % 16, the same tree) — bit-exact.
// Layout: contiguous device arrays (accumulate: any strides through copy.h's StridedPair);
// outputs never overlap inputs except where "in place" is said. Asynchronous on the stream.
// Determinism: element-wise ops depend on their element only; the reductions have fixed orders
// (no atomics), so every result is the same bits on every run.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"
#include "cuda/kernels/copy.h"

namespace zt::cuda_kernels {

enum class EwOp : uint8_t { add, sub, mul };

// out (n) = a (n) op b (n).
void binary(EwOp op, DType t, void* out, const void* a, const void* b, int64_t n, cudaStream_t s);
// out (n) = float(factor) * x (n); out may be x (in place). t: f32, bf16 or f16.
void scale(DType t, void* out, const void* x, double factor, int64_t n, cudaStream_t s);
// out (n) = s[0] * x (n), s one device float (read there: a gradient that stays on the device);
// out may be x. t: f32 or bf16. Bit-exact against the CPU's T(s) * x.
void scale_by(DType t, void* out, const void* x, const float* s, int64_t n, cudaStream_t stream);
// da = dout * b, db = dout * a; either output may be null, not both.
void mul_backward(DType t, void* da, void* db, const void* dout, const void* a, const void* b, int64_t n,
                  cudaStream_t s);

void silu_forward(DType t, void* out, const void* x, int64_t n, cudaStream_t s);
void silu_backward(DType t, void* dx, const void* dout, const void* x, int64_t n, cudaStream_t s);

// dst += alpha * src over the layout l (l.stride[0] dst, l.stride[1] src). dst's elements must be
// distinct (no zero stride over a dimension of size > 1) and must not overlap src's.
void accumulate(DType t, void* dst, const void* src, const StridedPair& l, double alpha, cudaStream_t s);

// dst (n) = round(float(dst) + float(src)): dst f32 with src f32 / bf16 / f16, or dst bf16 / f16
// with src of the same dtype or f32 (core's accumulate_cast_: a float32 unit gradient into a 2-byte
// buffer). Contiguous.
void accumulate_cast(DType dst_t, void* dst, DType src_t, const void* src, int64_t n, cudaStream_t s);

// dx (n) = round(double(g[0]) * factor); g: one device element of dtype t.
void fill_scaled(DType t, void* dx, const void* g, double factor, int64_t n, cudaStream_t s);

// Bytes of device workspace sum_all needs (one double per kSumBlock block; at least 8).
int64_t sum_all_workspace_bytes(int64_t n);
// out[0] = round(factor * sum(x (n))); workspace: >= sum_all_workspace_bytes(n), 8-byte aligned.
void sum_all(DType t, void* out, const void* x, int64_t n, double factor, void* workspace, cudaStream_t s);

// out (R) = sum over the last dim of x (R, N).
void sum_last_forward(DType t, void* out, const void* x, int64_t R, int64_t N, cudaStream_t s);
// dx (R, N) = dout (R) broadcast along the last dim.
void sum_last_backward(DType t, void* dx, const void* dout, int64_t R, int64_t N, cudaStream_t s);

// *flag_dev = 1 when some element of x (n) is inf or NaN (exponent bits all ones); otherwise the
// flag is left as it is (the caller zeroes it first). t: f32, f64, bf16, f16. Several threads may
// store 1 at once: an integer store of one value, not a float atomic — the result is the same.
void all_finite_async(DType t, const void* x, int64_t n, int* flag_dev, cudaStream_t s);

}  // namespace zt::cuda_kernels
