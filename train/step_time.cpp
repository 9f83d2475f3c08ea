// defines: StepTime (compute_total, comm_total), collective_seconds, simulate_step_time,
//          step_time_trace_json (train/step_time.h); file-local: ring_steps, Timeline
#include "train/step_time.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <numeric>

#include "core/check.h"
#include "core/memory.h"  // defines: cpu_maps

namespace zt {

double StepTime::compute_total() const { return std::accumulate(compute_s.begin(), compute_s.end(), 0.0); }
double StepTime::comm_total() const { return std::accumulate(comm_s.begin(), comm_s.end(), 0.0); }

namespace {

int ring_steps(Collective kind, int N) { return kind == Collective::all_reduce ? 2 * (N - 1) : N - 1; }

}  // namespace

double collective_seconds(const SimulatedCollective& c, const DeviceProfile& p, int world, int nodes, bool loaded) {
  const int N = c.group_size, k = c.group_nodes;
  if (N <= 1) return 0;
  const bool spans_nodes = k > 1;
  if (c.kind == Collective::barrier) {
    return std::ceil(std::log2(static_cast<double>(N))) * p.link(spans_nodes).hop(loaded).alpha_s;
  }
  if (c.kind == Collective::all_to_all) {
    double t = 0, alpha = 0;
    if (c.bytes > c.inter_node) {  // blocks to ranks of this node (none with one rank a node)
      const LinkCost intra = p.link(0).hop(loaded);
      t = static_cast<double>(c.bytes - c.inter_node) / intra.bytes_per_s;
      alpha = intra.alpha_s;
    }
    if (c.inter_node > 0) {  // every rank of this node sends its off-node blocks through the node's link
      const LinkCost inter = p.link(1).hop(loaded);
      t = std::max(t, static_cast<double>(world / nodes) * static_cast<double>(c.inter_node) / inter.bytes_per_s);
      alpha = inter.alpha_s;
    }
    return (N - 1) * alpha + t;
  }
  // A ring: steps of bytes / steps each, at the slowest hop's pace.
  const int steps = ring_steps(c.kind, N);
  const LinkCost l = p.link(spans_nodes).hop(loaded);
  // On the network, the groups of this shape running at once (world / N of them, each crossing
  // k of the K nodes' links) share each node's link.
  const double share = spans_nodes ? static_cast<double>(world) / N * k / nodes : 1.0;
  return steps * l.alpha_s + static_cast<double>(c.bytes) * share / l.bytes_per_s;
}

namespace {

// The three clocks of the header comment, watching the dry run's last step. The comm queue is run
// lazily: a collective progresses at its loaded pace while the compute clock runs ops and at its
// idle pace while compute waits, so its end is known once compute has waited for it or gone past.
class Timeline final : public DryRunObserver {
 public:
  Timeline(const DeviceProfile& p, int world, int nodes, int timed_step)
      : p_(p), world_(world), nodes_(nodes), timed_(timed_step) {}

  void on_op(const MetaOpRecord& op) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!on_) return;
    bool timed = false;
    const double work = p_.op_seconds(op, &timed), t0 = t_;
    compute(work);
    span(TraceTrack::compute, op.row, t0, t_);
    out_.compute_s[static_cast<int>(op.cls)] += t_ - t0;  // slowed by communication beside it
    ++out_.ops;
    if (!timed) ++out_.untimed_ops, out_.untimed_s += t_ - t0;
    out_.flops += op.flops;
  }

  void on_alloc(size_t bytes, Category c) override {
    if (p_.first_touch_bytes_per_s <= 0 || !cpu_maps(bytes, c)) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (!on_) return;
    const double t0 = t_;
    compute(static_cast<double>(bytes) / p_.first_touch_bytes_per_s);
    span(TraceTrack::compute, "first touch", t0, t_);
    out_.first_touch_s += t_ - t0;
  }

