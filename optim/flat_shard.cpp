#include "optim/flat_shard.h"

#include <algorithm>

namespace zt {

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
  s.infos = ps.infos();
  return s;
}

void check_shard(const FlatShard& s, const char* who) {
  if (s.lo < 0 || s.hi < s.lo) ZT_THROW(who, ": shard '", s.name, "' has an empty or inverted range [", s.lo, ", ", s.hi, ")");
  for (const Tensor* t : {&s.param, &s.grad}) {
    const char* what = t == &s.param ? "param" : "grad";
    if (!t->defined()) ZT_THROW(who, ": shard '", s.name, "': ", what, " is undefined");
    if (t->dim() != 1 || t->numel() != s.numel() || !t->is_contiguous())
      ZT_THROW(who, ": shard '", s.name, "': ", what, " is ", t->str(), ", expected a contiguous 1-D tensor of ",
               s.numel(), " elements (range [", s.lo, ", ", s.hi, "))");
    if (t->dtype() != DType::f32 && t->dtype() != DType::f64)
      ZT_THROW(who, ": shard '", s.name, "': ", what, " is ", dtype_name(t->dtype()), ", expected float32 or float64");
  }
  if (s.param.dtype() != s.grad.dtype())
    ZT_THROW(who, ": shard '", s.name, "': param is ", dtype_name(s.param.dtype()), " but grad is ",
             dtype_name(s.grad.dtype()));
  int64_t end = 0;
  for (const ParamInfo& p : s.infos) {
    if (p.offset < end || p.numel < 0)
      ZT_THROW(who, ": shard '", s.name, "': parameter '", p.name, "' at offset ", p.offset,
               " overlaps the previous one or is out of order");
    end = p.offset + p.numel;
  }
}

std::vector<DecaySegment> decay_segments(const FlatShard& s) {
  std::vector<DecaySegment> out;
  auto push = [&](int64_t b, int64_t e, bool d) {  // global [b, e), clipped to the shard
    b = std::max(b, s.lo);
    e = std::min(e, s.hi);
    if (b >= e) return;
    if (!out.empty() && out.back().decay == d && out.back().end == b - s.lo)
      out.back().end = e - s.lo;
    else
      out.push_back({b - s.lo, e - s.lo, d});
  };
  int64_t pos = 0;  // global flat position covered so far
  for (const ParamInfo& p : s.infos) {
    push(pos, p.offset, false);  // a gap (none today; ParamSet packs densely)
    push(p.offset, p.offset + p.numel, p.decay);
    pos = p.offset + p.numel;
  }
  push(pos, s.hi, false);  // padding
  return out;
}

std::vector<Tensor> flat_grads(const std::vector<ParamSet*>& sets) {
  std::vector<Tensor> g;
  for (ParamSet* ps : sets) {
    ZT_CHECK(ps && ps->finalized(), "flat_grads: null or unfinalized ParamSet");
    g.push_back(ps->flat_grad());
  }
  return g;
}

}  // namespace zt
