// defines: cpu_backend, CpuBackend (copy, copy_from_host, copy_to_host, fill, accumulate and 9 more)
//          (core/cpu_backend.h); file-local: need_cpu, host_copy
//
// CpuBackend, part 1 (core/cpu_backend.h): memory, copies, casts, shard norms, AdamW, SGD, and
// the one instance. Every entry calls the CPU kernel that the tensor-level function used before the
// backend table existed, so results are bit for bit those of core/kernels.
#include "core/cpu_backend.h"
#include "core/cpu_bf16.h"  // defines: Bf16StandIns

#include <cstring>

#include "core/dispatch.h"  // dispatch_float
#include "core/kernels/accumulate.h"
#include "core/kernels/adamw.h"
#include "core/kernels/cast.h"
#include "core/kernels/quantize.h"
#include "core/kernels/reduce.h"
#include "core/kernels/sgd.h"

namespace zt {

namespace {

void need_cpu(const Tensor& t, const char* entry) {
  ZT_CHECK(t.defined(), "cpu backend ", entry, ": undefined tensor");
  ZT_CHECK(t.device().is_cpu(), "cpu backend ", entry, ": tensor ", t.str(), " is on ", t.device().str());
}

// Host <-> "device" on the cpu: the same bytes, one memcpy.
void host_copy(const Tensor& dst, const Tensor& src, const char* entry) {
  need_cpu(dst, entry);
  need_cpu(src, entry);
  ZT_CHECK(dst.dtype() == src.dtype() && dst.shape() == src.shape(), "cpu backend ", entry, ": ", src.str(),
           " into ", dst.str(), " (same dtype and shape expected)");
  ZT_CHECK(dst.is_contiguous() && src.is_contiguous(), "cpu backend ", entry, ": ", src.str(), " into ", dst.str(),
           " (both contiguous expected)");
  if (dst.nbytes()) std::memcpy(dst.raw(), src.raw(), dst.nbytes());
}

}  // namespace

CpuBackend& cpu_backend() {
  static CpuBackend b;
  return b;
}

// The strided converting copy and the fill are Tensor's own cpu paths (core/tensor.cpp): one
// implementation for both.
void CpuBackend::copy(const Tensor& dst, const Tensor& src) {
  need_cpu(dst, "copy");
  need_cpu(src, "copy");
  Tensor d = dst;
  d.copy_(src);
}

void CpuBackend::copy_from_host(const Tensor& dst, const Tensor& src_host) {
  host_copy(dst, src_host, "copy_from_host");
}
void CpuBackend::copy_to_host(const Tensor& dst_host, const Tensor& src) { host_copy(dst_host, src, "copy_to_host"); }

void CpuBackend::fill(const Tensor& dst, double value) {
  need_cpu(dst, "fill");
  Tensor d = dst;
  d.fill_(value);
}

void CpuBackend::accumulate(const Tensor& dst, const Tensor& src, double alpha) {
  need_cpu(dst, "accumulate");
  if (Bf16StandIns f{&dst, &src}; f.active()) {
    accumulate(f(dst), f(src), alpha);
    return f.store({&dst});
  }
  Tensor d = dst;
  accumulate_(d, src, alpha);
}

void CpuBackend::cast(const Tensor& dst, const Tensor& src, double factor) {
  need_cpu(dst, "cast");
  cast_(dst, src, factor);
}

void CpuBackend::accumulate_cast(const Tensor& dst, const Tensor& src) {
  need_cpu(dst, "accumulate_cast");
  accumulate_cast_(dst, src);
}

bool CpuBackend::all_finite(const Tensor& t) {
  need_cpu(t, "all_finite");
  return zt::all_finite(t);
}

double CpuBackend::sum_of_squares(const Tensor& t) {
  need_cpu(t, "sum_of_squares");
  ZT_CHECK(t.is_contiguous(), "cpu backend sum_of_squares: ", t.str(), " is not contiguous");
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::f32: return zt::sum_of_squares(t.data<float>(), n);
    case DType::f64: return zt::sum_of_squares(t.data<double>(), n);
    case DType::bf16: return sum_of_squares_bf16(static_cast<const uint16_t*>(t.raw()), n);
    case DType::f16: return sum_of_squares_f16(static_cast<const uint16_t*>(t.raw()), n);
    default:
      ZT_THROW("sum_of_squares: tensor ", t.str(), " has dtype ", dtype_name(t.dtype()),
               ", expected float32, float64, bfloat16 or float16");
  }
}

