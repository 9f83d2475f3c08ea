// defines: SlicedParams, gather_slices (parallel/sliced_params.h); file-local: check_same_model
#include "parallel/sliced_params.h"

#include <algorithm>

namespace zt {

namespace {
// The sliced model is the whole one cut: the same units and parameters, each slice's full shape
// the whole one's. `who` names the caller in the error.
void check_same_model(const std::vector<Unit*>& sliced, const std::vector<Unit*>& whole, const char* who) {
  ZT_CHECK(sliced.size() == whole.size(), who, ": the sliced model has ", sliced.size(), " units, the whole one ",
           whole.size());
  for (size_t u = 0; u < sliced.size(); ++u) {
    const std::vector<ParamInfo>&s = sliced[u]->params().infos(), &w = whole[u]->params().infos();
    ZT_CHECK(s.size() == w.size(), who, ": unit '", sliced[u]->name(), "' has ", s.size(), " parameters sliced, ",
             w.size(), " whole");
    for (size_t i = 0; i < s.size(); ++i)
      ZT_CHECK(s[i].name == w[i].name && s[i].slice.full_shape(s[i].shape) == w[i].shape, who, ": unit '",
               sliced[u]->name(), "' parameter '", s[i].name, "' ", shape_str(s[i].slice.full_shape(s[i].shape)),
               " whole is '", w[i].name, "' ", shape_str(w[i].shape), " in the whole model");
  }
}
}  // namespace

SlicedParams::SlicedParams(Model& sliced, Model& whole, std::unique_ptr<ParamSource> whole_values)
    : sliced_(sliced.units()), whole_(whole.units()), values_(std::move(whole_values)) {
  check_same_model(sliced_, whole_, "SlicedParams");
}

void SlicedParams::fill(int unit, int64_t lo, const Tensor& dst) {
  const std::vector<ParamInfo>& params = sliced_.at(static_cast<size_t>(unit))->params().infos();
  const std::vector<ParamInfo>& whole = whole_[static_cast<size_t>(unit)]->params().infos();
  const int64_t hi = lo + dst.numel();
  Tensor(dst).zero_();  // the padding (every parameter element is written below)
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamInfo& p = params[i];
    for (int64_t k = std::max(lo, p.offset) - p.offset, k1 = std::min(hi, p.offset + p.numel) - p.offset; k < k1;) {
      const int64_t len = std::min(k1 - k, p.slice.run_length(p.shape, k));
      values_->fill(unit, whole[i].offset + p.slice.full_index(p.shape, k), dst.flat_view(p.offset + k - lo, {len}));
      k += len;
    }
  }
}

void gather_slices(Model& whole, Model& sliced, const TensorParallel& tp) {
  const std::vector<Unit*> su = sliced.units(), wu = whole.units();
  check_same_model(su, wu, "gather_slices");
  for (size_t u = 0; u < su.size(); ++u) {
    const ParamSet &sp = su[u]->params(), &wp = wu[u]->params();
    ZT_CHECK(sp.flat().storage()->resident() && wp.flat().storage()->resident(), "gather_slices: unit '", su[u]->name(),
             "' holds no values on this rank (ZeRO stage 3 keeps a shard: consolidate its checkpoint ", "instead)");
    for (int i = 0; i < sp.size(); ++i) {
      const ParamInfo& p = sp.infos()[static_cast<size_t>(i)];
      Tensor dst = wp.value(i);
      const Tensor mine = sp.value(i).contiguous();
      if (p.slice.whole() || !tp.on()) {
        dst.copy_(mine);
        continue;
      }
      Tensor all = Tensor::empty({tp.size() * p.numel}, mine.dtype(), Category::comm);
      tp.group->all_gather(mine.view({p.numel}), all);
      for (int64_t q = 0; q < tp.size(); ++q) {  // rank q's elements (its piece's), at their places
        TensorSlice s = p.slice;
        s.part = q / s.replicas;
        for (int64_t k = 0; k < p.numel;) {
          const int64_t len = s.run_length(p.shape, k);
          dst.flat_view(s.full_index(p.shape, k), {len}).copy_(all.flat_view(q * p.numel + k, {len}));
          k += len;
        }
      }
    }
  }
}

}  // namespace zt
