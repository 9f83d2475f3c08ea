// defines: Collective, ring_bytes, CommCounters, Work, ProcessGroup, SingleProcessGroup, intra_node_group,
//          inter_node_group, node_block_group, sub_topology, init_process_group —
//          the communication interface ZeRO talks to (docs/architecture.md "Devices and backends").
//
// A ProcessGroup is N ranks that run the same program and call the same collectives in the same
// order. Every collective has an async form returning a Work handle (wait() blocks until the
// result is in place and the buffers may be touched again); the plain form is async + wait.
// Buffers are contiguous 1-D float32 / float64 / bfloat16 / float16 tensors; the reduction is a sum
// (2-byte types add in float32 and round after each addition). The collectives that only move
// data (all-gather, broadcast, all-to-all) also take uint8 bytes: ZeRO++'s quantized payloads.
//
//   all_reduce(x)            x (n)            -> x = sum over ranks of x
//   reduce_scatter(in, out)  in (N*S)         -> out (S) = sum over ranks of in[r*S, (r+1)*S)
//   all_gather(in, out)      in (S)           -> out (N*S), out[q*S, (q+1)*S) = rank q's in
//   broadcast(x, root)       x (n)            -> x = root's x
//   all_to_all(in, out)      in (N*S)         -> out (N*S), out[q*S, (q+1)*S) = rank q's in[r*S, (r+1)*S)
//                                                (r = this rank: block q of in goes to rank q)
//
// split(color, key) makes sub-groups (MPI_Comm_split): collective over the group, the ranks that
// pass the same color form one new group, ranked by key (ties by their rank here); a negative
// color joins none (null). It first gathers every rank's color and key (an all-gather), so that
// every rank knows its new group's members. intra_node_group / inter_node_group split by the
// topology: the ranks of this rank's node, and the ranks with this rank's local rank on every node
// (one per node), the two levels a hierarchical collective (ZeRO++'s hpZ and qgZ, NCCL's trees)
// runs on. Every rank knows the whole topology, so these two compute their members themselves and
// gather nothing (they are still collective: the backend's split is); that is also what lets a
// simulated group (dist/simulated_process_group.h), which plays one rank alone, make them.
//
// Counters: bytes each rank moves per collective kind, by the ring convention the ZeRO paper
// uses (Rajbhandari et al. 2019, section 7): for n elements of b bytes on N ranks,
//   all-reduce 2*n*b*(N-1)/N, reduce-scatter and all-gather n*b*(N-1)/N (n = the full N*S),
//   broadcast n*b*(N-1)/N, barrier 0, all-to-all n*b*(N-1)/N (n = in's N*S: every block but its own).
// So stages 0-2 move 2*Psi*(N-1)/N elements per step and stage 3 3*Psi*(N-1)/N; one rank moves 0.
//
// Time (CommTimes, always measured): per kind, `busy` = how long the collectives ran (on the
// MPI backend's communication thread, from the moment it starts one to its end; on a backend
// that runs a collective inside the call, the call), `wait` = how long the caller blocked in
// Work::wait() (the communication that compute did not hide). With a Tracer (core/trace.h) each
// run is a span on the rank's comm track and each wait one on its compute track, named after
// the kind and the CommLabel in effect when it was issued ("all_gather block3"); a run's args
// give its bytes and, of those, the ones that cross to another node (the link classes).
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.h"  // defines: DeviceEvent
#include "core/tensor.h"
#include "core/trace.h"     // defines: Tracer
#include "dist/topology.h"  // defines: Topology

