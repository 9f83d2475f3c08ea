// defines: flat_layout, full_shard, full_shards, shard_of (zero/param_layout.h).
#include "zero/param_layout.h"

namespace zt {

std::vector<FlatParam> flat_layout(const ParamSet& ps) {
  std::vector<FlatParam> out;
  out.reserve(ps.infos().size());
  for (const ParamInfo& p : ps.infos()) out.push_back({p.name, p.offset, p.numel, p.decay});
  return out;
}

FlatShard full_shard(const ParamSet& ps) {
  ZT_CHECK(ps.finalized(), "optimizer: ParamSet '", ps.unit_name(), "' is not finalized");
  return shard_of(ps, 0, ps.padded_numel());
}

std::vector<FlatShard> full_shards(const std::vector<ParamSet*>& sets, const char* who) {
  std::vector<FlatShard> out;
  for (ParamSet* ps : sets) {
    if (!ps) ZT_THROW(who, ": null ParamSet in the parameter list");
    out.push_back(full_shard(*ps));
  }
  return out;
}

FlatShard shard_of(const ParamSet& ps, int64_t lo, int64_t hi) {
  if (!ps.finalized()) ZT_THROW("optimizer: ParamSet '", ps.unit_name(), "' is not finalized");
  if (lo < 0 || lo > hi || hi > ps.padded_numel())
    ZT_THROW("optimizer: shard [", lo, ", ", hi, ") of unit '", ps.unit_name(),
             "' is outside its flat buffer [0, ", ps.padded_numel(), ")");
  FlatShard s;
  s.name = ps.unit_name();
  s.lo = lo;
  s.hi = hi;
  s.param = ps.flat().flat_view(lo, {hi - lo});
  s.grad = ps.flat_grad().flat_view(lo, {hi - lo});
  s.layout = flat_layout(ps);
  return s;
}

}  // namespace zt
