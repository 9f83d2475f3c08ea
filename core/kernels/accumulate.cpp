// defines: accumulate_ (core/kernels/accumulate.h); file-local: axpy_contig
#include "core/kernels/accumulate.h"

#include "core/backend.h"

namespace zt {

namespace {
template <class T>
void axpy_contig(T* dst, const T* src, T alpha, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) dst[i] += alpha * src[i];
}
}  // namespace

void accumulate_(Tensor& dst, const Tensor& src, double alpha) {
  check_shape(src, dst.shape(), "accumulate_: src");
  ZT_CHECK(dst.device() == src.device(), "accumulate_: src on ", src.device().str(), " into dst on ",
           dst.device().str(), " (both must be on one device)");
  if (!dst.device().is_cpu()) {  // a device's kernels (any strides; its compute dtypes)
    ZT_CHECK(dst.dtype() == src.dtype(), "accumulate_: dtype ", dtype_name(src.dtype()), " into ",
             dtype_name(dst.dtype()));
    Backend& b = backend_of(dst);
    ZT_CHECK(b.computes(dst.dtype()), "accumulate_: dtype ", dtype_name(dst.dtype()), " on ", dst.device().str(),
             " is not a compute dtype there");
    return b.accumulate(dst, src, alpha);
  }
  ZT_CHECK(dst.dtype() == src.dtype(), "accumulate_: dtype ", dtype_name(src.dtype()), " into ", dtype_name(dst.dtype()));
  if (dst.dtype() == DType::bf16) return backend_of(dst).accumulate(dst, src, alpha);  // float32 stand-ins
  check_float(dst, "accumulate_: dst");
  ZT_CHECK(dst.dtype() == src.dtype(), "accumulate_: dtype ", dtype_name(src.dtype()), " into ", dtype_name(dst.dtype()));
  Tensor s = src.contiguous();
  if (dst.is_contiguous()) {
    if (dst.dtype() == DType::f32) axpy_contig(dst.data<float>(), s.data<float>(), static_cast<float>(alpha), dst.numel());
    else axpy_contig(dst.data<double>(), s.data<double>(), alpha, dst.numel());
    return;
  }
  Tensor tmp = dst.contiguous();  // strided destination: gather, add, scatter back
  accumulate_(tmp, s, alpha);
  dst.copy_(tmp);
}

}  // namespace zt