namespace zt {

struct ProcessGrid;  // dist/process_grid.h

enum class Collective : uint8_t { all_reduce, reduce_scatter, all_gather, broadcast, barrier, all_to_all };
inline constexpr int kNumCollectives = 6;
const char* collective_name(Collective c);  // "all_reduce", ...
// The ring convention's bytes one rank moves in a collective of n elements of b bytes over N
// ranks: factor * n * b * (N - 1) / N (factor 2 for all-reduce, 1 for the others), exact for n
// divisible by N. What the counters below add per call, and what the estimator predicts with.
inline int64_t ring_bytes(int64_t factor, int64_t n, int64_t b, int64_t N) { return factor * n * b * (N - 1) / N; }

struct CommCounters {
  std::array<int64_t, kNumCollectives> bytes{};  // ring-convention bytes moved by this rank
  std::array<int64_t, kNumCollectives> calls{};
  // The same bytes by the link they cross in the ring model: a ring over the ranks in rank order,
  // each rank sending to rank + 1 (mod N), so all of this rank's bytes cross the link to its
  // successor — [0] when that rank is on the same node (shared memory), [1] when it is on another
  // node (the network); an all-to-all's blocks go straight to their ranks, each block counted on
  // its own link. On MPI the reduce-scatter, all-gather and all-reduce run as exactly this ring
  // (dist/mpi_ring.h), so the split is what crosses each link (the cluster in a box measures it:
  // bench/results/collectives.md); a broadcast is MPI's own (a tree), and NCCL picks its rings
  // and trees itself.
  std::array<int64_t, 2> link{};
  int64_t intra_node() const { return link[0]; }
  int64_t inter_node() const { return link[1]; }
  int64_t of(Collective c) const { return bytes[static_cast<int>(c)]; }
  int64_t total() const;
  CommCounters operator-(const CommCounters& o) const;  // what moved between two readings
  CommCounters& operator+=(const CommCounters& o);
};

// Seconds per collective kind (see the header comment).
struct CommTimes {
  std::array<double, kNumCollectives> busy_s{};
  std::array<double, kNumCollectives> wait_s{};
  double busy_total() const;
  double wait_total() const;
};

// The handle of one collective in flight.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;  // rethrows the collective's error, if any
  // true when the outputs are already written by work queued on their device's compute stream
  // (or done): then a copy the device queues after this point reads them without wait() first
  // (zero/gradient_landing.h starts a gradient's copy to the host that way). A one-rank group's
  // collectives (copies on the device) and completed_work(); false for a collective running
  // apart (MPI's progress thread; NCCL's stream, which the compute stream waits for only in wait()).
  virtual bool outputs_queued() const { return false; }
  // The device event that marks the outputs written, for a copy queued after it without the host
  // waiting (Backend::copy_to_host_async's `after`): NCCL's completion event on its stream. Null
  // when there is none (outputs_queued(), or only wait() tells: MPI).
  virtual DeviceEventPtr done_event() const { return nullptr; }
};
using WorkPtr = std::shared_ptr<Work>;
WorkPtr completed_work();  // a Work that is already done
// A Work that is already done and reports each wait(): how a dry run's simulated group and swap
// files tell the step simulator where the engine waits (train/step_time.h).
WorkPtr reported_work(std::function<void()> on_wait);

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "single" | "mpi" | "nccl" | "simulated"
  // Which ranks share a node (dist/topology.h): found once, when the group is made.
  virtual const Topology& topology() const = 0;

  // ---- async forms: check shapes, count bytes, hand the work to the backend ----
  WorkPtr all_reduce_async(const Tensor& x);
  WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out);
  WorkPtr all_gather_async(const Tensor& in, const Tensor& out);
  WorkPtr broadcast_async(const Tensor& x, int root);
  WorkPtr barrier_async();
  WorkPtr all_to_all_async(const Tensor& in, const Tensor& out);

  // ---- blocking forms ----
  void all_reduce(const Tensor& x) { all_reduce_async(x)->wait(); }
  void reduce_scatter(const Tensor& in, const Tensor& out) { reduce_scatter_async(in, out)->wait(); }
  void all_gather(const Tensor& in, const Tensor& out) { all_gather_async(in, out)->wait(); }
  void broadcast(const Tensor& x, int root) { broadcast_async(x, root)->wait(); }
  void barrier() { barrier_async()->wait(); }
  void all_to_all(const Tensor& in, const Tensor& out) { all_to_all_async(in, out)->wait(); }
  double all_reduce_sum(double v);  // one double (a loss, a squared norm): sum over ranks
  // Collective. Every rank passes its own error message ("" = it succeeded). Returns "" when no
  // rank failed, else "rank q: <message>" of the lowest failing rank (its first 4000 bytes), so
  // that a rank whose own part succeeded reports the cause, not only that a peer failed (and the
  // cause is printed even when that peer is killed by the abort before it prints).
  std::string first_error(const std::string& mine);

  // Collective over this group (see the header comment): the new group of the ranks with this
  // rank's color, ranked by (key, rank here); null for a negative color. Its topology is this
  // group's restricted to its ranks; its collectives are ordered with this group's (on the MPI
  // backend, one communication thread runs both, in the order they are issued). It counts and
  // times into this group too (the world's counters are everything a rank moved, sub-groups
  // included), traces with this group's tracer and label unless it has its own, and must not
  // outlive it. Virtual only so that a backend that cannot gather the colors (the simulated
  // group) can refuse it; the others use this one.
  virtual std::unique_ptr<ProcessGroup> split(int color, int key);

  // Stops the whole job: every rank exits, the message names this rank (a rank that cannot go on
  // must never leave the others waiting in a collective).
  [[noreturn]] virtual void abort(const std::string& message, int code = 1) = 0;

  // The longest one collective may wait before the job is aborted with a report of the ranks it
  // waits for (dist/mpi_watchdog.h; 0 = no limit; throws for a negative value). Returns whether
  // this backend enforces it: the MPI and NCCL backends do; one rank has no peer to wait for.
  virtual bool set_collective_timeout(double seconds);

  const CommCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = CommCounters{}; }
  CommTimes times() const;

  // Tracing (null: off). The label names the collectives issued while it is set (CommLabel).
  void set_tracer(Tracer* t) { tracer_ = t; }
  Tracer* tracer() const;  // this group's, else its parent's (split)
  void set_label(std::string label) { label_ = std::move(label); }
  const std::string& label() const;  // this group's, else its parent's (split)

 protected:
  // What is being issued, for the backend: one that runs the collective later (on its own
  // thread) takes a copy, sets `claimed`, and calls record_run when it ran; otherwise the call
  // itself is taken as the run.
  struct CommOp {
    Collective kind = Collective::barrier;
    std::string name;  // "all_gather block3"; empty when no tracer is set
    int64_t bytes = 0;
    int64_t inter_node = 0;  // of `bytes`, those that cross to another node (CommCounters::link)
    bool claimed = false;
  };
  CommOp* issuing_ = nullptr;  // non-null inside do_*()
  void record_run(const CommOp& op, std::chrono::steady_clock::time_point t0, std::chrono::steady_clock::time_point t1);

  virtual WorkPtr do_all_reduce(const Tensor& x) = 0;
  virtual WorkPtr do_reduce_scatter(const Tensor& in, const Tensor& out) = 0;
  virtual WorkPtr do_all_gather(const Tensor& in, const Tensor& out) = 0;
  virtual WorkPtr do_broadcast(const Tensor& x, int root) = 0;
  virtual WorkPtr do_barrier() = 0;
  virtual WorkPtr do_all_to_all(const Tensor& in, const Tensor& out) = 0;
  // The backend's split, called on every rank; `members` holds the new group's ranks in this group,
  // in the new order (agreed by every rank: ProcessGroup::split gathers the colors and keys first),
  // empty for a negative color, which gets null.
  virtual std::unique_ptr<ProcessGroup> do_split(int color, const std::vector<int>& members) = 0;
  // The split once every rank knows `members` (as do_split takes them): do_split, and the new
  // group made this one's child (it counts, times and traces into this group too). Called by
  // split after its gather, and by intra_node_group / inter_node_group, whose members the
  // topology gives without one.
  std::unique_ptr<ProcessGroup> split_members(int color, const std::vector<int>& members);
  friend std::unique_ptr<ProcessGroup> intra_node_group(ProcessGroup& g);
  friend std::unique_ptr<ProcessGroup> inter_node_group(ProcessGroup& g);
  friend std::unique_ptr<ProcessGroup> node_block_group(ProcessGroup& g, int block);
  friend ProcessGrid make_process_grid(ProcessGroup& world, int tensor_parallel_size, int sequence_parallel_size);

 private:
  void count(Collective c, int64_t ring_bytes);
  void count_all_to_all(int64_t block_bytes);  // each block on the link to its rank
  template <class F> WorkPtr issue(Collective c, int64_t ring_bytes, F&& do_it);
  CommCounters counters_;
  mutable std::mutex times_mu_;  // busy_s is written by the communication thread
  CommTimes times_;
  std::atomic<Tracer*> tracer_{nullptr};
  std::string label_;
  ProcessGroup* parent_ = nullptr;  // the group this one was split from
  struct TimedWork;
  friend class CommLabel;  // wait() timed (process_group.cpp)
};

