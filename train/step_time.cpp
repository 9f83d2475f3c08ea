// defines: StepTime (compute_total, comm_total), collective_seconds, simulate_step_time,
//          step_time_trace_json (train/step_time.h); file-local: ring_steps, Timeline
#include "train/step_time.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace zt {

double StepTime::compute_total() const {
  double t = 0;
  for (double c : compute_s) t += c;
  return t;
}

double StepTime::comm_total() const {
  double t = 0;
  for (double c : comm_s) t += c;
  return t;
}

namespace {

int ring_steps(Collective kind, int N) { return kind == Collective::all_reduce ? 2 * (N - 1) : N - 1; }

}  // namespace

double collective_seconds(const SimulatedCollective& c, const DeviceProfile& p, int world, int nodes) {
  const int N = c.group_size, k = c.group_nodes;
  if (N <= 1) return 0;
  const bool spans_nodes = k > 1;
  if (c.kind == Collective::barrier) {
    const LinkCost& l = p.link(spans_nodes);
    return std::ceil(std::log2(static_cast<double>(N))) * l.alpha_s;
  }
  if (c.kind == Collective::all_to_all) {
    const LinkCost& intra = p.link(0);
    double t = static_cast<double>(c.bytes - c.inter_node) / intra.bytes_per_s;
    double alpha = intra.alpha_s;
    if (c.inter_node > 0) {  // every rank of this node sends its off-node blocks through the node's link
      const LinkCost& inter = p.link(1);
      t = std::max(t, static_cast<double>(world / nodes) * static_cast<double>(c.inter_node) / inter.bytes_per_s);
      alpha = inter.alpha_s;
    }
    return (N - 1) * alpha + t;
  }
  // A ring: steps of bytes / steps each, at the slowest hop's pace.
  const int steps = ring_steps(c.kind, N);
  const LinkCost& l = p.link(spans_nodes);
  // On the network, the groups of this shape running at once (world / N of them, each crossing
  // k of the K nodes' links) share each node's link.
  const double share = spans_nodes ? static_cast<double>(world) / N * k / nodes : 1.0;
  return steps * l.alpha_s + static_cast<double>(c.bytes) * share / l.bytes_per_s;
}

namespace {

// The two clocks of the header comment, watching the dry run's last step.
class Timeline final : public DryRunObserver {
 public:
  Timeline(const DeviceProfile& p, int world, int nodes, int timed_step)
      : p_(p), world_(world), nodes_(nodes), timed_(timed_step) {}

  void on_op(const MetaOpRecord& op) override {
    if (!on_) return;
    const double dt = p_.op_seconds(op);
    span(0, op.row, t_, t_ + dt);
    t_ += dt;
    out_.compute_s[static_cast<int>(op.cls)] += dt;
    out_.flops += op.flops;
  }

  int64_t issued(const SimulatedCollective& c) override {
    if (!on_) return -1;  // issued before the timed step: already done by then
    const double dur = collective_seconds(c, p_, world_, nodes_);
    const double start = std::max(t_, comm_free_);
    comm_free_ = start + dur;
    span(1, c.name, start, comm_free_);
    out_.comm_s[static_cast<int>(c.kind)] += dur;
    const bool inter = c.group_nodes > 1;
    issued_.push_back({comm_free_, c.kind, inter});
    // the share of its time that takes the compute cores (profile's comm_overlap < 1)
    if (const double taken = (1 - p_.comm_overlap) * dur; taken > 0) {
      span(0, std::string("cores taken by ") + c.name, t_, t_ + taken);
      out_.exposed_s[inter ? 1 : 0] += taken;
      t_ += taken;
    }
    return static_cast<int64_t>(issued_.size()) - 1;
  }

  void waited(int64_t id) override {
    if (!on_ || id < 0) return;
    const Issued& w = issued_.at(static_cast<size_t>(id));
    if (w.done <= t_) return;
    span(0, std::string("wait ") + collective_name(w.kind), t_, w.done);
    out_.wait_s[static_cast<int>(w.kind)] += w.done - t_;
    out_.exposed_s[w.inter ? 1 : 0] += w.done - t_;
    t_ = w.done;
  }

  void phase(int step, Phase p) override {
    if (step != timed_) return;
    if (on_) phase_time() += t_ - phase_start_;  // the phase that just ended
    if (p == Phase::end) {
      on_ = false;
      out_.step_s = std::max(t_, comm_free_);
      return;
    }
    on_ = true;
    phase_ = p;
    phase_start_ = t_;
  }

  StepTime take() { return std::move(out_); }

 private:
  struct Issued {
    double done;
    Collective kind;
    bool inter;  // over the network (the group spans nodes)
  };
  double& phase_time() {
    return phase_ == Phase::forward ? out_.forward_s : phase_ == Phase::backward ? out_.backward_s : out_.optimizer_s;
  }
  void span(int track, const std::string& name, double t0, double t1) {
    if (t1 > t0) out_.spans.push_back({track, name, t0, t1});
  }

  const DeviceProfile& p_;
  int world_, nodes_, timed_;
  bool on_ = false;
  Phase phase_ = Phase::forward;
  double t_ = 0, comm_free_ = 0, phase_start_ = 0;
  std::vector<Issued> issued_;
  StepTime out_;
};

}  // namespace

StepTime simulate_step_time(const DryRunRequest& req, const DeviceProfile& p, DryRun* run) {
  const EngineConfig& e = req.run.engine;
  if (e.zero.offload_optimizer.nvme() || e.zero.offload_param.nvme())
    ZT_THROW(
        "step time: offload to nvme is not simulated yet (the swap files' reads and writes have no cost model); "
        "cpu offload and every stage are");
  if (req.steps < 2) ZT_THROW("step time: steps = ", req.steps, " (expected >= 2: the recording step and a timed one)");
  Timeline tl(p, req.world_size, req.nodes, req.steps - 1);
  DryRunRequest r = req;
  r.observer = &tl;
  DryRun d = dry_run(r);
  StepTime t = tl.take();
  t.tokens = req.run.batch() * req.run.seq_len * req.run.grad_accum();
  if (run) *run = std::move(d);
  return t;
}

nlohmann::json step_time_trace_json(const StepTime& t, int rank) {
  nlohmann::json ev = nlohmann::json::array();
  ev.push_back({{"ph", "M"},
                {"name", "process_name"},
                {"pid", rank},
                {"args", {{"name", "rank " + std::to_string(rank) + " (simulated)"}}}});
  ev.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank}, {"tid", 0}, {"args", {{"name", "compute"}}}});
  ev.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank}, {"tid", 1}, {"args", {{"name", "comm"}}}});
  for (const SimSpan& s : t.spans)
    ev.push_back({{"ph", "X"},
                  {"name", s.name},
                  {"cat", s.track ? "comm" : "compute"},
                  {"pid", rank},
                  {"tid", s.track},
                  {"ts", s.t0 * 1e6},
                  {"dur", (s.t1 - s.t0) * 1e6}});
  return {{"traceEvents", ev}, {"displayTimeUnit", "ms"}};
}

}  // namespace zt
