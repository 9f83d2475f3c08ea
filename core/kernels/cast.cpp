// defines: cast_, accumulate_cast_, all_finite (core/kernels/cast.h); file-local: is_cast_dtype,
//          check_pair, cast_loop, cast_to, cast_dispatch, accumulate_loop and 1 more
#include "core/kernels/cast.h"

#include <cmath>

#include "core/backend.h"
#include "core/parallel.h"

namespace zt {

namespace {

// Element access per storage dtype: load to float32, store from float32 (rounding to nearest even).
template <DType D> struct Io;
template <> struct Io<DType::f32> {
  using T = float;
  static float load(float x) { return x; }
  static float store(float x) { return x; }
};
template <> struct Io<DType::bf16> {
  using T = uint16_t;
  static float load(uint16_t x) { return cvt::bf16_to_f32(x); }
  static uint16_t store(float x) { return cvt::f32_to_bf16(x); }
};
template <> struct Io<DType::f16> {
  using T = uint16_t;
  static float load(uint16_t x) { return cvt::f16_to_f32(x); }
  static uint16_t store(float x) { return cvt::f32_to_f16(x); }
};

bool is_cast_dtype(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

// dst and src may be the same elements (in place) but must not overlap otherwise: element i is
// read and then written, so only an exact alias is safe.
void check_pair(const char* op, const Tensor& dst, const Tensor& src) {
  if (!dst.defined() || !src.defined())
    ZT_THROW(op, ": undefined tensor (dst ", dst.str(), ", src ", src.str(), ")");
  if (dst.numel() != src.numel())
    ZT_THROW(op, ": dst ", dst.str(), " and src ", src.str(), " differ in numel (", dst.numel(), " vs ", src.numel(),
             "), expected the same number of elements");
  if (!dst.is_contiguous() || !src.is_contiguous())
    ZT_THROW(op, ": dst ", dst.str(), ", src ", src.str(), ": expected both contiguous");
  if (dst.device() != src.device())
    ZT_THROW(op, ": dst ", dst.str(), " is on ", dst.device().str(), " but src ", src.str(), " is on ",
             src.device().str(), ": expected one device");
  const auto* d = static_cast<const char*>(dst.raw());
  const auto* s = static_cast<const char*>(src.raw());
  const bool overlap = d < s + src.nbytes() && s < d + dst.nbytes();
  const bool same = d == s && dst.element_size() == src.element_size();
  if (overlap && !same && dst.numel() > 0)
    ZT_THROW(op, ": dst ", dst.str(), " and src ", src.str(),
             " overlap in memory without being the same elements (expected disjoint or identical buffers)");
}

template <DType S, DType D, bool Scale>
void cast_loop(void* dst, const void* src, float f, int64_t n) {
  auto* d = static_cast<typename Io<D>::T*>(dst);
  const auto* s = static_cast<const typename Io<S>::T*>(src);
#pragma omp parallel for simd schedule(static) if (n > kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) {
    float v = Io<S>::load(s[i]);
    if constexpr (Scale) v *= f;
    d[i] = Io<D>::store(v);
  }
}

template <DType S, bool Scale>
void cast_to(DType dt, void* dst, const void* src, float f, int64_t n) {
  switch (dt) {
    case DType::f32: return cast_loop<S, DType::f32, Scale>(dst, src, f, n);
    case DType::bf16: return cast_loop<S, DType::bf16, Scale>(dst, src, f, n);
    case DType::f16: return cast_loop<S, DType::f16, Scale>(dst, src, f, n);
    default: ZT_THROW("cast_: unsupported dst dtype ", dtype_name(dt));
  }
}

template <bool Scale>
void cast_dispatch(DType st, DType dt, void* dst, const void* src, float f, int64_t n) {
  switch (st) {
    case DType::f32: return cast_to<DType::f32, Scale>(dt, dst, src, f, n);
    case DType::bf16: return cast_to<DType::bf16, Scale>(dt, dst, src, f, n);
    case DType::f16: return cast_to<DType::f16, Scale>(dt, dst, src, f, n);
    default: ZT_THROW("cast_: unsupported src dtype ", dtype_name(st));
  }
}

template <DType D, DType S>
void accumulate_loop(void* dst, const void* src, int64_t n) {
  auto* d = static_cast<typename Io<D>::T*>(dst);
  const auto* s = static_cast<const typename Io<S>::T*>(src);
#pragma omp parallel for simd schedule(static) if (n > kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) d[i] = Io<D>::store(Io<D>::load(d[i]) + Io<S>::load(s[i]));
}

// 1 when some element has an all-ones exponent (inf or NaN). An integer OR: any combination
// order gives the same answer, so the reduction clause is safe here.
template <class U>
bool any_nonfinite(const U* x, int64_t n, U exp_mask) {
  U bad = 0;
#pragma omp parallel for simd schedule(static) reduction(| : bad) if (n > kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) bad |= static_cast<U>((x[i] & exp_mask) == exp_mask);
  return bad != 0;
}

}  // namespace

void cast_(const Tensor& dst, const Tensor& src, double factor) {
  check_pair("cast_", dst, src);
  if (!is_cast_dtype(dst.dtype()) || !is_cast_dtype(src.dtype()))
    ZT_THROW("cast_: dst ", dst.str(), ", src ", src.str(), ": expected dtypes float32, bfloat16 or float16");
  const float f = static_cast<float>(factor);
  if (!std::isfinite(f))
    ZT_THROW("cast_: factor ", factor, " (dst ", dst.str(), ", src ", src.str(), ") is not finite in float32");
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (!dst.device().is_cpu()) return backend_of(dst).cast(dst, src, factor);
  if (f == 1.0f) cast_dispatch<false>(src.dtype(), dst.dtype(), dst.raw(), src.raw(), f, n);
  else cast_dispatch<true>(src.dtype(), dst.dtype(), dst.raw(), src.raw(), f, n);
}

void accumulate_cast_(const Tensor& dst, const Tensor& src) {
  check_pair("accumulate_cast_", dst, src);
  if (!is_cast_dtype(dst.dtype()) || (src.dtype() != DType::f32 && src.dtype() != dst.dtype()))
    ZT_THROW("accumulate_cast_: dst ", dst.str(), ", src ", src.str(),
             ": expected dst float32, bfloat16 or float16 and src float32 or dst's dtype");
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (!dst.device().is_cpu()) return backend_of(dst).accumulate_cast(dst, src);
  const bool same = src.dtype() == dst.dtype();
  switch (dst.dtype()) {
    case DType::f32: return accumulate_loop<DType::f32, DType::f32>(dst.raw(), src.raw(), n);
    case DType::bf16:
      return same ? accumulate_loop<DType::bf16, DType::bf16>(dst.raw(), src.raw(), n)
                  : accumulate_loop<DType::bf16, DType::f32>(dst.raw(), src.raw(), n);
    case DType::f16:
      return same ? accumulate_loop<DType::f16, DType::f16>(dst.raw(), src.raw(), n)
                  : accumulate_loop<DType::f16, DType::f32>(dst.raw(), src.raw(), n);
    default: break;  // excluded above
  }
}

bool all_finite(const Tensor& t) {
  if (!t.defined()) ZT_THROW("all_finite: undefined tensor");
  if (!t.is_contiguous()) ZT_THROW("all_finite: tensor ", t.str(), " is not contiguous (expected a flat buffer)");
  const int64_t n = t.numel();
  if (n == 0) return true;
  if (!t.device().is_cpu()) {
    if (t.dtype() != DType::f32 && t.dtype() != DType::f64 && t.dtype() != DType::bf16 && t.dtype() != DType::f16)
      ZT_THROW("all_finite: tensor ", t.str(), " has dtype ", dtype_name(t.dtype()),
               ", expected float32, float64, bfloat16 or float16");
    return backend_of(t).all_finite(t);
  }
  switch (t.dtype()) {
    case DType::f32: return !any_nonfinite(static_cast<const uint32_t*>(t.raw()), n, uint32_t(0x7f800000u));
    case DType::f64:
      return !any_nonfinite(static_cast<const uint64_t*>(t.raw()), n, uint64_t(0x7ff0000000000000ull));
    case DType::bf16: return !any_nonfinite(static_cast<const uint16_t*>(t.raw()), n, uint16_t(0x7f80u));
    case DType::f16: return !any_nonfinite(static_cast<const uint16_t*>(t.raw()), n, uint16_t(0x7c00u));
    default:
      ZT_THROW("all_finite: tensor ", t.str(), " has dtype ", dtype_name(t.dtype()),
               ", expected float32, float64, bfloat16 or float16");
  }
}

}  // namespace zt
