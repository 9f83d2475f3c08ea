// defines: FlatParam, FlatShard, DecaySegment, check_shard, decay_segments — what an optimizer
// updates: a contiguous range [lo, hi) of one unit's flat parameter space, and the layout of that
// space (which elements are which parameter, and whether weight decay applies to them).
//
// The optimizers never see parameter tensors, only flat ranges (the ZeRO spine, see
// docs/architecture.md "The life of one parameter", step 5):
//
//   unit flat space  [ p0 (decay) ....... | p1 (no decay) .. | p2 (decay) ..... | pad ]
//                    0                          lo ^=========== shard ===========^ hi
//   shard.param  = (hi - lo) elements, shard.param[i] is flat element lo + i
//   shard.grad   = (hi - lo) elements, same dtype, aligned the same way
//
// Without ZeRO (and for stage 1 in fp32) param and grad are views into ParamSet::flat() and
// flat_grad(). ZeRO stage 2 passes its reduce-scattered gradient shard as `grad`; stage 3 its
// parameter shard as `param`. `layout` is the layout of the WHOLE flat buffer (offsets from 0),
// so each element of the shard knows whether AdamW's weight decay applies to it. Padding elements
// (beyond the last parameter) belong to no parameter: they are updated without decay, and since
// their parameter and gradient are zero they stay zero.
//
// optim depends on core only: a FlatParam is optim's own record of a parameter's place. The
// bridge from nn's ParamSet (flat_layout, full_shard, shard_of, ...) is zero/param_layout.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace zt {

// One parameter's place in its unit's flat buffer: elements [offset, offset + numel).
struct FlatParam {
  std::string name;  // within the unit: messages
  int64_t offset = 0, numel = 0;
  bool decay = false;  // AdamW's (or SGD's) weight decay applies to its elements
};

struct FlatShard {
  std::string name;  // the unit's name: messages and checkpoint keys
  Tensor param;      // 1-D contiguous, hi - lo elements, float32 or float64
  Tensor grad;       // 1-D contiguous, hi - lo elements, same dtype as param
  int64_t lo = 0, hi = 0;
  std::vector<FlatParam> layout;  // the whole flat buffer's parameters, in offset order
  int64_t numel() const { return hi - lo; }
};

// Throws a zt::Error naming the shard unless param/grad are 1-D, contiguous, hi - lo elements,
// the same float dtype, and the layout is in increasing offset order without overlap.
void check_shard(const FlatShard& s, const char* who);

// A run of shard-local elements [begin, end) with one decay flag. The segments of a shard cover
// [0, hi - lo) in order, without gaps; adjacent runs with the same flag are merged.
struct DecaySegment {
  int64_t begin = 0, end = 0;
  bool decay = false;
};
std::vector<DecaySegment> decay_segments(const FlatShard& s);

}  // namespace zt
