// defines: FlatShard, DecaySegment, full_shard, shard_of, decay_segments, flat_grads — what an
// optimizer updates: a contiguous range [lo, hi) of one unit's flat parameter space.
//
// The optimizers never see parameter tensors, only flat ranges (the ZeRO spine, see
// ARCHITECTURE.md "The life of one parameter", step 5):
//
//   unit flat space  [ p0 (decay) ....... | p1 (no decay) .. | p2 (decay) ..... | pad ]
//                    0                          lo ^=========== shard ===========^ hi
//   shard.param  = (hi - lo) elements, shard.param[i] is flat element lo + i
//   shard.grad   = (hi - lo) elements, same dtype, aligned the same way
//
// Without ZeRO (and for stage 1 in fp32) param and grad are views into ParamSet::flat() and
// flat_grad(). ZeRO stage 2 passes its reduce-scattered gradient shard as `grad`; stage 3 its
// parameter shard as `param`. `infos` is the layout of the WHOLE flat buffer (offsets from 0), so
// each element of the shard knows whether AdamW's weight decay applies to it. Padding elements
// (beyond the last parameter) belong to no parameter: they are updated without decay, and since
// their parameter and gradient are zero they stay zero.
#pragma once
#include <string>
#include <vector>

#include "nn/param_set.h"

namespace zt {

struct FlatShard {
  std::string name;  // the unit's name: messages and checkpoint keys
  Tensor param;      // 1-D contiguous, hi - lo elements, float32 or float64
  Tensor grad;       // 1-D contiguous, hi - lo elements, same dtype as param
  int64_t lo = 0, hi = 0;
  std::vector<ParamInfo> infos;  // layout of the whole flat buffer (ParamSet::infos())
  int64_t numel() const { return hi - lo; }
};

// The whole flat buffer of a finalized ParamSet: [0, padded_numel()).
FlatShard full_shard(const ParamSet& ps);
// full_shard of each set, in order; `who` names the optimizer in the error for a null set.
std::vector<FlatShard> full_shards(const std::vector<ParamSet*>& sets, const char* who);
// Elements [lo, hi) of a finalized ParamSet's flat buffers (views, no copy).
// 0 <= lo <= hi <= padded_numel(), else a zt::Error naming the unit and the range.
FlatShard shard_of(const ParamSet& ps, int64_t lo, int64_t hi);
// Throws a zt::Error naming the shard unless param/grad are 1-D, contiguous, hi - lo elements,
// the same float dtype, and the infos are in increasing offset order without overlap.
void check_shard(const FlatShard& s, const char* who);

// A run of shard-local elements [begin, end) with one decay flag. The segments of a shard cover
// [0, hi - lo) in order, without gaps; adjacent runs with the same flag are merged.
struct DecaySegment {
  int64_t begin = 0, end = 0;
  bool decay = false;
};
std::vector<DecaySegment> decay_segments(const FlatShard& s);

// The flat gradient buffers of some parameter sets, in order (for clipping).
std::vector<Tensor> flat_grads(const std::vector<ParamSet*>& sets);

}  // namespace zt
