// defines: PhaseTimes (constructor, add, line) (train/wall_clock_breakdown.h)
#include "train/wall_clock_breakdown.h"

#include <cstdio>

namespace zt {

namespace {

double offload_s(const EngineTimes& e) {
  return e.offload_step_s + e.offload_fetch_s + e.offload_grads_s + e.checkpoint_wait_s;
}

}  // namespace

PhaseTimes::PhaseTimes(ProcessGroup& g, const EngineTimes& e)
    : times0_(g.times()), times_(times0_), counters0_(g.counters()), counters_(counters0_), engine0_(e), engine_(e) {}

void PhaseTimes::add(const StepStats& s, ProcessGroup& g, const EngineTimes& e) {
  ++steps_;
  forward_ms_ += s.forward_ms;
  backward_ms_ += s.backward_ms;
  optimizer_ms_ += s.optimizer_ms;
  times_ = g.times();
  counters_ = g.counters();
  engine_ = e;
}

std::string PhaseTimes::line() const {
  if (steps_ == 0) return "";
  const double n = static_cast<double>(steps_);
  std::string out;
  char buf[160];
  std::snprintf(buf, sizeof buf, "time (ms) | fwd: %.1f | bwd: %.1f | step: %.1f", forward_ms_ / n, backward_ms_ / n,
                optimizer_ms_ / n);
  out += buf;
  // Every collective that ran: its time on the communication thread (overlapping compute).
  for (int k = 0; k < kNumCollectives; ++k) {
    const Collective c = static_cast<Collective>(k);
    if (c == Collective::barrier || counters_.calls[k] == counters0_.calls[k]) continue;
    std::snprintf(buf, sizeof buf, " | %s: %.1f", collective_name(c),
                  1000.0 * (times_.busy_s[k] - times0_.busy_s[k]) / n);
    out += buf;
  }
  const double mib = 1024.0 * 1024.0 * n;
  std::snprintf(buf, sizeof buf, " | offload: %.1f | MiB sent intra-node: %.2f inter-node: %.2f (mean of %lld step%s)",
                1000.0 * (offload_s(engine_) - offload_s(engine0_)) / n,
                static_cast<double>(counters_.intra_node() - counters0_.intra_node()) / mib,
                static_cast<double>(counters_.inter_node() - counters0_.inter_node()) / mib,
                static_cast<long long>(steps_), steps_ == 1 ? "" : "s");
  out += buf;
  return out;
}

}  // namespace zt