  int64_t issued(const SimulatedCollective& c) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!on_) return -1;  // issued before the timed step: already done by then
    issued_.push_back({c.name, c.kind, c.group_nodes > 1, t_, collective_seconds(c, p_, world_, nodes_, false),
                       collective_seconds(c, p_, world_, nodes_, true)});
    return static_cast<int64_t>(issued_.size()) - 1;
  }

  void waited(int64_t id) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!on_ || id < 0) return;
    const size_t k = static_cast<size_t>(id);
    while (head_ <= k) run_comm(kForever, /*loaded=*/false);
    const Issued& w = issued_[k];
    if (w.done <= t_) return;
    span(TraceTrack::compute, "wait " + w.name, t_, w.done);
    out_.wait_s[static_cast<int>(w.kind)] += w.done - t_;
    out_.exposed_s[w.inter ? 1 : 0] += w.done - t_;
    t_ = w.done;
  }

  // The NVMe tier: one queue of requests in issue order (the rank's IO thread), each taking the
  // profile's alpha + bytes / rate, beside compute and communication (disks and their DMA are
  // resources of their own).
  int64_t swap_issued(bool write, int64_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!on_) return -1;  // issued before the timed step: done by then
    const NvmeCost& n = p_.nvme_cost();
    const double start = std::max(io_t_, t_);
    io_t_ = start + n.alpha_s + static_cast<double>(bytes) / (write ? n.write_bytes_per_s : n.read_bytes_per_s);
    io_done_.push_back(io_t_);
    span(TraceTrack::io, write ? "nvme write" : "nvme read", start, io_t_);
    out_.nvme_s[write] += io_t_ - start;
    return static_cast<int64_t>(io_done_.size()) - 1;
  }

  void swap_waited(int64_t id) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!on_ || id < 0) return;
    const double done = io_done_.at(static_cast<size_t>(id));
    if (done <= t_) return;
    span(TraceTrack::compute, "wait nvme", t_, done);
    out_.exposed_nvme_s += done - t_;
    compute_idle(done);
  }

  void phase(int step, Phase p) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (step != timed_) return;
    if (on_) phase_time() += t_ - phase_start_;  // the phase that just ended
    if (p == Phase::end) {
      on_ = false;
      while (head_ < issued_.size()) run_comm(kForever, false);  // anything still in flight
      out_.step_s = std::max({t_, comm_t_, io_t_});
      return;
    }
    on_ = true;
    phase_ = p;
    phase_start_ = t_;
  }

  StepTime take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(out_);
  }

 private:
  static constexpr double kForever = 1e300;
  struct Issued {
    std::string name;
    Collective kind;
    bool inter;           // over the network (the group spans nodes)
    double issue;         // the compute clock when it was issued
    double idle, loaded;  // its length with compute waiting, with compute running beside it
    double start = -1, done = -1;
  };
  // Compute waits (for the disk) until `until`: the comm queue runs at its idle pace meanwhile.
  void compute_idle(double until) {
    run_comm(until, /*loaded=*/false);
    t_ = until;
  }
  // An op of `work` seconds alone: while a collective is in flight beside it, compute goes at the
  // profile's compute_pace and the collective at its loaded pace; else at full speed.
  void compute(double work) {
    while (work > 0) {
      if (head_ == issued_.size()) {  // nothing in flight (every issue is at or before t_)
        t_ += work;
        return;
      }
      Issued& c = issued_[head_];
      if (c.start < 0) c.start = std::max(comm_t_, c.issue);
      comm_t_ = t_;
      const double left = (1 - progress_) * c.loaded;  // the collective's time to its end, beside compute
      if (work <= p_.compute_pace * left) {
        run_comm(t_ + work / p_.compute_pace, /*loaded=*/true);
        t_ += work / p_.compute_pace;
        return;
      }
      work -= p_.compute_pace * left;
      run_comm(t_ + left, /*loaded=*/true);  // to the collective's end (at once for one of no length)
      t_ += left;
    }
  }
  // Runs the queue up to `until` (the head collective at least to its end when `until` is
  // kForever), each collective not before its issue nor before the previous one's end.
  // A collective of no length (one rank's) ends where it starts.
  void run_comm(double until, bool loaded) {
    while (head_ < issued_.size()) {
      Issued& c = issued_[head_];
      if (c.start < 0) {
        if (std::max(comm_t_, c.issue) > until) return;
        comm_t_ = std::max(comm_t_, c.issue);
        c.start = comm_t_;
      }
      const double len = loaded ? c.loaded : c.idle;
      const double left = (1 - progress_) * len;
      if (comm_t_ + left > until) {  // still running at `until`
        progress_ += (until - comm_t_) / len;
        comm_t_ = until;
        return;
      }
      comm_t_ += left;
      c.done = comm_t_;
      span(TraceTrack::comm, c.name, c.start, c.done);
      out_.comm_s[static_cast<int>(c.kind)] += c.done - c.start;
      ++head_;
      progress_ = 0;
      if (until == kForever) return;  // one collective at a time when run to its end
    }
  }
  double& phase_time() {
    return phase_ == Phase::forward ? out_.forward_s : phase_ == Phase::backward ? out_.backward_s : out_.optimizer_s;
  }
  void span(TraceTrack track, const std::string& name, double t0, double t1) {
    if (t1 > t0) out_.spans.push_back({track, name, t0, t1});
  }

  // The observer is told from more than one thread: the activation checkpoints' copies to the host
  // run on their own worker (zero/activation_offload.h). Their ops go on the compute clock in the
  // order they arrive, as every host-device copy does here.
  std::mutex mu_;
  const DeviceProfile& p_;
  int world_, nodes_, timed_;
  bool on_ = false;
  Phase phase_ = Phase::forward;
  double t_ = 0, phase_start_ = 0;
  std::vector<Issued> issued_;
  size_t head_ = 0;      // the first collective not done
  double comm_t_ = 0;    // the comm queue has run up to here
  double progress_ = 0;  // the head's share done
  std::vector<double> io_done_;  // each swap request's end
  double io_t_ = 0;              // the IO queue is busy up to here
  StepTime out_;
};

}  // namespace

