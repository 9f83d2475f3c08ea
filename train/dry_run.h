// defines: DryRunObserver, DryRunRequest, DryRunStep, DryRun, dry_run_ranks, dry_run_of_rank, dry_run — the estimate as a dry run of the real
//          training step: the model built on the meta device (core/meta_backend.h), the real ZeRO
//          engine over a simulated process group (dist/simulated_process_group.h), the real steps.
//
// PyTorch's meta device and FakeTensor run a model with shapes only; torchtitan estimates memory
// that way. Here the whole training step runs so: the model laid out without bytes, the engine
// constructed for one rank of an N-rank job over K nodes (partitioned construction, as zt-train
// builds it), then the recording step (stage 3 records its order of gathers) and steady steps, each
// as Trainer::step runs it (train/trainer.h): every micro-batch's forward and backward, then the
// optimizer step. Every allocation goes through the same allocators' accounting as a real run
// and every collective through ProcessGroup's counting, so the peaks per category and tier and the
// bytes per collective and link class are the run's own — there is no second description of what
// a stage, a tier, a kernel or ZeRO++ keeps. Values are not computed (the meta device's fixed
// answers: loss 0, gradient norm 0, every value finite).
//
// The NVMe tier (offload to nvme) is counted as the real run counts it: the engine's swap files are
// dry on the meta device (zero/aio.h's SwapMode), so every region is reserved with the real
// rounding and offsets, and every read and write is checked, but no file is created and no IO is
// done. What a dry run cannot see: a GPU's own allocations (the meta device models the CPU backend:
// core/meta_backend.h). What it touches outside the meta device: the few values the step reads on
// the host (the token ids it checks against the vocabulary, the loss as a scalar) are copied into
// real CPU memory, through the CPU allocator (about B x T x 4 bytes in a category or two, freed at
// once): a process that measures its own CPU peaks sees them if it dry-runs between a reset and a
// read.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/memory.h"
#include "core/meta_backend.h"             // defines: MetaOpObserver
#include "dist/process_group.h"            // defines: CommCounters
#include "dist/simulated_process_group.h"  // defines: CommObserver
#include "models/model_config.h"
#include "nn/model.h"
#include "train/run_config.h"
#include "zero/aio.h"  // defines: SwapObserver

namespace zt {

// Told everything a dry run does, in order (the step simulator, train/step_time.h): every op the
// meta device runs, every collective issued and waited for, every swap-file read and write of the
// NVMe tier issued and waited for, and where each step's phases begin.
class DryRunObserver : public MetaOpObserver, public CommObserver, public SwapObserver {
 public:
  enum class Phase { forward, backward, optimizer, end };  // end: the step has returned
  virtual void phase(int step, Phase p) = 0;
};

struct DryRunRequest {
  ModelConfig model;  // a GPT-2 or Llama config (models/model_config.h), unless `build` is set
  // A model of your own (nn/model.h; examples/train_custom): called once, on the meta device (the
  // default device during the call), it builds the model with its flat buffers padded for
  // `world_size` ranks, exactly as the real program builds it. A model built holding its values
  // (materialized) goes to the engine as it is, as the real program hands it; one laid out without
  // bytes is given the dry run's initial values (partitioned construction, as zt-train's).
  std::function<std::unique_ptr<Model>(int64_t world_size)> build;
  RunConfig run;       // engine (stage, precision, offload, ZeRO++, buckets), batch, seq_len, compute_dtype
  int world_size = 1;  // N ranks
  int nodes = 1;       // K nodes of N / K ranks each (node-major, as the launchers number them)
  int rank = 0;        // the rank simulated (rank 0 and the last rank differ by padding)
  int threads = 1;     // OpenMP threads of that rank (the CPU kernels' per-thread scratch)
  int steps = 2;       // the recording step and at least one steady step
  DryRunObserver* observer = nullptr;  // null: nobody watches (construction included when set)
};

// One optimizer step: the peaks since its start (zt-train resets the device's peaks at each step's
// start), what is held at its end, and the bytes it moved.
struct DryRunStep {
  MemoryStats device, host;
  CommCounters comm;
};

struct DryRun {
  MemoryStats setup_device, setup_host;  // construction: peaks and what is held when it ends
  std::vector<DryRunStep> steps;
  MemoryStats device, host;  // the whole run: peaks (setup included), and what the last step left held
  // The NVMe tier: bytes reserved per category in this rank's swap files at the end (the engine's
  // memory_report().nvme; reserved at setup, never freed, so current equals peak). Zero without
  // offload to nvme.
  MemoryStats nvme;
  int64_t psi = 0, psi_padded = 0;
  int nodes = 1;  // the nodes simulated (dry_run_of_rank: 1 for a job not node-major over equal nodes)
  const DryRunStep& steady() const { return steps.back(); }
};

// The ranks worth simulating of a world of N: rank 0 and the last rank (the only ones whose
// shards differ, by the units' padding).
std::vector<int> dry_run_ranks(int world_size);

// The request for this rank of a real job: `run` of `model` on g's world, rank and nodes, with
// `threads` threads. The simulated group lays ranks out node-major over equal nodes, as the
// launchers place them (dist/topology.h); a job placed otherwise is simulated on one node (only
// ZeRO++'s node groups depend on the layout): `nodes` is then 1 while g has more.
DryRunRequest dry_run_of_rank(const RunConfig& run, const ModelConfig& model, const ProcessGroup& g, int threads);

// Runs the request's steps on the meta device; throws a zt::Error naming the field for a request
// that cannot run (a rank outside the world, nodes that do not divide it).
DryRun dry_run(const DryRunRequest& req);

}  // namespace zt
