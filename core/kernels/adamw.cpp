// defines: cpu_adam_isa_name, cpu_adam_isa_available, cpu_adam_isa_from_env, cpu_adam_isa,
//          set_cpu_adam_isa, adamw_update (core/kernels/adamw.h); file-local: adamw_one, range_portable,
//          cpu_has_avx2_fma, rounded
//
// The fused AdamW kernel (core/kernels/adamw.h): scalars, the portable path, the run-time choice
// of path, and the OpenMP split. The avx2_fma path is in adamw_avx2.cpp.
#include "core/kernels/adamw.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "core/parallel.h"  // kParallelMinElements

#if defined(__x86_64__) || defined(__i386__)
#define ZT_ADAMW_HAVE_AVX2_PATH 1
#endif

namespace zt {

using adamw_detail::Scalars;

namespace {

// One element: the header's operations in its order, line by line the vector code of
// adamw_avx2.cpp (std::fma where it has _mm256_fmadd_ps / _mm256_fmsub_ps). No a * b + c
// appears, so FMA contraction by the compiler has nothing to fuse.
template <class T>
inline void adamw_one(T& p, T g, T& m, T& v, const Scalars<T>& s) {
  const T mi = std::fma(s.b1, m, s.c1 * g);
  const T vi = std::fma(s.b2, v, s.c2 * (g * g));
  m = mi;
  v = vi;
  const T denom = std::sqrt(vi) / s.bc2_sqrt + s.eps;
  const T upd = (s.step_size * mi) / denom;
  p = std::fma(p, s.keep, -upd);
}

template <class T>
void range_portable(T* __restrict param, const T* __restrict grad, T* __restrict m, T* __restrict v, int64_t b,
                    int64_t e, const Scalars<T>& s) {
  for (int64_t i = b; i < e; ++i) adamw_one(param[i], grad[i], m[i], v[i], s);
}

bool cpu_has_avx2_fma() {
#if defined(ZT_ADAMW_HAVE_AVX2_PATH)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

// x rounded to double on its own: GCC (-ffp-contract=fast) would fuse 1 - lr * wd into one
// fnmadd (one rounding), which PyTorch's Python float arithmetic does not do.
double rounded(double x) {
  volatile double r = x;
  return r;
}

// -1: not decided yet (ZT_CPU_ADAM is read on the first cpu_adam_isa()); else a CpuAdamIsa.
std::atomic<int> g_isa{-1};

}  // namespace

const char* cpu_adam_isa_name(CpuAdamIsa isa) {
  switch (isa) {
    case CpuAdamIsa::portable: return "portable";
    case CpuAdamIsa::avx2_fma: return "avx2_fma";
  }
  ZT_THROW("cpu_adam_isa_name: invalid CpuAdamIsa value ", static_cast<int>(isa));
}

bool cpu_adam_isa_available(CpuAdamIsa isa) {
  static const bool avx2_fma = cpu_has_avx2_fma();
  return isa == CpuAdamIsa::portable || (isa == CpuAdamIsa::avx2_fma && avx2_fma);
}

CpuAdamIsa cpu_adam_isa_from_env(const char* value) {
  if (value == nullptr || *value == '\0' || std::strcmp(value, "auto") == 0)
    return cpu_adam_isa_available(CpuAdamIsa::avx2_fma) ? CpuAdamIsa::avx2_fma : CpuAdamIsa::portable;
  for (CpuAdamIsa isa : {CpuAdamIsa::portable, CpuAdamIsa::avx2_fma}) {
    if (std::strcmp(value, cpu_adam_isa_name(isa)) != 0) continue;
    if (!cpu_adam_isa_available(isa))
      ZT_THROW("ZT_CPU_ADAM=", value, ": this CPU (or this non-x86 build) has no AVX2+FMA; use ZT_CPU_ADAM=portable or auto");
    return isa;
  }
  ZT_THROW("ZT_CPU_ADAM='", value, "' is not a CPU AdamW path; expected portable, avx2_fma or auto (or unset)");
}

CpuAdamIsa cpu_adam_isa() {
  int s = g_isa.load(std::memory_order_acquire);
  if (s < 0) {
    const int chosen = static_cast<int>(cpu_adam_isa_from_env(std::getenv("ZT_CPU_ADAM")));
    g_isa.compare_exchange_strong(s, chosen, std::memory_order_acq_rel);  // a racing set_ wins
    s = g_isa.load(std::memory_order_acquire);
  }
  return static_cast<CpuAdamIsa>(s);
}

void set_cpu_adam_isa(CpuAdamIsa isa) {
  if (isa != CpuAdamIsa::portable && isa != CpuAdamIsa::avx2_fma)
    ZT_THROW("set_cpu_adam_isa: invalid CpuAdamIsa value ", static_cast<int>(isa));
  if (!cpu_adam_isa_available(isa))
    ZT_THROW("set_cpu_adam_isa(", cpu_adam_isa_name(isa), "): this CPU (or this non-x86 build) has no AVX2+FMA");
  g_isa.store(static_cast<int>(isa), std::memory_order_release);
}

template <class T>
void adamw_update(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWArgs& h) {
  ZT_CHECK(h.step >= 1, "adamw_update: step is 1-based, got ", h.step);
  ZT_CHECK(n >= 0, "adamw_update: n = ", n);
  // Scalars in double, as PyTorch computes them in Python floats, then rounded once to T.
  const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  Scalars<T> s;
  s.step_size = static_cast<T>(h.lr / bc1);
  s.bc2_sqrt = static_cast<T>(std::sqrt(bc2));
  s.keep = h.decay ? static_cast<T>(1.0 - rounded(h.lr * h.weight_decay)) : T(1);
  s.b1 = static_cast<T>(h.beta1);
  s.b2 = static_cast<T>(h.beta2);
  s.c1 = static_cast<T>(1.0 - h.beta1);
  s.c2 = static_cast<T>(1.0 - h.beta2);
  s.eps = static_cast<T>(h.eps);
  [[maybe_unused]] const bool vec = std::is_same_v<T, float> && cpu_adam_isa() == CpuAdamIsa::avx2_fma;
  auto range = [&](int64_t b, int64_t e) {
#if defined(ZT_ADAMW_HAVE_AVX2_PATH)
    if constexpr (std::is_same_v<T, float>) {
      if (vec) return adamw_detail::range_avx2_fma(param, grad, m, v, b, e, s);
    }
#endif
    range_portable(param, grad, m, v, b, e, s);
  };
  if (n < kParallelMinElements) return range(0, n);
  // Static split into equal contiguous blocks starting at multiples of 16 elements; every element
  // takes the same operations wherever it lands, so the result does not depend on the split.
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t per = ((n + nt - 1) / nt + 15) / 16 * 16;
    const int64_t b = std::min(n, t * per), e = std::min(n, b + per);
    range(b, e);
  }
}

template void adamw_update<float>(float*, const float*, float*, float*, int64_t, const AdamWArgs&);
template void adamw_update<double>(double*, const double*, double*, double*, int64_t, const AdamWArgs&);

}  // namespace zt
