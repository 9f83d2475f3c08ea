// defines: set_num_threads, num_threads — one knob for OpenMP and OpenBLAS threads;
//          kParallelMinElements — the size below which a kernel loop stays on one thread.
#pragma once
#include <cstdint>

namespace zt {

// Sets the threads used by our OpenMP kernels and by OpenBLAS (the OpenMP build follows the same
// pool). n <= 0 means "all cores". Returns the number now in use.
int set_num_threads(int n);
int num_threads();

// Element count below which a kernel loop stays single-threaded (`omp parallel for ... if (n >
// kParallelMinElements)`): under ~32K elements (128 KiB of float32) waking the thread pool costs
// more than the loop itself. Heavier per-element loops (softmax, cross-entropy) use a fraction
// of it. Only decides how a loop is split, never what it computes.
inline constexpr int64_t kParallelMinElements = 32768;

}  // namespace zt
