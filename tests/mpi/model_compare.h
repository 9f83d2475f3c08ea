// defines: zt::test::worst_relative — a model built whole against the same model cut for tensor
//          parallelism (or whole too), parameter by parameter: the grid tests'
//          (tests/mpi/test_tensor_parallel.cpp, tests/mpi/test_grid_checkpoint.cpp) one comparison.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "nn/model.h"

namespace zt::test {

// Every parameter of every unit of `tp` (values when `values`, else gradients) against its places
// in `full`: the largest |difference| relative to the largest |value| of that full tensor.
inline double worst_relative(Model& full, Model& tp, bool values) {
  double worst = 0;
  std::vector<Unit*> fu = full.units(), tu = tp.units();
  REQUIRE(fu.size() == tu.size());
  for (size_t u = 0; u < fu.size(); ++u) {
    const ParamSet &fp = fu[u]->params(), &tps = tu[u]->params();
    REQUIRE(fp.size() == tps.size());
    for (int i = 0; i < tps.size(); ++i) {
      const ParamInfo& info = tps.infos()[static_cast<size_t>(i)];
      INFO(fu[u]->name() << " " << info.name);
      REQUIRE(info.slice.full_shape(info.shape) == fp.infos()[static_cast<size_t>(i)].shape);
      const std::vector<double> f = (values ? fp.value(i) : fp.grad(i)).to_vector();
      const std::vector<double> t = (values ? tps.value(i) : tps.grad(i)).to_vector();
      double scale = 0, diff = 0;
      for (double x : f) scale = std::max(scale, std::abs(x));
      for (size_t k = 0; k < t.size(); ++k)
        diff = std::max(
            diff, std::abs(t[k] - f[static_cast<size_t>(info.slice.full_index(info.shape, static_cast<int64_t>(k)))]));
      worst = std::max(worst, scale > 0 ? diff / scale : diff);
    }
  }
  return worst;
}

}  // namespace zt::test
