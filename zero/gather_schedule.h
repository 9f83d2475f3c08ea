// defines: GatherSchedule — stage 3's rules for when a unit's full parameters are gathered and
//          freed: reference counts of the open scopes, persistence, the order of acquires
//          recorded in the first micro-step, prefetch along it and the reuse distance (DeepSpeed's
//          stage3_prefetch_bucket_size, stage3_max_live_parameters, stage3_max_reuse_distance,
//          stage3_param_persistence_threshold).
//
// The rules are written once, here, on unit indices and sizes; what a gather *is* belongs to
// whoever drives the schedule (the Actions): zero/sharded_parameters.cpp, real all-gathers into
// the unit's flat buffer (on the meta device, train/dry_run.h, the same gathers without bytes).
//
// Per unit i of P_i elements: refs (open scopes: a forward between acquire and release, a
// backward between before_backward and after_backward), gathered (the full parameters resident,
// or being gathered). A unit is freed when its last reference goes, unless it is persistent or the
// recorded order uses it again within stage3_max_reuse_distance elements.
#pragma once
#include <cstdint>
#include <vector>

#include "zero/engine_config.h"

namespace zt {

class GatherSchedule {
 public:
  class Actions {
   public:
    virtual ~Actions() = default;
    // Unit i's full parameters become resident and their gather is issued (prefetch: ahead of use).
    virtual void start(int i, bool prefetch) = 0;
    virtual void finish(int i) = 0;  // wait until unit i's gather (if any in flight) has landed
    virtual void drop(int i) = 0;    // free unit i's full parameters (a gather in flight lands first)
    virtual bool may_prefetch() const { return true; }  // may another gather start ahead of use now?
  };

  GatherSchedule(const ZeroOptimization& z, Actions& actions) : z_(z), actions_(actions) {}

  // DeepSpeed's stage3_param_persistence_threshold: a unit of `numel` parameters stays gathered.
  static bool persistent(int64_t numel, const ZeroOptimization& z) {
    return numel <= z.stage3_param_persistence_threshold;
  }
  // Unit `index` (added in index order): P elements, persistent (stays gathered), gathered now.
  void add_unit(int index, int64_t P, bool persistent, bool gathered);
  bool persistent(int i) const { return units_.at(i).persistent; }
  bool gathered(int i) const { return units_.at(i).gathered; }
  int64_t live_elements() const { return live_; }  // gathered elements of non-persistent units

  // ---- the scopes ----
  void forward_begins() { pos_ = 0; }
  void micro_step_done() { recording_ = false; }  // the first micro-step's order is the order
  void acquire(int i, bool evaluating);
  void release(int i, bool evaluating);

  // ---- direct use ----
  void gather(int i, bool wait);  // make it resident (issue the gather unless gathered); wait: landed
  void free_unit(int i);          // free it unless in use, persistent or not gathered

 private:
  struct GatherState {  // of one unit
    int64_t P = 0;
    bool persistent = false, gathered = false;
    int refs = 0;
  };
  void prefetch_after(size_t pos);

  const ZeroOptimization& z_;
  Actions& actions_;
  std::vector<GatherState> units_;
  int64_t live_ = 0;
  // The order of acquires (unit indices) recorded in the first training micro-step, and the
  // position in it.
  std::vector<int> order_;
  bool recording_ = true;
  size_t pos_ = 0;
};

}  // namespace zt
