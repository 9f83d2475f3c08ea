// defines: SlicedParams (parallel/sliced_params.h)
#include "parallel/sliced_params.h"

#include <algorithm>

namespace zt {

SlicedParams::SlicedParams(Model& sliced, Model& whole, std::unique_ptr<ParamSource> whole_values)
    : sliced_(sliced.units()), whole_(whole.units()), values_(std::move(whole_values)) {
  ZT_CHECK(sliced_.size() == whole_.size(), "SlicedParams: the sliced model has ", sliced_.size(),
           " units, the whole one ", whole_.size());
  for (size_t u = 0; u < sliced_.size(); ++u) {
    const std::vector<ParamInfo>&s = sliced_[u]->params().infos(), &w = whole_[u]->params().infos();
    ZT_CHECK(s.size() == w.size(), "SlicedParams: unit '", sliced_[u]->name(), "' has ", s.size(),
             " parameters sliced, ", w.size(), " whole");
    for (size_t i = 0; i < s.size(); ++i)
      ZT_CHECK(s[i].name == w[i].name && s[i].slice.full_shape(s[i].shape) == w[i].shape, "SlicedParams: unit '",
               sliced_[u]->name(), "' parameter '", s[i].name, "' ", shape_str(s[i].slice.full_shape(s[i].shape)),
               " whole is '", w[i].name, "' ", shape_str(w[i].shape), " in the whole model");
  }
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

}  // namespace zt
