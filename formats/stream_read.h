// defines: ByteRange, kStreamChunkBytes, read_stored_tensor, same_stored_values — reading one
//          tensor stored row-major in a file into a view of a unit's buffer, through a bounded
//          buffer. Shared by the streaming readers of formats/ (hf_reader.cpp, llmc_checkpoint.cpp).
#pragma once
#include <cstdint>
#include <functional>

#include "core/tensor.h"

namespace zt {

// Reads bytes [lo, lo + n) of one stored tensor into dst; throws naming the file and the tensor.
using ByteRange = std::function<void(uint64_t lo, uint64_t n, void* dst)>;

// The largest buffer read_stored_tensor allocates (whole rows; one row when a row is larger).
inline constexpr int64_t kStreamChunkBytes = int64_t{1} << 20;

// dst := the tensor stored as `shape` (row-major, dtype `stored`), read through `read`.
//   transpose false: dst has `shape`;  transpose true (2-D): dst has shape (shape[1], shape[0])
//   (HF's Conv1D (in, out) into ZeroTensor's (out, in)).
// dst: a CPU view, any float dtype. When dst is contiguous, of dtype `stored` and not transposed
// the bytes go straight into it; otherwise rows [r0, r1) at a time through one workspace buffer
// of at most kStreamChunkBytes (converted exactly: f16 / bf16 -> f32 widen).
void read_stored_tensor(const Shape& shape, DType stored, bool transpose, const Tensor& dst, const ByteRange& read);

// True when two stored tensors of the same shape hold the same values (bitwise; converted to
// float32 first when their dtypes differ), compared kStreamChunkBytes of rows at a time.
bool same_stored_values(const Shape& shape, DType a_dtype, const ByteRange& a, DType b_dtype, const ByteRange& b);

}  // namespace zt