// Names the collectives issued in its scope (trace spans: "all_gather block3").
class CommLabel {
 public:
  CommLabel(ProcessGroup& g, std::string label) : g_(g), prev_(g.label_) { g.set_label(std::move(label)); }
  ~CommLabel() { g_.set_label(std::move(prev_)); }
  CommLabel(const CommLabel&) = delete;
  CommLabel& operator=(const CommLabel&) = delete;

 private:
  ProcessGroup& g_;
  std::string prev_;
};

// One rank, no MPI: every collective is the identity (and moves 0 bytes).
class SingleProcessGroup final : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }
  const Topology& topology() const override;
  [[noreturn]] void abort(const std::string& message, int code) override;

 protected:
  WorkPtr do_all_reduce(const Tensor&) override { return completed_work(); }
  WorkPtr do_reduce_scatter(const Tensor& in, const Tensor& out) override;
  WorkPtr do_all_gather(const Tensor& in, const Tensor& out) override;
  WorkPtr do_broadcast(const Tensor&, int) override { return completed_work(); }
  WorkPtr do_barrier() override { return completed_work(); }
  WorkPtr do_all_to_all(const Tensor& in, const Tensor& out) override;
  std::unique_ptr<ProcessGroup> do_split(int color, const std::vector<int>& members) override;
};

