// defines: cuda_kernels::SgdConfig, cuda_kernels::sgd_step — the fused SGD update of one flat
//          float32 shard on the GPU.
//
// Semantics: core/kernels/sgd.h's sgd_update<float> (torch.optim.SGD with dampening = 0):
//
//   d   = g + wd * p                (only where decay)
//   buf = mu * buf + d              (mu = momentum > 0)
//   d   = d + mu * buf  (nesterov)  or  d = buf  (plain momentum)
//   p   = p - lr * d
//
// lr, mu, wd rounded once to float on the host (wd = 0 without decay), as the CPU kernel does.
// Per element, float32 in the CPU kernel's order, every operation rounded on its own
// (__fmul_rn / __fadd_rn / __fsub_rn: no FMA contraction, as cuda/kernels/adamw.cu):
//
//   mu == 0:  p' = p - lr * (g + wd * p)
//   mu > 0:   d = g + wd * p;  b = mu * buf + d;  buf' = b;  p' = p - lr * (nesterov ? d + mu * b : b)
//
// The CPU kernel writes the same expressions as plain a * b + c, which a CPU build may contract
// into fused multiply-adds (GCC with FMA does), so GPU and CPU results can differ in the last bits
// (tests/gpu/test_cuda_backend_ops.cpp: within 1e-6 relative). Using __fmaf_rn at those places
// would match such a build bit for bit, but not a build that does not contract.
//
// Determinism: element-wise, each element takes the same instructions wherever it lies (vector or
// scalar path), so any shard split gives the full update restricted to the shard, bit for bit.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace zt::cuda_kernels {

// The hyperparameters (the fields of optim/sgd.h's SgdHyper; the cuda layer sits below optim, so
// it has its own struct). Validated by the caller's optimizer (SgdHyper::validate).
struct SgdConfig {
  double lr = 1e-2;
  double momentum = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

// One SGD update of n elements, asynchronous on `s`. param, grad: device float32 arrays of n
// elements; buf: the momentum buffer (n device floats, read and written) when h.momentum > 0,
// null when it is 0; none overlapping. decay: weight decay applies to all n.
// 128-bit accesses when param, grad (and buf) are 16-byte aligned.
void sgd_step(float* param, const float* grad, float* buf, int64_t n, const SgdConfig& h, bool decay, cudaStream_t s);

}  // namespace zt::cuda_kernels
