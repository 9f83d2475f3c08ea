// Stage 3, ParameterSharded (zero/stage.h; the paper's P_os+g+p, section 5.3 and 7.2): stage 2,
// except that each rank keeps only its shard of the parameters, in a ParamTier (the device, or
// with offload_param the host or the NVMe swap file). A unit's full parameters exist only while
// it computes:
//
//   acquire(unit)    the shard all-gathered into the unit's flat buffer (or wait for a prefetch)
//   ... forward, or backward (acquired again from before_backward) ...
//   release(unit)    the flat buffer freed with Storage::release(), so the views autograd saved
//                    stay valid and see the next gather (PyTorch FSDP's storage resize)
//
// Units below stage3_param_persistence_threshold stay gathered. The order of acquires in the
// first micro-step is recorded; later steps prefetch along it (at most
// stage3_prefetch_bucket_size elements ahead and stage3_max_live_parameters gathered) and keep a
// unit gathered when the order uses it again within stage3_max_reuse_distance elements.
#include "zero/stage.h"

#include "core/kernels/cast.h"  // defines: cast_

namespace zt {

ParameterSharded::ParameterSharded(ZeroContext& cx, const PrecisionPolicy& precision, ParamTier& params,
                                   ShardOptimizer& opt, Units& units)
    : GradientSharded(cx, precision, params, opt, units) {
  compute_copy_ = true;  // the full parameters come and go
}

void ParameterSharded::place_params(ShardedUnit& s) {
  s.persistent = s.ps->numel() <= cx_.cfg.zero.stage3_param_persistence_threshold;
  s.param_shard = params_.new_shard(s, precision_.working());
  precision_.to_working(s.param_shard, s.initial_slice(s.lo, s.S));
  params_.park(s);
  // The model's buffer is the compute copy: freed until the first acquire, or never created
  // (partitioned construction: ShardedUnit::initial is the shard alone). A separate compute copy
  // is freed by the precision policy.
  if (!s.ps->flat().storage()->resident() || (!precision_.separate_compute_copy() && !s.persistent)) {
    s.ps->flat().storage()->release();
    s.gathered = false;
  }
}

void ParameterSharded::setup_done() {
  for (auto& s : units_)  // separate compute copy: the persistent units' stays from now on
    if (s->persistent && !s->gathered) gather(*s, /*wait=*/true);
}

void ParameterSharded::fill_compute_copy(ShardedUnit& s, std::deque<Pending>& q) {
  params_.fetch(s, q, [this](ShardedUnit& u, const Tensor& src, std::deque<Pending>& out) { gather_from(u, src, out); });
}

// All-gathers the shards (`src`, S elements of the working dtype on the device) into the unit's
// compute parameters: directly, or (separate compute copy) into a transient 2-byte buffer that
// is converted when it lands and then freed.
void ParameterSharded::gather_from(ShardedUnit& s, const Tensor& src, std::deque<Pending>& q) {
  const Tensor& flat = s.ps->flat();
  const int64_t bucket = cx_.cfg.zero.allgather_bucket_size;
  if (!precision_.separate_compute_copy()) return all_gather_chunked(cx_.group, src, flat, bucket, q);
  Tensor full = Tensor::empty({s.P}, precision_.working(), Category::params);
  all_gather_chunked(cx_.group, src, full, bucket, q);
  const PrecisionPolicy* precision = &precision_;
  q.push_back({completed_work(), [precision, flat, full] { precision->fill_compute(flat, full); }});
}

// Gathers the units after order position `pos` ahead of use: always the next one, then more
// while the units ahead (gathered already or not) fit stage3_prefetch_bucket_size, and never past
// stage3_max_live_parameters gathered elements.
void ParameterSharded::prefetch_after(size_t pos) {
  int64_t ahead = 0;
  for (size_t j = pos + 1; j < order_.size(); ++j) {
    ShardedUnit& t = *units_[order_[j]];
    if (ahead > 0 && ahead + t.P > cx_.cfg.zero.stage3_prefetch_bucket_size) break;
    if (!t.gathered) {
      if (live_elements_ + t.P > cx_.cfg.zero.stage3_max_live_parameters) break;
      if (!params_.may_fetch(units_)) break;  // offload_param nvme: at most buffer_count reads in flight
      gather(t, /*wait=*/false);
    }
    ahead += t.P;
  }
}

void ParameterSharded::acquire(ShardedUnit& s, bool evaluating) {
  bool prefetch = false;
  size_t pos = 0;
  if (evaluating) {
    // evaluation does not follow (or record) the training order: no prefetch
  } else if (recording_) {
    order_.push_back(s.index);
  } else if (order_pos_ < order_.size() && order_[order_pos_] == s.index) {
    prefetch = true;
    pos = order_pos_++;
  } else {
    order_pos_ = order_.size();  // off the recorded path: no prefetch until the next step
  }
  ++s.refs;
  // This unit's own gather is issued before the prefetches: the communication thread runs
  // collectives in issue order, and this one is waited for now. (Found in a trace: the first
  // unit of each step waited behind the gathers of the units after it.)
  gather(s, /*wait=*/false);
  if (prefetch) prefetch_after(pos);
  gather(s, /*wait=*/true);
}

// The end of a scope: free the full parameters unless the recorded order uses the unit again
// within stage3_max_reuse_distance elements.
void ParameterSharded::release(ShardedUnit& s, bool evaluating) {
  ZT_CHECK(s.refs > 0, "release of unit '", s.unit->name(), "' without an acquire");
  --s.refs;
  const int64_t max_reuse = cx_.cfg.zero.stage3_max_reuse_distance;
  if (!recording_ && !evaluating && order_pos_ < order_.size()) {
    int64_t distance = 0;
    for (size_t j = order_pos_; j < order_.size(); ++j) {
      if (order_[j] == s.index) {
        if (distance <= max_reuse && max_reuse > 0) return;
        break;
      }
      distance += units_[order_[j]]->P;
    }
  }
  free_compute_copy(s);
}

// The update changed the shards: the gathered copies are stale. Persistent units are refreshed,
// the others freed (their next acquire gathers the new parameters).
void ParameterSharded::publish_unit(ShardedUnit& s, std::deque<Pending>& q) {
  if (s.persistent) fill_compute_copy(s, q);
  else free_compute_copy(s);
}

}  // namespace zt
