// defines: set_num_threads, num_threads — one knob for OpenMP and OpenBLAS threads.
#pragma once

namespace zt {

// Sets the threads used by our OpenMP kernels and by OpenBLAS (the OpenMP build follows the same
// pool). n <= 0 means "all cores". Returns the number now in use.
int set_num_threads(int n);
int num_threads();

}  // namespace zt
