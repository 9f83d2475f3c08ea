// defines: flat_layout, full_shard, full_shards, shard_of — the bridge from nn's
//          ParamSet (nn/param_set.h) to optim's flat shards (optim/flat_shard.h).
//
// nn and optim sit side by side above core and do not see each other: a ParamSet knows its
// parameters (names, shapes, offsets, decay flags) and its flat buffers; an optimizer knows flat
// ranges and a FlatParam layout. zero/ links both, so the translation lives here, once:
//
//   ParamSet  flat      [ p0 ........ | p1 .... | p2 ...... | pad ]   (padded_numel elements)
//             infos()   {name, shape, offset, numel, decay} per parameter
//      |  shard_of(ps, lo, hi)
//      v
//   FlatShard param = flat[lo, hi), grad = flat_grad[lo, hi)   (views, no copy)
//             layout = flat_layout(ps): {name, offset, numel, decay} per parameter, whole buffer
//
// Without ZeRO an optimizer updates full_shards(sets) (every element of each set); the ZeRO
// engine cuts its own shards (its stage decides which) and takes only their layout, flat_layout.
#pragma once
#include <cstdint>
#include <vector>

#include "nn/param_set.h"
#include "optim/flat_shard.h"

namespace zt {

// The parameters of ps as optim sees them: ParamSet::infos() without the shapes, same order.
std::vector<FlatParam> flat_layout(const ParamSet& ps);

// The whole flat buffer of a finalized ParamSet: [0, padded_numel()).
FlatShard full_shard(const ParamSet& ps);
// full_shard of each set, in order; `who` names the optimizer in the error for a null set. What an
// optimizer without ZeRO updates: AdamW(full_shards(sets, "AdamW"), h).
std::vector<FlatShard> full_shards(const std::vector<ParamSet*>& sets, const char* who);
// Elements [lo, hi) of a finalized ParamSet's flat buffers (views, no copy).
// 0 <= lo <= hi <= padded_numel(), else a zt::Error naming the unit and the range.
FlatShard shard_of(const ParamSet& ps, int64_t lo, int64_t hi);

}  // namespace zt
