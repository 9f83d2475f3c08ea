// defines: ParamSource, ResidentParams — where a model's initial parameter values come from,
//          addressable by unit and flat offset, so a rank can create its shard alone.
//
// Partitioned construction (DeepSpeed's zero.Init, FSDP's meta-device init): a model is laid out
// without bytes (ModelOptions{materialize = false}), and the ZeRO engine asks a ParamSource for
// exactly the elements its stage keeps: stage 3 only [r*S, (r+1)*S) of each unit, stages 0-2 the
// whole unit (their parameters are replicated), one unit at a time. The full model never exists
// on a rank at stage 3. Sources: the seeded initialization (models/init.h's ModelInit), weights
// in a file (formats/hf_weights.h's pretrained_source), or a model already filled in memory
// (ResidentParams, below).
#pragma once
#include "nn/model.h"

namespace zt {

class ParamSource {
 public:
  virtual ~ParamSource() = default;
  // dst (n elements, contiguous, a float dtype, any device) := elements [lo, lo + n) of unit
  // `unit`'s flat parameter buffer (Model::units() order), the padding included (zeros).
  virtual void fill(int unit, int64_t lo, const Tensor& dst) = 0;
};

// The values already in a model's (materialized) flat buffers.
class ResidentParams final : public ParamSource {
 public:
  explicit ResidentParams(Model& m) : units_(m.units()) {}
  void fill(int unit, int64_t lo, const Tensor& dst) override {
    const Tensor& flat = units_.at(static_cast<size_t>(unit))->params().flat();
    ZT_CHECK(flat.storage()->resident(), "ResidentParams: unit '", units_[unit]->name(), "' holds no bytes");
    Tensor(dst).copy_(flat.flat_view(lo, {dst.numel()}));
  }

 private:
  std::vector<Unit*> units_;
};

}  // namespace zt