// The two levels of the nodes (collective over g, as split is, and the same as
// g.split(node, rank) and g.split(local rank, node) would make, without their gather): the ranks
// of this rank's node, ranked as in g; and one rank per node, those with this rank's local rank
// (ranked by node).
std::unique_ptr<ProcessGroup> intra_node_group(ProcessGroup& g);
std::unique_ptr<ProcessGroup> inter_node_group(ProcessGroup& g);
// The `block` consecutive ranks of this rank's node (in rank order) that include it — ZeRO++ hpZ's
// secondary group (zero/zeropp.h) — from the topology, without a gather (collective over g, the
// same as g.split(first member, rank)). Every node's rank count must be a multiple of `block`
// (a zt::Error naming the node otherwise).
std::unique_ptr<ProcessGroup> node_block_group(ProcessGroup& g, int block);

// A sub-group's topology: `parent` restricted to `members` (parent ranks, in the sub-group's
// order), nodes renumbered by their lowest member; `rank` is the rank in the sub-group.
Topology sub_topology(const Topology& parent, const std::vector<int>& members, int rank);

// The process-wide group (the one other global the architecture allows): MPI when this process
// was started by mpirun (OMPI_COMM_WORLD_SIZE / PMI_SIZE set), else a SingleProcessGroup, so a
// run of one process needs no mpirun. The first call creates it; later calls return the same one.
ProcessGroup& init_process_group();
// Shuts the MPI backend down (MPI_Finalize) if it was started; call once at the end of main.
void finalize_process_group();

}  // namespace zt
