// defines: read_stored_tensor, same_stored_values (formats/stream_read.h); file-local: Rows, rows_of,
//          chunk_rows
#include "formats/stream_read.h"

#include <algorithm>
#include <cstring>

#include "core/memory.h"

namespace zt {

namespace {
// A stored tensor as (rows, row elements): a 1-D tensor is rows of one element.
struct Rows {
  int64_t rows, row_numel;
};
Rows rows_of(const Shape& shape) {
  if (shape.empty()) return {1, 1};
  const int64_t r = shape[0];
  return {r, r == 0 ? 0 : shape_numel(shape) / r};
}
// Rows per chunk: as many whole rows as fit kStreamChunkBytes, at least one.
int64_t chunk_rows(const Rows& r, DType dt) {
  const int64_t row_bytes = std::max<int64_t>(1, r.row_numel * static_cast<int64_t>(dtype_size(dt)));
  return std::max<int64_t>(1, std::min(r.rows, kStreamChunkBytes / row_bytes));
}
}  // namespace

void read_stored_tensor(const Shape& shape, DType stored, bool transpose, const Tensor& dst, const ByteRange& read) {
  const Shape want = transpose ? Shape{shape.at(1), shape.at(0)} : shape;
  ZT_CHECK(dst.device().is_cpu() && dst.shape() == want, "read_stored_tensor: a ", shape_str(shape),
           transpose ? " tensor, transposed, " : " tensor ", "into ", dst.str());
  const int64_t es = static_cast<int64_t>(dtype_size(stored));
  if (!transpose && dst.dtype() == stored && dst.is_contiguous()) {  // (numel,) bytes as they lie
    read(0, static_cast<uint64_t>(dst.nbytes()), dst.raw());
    return;
  }
  const Rows r = rows_of(shape);
  const int64_t k = chunk_rows(r, stored);
  Tensor buf = Tensor::empty({k * r.row_numel}, stored, Category::workspace, cpu_allocator());  // (k rows,)
  for (int64_t r0 = 0; r0 < r.rows; r0 += k) {
    const int64_t r1 = std::min(r.rows, r0 + k), n = (r1 - r0) * r.row_numel;
    read(static_cast<uint64_t>(r0 * r.row_numel * es), static_cast<uint64_t>(n * es), buf.raw());
    if (transpose) {  // stored rows [r0, r1) of (in, out) are dst's columns [r0, r1) of (out, in)
      Tensor part = buf.flat_view(0, {r1 - r0, shape[1]});
      dst.slice(1, r0, r1).copy_(part.transpose(0, 1));
    } else {
      Shape part_shape = shape;
      if (!part_shape.empty()) part_shape[0] = r1 - r0;
      Tensor d = shape.empty() ? dst : dst.slice(0, r0, r1);
      d.copy_(buf.flat_view(0, part_shape));
    }
  }
}

bool same_stored_values(const Shape& shape, DType a_dtype, const ByteRange& a, DType b_dtype, const ByteRange& b) {
  const Rows r = rows_of(shape);
  const int64_t k = std::min(chunk_rows(r, a_dtype), chunk_rows(r, b_dtype));
  const int64_t ae = static_cast<int64_t>(dtype_size(a_dtype)), be = static_cast<int64_t>(dtype_size(b_dtype));
  Tensor x = Tensor::empty({k * r.row_numel}, a_dtype, Category::workspace, cpu_allocator());
  Tensor y = Tensor::empty({k * r.row_numel}, b_dtype, Category::workspace, cpu_allocator());
  for (int64_t r0 = 0; r0 < r.rows; r0 += k) {
    const int64_t n = (std::min(r.rows, r0 + k) - r0) * r.row_numel;
    a(static_cast<uint64_t>(r0 * r.row_numel * ae), static_cast<uint64_t>(n * ae), x.raw());
    b(static_cast<uint64_t>(r0 * r.row_numel * be), static_cast<uint64_t>(n * be), y.raw());
    Tensor xs = x.flat_view(0, {n}), ys = y.flat_view(0, {n});
    if (a_dtype != b_dtype) {
      xs = xs.to(DType::f32);
      ys = ys.to(DType::f32);
    }
    if (std::memcmp(xs.raw(), ys.raw(), xs.nbytes()) != 0) return false;
  }
  return true;
}

}  // namespace zt
