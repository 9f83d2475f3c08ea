// defines: CheckpointParams — one tensor ("param") of a ZeRO sharded checkpoint (zero/checkpoint.h)
//          as a ParamSource (nn/param_source.h): any element range of any unit, read on demand
//          from whichever rank files hold it. Single process.
//
// Consolidation streams through it (train/consolidate.h): a writer asks for one parameter at a
// time (fill(unit, its offset, a buffer of its size)), so at most one parameter of the model is
// in memory, never a whole unit list; load_trained_model fills a model unit by unit through it.
// Each rank file is verified whole (size and FNV-1a 64 against meta.json) when first read. A
// tensor-parallel checkpoint (its slices in the rank files) is presented as the whole model: its
// units, their sizes and meta()'s "units" as the one-rank model lays them out, each element read
// from the slice that holds it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/param_source.h"
#include "zero/checkpoint.h"

namespace zt {

namespace checkpoint_detail {
struct FileLayout;
class RankFiles;
}  // namespace checkpoint_detail

class CheckpointParams final : public ParamSource {
 public:
  // path: a step directory or a root holding `latest`. Throws naming the checkpoint (read_sharded_meta's
  // errors) and when it has no tensor `tensor`.
  explicit CheckpointParams(const std::string& path, const std::string& tensor = "param");
  ~CheckpointParams() override;

  const ShardedMeta& meta() const { return meta_; }
  int units() const;
  const std::string& unit_name(int unit) const;
  int64_t unit_numel(int unit) const;
  DType dtype() const;  // the tensor's dtype in the files

  // dst (n elements, contiguous, a float dtype, any device) := elements [lo, lo + n) of unit
  // `unit`'s flat space of the tensor, converted to dst's dtype; elements >= numel are zero. Read
  // straight into dst when it is a CPU buffer of the file's dtype, else through one buffer of n.
  void fill(int unit, int64_t lo, const Tensor& dst) override;

 private:
  ShardedMeta meta_;
  std::unique_ptr<checkpoint_detail::FileLayout> layout_;
  std::unique_ptr<checkpoint_detail::RankFiles> files_;
  int tensor_ = -1;
  // A tensor-parallel checkpoint's units as the whole model lays them out (empty otherwise).
  std::vector<std::vector<ParamInfo>> whole_;
  std::vector<int64_t> whole_numel_;
};

}  // namespace zt
