// defines: SimSpan, StepTime, collective_seconds, simulate_step_time, step_time_trace_json — how long
//          a training step takes, simulated on its dry run: the engine's own order of ops, issues
//          and waits, costed by a device profile (train/device_profile.h).
//
// The dry run (train/dry_run.h) runs the real step on the meta device over a simulated group; here
// a timeline watches it (DryRunObserver) and keeps three clocks for the simulated rank:
//
//   compute   the training thread / compute stream: every op (core/meta_backend.h's MetaOpRecord)
//             advances it by the op's cost in the profile (measured for its shapes, else its
//             class's roofline);
//   comm      the communication queue: a collective issued at compute time t starts when the
//             queue is free and t has come (max of the two), and takes collective_seconds: at the
//             links' loaded pace while the compute clock runs ops beside it, at the idle pace
//             while compute waits (the profile measures both). One queue per rank, in issue order,
//             as the MPI backend's communication thread runs every group's collectives in the
//             order they are issued (dist/mpi_process_group.h);
//   io        the NVMe tier's IO thread: each swap-file read or write (zero/aio.h) starts when the
//             queue is free and its issue has come, and takes the profile's nvme cost.
//
// A wait (Work::wait) moves the compute clock to the collective's end when it has not come yet:
// that difference is the exposed communication, counted per kind and per link class. While a
// collective runs beside the ops, both may slow down: the collective takes the links' loaded time
// and compute goes at the profile's compute_pace (on a GPU about 1 and the idle time; on a CPU rank
// whose MPI progress thread spins on the kernels' cores, much less: zt-profile measures both). So
// overlap is not a formula: it comes from where the engine issues and where it waits — stage 3's
// prefetch ahead of the forward, overlap_comm's reductions behind the backward, the bucket sizes,
// the reuse distance — exactly as the real step would order them. The step ends when all three clocks
// have (the engine waits for everything it issued before the step returns).
//
// What it assumes, and what it leaves out:
//   - every rank runs the same ops on the same shapes at the same time (data parallelism: the
//     simulated rank stands for all; a collective starts when every rank has issued it, which
//     is when this one has);
//   - compute and communication slow each other down as the profile measured them (compute_pace,
//     the loaded hops), whatever the op and the collective (zt-profile times the ops with every
//     rank of the machine computing at once, and one GEMM loop beside one all-gather);
//   - host-side time outside the backend's ops (autograd's bookkeeping, the engine's logic) is in
//     each class's overhead_s only;
//   - a block the CPU allocator maps anew (core/memory.h's cpu_maps) is filled by the kernel at
//     its first touch: charged on the compute clock when it is allocated, at the profile's
//     first_touch_bytes_per_s, though the touch may come on the communication thread (a gathered
//     parameter's buffer); on a rank sharing its core, either way the step pays it;
//   - the NVMe tier: one IO queue per rank in issue order (its IO thread), each request alpha + bytes /
//     rate from the profile (measured with the node's ranks swapping at once), beside compute and
//     communication; a wait on a request that has not ended is exposed IO (exposed_nvme_s).
//
// Collectives by algorithm, N ranks of the group over k nodes, W ranks of the world over K nodes,
// b = this rank's ring-model bytes (CommCounters' convention), one hop alpha + m / beta:
//   ring (all-gather, reduce-scatter, broadcast: N - 1 steps; all-reduce: 2 (N - 1)): each step
//     moves b / steps; the ring runs at its slowest hop, inter-node as soon as it spans two nodes,
//     whose network link is shared by the W / N groups of this shape running at once, k / K of
//     them crossing each node's link: time = steps * (alpha + (b / steps) * share / beta);
//   all-to-all: N - 1 messages; the node's link carries what all its W / K ranks send off-node:
//     time = (N - 1) * alpha + max(intra bytes / beta_intra, (W / K) * inter bytes / beta_inter);
//   barrier: ceil(log2 N) * alpha.
#pragma once
#include <array>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/trace.h"                    // defines: Tracer, TraceTrack
#include "dist/simulated_process_group.h"  // defines: SimulatedCollective
#include "train/device_profile.h"
#include "train/dry_run.h"

namespace zt {

// One interval of the simulated step (seconds from the step's start) on a trace track (core/trace.h).
struct SimSpan {
  TraceTrack track = TraceTrack::compute;
  std::string name;
  double t0 = 0, t1 = 0;
};

// The simulated rank's steady step.
struct StepTime {
  double step_s = 0;
  // The compute clock's time in each phase (every micro-batch's forward, backward; the optimizer
  // step), waits included: DeepSpeed's wall_clock_breakdown's forward / backward / step.
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
  std::array<double, kNumOpClasses> compute_s{};  // the ops' time per class (slowed beside a collective)
  std::array<double, kNumCollectives> comm_s{};   // the comm queue's busy time per kind
  std::array<double, kNumCollectives> wait_s{};   // compute waiting on collectives of that kind
  std::array<double, 2> exposed_s{};              // the same waits by link class (intra, inter)
  std::array<double, 2> nvme_s{};                 // the IO queue's busy time: reads, writes
  double exposed_nvme_s = 0;                      // compute waiting on the swap files
  double first_touch_s = 0;  // fresh mappings filled by the kernel (DeviceProfile::first_touch_bytes_per_s)
  // The ops the profile has no time of (not in DeviceProfile::ops: a datasheet profile's, or a
  // shape zt-profile did not run), costed at their class's rate, and their share of compute_s.
  int ops = 0, untimed_ops = 0;
  double untimed_s = 0;
  double flops = 0;                               // the step's arithmetic on this rank (recomputation included)
  // This rank's share of the job's tokens per step: micro-batch x sequence x accumulation, over
  // the tensor x sequence ranks that share them (the whole of them without a grid).
  double tokens = 0;
  std::vector<SimSpan> spans;
  // The job's tokens per second: this rank's tokens a step on each of `world` ranks.
  double tokens_per_s(int world) const { return step_s > 0 ? tokens * world / step_s : 0; }
  double compute_total() const;
  double comm_total() const;
  double exposed_total() const { return exposed_s[0] + exposed_s[1]; }
};

// The collective's time on the profile's links (the algorithms in the header comment); `world`
// and `nodes` are the job's; `loaded`: while compute runs beside it (the links' loaded hops).
double collective_seconds(const SimulatedCollective& c, const DeviceProfile& p, int world, int nodes,
                          bool loaded = false);

// The request's dry run with the timeline watching its last step (req.steps >= 2; the first
// records stage 3's order), on `p` as the job's ranks see it (DeviceProfile::for_ranks_per_node
// with the request's ranks per node). `run`, when given, receives the dry run itself (memory and
// bytes).
StepTime simulate_step_time(const DryRunRequest& req, const DeviceProfile& p, DryRun* run = nullptr);

// The simulated step as a Chrome trace: a Tracer's events (core/trace.h; pid = rank) on simulated
// times, compute and comm spans.
nlohmann::json step_time_trace_json(const StepTime& t, int rank);

}  // namespace zt
