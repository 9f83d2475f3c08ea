// defines: PrecisionPolicy — how the ZeRO engine represents and converts parameters and
//          gradients: fp32, or mixed precision (bf16 / fp16) with float32 compute or with bf16
//          compute, and fp16's loss scaling (Rajbhandari et al. 2019, section 3.1; Micikevicius
//          et al. 2018 for the loss scale).
//
// Every difference between fp32 and mixed precision lives in this one class; the stages
// (zero/stage.h) ask it how to make, fold and land gradients and parameters, and never test the
// precision themselves. It owns what only mixed precision has: the float32 master of each unit's
// optimizer slice and, computing in float32, the compute copies (their scopes at stages 0-2, the
// conversion of what stage 3 gathers).
//
//   fp32                 working = compute = float32. The model's flat buffers are the working
//                        parameters and gradient; no master copy (the parameters are the master).
//   mixed, f32 compute   working = bf16 / fp16, compute = float32: the model's float32 buffers
//                        are workspaces that exist while the unit computes (the *compute copy*,
//                        converted from the 2-byte parameters at acquire); the unit's float32
//                        gradient is rounded to 2 bytes as soon as its backward ends, and freed.
//   mixed, bf16 compute  the model was built in bf16: its flat buffer IS the 2-byte parameters,
//                        the kernels compute in bf16 and the gradient comes out in bf16.
//
// Mixed precision keeps a float32 master (optim) that the optimizer updates and rounds back. A
// unit's gradient is divided by N before it is rounded (PyTorch DDP's pre-division: an fp16 sum
// over ranks cannot overflow where the average would not); the fp16 unscale and the clipping
// coefficient are applied once, when a gradient shard is converted to float32 for the update.
#pragma once
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "zero/sharded_unit.h"

namespace zt {

class PrecisionPolicy {
 public:
  // model_dtype: the dtype the model was built in (its first unit's).
  PrecisionPolicy(ZeroContext& cx, DType model_dtype);

  bool mixed() const { return mixed_; }
  DType working() const { return mixed_ ? half_ : DType::f32; }
  // zero/footprint.h's answers: bytes per working element (parameters and gradients), and of the
  // float32 master per element of the optimizer's slice (mixed precision, device optimizer).
  static int64_t working_bytes(Precision p) { return p == Precision::f32 ? 4 : 2; }
  static int64_t master_bytes(Precision p) { return p == Precision::f32 ? 0 : 4; }
  // The float32 tensor the optimizer updates for `working` (the unit's working parameters over
  // the optimizer's slice): mixed precision's master, or the working parameters themselves (fp32).
  Tensor updated(const ShardedUnit& s, const Tensor& working) const { return mixed_ ? masters_.at(s.index) : working; }
  // A zt::Error unless the unit's parameters are in the dtype this policy trains.
  void check(const ShardedUnit& s) const;

  // ---- setup ----
  // Mixed without offload: the master = elements [lo, lo + n) of the initial parameters, float32.
  void make_master(const ShardedUnit& s, const InitialValues& init, int64_t lo, int64_t n);
  // The full working parameters of stages 0-2: the model's buffer, or (separate compute copy) a
  // new 2-byte buffer holding it rounded.
  Tensor full_params(ShardedUnit& s) const;
  // The full working gradient of stages 0-1 (zeroed): the model's flat_grad (fp32) or a 2-byte one.
  Tensor full_grads(ShardedUnit& s) const;
  // dst (working dtype) = src (the initial parameters), rounded if the dtypes differ.
  void to_working(const Tensor& dst, const Tensor& src) const;
  // After the stage placed the unit: the model's buffers that are not working state become
  // workspaces that exist while the unit computes (freed now). True when that freed the model's
  // parameter buffer (a float32 compute copy, to be filled before the unit computes).
  bool release_compute_buffers(ShardedUnit& s);

