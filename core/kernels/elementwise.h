// defines: elementwise and reduction kernels on raw contiguous buffers (float / double):
//          add/sub/mul/scale forward, mul backward, fill, sum_all, sum_last forward/backward,
//          column sums.
//
// All buffers are contiguous, row-major, and do not alias unless stated. Large loops run as
// `omp parallel for simd schedule(static)`; loops below kParallelMinElements
// (core/parallel.h) stay on one thread.
// Every reduction is deterministic and independent of the thread count: sum_all adds fixed
// blocks of kSumBlock elements (each with kLanes partial sums) and combines the block sums in
// order; row and column reductions give each output element to exactly one thread.
#pragma once
#include <cstdint>

namespace zt {

inline constexpr int64_t kSumBlock = 8192;  // elements per partial sum in sum_all

// out (n) = a + b, a - b, a * b, s * x. out may alias an input.
template <class T> void add_forward(T* out, const T* a, const T* b, int64_t n);
template <class T> void sub_forward(T* out, const T* a, const T* b, int64_t n);
template <class T> void mul_forward(T* out, const T* a, const T* b, int64_t n);
template <class T> void scale_forward(T* out, const T* x, T s, int64_t n);

// out = a * b backward: da = dout * b, db = dout * a (either output may be null: not needed).
template <class T> void mul_backward(T* da, T* db, const T* dout, const T* a, const T* b, int64_t n);

// out (n) = v
template <class T> void fill(T* out, T v, int64_t n);

// sum of x (n), accumulated in double, deterministic for any thread count.
template <class T> double sum_all(const T* x, int64_t n);

// out (R) = sum over the last dim of in (R, N).
template <class T> void sum_last_forward(T* out, const T* in, int64_t R, int64_t N);
// dx (R, N) = dout (R) broadcast along the last dim.
template <class T> void sum_last_backward(T* dx, const T* dout, int64_t R, int64_t N);

// out (N) (+)= column sums of in (R, N): out[j] = (accumulate ? out[j] : 0) + sum_r in[r, j],
// rows added in order r = 0..R-1 (threads split the columns). Used for a bias gradient.
template <class T> void col_sum(T* out, const T* in, int64_t R, int64_t N, bool accumulate);

}  // namespace zt
