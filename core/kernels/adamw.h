// defines: adamw_update (one fused AdamW step on raw contiguous arrays) — the CPU kernel behind
//          the cpu backend's adamw_step (optim/adamw.h's AdamW calls it through the backend);
//          CpuAdamIsa, cpu_adam_isa, set_cpu_adam_isa, cpu_adam_isa_name, cpu_adam_isa_available,
//          cpu_adam_isa_from_env — which instruction set the float32 kernel runs (chosen at run time).
//
// Semantics: torch.optim.AdamW (Loshchilov & Hutter 2019, "Decoupled Weight Decay
// Regularization", Algorithm 2; PyTorch's _single_tensor_adamw, amsgrad=False, maximize=False).
// With t = h.step (1-based):
//
//   p  = p * (1 - lr * wd)                       (only where h.decay; decoupled from the gradient)
//   m  = b1 * m + (1 - b1) * g
//   v  = b2 * v + (1 - b2) * g^2
//   denom = sqrt(v) / sqrt(1 - b2^t) + eps
//   p  = p - (lr / (1 - b1^t)) * m / denom
//
// Scalars: the bias corrections 1 - b^t in double (b2^t for b2 = 0.999 loses digits in float),
// then rounded once to T: step_size = lr / (1 - b1^t), bc2_sqrt = sqrt(1 - b2^t),
// keep = 1 - lr * wd (1 without decay), b1, b2, c1 = 1 - b1, c2 = 1 - b2, eps.
// Per element, in T, exactly these operations in this order (fma = one rounding, as
// _mm256_fmadd_ps / std::fma; every other operation IEEE-rounded on its own, sqrt and / included):
//
//   m'    = fma(b1, m, c1 * g)
//   v'    = fma(b2, v, c2 * (g * g))
//   denom = sqrt(v') / bc2_sqrt + eps
//   p'    = fma(p, keep, -((step_size * m') / denom))
//
// Every operation is correctly rounded, so each code path below gives the same bits. The file
// contains no plain a * b + c, so the compiler's FMA contraction (-ffp-contract=fast, GCC's
// default in GNU mode) cannot change the result either.
//
// Code paths (float32; double always runs the portable scalar loop):
//   avx2_fma  8 lanes of AVX2 + FMA intrinsics, compiled with __attribute__((target("avx2,fma")))
//             (core/kernels/adamw_avx2.cpp), so it exists in every x86-64 build, -march=native or not.
//   portable  plain C++ (std::fma, std::sqrt, /), no intrinsics; any CPU.
// Chosen once, at the first call of cpu_adam_isa() (adamw_update calls it): the environment
// variable ZT_CPU_ADAM = portable | avx2_fma | auto (unset or empty = auto); auto picks avx2_fma when
// __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), else portable. An unknown value,
// or avx2_fma on a CPU without it, is a zt::Error (thrown by that first call, and again by every
// later one until set_cpu_adam_isa decides). set_cpu_adam_isa overrides the choice at any time.
//
// Memory and threads: one pass over memory (p, g, m, v each read once; p, m, v written once:
// 28 bytes per float32 element). Above kParallelMinElements the range is split statically into
// one contiguous block per OpenMP thread, each starting at a multiple of 16 elements; the avx2_fma
// path runs the last < 8 elements of a block through the same vector code on a zero-padded copy.
// Every element takes the same operations wherever it lies, so the result is bitwise the same for
// any thread count, any shard boundaries (a rank's shard update equals the full update restricted
// to it) and either code path.
#pragma once
#include <cstdint>

#include "core/backend.h"  // AdamWArgs

namespace zt {

// n contiguous elements; T is float or double; param, grad, m, v must not overlap.
template <class T>
void adamw_update(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWArgs& h);

extern template void adamw_update<float>(float*, const float*, float*, float*, int64_t, const AdamWArgs&);
extern template void adamw_update<double>(double*, const double*, double*, double*, int64_t, const AdamWArgs&);

enum class CpuAdamIsa { portable, avx2_fma };

// The path the float32 kernel runs now (resolving ZT_CPU_ADAM on the first call; see above).
CpuAdamIsa cpu_adam_isa();
// Forces a path for all later calls (process-wide). avx2_fma where !cpu_adam_isa_available: zt::Error.
void set_cpu_adam_isa(CpuAdamIsa isa);
// "portable" / "avx2_fma" (the values ZT_CPU_ADAM takes).
const char* cpu_adam_isa_name(CpuAdamIsa isa);
// Whether this build and this CPU can run `isa` (portable: always).
bool cpu_adam_isa_available(CpuAdamIsa isa);
// The path a value of ZT_CPU_ADAM selects (null or "" or "auto": the best available). Throws
// zt::Error naming the variable and the value for an unknown value or an unavailable path.
CpuAdamIsa cpu_adam_isa_from_env(const char* value);

namespace adamw_detail {

// The per-call scalars of the header's formula, rounded to T.
template <class T>
struct Scalars {
  T step_size, bc2_sqrt, keep, b1, b2, c1, c2, eps;
};

// The avx2_fma path over elements [b, e) (core/kernels/adamw_avx2.cpp); x86-64 builds only, and
// only to be called where cpu_adam_isa_available(CpuAdamIsa::avx2_fma).
void range_avx2_fma(float* __restrict param, const float* __restrict grad, float* __restrict m,
                    float* __restrict v, int64_t b, int64_t e, const Scalars<float>& s);

}  // namespace adamw_detail

}  // namespace zt
