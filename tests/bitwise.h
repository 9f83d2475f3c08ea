// defines: test::bitwise_equal — the tests' one "same bytes" comparison, for tensors (any device,
//          any strides: compared as contiguous host copies) and for an engine's shards.
#pragma once
#include <cstring>
#include <vector>

#include "core/tensor.h"
#include "zero/engine.h"  // defines: CheckpointShard

namespace zt::test {

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
  return std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
}

// Every tensor of every unit, in order (the names are not compared).
inline bool bitwise_equal(const std::vector<CheckpointShard>& a, const std::vector<CheckpointShard>& b) {
  if (a.size() != b.size()) return false;
  for (size_t u = 0; u < a.size(); ++u) {
    if (a[u].tensors.size() != b[u].tensors.size()) return false;
    for (size_t t = 0; t < a[u].tensors.size(); ++t)
      if (!bitwise_equal(a[u].tensors[t].second, b[u].tensors[t].second)) return false;
  }
  return true;
}

}  // namespace zt::test
