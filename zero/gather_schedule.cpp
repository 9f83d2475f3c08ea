// defines: GatherSchedule's rules (zero/gather_schedule.h): gather, free, acquire, release, prefetch.
#include "zero/gather_schedule.h"

#include "core/check.h"

namespace zt {

void GatherSchedule::add_unit(int index, int64_t P, bool persistent, bool gathered) {
  ZT_CHECK(index == static_cast<int>(units_.size()), "GatherSchedule::add_unit: unit ", index, " after ", units_.size(),
           " units (units are added in index order)");
  units_.push_back({P, persistent, gathered, 0});
  if (gathered && !persistent) live_ += P;
}

void GatherSchedule::gather(int i, bool wait) {
  GatherState& u = units_.at(i);
  if (!u.gathered) {
    u.gathered = true;
    if (!u.persistent) live_ += u.P;  // persistent units stay for the run: not "live" ones
    actions_.start(i, !wait);
    if (!z_.overlap_comm) wait = true;
  }
  if (wait) actions_.finish(i);
}

void GatherSchedule::free_unit(int i) {
  GatherState& u = units_.at(i);
  if (u.persistent || !u.gathered || u.refs > 0) return;
  actions_.drop(i);  // a prefetch nobody used lands before its buffer is freed
  u.gathered = false;
  live_ -= u.P;
}

// Gathers the units after order position `pos` ahead of use: always the next one, then more
// while the units ahead (gathered already or not) fit stage3_prefetch_bucket_size, and never past
// stage3_max_live_parameters gathered elements.
void GatherSchedule::prefetch_after(size_t pos) {
  int64_t ahead = 0;
  for (size_t j = pos + 1; j < order_.size(); ++j) {
    const int t = order_[j];
    const GatherState& u = units_[t];
    if (ahead > 0 && ahead + u.P > z_.stage3_prefetch_bucket_size) break;
    if (!u.gathered) {
      if (live_ + u.P > z_.stage3_max_live_parameters) break;
      if (!actions_.may_prefetch()) break;  // offload_param nvme: at most buffer_count reads in flight
      gather(t, /*wait=*/false);
    }
    ahead += u.P;
  }
}

void GatherSchedule::acquire(int i, bool evaluating) {
  bool prefetch = false;
  size_t at = 0;
  if (evaluating) {
    // evaluation does not follow (or record) the training order: no prefetch
  } else if (recording_) {
    order_.push_back(i);
  } else if (pos_ < order_.size() && order_[pos_] == i) {
    prefetch = true;
    at = pos_++;
  } else {
    pos_ = order_.size();  // off the recorded path: no prefetch until the next step
  }
  ++units_.at(i).refs;
  // This unit's own gather is issued before the prefetches: the communication thread runs
  // collectives in issue order, and this one is waited for now. (Found in a trace: the first
  // unit of each step waited behind the gathers of the units after it.)
  gather(i, /*wait=*/false);
  if (prefetch) prefetch_after(at);
  gather(i, /*wait=*/true);
}

// The end of a scope: free the full parameters unless the recorded order uses the unit again
// within stage3_max_reuse_distance elements.
void GatherSchedule::release(int i, bool evaluating) {
  GatherState& u = units_.at(i);
  ZT_CHECK(u.refs > 0, "release of unit ", i, " without an acquire");
  --u.refs;
  const int64_t max_reuse = z_.stage3_max_reuse_distance;
  if (!recording_ && !evaluating && pos_ < order_.size()) {
    int64_t distance = 0;
    for (size_t j = pos_; j < order_.size(); ++j) {
      if (order_[j] == i) {
        if (distance <= max_reuse && max_reuse > 0) return;
        break;
      }
      distance += units_[order_[j]].P;
    }
  }
  free_unit(i);
}

}  // namespace zt
