// defines: ShardedParameters (zero/stage.h) — stage 3: the parameters kept as a shard, gathered
//          just in time around each use, prefetched, freed; its GatherSchedule's actions.
//
// Rajbhandari et al. 2019, sections 5.3 and 7.2 (P_os+g+p): each rank keeps only its shard of the
// parameters, in a ParamTier (the device, or with offload_param the host or the NVMe swap file).
// A unit's full parameters exist only while it computes:
//
//   acquire(unit)    the shard all-gathered into the unit's flat buffer (or wait for a prefetch)
//   ... forward, or backward (acquired again from before_backward) ...
//   release(unit)    the flat buffer freed with Storage::release(), so the views autograd saved
//                    stay valid and see the next gather (PyTorch FSDP's storage resize)
//
// Units below stage3_param_persistence_threshold stay gathered. When to gather and free is the
// GatherSchedule's (zero/gather_schedule.h: the recorded order, prefetch, reuse distance); this
// file says what a gather is. The path of one gather, top to bottom:
//
//   acquire -> GatherSchedule::acquire -> start -> fill -> gather -> all_gather_chunked
//   (zero/pending.h) or qwZ's quantized_all_gather (zero/zeropp.h) -> ProcessGroup::all_gather_async
//
// A shard offloaded to the host or NVMe reaches the device first (ParamTier::fetch, which calls
// gather once the shard is there); a shard on the device is gathered from where it is.
//
// ZeRO++ (zero/zeropp.h) changes what a gather is, not when: with qwZ the world all-gather is
// quantized (but a persistent unit's refresh after the step, exact as DeepSpeed's); with hpZ a
// training forward's release keeps this rank's secondary shard of the gathered parameters (1/H of
// them, Category::secondary; on the host tier when offload_param keeps the shards there, as
// DeepSpeed's) before freeing the rest, and every gather of that unit until its backward opens its
// gradient (a recompute's, the backward's) is an all-gather of the secondary shards inside the
// node (under qwZ quantized too, as DeepSpeed's); then the secondary is freed.
#include "core/kernels/cast.h"  // defines: cast_
#include "zero/stage.h"

