// defines: SlicedParams, gather_slices — a tensor-parallel model's initial values from a source of
//          the whole model (pretrained weights, zt-train --init-from), each slice's elements read
//          from their places in the whole tensors; and the other way, the whole model from the
//          slices of a tensor group (zt-train --save-hf / --save-llmc).
//
// The sliced model and the whole one have the same units and parameters in the same order; a
// slice's parameter i of unit u holds the elements of the whole parameter i that its TensorSlice
// (nn/param_set.h) names. fill() asks the whole model's source for them in runs that are
// consecutive in both (a column-parallel weight's rows come in one run per block; a row-parallel
// weight's in one run per row), so the source's own reading (one unit held at a time: UnitReader)
// decides the peak, as for an unsliced model.
#pragma once
#include <memory>
#include <vector>

#include "nn/model.h"
#include "nn/param_source.h"
#include "parallel/tensor_parallel.h"

namespace zt {

class SlicedParams final : public ParamSource {
 public:
  // sliced: the model as this rank builds it; whole: the same model built whole (a layout: it
  // may hold no bytes), which `whole_values` serves. Both must outlive this source. Throws naming
  // the first unit or parameter in which they differ.
  SlicedParams(Model& sliced, Model& whole, std::unique_ptr<ParamSource> whole_values);
  void fill(int unit, int64_t lo, const Tensor& dst) override;

 private:
  std::vector<Unit*> sliced_, whole_;
  std::unique_ptr<ParamSource> values_;
};

// whole's values from the tensor group's slices: each cut parameter of `sliced` (this rank's, with
// its values: ZeRO stages 0-2) all-gathered over tp's group and every element put at its place in
// the whole tensor; the whole parameters copied. Collective: every rank of the group calls it.
// whole: the same model built without tensor parallelism, with bytes. Throws as SlicedParams does.
void gather_slices(Model& whole, Model& sliced, const TensorParallel& tp);

}  // namespace zt
