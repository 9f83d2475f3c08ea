// defines: ParamSource, ResidentParams, UnitReader — where a model's initial parameter values come from,
//          addressable by unit and flat offset, so a rank can create its shard alone.
//
// Partitioned construction (DeepSpeed's zero.Init, FSDP's meta-device init): a model is laid out
// without bytes (ModelOptions{materialize = false}), and the ZeRO engine asks a ParamSource for
// exactly the elements its stage keeps: stage 3 only [r*S, (r+1)*S) of each unit, stages 0-2 the
// whole unit (their parameters are replicated), one unit at a time. The full model never exists
// on a rank at stage 3. Sources: the seeded initialization (models/init.h's ModelInit), weights
// in a file (formats/hf_weights.h's pretrained_source, a UnitReader: one unit read from the file
// at a time), a sharded checkpoint (zero/checkpoint_source.h), or a model already filled in
// memory (ResidentParams, below).
#pragma once
#include <algorithm>

#include "core/memory.h"
#include "nn/model.h"

namespace zt {

class ParamSource {
 public:
  virtual ~ParamSource() = default;
  // dst (n elements, contiguous, a float dtype, any device) := elements [lo, lo + n) of unit
  // `unit`'s flat parameter buffer (Model::units() order), the padding included (zeros).
  virtual void fill(int unit, int64_t lo, const Tensor& dst) = 0;
};

// The values already in a model's (materialized) flat buffers: what the whole-model writers
// (save_hf_weights, save_llmc_checkpoint) read through the same interface as a streamed source.
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

// A source that reads whole units (a file's tensors for one unit) and serves ranges of them. The
// unit last read is kept (numel elements of the unit's dtype, Category::workspace) until another
// unit is asked for, and freed before the next is read: at most one unit is held, so a stage-3
// rank's peak is its shards plus one unit. A request for a whole unit into a CPU buffer of the
// unit's dtype is read straight into it (no copy held): fill_model() does that for every unit.
class UnitReader : public ParamSource {
 public:
  explicit UnitReader(Model& layout) : units_(layout.units()) {}

  void fill(int unit, int64_t lo, const Tensor& dst) override {
    const ParamSet& ps = units_.at(static_cast<size_t>(unit))->params();
    const int64_t n = dst.numel(), numel = ps.numel();
    ZT_CHECK(lo >= 0 && lo + n <= ps.padded_numel(), "UnitReader: elements [", lo, ", ", lo + n, ") of unit '",
             ps.unit_name(), "', which has ", ps.padded_numel());
    const int64_t real = std::max<int64_t>(0, std::min(numel, lo + n) - lo);  // [lo, lo + real) are parameters
    if (lo == 0 && real == numel && dst.device().is_cpu() && dst.is_contiguous() && dst.dtype() == ps.dtype()) {
      release();
      read_unit(unit, dst.flat_view(0, {numel}));
    } else {
      if (cached_ != unit) {
        release();  // the previous unit goes before the next is read
        cache_ = Tensor::empty({numel}, ps.dtype(), Category::workspace, cpu_allocator());
        read_unit(unit, cache_);
        cached_ = unit;
      }
      if (real > 0) dst.flat_view(0, {real}).copy_(cache_.flat_view(lo, {real}));
    }
    if (real < n) dst.flat_view(real, {n - real}).zero_();  // the padding
  }

  // Every unit of `model` (the layout this reader was made for, materialized) from the source.
  void fill_model() {
    for (size_t u = 0; u < units_.size(); ++u) {
      const ParamSet& ps = units_[u]->params();
      ZT_CHECK(ps.finalized() && ps.flat().storage()->resident(), "UnitReader: unit '", ps.unit_name(),
               "' holds no bytes to fill");
      read_unit(static_cast<int>(u), ps.flat().flat_view(0, {ps.numel()}));
    }
  }

  void release() {
    cache_ = Tensor();
    cached_ = -1;
  }

 protected:
  // flat (numel elements of unit `unit`, the unit's dtype, contiguous, CPU) := the unit's parameters.
  virtual void read_unit(int unit, const Tensor& flat) = 0;

  std::vector<Unit*> units_;

 private:
  int cached_ = -1;
  Tensor cache_;
};

}  // namespace zt