void CpuBackend::quantize(const Tensor& codes, const Tensor& scales, const Tensor& x, int bits, int64_t block,
                          QuantScheme scheme) {
  need_cpu(x, "quantize");
  zt::quantize_(codes, scales, x, bits, block, scheme);
}

void CpuBackend::dequantize(const Tensor& out, const Tensor& codes, const Tensor& scales, int bits, int64_t block) {
  need_cpu(out, "dequantize");
  zt::dequantize_(out, codes, scales, bits, block);
}

void CpuBackend::scale_(const Tensor& t, double factor) {
  need_cpu(t, "scale_");
  if (Bf16StandIns f{&t}; f.active()) {
    scale_(f(t), factor);
    return f.store({&t});
  }
  ZT_CHECK(t.is_contiguous(), "cpu backend scale_: ", t.str(), " is not contiguous");
  dispatch_float(t.dtype(), "cpu backend ", "scale_", [&](auto tag) {
    using T = decltype(tag);
    scale_inplace(t.data<T>(), t.numel(), static_cast<T>(factor));
  });
}

void CpuBackend::adamw_step(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
                            const AdamWArgs& h, const Tensor& out_lowp) {
  for (const Tensor* t : {&master, &grad, &m, &v}) {
    need_cpu(*t, "adamw_step");
    ZT_CHECK(t->is_contiguous() && t->numel() == master.numel() && t->dtype() == master.dtype(),
             "cpu backend adamw_step: ", t->str(), " with master ", master.str(),
             " (contiguous, same numel and dtype expected)");
  }
  const int64_t n = master.numel();
  dispatch_float(master.dtype(), "cpu backend ", "adamw_step", [&](auto tag) {
    using T = decltype(tag);
    adamw_update<T>(master.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), n, h);
  });
  if (out_lowp.defined()) {  // the 2-byte parameter shard: round the new master once (cast_ from float32)
    need_cpu(out_lowp, "adamw_step");
    ZT_CHECK(master.dtype() == DType::f32 && (out_lowp.dtype() == DType::bf16 || out_lowp.dtype() == DType::f16),
             "cpu backend adamw_step: out_lowp ", out_lowp.str(), " for master ", master.str(),
             " (bfloat16 or float16 from a float32 master expected)");
    cast_(out_lowp, master, 1.0);
  }
}

void CpuBackend::sgd_step(const Tensor& param, const Tensor& grad, const Tensor& buf, const SgdArgs& h) {
  ZT_CHECK(buf.defined() == (h.momentum > 0), "cpu backend sgd_step: momentum ", h.momentum, " with ",
           buf.defined() ? "a" : "no", " momentum buffer (one expected exactly when momentum > 0)");
  for (const Tensor* t : {&param, &grad, &buf}) {
    if (t == &buf && !buf.defined()) continue;
    need_cpu(*t, "sgd_step");
    ZT_CHECK(t->is_contiguous() && t->numel() == param.numel() && t->dtype() == param.dtype(),
             "cpu backend sgd_step: ", t->str(), " with param ", param.str(),
             " (contiguous, same numel and dtype expected)");
  }
  dispatch_float(param.dtype(), "cpu backend ", "sgd_step", [&](auto tag) {
    using T = decltype(tag);
    sgd_update<T>(param.data<T>(), grad.data<T>(), buf.defined() ? buf.data<T>() : nullptr, param.numel(), h);
  });
}

}  // namespace zt
