// defines: cuda_kernels::cast — float32 / bfloat16 / float16 conversions on the GPU, with a scale
//          folded in, bit for bit what core/kernels/cast.h's cast_ returns; and (CUDA sources only)
//          cuda_kernels::dev — the device forms of the conversions (Io<DType>) and 16-byte packs,
//          shared by the other kernels in cuda/kernels/.
//
// API: raw device pointers + element counts + a stream (Tensor has no device yet). Launches are
// asynchronous on `s`; argument errors throw a zt::Error before anything is launched, launch
// errors throw through ZT_CUDA_CHECK (cuda/check.h).
//
// Rounding (the same rules as core/dtype.h and cvt:: in core/kernels/cast.h, written with the
// same integer formulas, NOT the CUDA intrinsics): round to nearest even; bf16 NaN ->
// (bits >> 16) | 0x40 (sign and payload kept, quiet bit set); f16 NaN -> sign | 0x7e00; f16
// overflow (|x| >= 65520) -> +-inf; f16 subnormals rounded, not flushed. (__float2bfloat16_rn
// would turn every NaN into the canonical 0x7fff and lose the sign, so it is not used.)
// Arithmetic is float32: dst = round_to(dst_t, float(src) * factor); factor == 1 skips the
// multiply, so a float32 -> float32 copy is exact, NaN payloads included.
// One documented difference from the CPU: with factor != 1, a NaN input times the factor is the
// GPU's canonical NaN (0x7fffffff) while x86 keeps the input's sign and payload; the result is a
// NaN either way (bf16: 0x7fff vs (payload >> 16) | 0x40).
// Requires IEEE float32 adds with denormals (the f16 subnormal path): never build these sources
// with --use_fast_math / -ftz=true.
//
// Determinism: element-wise; each element's result depends on that element only (the vector and
// the scalar path run the same per-element code), so the output is the same for any launch.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace zt::cuda_kernels {

// dst (n) = round_to(dst_t, float(src (n)) * factor), element-wise. dst_t, src_t: f32, bf16 or f16
// (bf16 / f16 stored as uint16_t bits). factor finite. dst and src are device pointers that must
// not partially overlap (dst == src with equal element sizes, in place, is fine). 128-bit loads
// and stores when both pointers are 16-byte aligned, 8 elements per thread; the n % 8 tail and
// unaligned buffers take a scalar path with identical per-element arithmetic.
void cast(DType dst_t, void* dst, DType src_t, const void* src, int64_t n, float factor, cudaStream_t s);

}  // namespace zt::cuda_kernels

#if defined(__CUDACC__)
// ---- device helpers for cuda/kernels/*.cu (nvcc only) ----
namespace zt::cuda_kernels::dev {

__device__ __forceinline__ float bf16_to_f32(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }

// = cvt::f32_to_bf16 (core/kernels/cast.h)
__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// = cvt::f16_to_f32: exact; a subnormal half is normalized by one exact float subtraction.
__device__ __forceinline__ float f16_to_f32(uint16_t h) {
  const uint32_t shifted_exp = 0x7c00u << 13;
  uint32_t o = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
  const uint32_t exp = o & shifted_exp;
  o += (127u - 15u) << 23;
  if (exp == shifted_exp) o += (128u - 16u) << 23;  // inf / NaN: keep payload
  else if (exp == 0) o = __float_as_uint(__fsub_rn(__uint_as_float(o + (1u << 23)), __uint_as_float(113u << 23)));
  return __uint_as_float(o | ((static_cast<uint32_t>(h) & 0x8000u) << 16));
}

// = cvt::f32_to_f16 (F. Giesen's float_to_half_fast3_rtne).
__device__ __forceinline__ uint16_t f32_to_f16(float f) {
  const uint32_t x = __float_as_uint(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  uint32_t o;
  if (a >= ((127u + 16u) << 23)) {
    o = a > 0x7f800000u ? 0x7e00u : 0x7c00u;  // NaN, or inf (overflow)
  } else if (a < (113u << 23)) {
    const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;  // 0.5f
    o = __float_as_uint(__fadd_rn(__uint_as_float(a), __uint_as_float(denorm_magic))) - denorm_magic;
  } else {
    o = (a + ((15u - 127u) << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  }
  return static_cast<uint16_t>(o | sign);
}

// Storage type of a dtype and its exact load to / rounding store from float32.
template <DType D> struct Io;
template <> struct Io<DType::f32> {
  using T = float;
  __device__ __forceinline__ static float load(float x) { return x; }
  __device__ __forceinline__ static float store(float x) { return x; }
};
template <> struct Io<DType::bf16> {
  using T = uint16_t;
  __device__ __forceinline__ static float load(uint16_t x) { return bf16_to_f32(x); }
  __device__ __forceinline__ static uint16_t store(float x) { return f32_to_bf16(x); }
};
template <> struct Io<DType::f16> {
  using T = uint16_t;
  __device__ __forceinline__ static float load(uint16_t x) { return f16_to_f32(x); }
  __device__ __forceinline__ static uint16_t store(float x) { return f32_to_f16(x); }
};

// 8 elements through 128-bit accesses: p must be 16-byte aligned (8 * sizeof(T) is 16 or 32 bytes),
// and the register array declared alignas(16).
template <class T>
__device__ __forceinline__ void load8(T (&r)[8], const T* p) {
  static_assert(8 * sizeof(T) % 16 == 0);
  const uint4* q = reinterpret_cast<const uint4*>(p);
  uint4* d = reinterpret_cast<uint4*>(r);
#pragma unroll
  for (int w = 0; w < static_cast<int>(8 * sizeof(T) / 16); ++w) d[w] = q[w];
}
template <class T>
__device__ __forceinline__ void store8(T* p, const T (&r)[8]) {
  uint4* q = reinterpret_cast<uint4*>(p);
  const uint4* s = reinterpret_cast<const uint4*>(r);
#pragma unroll
  for (int w = 0; w < static_cast<int>(8 * sizeof(T) / 16); ++w) q[w] = s[w];
}

__host__ __device__ inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Blocks of `threads` for `work` items, each thread striding by the grid (capped, so any n fits).
inline unsigned grid_for(int64_t work, int threads) {
  const int64_t b = (work + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > (int64_t(1) << 20) ? (int64_t(1) << 20) : b));
}

}  // namespace zt::cuda_kernels::dev
#endif
