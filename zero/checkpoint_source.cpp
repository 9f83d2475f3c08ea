// defines: CheckpointParams (zero/checkpoint_source.h): a checkpoint's tensor as a ParamSource, unit by unit.
#include "zero/checkpoint_source.h"

#include "zero/checkpoint_files.h"  // defines: FileLayout, RankFiles, read_elements, layout_of

namespace zt {

using namespace checkpoint_detail;

CheckpointParams::CheckpointParams(const std::string& path, const std::string& tensor)
    : meta_(read_sharded_meta(path)), layout_(std::make_unique<FileLayout>(layout_of(meta_))) {
  tensor_ = layout_->tensor_index(tensor);
  if (tensor_ < 0) ZT_THROW("checkpoint '", meta_.dir, "' has no tensor '", tensor, "'");
  files_ = std::make_unique<RankFiles>(meta_, *layout_);
  // A tensor-parallel checkpoint is presented as the whole model: each unit's parameters with
  // their whole shapes, back to back, in meta()'s "units" too (what consolidation writes).
  if (layout_->tp == 1) return;
  nlohmann::json& units = meta_.meta.at("units");
  for (size_t u = 0; u < layout_->units.size(); ++u) {
    whole_.push_back(whole_parameters(layout_->units[u].params));
    nlohmann::json params = nlohmann::json::array();
    int64_t numel = 0;
    for (const ParamInfo& p : whole_.back()) {
      params.push_back({{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}, {"decay", p.decay}});
      numel += p.numel;
    }
    units.at(u)["params"] = params;
    units.at(u)["numel"] = numel;
    units.at(u)["padded_numel"] = numel;
    whole_numel_.push_back(numel);
  }
}

CheckpointParams::~CheckpointParams() = default;

int CheckpointParams::units() const { return static_cast<int>(layout_->units.size()); }
const std::string& CheckpointParams::unit_name(int unit) const { return layout_->units.at(unit).name; }
int64_t CheckpointParams::unit_numel(int unit) const {
  return whole_.empty() ? layout_->units.at(unit).numel : whole_numel_.at(static_cast<size_t>(unit));
}
DType CheckpointParams::dtype() const { return layout_->dtypes[tensor_]; }

void CheckpointParams::fill(int unit, int64_t lo, const Tensor& dst) {
  ZT_CHECK(unit >= 0 && unit < units(), "checkpoint '", meta_.dir, "': unit ", unit, " of ", units());
  ZT_CHECK(dst.is_contiguous() && lo >= 0, "CheckpointParams::fill: a contiguous destination and lo >= 0, got ",
           dst.str(), " at ", lo);
  const bool direct = dst.device().is_cpu() && dst.dtype() == dtype();
  Tensor buf = direct ? dst : Tensor::empty({dst.numel()}, dtype(), Category::workspace, cpu_allocator());
  const auto u = static_cast<size_t>(unit), t = static_cast<size_t>(tensor_);
  if (whole_.empty()) read_elements(*files_, *layout_, u, t, lo, dst.numel(), buf.raw());
  else read_elements_as(*files_, *layout_, u, t, whole_[u], lo, dst.numel(), buf.raw());
  if (!direct) Tensor(dst).copy_(buf.view(dst.shape()));
}

}  // namespace zt
