// defines: cuda_kernels::AdamWConfig, cuda_kernels::adamw_step — the fused AdamW update of one
//          flat float32 shard on the GPU (optionally writing the bf16 copy of the new weights).
//
// Semantics: core/kernels/adamw.h's adamw_update<float> (torch.optim.AdamW, amsgrad = false,
// maximize = false; Loshchilov & Hutter 2019, Algorithm 2). With t the 1-based step:
//
//   p  = p * (1 - lr * wd)                       (only where decay)
//   m  = b1 * m + (1 - b1) * g
//   v  = b2 * v + (1 - b2) * g^2
//   denom = sqrt(v) / sqrt(1 - b2^t) + eps
//   p  = p - (lr / (1 - b1^t)) * m / denom
//
// The float/double split is the CPU kernel's: on the host, in double, bc1 = 1 - b1^t,
// bc2 = 1 - b2^t, then step_size = float(lr / bc1), bc2_sqrt = float(sqrt(bc2)),
// keep = float(1 - lr * wd) (1 without decay), b1, b2, 1 - b1, 1 - b2, eps each rounded once to
// float. Per element, float32 in the order of the formula above, every operation rounded on its
// own (__fmul_rn / __fadd_rn / __fdiv_rn / __fsqrt_rn: no FMA contraction). The CPU kernel
// (both its paths, on every build) instead fuses three pairs into one rounding each:
// m = fma(b1, m, c1 g), v = fma(b2, v, c2 g^2), p = fma(p, keep, -upd); so GPU and CPU results
// differ by an ulp here and there (tests/gpu/test_cuda_kernels.cpp: within 1e-6 relative of the
// terms). Using __fmaf_rn at those three places (and computing keep on the host without FMA
// contraction, as the CPU kernel does) would make them agree bit for bit.
//
// out_bf16 (optional): out_bf16[i] = bf16(p_new[i]), round to nearest even (core/dtype.h) — the
// bf16 parameter copy that is gathered for the next forward (mixed precision, ZeRO).
//
// Determinism: element-wise, each element takes the same instructions wherever it lies (vector or
// scalar path), so any shard split gives the full update restricted to the shard, bit for bit.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace zt::cuda_kernels {

// The hyperparameters (the fields of optim/adamw.h's AdamWHyper; the cuda layer sits below optim,
// so it has its own struct). Validated by the caller's optimizer (AdamWHyper::validate).
struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

// One AdamW update of n elements at 1-based `step` (>= 1), asynchronous on `s`. master, grad, m, v:
// device float32 arrays of n elements, not overlapping. decay: weight decay applies to all n.
// out_bf16: null, or n device uint16_t (bf16 bits) receiving bf16(master) after the update.
// 128-bit accesses when master, grad, m, v are 16-byte aligned (and out_bf16 8-byte aligned).
void adamw_step(float* master, const float* grad, float* m, float* v, int64_t n, const AdamWConfig& h, int64_t step,
                bool decay, uint16_t* out_bf16, cudaStream_t s);

}  // namespace zt::cuda_kernels
