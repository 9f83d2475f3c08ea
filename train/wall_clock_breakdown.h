// defines: PhaseTimes — DeepSpeed's wall_clock_breakdown for zt-train: where the time of the steps
//          since the last printed line went, per step.
//
// With "wall_clock_breakdown": true (or --wall-clock-breakdown), zt-train prints beside every
// steps_per_print line, as DeepSpeed does, the forward, backward and optimizer-step times (the
// Trainer's clocks, the device synchronized at each phase's end: StepStats), and, what DeepSpeed
// does not show, the time each collective ran on the communication thread (overlapping compute),
// the host's offload work, and the bytes this rank sent per link class (docs/usage.md):
//
//   time (ms) | fwd: 12.1 | bwd: 30.4 | step: 3.2 | all_gather: 4.0 | reduce_scatter: 2.2 | ...
//             | offload: 0.0 | MiB sent intra-node: 1.25 inter-node: 0.00 (rank 0, mean of 10 steps)
#pragma once
#include <string>

#include "dist/process_group.h"  // defines: CommCounters, CommTimes
#include "train/trainer.h"       // defines: StepStats
#include "zero/engine.h"         // defines: EngineTimes

namespace zt {

class PhaseTimes {
 public:
  PhaseTimes() = default;
  // Counts from now: the group's and the engine's running totals are the starting point.
  PhaseTimes(ProcessGroup& g, const EngineTimes& e);
  // One more step: its phases, and the totals after it.
  void add(const StepStats& s, ProcessGroup& g, const EngineTimes& e);
  int64_t steps() const { return steps_; }
  std::string line() const;  // the printed line (the layout above); "" before any step

 private:
  int64_t steps_ = 0;
  double forward_ms_ = 0, backward_ms_ = 0, optimizer_ms_ = 0;
  CommTimes times0_, times_;
  CommCounters counters0_, counters_;
  EngineTimes engine0_, engine_;
};

}  // namespace zt