namespace zt {

ShardedParameters::ShardedParameters(ZeroContext& cx, PrecisionPolicy& precision, ParamTier& params,
                                     ShardOptimizer& opt, Units& units)
    : ParameterPolicy(cx, precision, params, opt, units, /*optimizer_sharded=*/true),
      schedule_(cx.cfg.zero, *this),
      quantized_weights_(cx.cfg.zero.zero_quantized_weights) {
  if (cx.cfg.zero.zero_hpz_partition_size > 1) hpz_group_ = hpz_secondary_group(cx.cfg.zero, cx.group);
}

// ---------------------------------------------------------------------------------------------
// Setup

// The shard in its tier, from the initial values; the model's buffer is the compute copy: kept
// for a persistent unit whose buffer still holds its current compute parameters, otherwise freed
// until the first acquire (or never created: partitioned construction, where the initial values
// are the shard alone).
void ShardedParameters::place(ShardedUnit& s, const InitialValues& init) {
  if (gathers_.size() <= static_cast<size_t>(s.index)) gathers_.resize(s.index + 1);
  const Tensor shard = params_.new_shard(s, precision_.working());
  precision_.to_working(shard, init.slice(s.lo, s.S));
  params_.park(s);
  if (!kept_whole(s, init)) s.ps->flat().storage()->release();
}

// After the precision: it frees the model's buffer where it is a float32 copy of 2-byte
// parameters, to be gathered (and converted) before use.
void ShardedParameters::placed(ShardedUnit& s, const InitialValues& init, bool compute_released) {
  schedule_.add_unit(s.index, s.P, GatherSchedule::persistent(s.ps->numel(), cx_.cfg.zero),
                     kept_whole(s, init) && !compute_released);
}

bool ShardedParameters::kept_whole(const ShardedUnit& s, const InitialValues& init) const {
  return GatherSchedule::persistent(s.ps->numel(), cx_.cfg.zero) && init.in_model_buffer;
}

void ShardedParameters::setup_done() {
  secondary_.resize(units_.size());  // hpZ: none yet
  for (auto& s : units_)             // a persistent unit freed at placement is gathered once, for the run
    if (schedule_.persistent(s->index) && !schedule_.gathered(s->index)) schedule_.gather(s->index, /*wait=*/true);
}

// ---------------------------------------------------------------------------------------------
// The scopes

void ShardedParameters::forward_begins() {
  backward_ = false;
  schedule_.forward_begins();
}

void ShardedParameters::acquire(ShardedUnit& s, bool evaluating) { schedule_.acquire(s.index, evaluating); }

void ShardedParameters::release(ShardedUnit& s, bool evaluating) {
  keep_secondary_ = hpz_group_ && !evaluating && !backward_;
  schedule_.release(s.index, evaluating);
  keep_secondary_ = false;
}

// The unit's backward begins (its acquire has landed): its secondary shard has served.
void ShardedParameters::backward_opens(ShardedUnit& s) { secondary_[s.index] = Tensor(); }

// ---------------------------------------------------------------------------------------------
// GatherSchedule::Actions: what a gather is

void ShardedParameters::start(int i, bool prefetch) {
  ShardedUnit& s = *units_[i];
  s.ps->flat().storage()->materialize();
  const bool secondary = secondary_[i].defined();
  if (Tracer* t = cx_.active_tracer())
    t->instant(TraceTrack::compute, "gather " + s.unit->name(), "gather",
               {{"unit", s.unit->name()}, {"elements", s.P}, {"prefetch", prefetch}, {"from_secondary", secondary}});
  CommLabel label(cx_.group, s.unit->name());
  if (secondary) gather_from_secondary(s, gathers_[i]);
  else fill(s, gathers_[i]);
}

void ShardedParameters::drop(int i) {
  ShardedUnit& s = *units_[i];
  drain(gathers_[i]);                                 // a prefetch nobody used: let it land before freeing its buffer
  if (keep_secondary_ && !secondary_[i].defined()) {  // hpZ: this rank's 1/H of what the forward used
    const int64_t m = s.P / cx_.cfg.zero.zero_hpz_partition_size;
    const Tensor mine = range(s.ps->flat(), hpz_group_->rank() * m, m);
    Tensor sec;
    if (params_.offloaded()) {  // where offload_param keeps the shards (the host tier), as DeepSpeed's
      sec = Tensor::empty({m}, precision_.working(), Category::secondary, params_.shard_memory());
      sec.copy_(mine);  // exact: the values came from `working`
    } else {
      sec = Tensor::empty({m}, precision_.working(), Category::secondary);
      cast_(sec, mine);  // exact: the values came from `working`
    }
    secondary_[i] = sec;
  }
  s.ps->flat().storage()->release();
  if (Tracer* t = cx_.active_tracer())
    t->instant(TraceTrack::compute, "release " + s.unit->name(), "gather", {{"unit", s.unit->name()}});
}

// A tier with a limit (offload_param nvme: buffer_count reads) counts the units with a fetch in
// flight; the others are never counted.
bool ShardedParameters::may_prefetch() const {
  const int64_t limit = params_.fetch_limit();
  if (limit < 0) return true;
  int64_t in_flight = 0;
  for (const auto& q : gathers_) in_flight += !q.empty();
  return in_flight < limit;
}

void ShardedParameters::fill(ShardedUnit& s, std::deque<Pending>& q, bool exact) {
  if (!params_.offloaded()) return gather(s, params_.shard(s), q, exact);
  params_.fetch(
      s, q, [this, exact](ShardedUnit& u, const Tensor& src, std::deque<Pending>& out) { gather(u, src, out, exact); });
}

// The gathered parameters land in the precision's target: the unit's compute parameters
// themselves, or a transient 2-byte buffer converted into them once the gather has landed.
void ShardedParameters::gather(ShardedUnit& s, const Tensor& src, std::deque<Pending>& q, bool exact) {
  const Tensor dst = precision_.gather_target(s);
  const ZeroOptimization& z = cx_.cfg.zero;
  if (quantized_weights_ && !exact && cx_.N > 1)  // qwZ; one rank sends nothing: nothing to quantize
    quantized_all_gather(cx_.group, src, dst, z.allgather_bucket_size, {8, z.zero_quantization_block_size}, q);
  else all_gather_chunked(cx_.group, src, dst, z.allgather_bucket_size, q);
  precision_.gathered(s, dst, q);
}

void ShardedParameters::gather_from_secondary(ShardedUnit& s, std::deque<Pending>& q) {
  const Tensor dst = precision_.gather_target(s);
  Tensor src = secondary_[s.index];
  if (params_.offloaded()) {  // kept on the host tier: to the device first, alive until the gather landed
    Tensor dev = Tensor::empty({src.numel()}, src.dtype(), Category::secondary);
    dev.copy_(src);
    src = dev;
  }
  {
    const ZeroOptimization& z = cx_.cfg.zero;
    CommLabel label(*hpz_group_, cx_.group.label() + " (hpZ secondary)");
    if (quantized_weights_ && !z.zero_hpz_secondary_exact)  // as DeepSpeed: qwZ quantizes this gather too
      quantized_all_gather(*hpz_group_, src, dst, z.allgather_bucket_size, {8, z.zero_quantization_block_size}, q);
    else all_gather_chunked(*hpz_group_, src, dst, z.allgather_bucket_size, q);
  }
  if (params_.offloaded()) q.push_back({completed_work(), [src] {}});
  precision_.gathered(s, dst, q);
}

// ---------------------------------------------------------------------------------------------
// After the step

// The update changed the shards: the gathered copies are stale. Persistent units are refreshed,
// exactly even under qwZ (DeepSpeed's stage3.py re-gathers them unquantized after every step and
// checkpoint load: they stay gathered, so a quantized copy would be used until the next step);
// the others freed (their next acquire gathers the new parameters).
void ShardedParameters::refresh(ShardedUnit& s, std::deque<Pending>& q) {
  secondary_[s.index] = Tensor();  // stale (hpZ)
  if (schedule_.persistent(s.index)) fill(s, q, /*exact=*/true);
  else schedule_.free_unit(s.index);
}

void ShardedParameters::publish() {
  std::deque<Pending> pending;
  for (auto& s : units_) {
    CommLabel label(cx_.group, s->unit->name());
    refresh(*s, pending);
  }
  drain(pending);
}

// Each rank loaded its own shard: round it (mixed) and refresh the gathered copies.
void ShardedParameters::loaded(bool round_master) {
  std::deque<Pending> pending;
  for (auto& s : units_) {
    if (round_master) precision_.round_master(*s, params_.shard(*s));
    refresh(*s, pending);
  }
  drain(pending);
}

void ShardedParameters::abandon_in_flight() {
  for (std::deque<Pending>& q : gathers_)
    for (Pending& p : q) p.work->wait();
}

}  // namespace zt
