// defines: kSumChunk, sum_of_squares (float, double, bfloat16, float16 buffers), scale_inplace —
//          the CPU kernels behind the norm and scaling of flat shards (core/kernels/shard_norm.h,
//          through the cpu backend's sum_of_squares and scale_).
//
// sum_of_squares: sum x_i^2 in double. The n elements are split into fixed chunks of kSumChunk
// (independent of the thread count); each chunk sums in 8 lanes over i mod 8 combined by a fixed
// pairwise tree, and the chunk partials are added in chunk order: bitwise identical for any
// number of threads. bfloat16 / float16 elements are converted exactly to float32 (then double)
// before squaring, so the sum equals the float32 path's on the converted values, bit for bit.
// scale_inplace: x *= factor element-wise (factor already rounded to T by the caller).
#pragma once
#include <cstdint>

namespace zt {

inline constexpr int64_t kSumChunk = int64_t(1) << 14;

// T: float or double.
template <class T>
double sum_of_squares(const T* x, int64_t n);
extern template double sum_of_squares<float>(const float*, int64_t);
extern template double sum_of_squares<double>(const double*, int64_t);
double sum_of_squares_bf16(const uint16_t* x, int64_t n);
double sum_of_squares_f16(const uint16_t* x, int64_t n);

// x (n) *= factor. T: float or double.
template <class T>
void scale_inplace(T* x, int64_t n, T factor);
extern template void scale_inplace<float>(float*, int64_t, float);
extern template void scale_inplace<double>(double*, int64_t, double);

}  // namespace zt
