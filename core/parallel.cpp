// defines: set_num_threads, num_threads (core/parallel.h)
#include "core/parallel.h"

#include <omp.h>

extern "C" void openblas_set_num_threads(int);

namespace zt {

int set_num_threads(int n) {
  if (n <= 0) n = omp_get_num_procs();
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
  return n;
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace zt