  // ---- the compute copy at stages 0-2 (float32 compute of 2-byte parameters) ----
  // acquire: the compute parameters made from the full working ones (once per scope nesting);
  // release: freed when the last scope ends. Nothing to do when the model's buffer is the
  // working parameters.
  void acquire_compute(const ShardedUnit& s, const Tensor& working_full);
  void release_compute(const ShardedUnit& s);
  // ---- stage 3: the all-gathered working parameters become the compute parameters ----
  // gather_target: where the all-gather of the unit's P working elements goes: the model's
  // buffer itself, or a transient 2-byte buffer. gathered, after the all-gather into it was
  // issued: a transient buffer is converted into the compute parameters once it has landed
  // (queued in q behind the gather); nothing otherwise.
  Tensor gather_target(const ShardedUnit& s) const;
  void gathered(const ShardedUnit& s, const Tensor& target, std::deque<Pending>& q) const;

  // ---- after a unit's backward ----
  // Stages 0-1, before the backward: a fresh zeroed compute gradient where fold_gradient freed the
  // last one (mixed); fp32 accumulates in the full gradient itself.
  void open_gradient(ShardedUnit& s) const;
  // Stages 0-1: folds the unit's compute gradient into grads_full and returns grads_full (fp32:
  // they are one buffer and autograd accumulated already).
  Tensor fold_gradient(ShardedUnit& s, const Tensor& grads_full, int N) const;
  // Stages 2-3: the unit's gradient as it goes into the reduce-scatter (mixed: a 2-byte comm
  // buffer holding grad / N; the compute gradient is freed).
  Tensor gradient_for_reduction(ShardedUnit& s, int N) const;
  // What the reduced sum is multiplied by: 1 / N (fp32), 1 (mixed: divided before).
  double reduction_scale(int N) const { return mixed_ ? 1.0 : 1.0 / static_cast<double>(N); }
  // A reduced chunk `got` (on any device) lands in dst: copied, scaled by `scale`, or accumulated.
  void land(const Tensor& dst, const Tensor& got, bool accumulate, double scale) const;

  // ---- the update ----
  // update_grads[i] / update_params[i]: unit i's working tensors over the optimizer's range.
  // Unit by unit: the float32 gradient (float32_gradient: fp32 scaled in place by clip * unscale
  // unless that is 1; mixed: the 2-byte gradient converted times clip * unscale), the optimizer's
  // update of the shard (Optimizer::update_shard), and, mixed, the master rounded into the 2-byte
  // parameters.
  void update(Optimizer& opt, double lr, double clip, double unscale, const std::vector<Tensor>& update_grads,
              const std::vector<Tensor>& update_params, const std::vector<std::unique_ptr<ShardedUnit>>& units) const;
  // The float32 gradient an update reads, from a working gradient g and factor = clip * unscale:
  // g itself, scaled in place unless factor is 1 (float32), or g x factor converted into a new
  // float32 workspace in `a` (2-byte; one rounding for the unscale and the clipping). The device
  // update above and the offloaded optimizer (zero/offload.cpp) both make it here.
  static Tensor float32_gradient(const Tensor& g, double factor, Allocator& a);
  // After a checkpoint load: the master rounded into the working parameters (mixed), no-op (fp32).
  void round_master(const ShardedUnit& s, const Tensor& working) const;

  // ---- fp16 loss scaling ----
  double loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }
  // fp16: records whether this step's gradients overflowed; true when the step must be skipped.
  bool skip_step(bool overflow);
  nlohmann::json state_meta() const;
  void load_state_meta(const nlohmann::json& j);

 private:
  bool mixed_ = false;         // bf16 / fp16: 2-byte params and grads, float32 master in optim
  DType half_ = DType::f32;    // the 2-byte dtype when mixed_
  bool compute_half_ = false;  // mixed_ with a model built in half_: compute in the 2-byte dtype
  // The model's float32 parameter buffer is a compute copy of the 2-byte parameters (mixed with
  // float32 compute): it exists only while the unit computes.
  bool separate_compute_copy() const { return mixed_ && !compute_half_; }
  void fill_compute(const Tensor& compute, const Tensor& working_full) const;  // compute = float32(working)
  DType model_dtype_ = DType::f32;
  Precision precision_ = Precision::f32;
  std::unique_ptr<LossScaler> scaler_;  // fp16 only
  ZeroContext& cx_;
  std::vector<Tensor> masters_;        // by unit index: mixed precision's float32 master (device optimizer)
  std::vector<int> compute_refs_;      // by unit index: open scopes on the compute copy (stages 0-2)
  std::vector<bool> compute_present_;  // by unit index: the compute copy is resident (stages 0-2)
};

}  // namespace zt
