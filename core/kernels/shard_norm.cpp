// defines: sum_of_squares, scale_ (core/kernels/shard_norm.h); file-local: check_flat
#include "core/kernels/shard_norm.h"

#include "core/backend.h"

namespace zt {

namespace {

void check_flat(const Tensor& t, const char* who) {
  if (!t.defined()) ZT_THROW(who, ": undefined tensor");
  if (!t.is_contiguous()) ZT_THROW(who, ": tensor ", t.str(), " is not contiguous (expected a flat buffer)");
}

}  // namespace

double sum_of_squares(const Tensor& t) {
  check_flat(t, "sum_of_squares");
  const DType d = t.dtype();
  if (d != DType::f32 && d != DType::f64 && d != DType::bf16 && d != DType::f16)
    ZT_THROW("sum_of_squares: tensor ", t.str(), " has dtype ", dtype_name(d),
             ", expected float32, float64, bfloat16 or float16");
  return backend_of(t).sum_of_squares(t);
}

double sum_of_squares(const std::vector<Tensor>& ts) {
  double s = 0;
  for (const Tensor& t : ts) s += sum_of_squares(t);
  return s;
}

void scale_(const Tensor& t, double factor) {
  check_flat(t, "scale_");
  Backend& b = backend_of(t);
  if (t.device().is_cpu()) check_float(t, "scale_");
  else if (!b.computes(t.dtype()))
    ZT_THROW("scale_: tensor ", t.str(), " on ", t.device().str(), " has dtype ", dtype_name(t.dtype()),
             ", which that device's kernels do not compute in");
  b.scale_(t, factor);
}

void scale_(const std::vector<Tensor>& ts, double factor) {
  for (const Tensor& t : ts) scale_(t, factor);
}

}  // namespace zt
