// defines: CpuBackend (core/backend.h's table on the host), cpu_backend().
//
// The kernels of core/kernels behind the table: OpenMP across cores (static schedules, so every
// result is bitwise reproducible), GEMMs through OpenBLAS (core/kernels/gemm.h). Compute dtypes
// float32, float64 (for gradient checks) and bfloat16. bfloat16 runs the float32 kernels on
// float32 copies of the arguments and rounds each output once (core/cpu_bf16.h): the semantics of
// a GPU's bf16 kernels, the reference they are checked against, and slow. float16 is a storage
// dtype here (cast, accumulate_cast, all_finite, sum_of_squares take it; the kernels do not).
// attention() keeps the row log-sum-exp (B, Hq, T) for the backward, which recomputes the
// probabilities tile by tile (FlashAttention-2's algorithm, core/kernels/attention.h).
#pragma once
#include "core/backend.h"

namespace zt {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu(); }
  Allocator& allocator() override { return cpu_allocator(); }
  bool computes(DType dt) const override { return dt == DType::f32 || dt == DType::f64 || dt == DType::bf16; }
  void synchronize() override {}

  // Every op of core/backend_ops.def: memory, casts, shard norms and AdamW in cpu_backend.cpp;
  // the kernels (elementwise through the norms) in cpu_backend_ops.cpp; RoPE and attention in
  // cpu_backend_attention.cpp; the fused ones (bias + GELU, residual + norm) in cpu_backend_fused.cpp.
#define ZT_BACKEND_OP(ret, name, params, args) ret name params override;
#include "core/backend_ops.def"
};

CpuBackend& cpu_backend();  // the one instance (backend(Device::cpu()) returns it)

}  // namespace zt
