// defines: check_shard, decay_segments (optim/flat_shard.h)
#include "optim/flat_shard.h"

#include <algorithm>

namespace zt {

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
  for (const FlatParam& p : s.layout) {
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
  for (const FlatParam& p : s.layout) {
    push(pos, p.offset, false);  // a gap (none today; ParamSet packs densely)
    push(p.offset, p.offset + p.numel, p.decay);
    pos = p.offset + p.numel;
  }
  push(pos, s.hi, false);  // padding
  return out;
}

}  // namespace zt
