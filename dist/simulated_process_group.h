// defines: SimulatedProcessGroup — one rank of an N-rank job played alone, without MPI and
//          without the other processes: the collectives counted exactly as the real groups count them.
//
// What it is for: a dry run of the ZeRO engine. One process plays rank r of a job of N ranks over
// K nodes (dist/topology.h's topology_of_equal_nodes makes the usual one), runs the engine on
// tensors that have shapes but no bytes, and reads what each collective moved: per collective kind
// and per link class (intra-node / inter-node), in the counters, the times and the trace spans of
// ProcessGroup. Those come from ProcessGroup's public async forms, unchanged: the shape checks,
// the ring-model bytes (ring_bytes), the link of each byte (the ring successor; an all-to-all's
// blocks on their own links) and the trace are the very code the MPI and NCCL groups run, so a
// simulated rank's counters equal the real rank's for the same sequence of collectives
// (tests/mpi/test_simulated.cpp checks it against MpiProcessGroup, world and node groups).
//
// Every collective completes inside the call (completed_work()). What it writes, "as if every
// rank held the same data as this one" (N = size(), r = rank()):
//
//   any buffer not on the cpu     nothing is read or written: the collective only counts. (A
//                                 device or meta tensor: its memory is never touched, and a meta
//                                 tensor has none.) A call with one such buffer touches none.
//   all_reduce(x)                 x := N * x                     (the sum of N equal copies)
//   reduce_scatter(in, out)       out := N * in[r*S, (r+1)*S)    (S = out's numel)
//   all_gather(in, out)           out[q*S, (q+1)*S) := in for every q
//   broadcast(x, root)            x unchanged                    (the root holds this x too)
//   all_to_all(in, out)           out[q*S, (q+1)*S) := in[r*S, (r+1)*S) for every q
//                                 (rank q sends its block r, and every rank's in is this in)
//   barrier()                     nothing
//
// Sums are computed in double and rounded once to the buffer's dtype. That is what the host
// scalars of a run need: all_reduce_sum(v) is N * v (a loss, a squared norm), and
// first_error(mine) is "" or "rank 0: <mine>" (rank 0, the lowest rank, failed the same way).
//
// Splits: ProcessGroup::split(color, key) gathers every rank's color and key, which one simulated
// rank cannot know, so it is refused (a zt::Error that says so). intra_node_group,
// inter_node_group, node_block_group (ZeRO++ hpZ's secondary group) and the process grid's groups
// (dist/process_grid.h) compute their members on every rank, so they work: their
// sub-groups are simulated groups over sub_topology(...), and count into this one as a real
// sub-group counts into its parent (the world's counters hold every byte the rank moved).
//
// abort() throws a zt::Error with the message (a dry run reports, it does not end the process);
// set_collective_timeout checks its value and returns false (no peer to wait for: ProcessGroup's).
//
// Time (train/step_time.h): with an observer set, every collective is reported when it is issued,
// and its Work's wait() when the caller waits for it — the engine's own issue and wait order,
// which is what decides how much communication compute hides. Sub-groups report to their parent's
// observer.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.h"  // defines: ProcessGroup, sub_topology

namespace zt {

// One collective as issued by the simulated rank: what it moves and over which group.
struct SimulatedCollective {
  Collective kind = Collective::barrier;
  int64_t bytes = 0;       // this rank's ring-model bytes (CommCounters' convention)
  int64_t inter_node = 0;  // of them, those that cross to another node (CommCounters::link)
  int group_size = 1;      // the group's ranks
  int group_nodes = 1;     // the nodes its ranks are on
  std::string name;        // "all_gather block3": the kind and the CommLabel in effect
};

class CommObserver {
 public:
  virtual ~CommObserver() = default;
  virtual int64_t issued(const SimulatedCollective& c) = 0;  // returns the collective's id
  virtual void waited(int64_t id) = 0;                       // the caller waits for it (again, maybe)
};

class SimulatedProcessGroup final : public ProcessGroup {
 public:
  // Rank `rank` of topology.size() ranks placed as `topology` says (its own rank is replaced by
  // `rank`; an error when out of range).
  SimulatedProcessGroup(int rank, Topology topology);
  int rank() const override { return topology_.rank; }
  int size() const override { return topology_.size(); }
  std::string backend() const override { return "simulated"; }
  const Topology& topology() const override { return topology_; }
  [[noreturn]] void abort(const std::string& message, int code = 1) override;  // throws zt::Error
  // Refused: "a simulated group splits only along its topology: ..." (see the header comment).
  std::unique_ptr<ProcessGroup> split(int color, int key) override;
  // Told of every collective issued on this group and its sub-groups, and of every wait (null: nobody).
  void set_observer(CommObserver* o) { observer_ = o; }

 protected:
  WorkPtr do_all_reduce(const Tensor& x) override;
  WorkPtr do_reduce_scatter(const Tensor& in, const Tensor& out) override;
  WorkPtr do_all_gather(const Tensor& in, const Tensor& out) override;
  WorkPtr do_broadcast(const Tensor&, int) override { return observed(); }
  WorkPtr do_barrier() override { return observed(); }
  WorkPtr do_all_to_all(const Tensor& in, const Tensor& out) override;
  // A simulated group of `members` (this group's ranks, in the new order) over sub_topology.
  std::unique_ptr<ProcessGroup> do_split(int color, const std::vector<int>& members) override;

 private:
  // The collective being issued (ProcessGroup's issuing_), told to the observer: a Work whose
  // wait() tells it too. completed_work() without an observer.
  WorkPtr observed();
  Topology topology_;  // topology_.rank is this group's rank
  CommObserver* observer_ = nullptr;
};

}  // namespace zt