StepTime simulate_step_time(const DryRunRequest& req, const DeviceProfile& p, DryRun* run) {
  if (req.steps < 2) ZT_THROW("step time: steps = ", req.steps, " (expected >= 2: the recording step and a timed one)");
  // The profile as the job's ranks see it: a shared host split among the ranks on a node.
  const DeviceProfile job = p.for_ranks_per_node(req.world_size / req.nodes);
  Timeline tl(job, req.world_size, req.nodes, req.steps - 1);
  DryRunRequest r = req;
  r.observer = &tl;
  DryRun d = dry_run(r);
  StepTime t = tl.take();
  // A data index's tokens are shared by its tensor x sequence ranks (docs/parallel.md): the job's
  // tokens a step are B T accumulation x the data-parallel degree.
  t.tokens = static_cast<double>(req.run.batch() * req.run.seq_len * req.run.grad_accum()) /
             static_cast<double>(req.run.grid_size());
  if (run) *run = std::move(d);
  return t;
}

nlohmann::json step_time_trace_json(const StepTime& t, int rank) {
  Tracer tr(rank);  // the real trace's format and tracks, on simulated times
  const Tracer::Clock::time_point origin{};
  tr.set_origin(origin);
  auto at = [&](double s) {
    return origin + std::chrono::duration_cast<Tracer::Clock::duration>(std::chrono::duration<double>(s));
  };
  for (const SimSpan& s : t.spans)
    tr.span(s.track, s.name,
            s.track == TraceTrack::comm ? "comm"
            : s.track == TraceTrack::io ? "io"
                                        : "compute",
            at(s.t0), at(s.t1));
  return {{"traceEvents", tr.events()}, {"displayTimeUnit", "ms"}};
}

}  // namespace zt
