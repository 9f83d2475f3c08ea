// defines: dry_run_ranks, dry_run_of_rank, dry_run (train/dry_run.h); file-local: NoValues, g_dry_run, MetaScope, check_request
#include "train/dry_run.h"

#include <mutex>

#include "core/backend.h"
#include "core/meta_backend.h"
#include "dist/process_grid.h"
#include "dist/simulated_process_group.h"
#include "models/init.h"  // defines: make_model
#include "nn/param_source.h"
#include "optim/schedule.h"  // defines: scheduled_lr
#include "zero/engine.h"

namespace zt {

namespace {

// The initial values of a dry run: none written, but staged as zt-train's initialization stages
// them (models/init.h's ModelInit::fill: chunks of kFillChunk elements on the default device), so
// construction's workspace peak is the real one. The engine asks for each unit's values as it
// creates them (partitioned construction). A host buffer with real bytes (none is expected) gets
// zeros.
class NoValues final : public ParamSource {
 public:
  void fill(int, int64_t, const Tensor& dst) override {
    if (dst.device().is_cpu()) Tensor(dst).zero_();
    const DType via = dst.dtype() == DType::f64 ? DType::f64 : DType::f32;
    for (int64_t c = 0; c < dst.numel(); c += ModelInit::kFillChunk)
      Tensor::empty({std::min(ModelInit::kFillChunk, dst.numel() - c)}, via, Category::workspace);
  }
};

// The meta device for the length of one dry run: one dry run at a time in a process (the meta
// allocators and the default device are the process's), empty at the start, peaks from zero, the
// rank's thread count, the request's observer; the default device is meta meanwhile. All of it restored at the end, also
// when the run throws.
std::mutex g_dry_run;

class MetaScope {
 public:
  MetaScope(int threads, DryRunObserver* observer) : lock_(g_dry_run, std::try_to_lock), meta_(meta_backend()) {
    ZT_CHECK(lock_.owns_lock(), "dry run: another dry run is running in this process (one at a time)");
    for (Allocator* a : {&meta_.allocator(), &meta_.host_allocator(false)})
      ZT_CHECK(a->stats().total() == 0, "dry run: the meta allocator '", a->name(), "' still holds ",
               format_bytes(a->stats().total()), " (another dry run in this process has not ended)");
    threads_before_ = meta_.threads();
    meta_.set_threads(threads);
    meta_.set_observer(observer);
    set_dry_swap_observer(observer);
    reset_peaks();
  }
  ~MetaScope() {
    meta_.set_threads(threads_before_);
    meta_.set_observer(nullptr);
    set_dry_swap_observer(nullptr);
  }
  MetaScope(const MetaScope&) = delete;
  MetaScope& operator=(const MetaScope&) = delete;
  void reset_peaks() {
    meta_.allocator().reset_peaks();
    meta_.host_allocator(false).reset_peaks();
  }
  MemoryStats device() const { return meta_.allocator().stats(); }
  MemoryStats host() const { return meta_.host_allocator(false).stats(); }

 private:
  std::unique_lock<std::mutex> lock_;
  MetaBackend& meta_;
  int threads_before_ = 1;
  DefaultDeviceScope scope_{Device::meta()};
};

void check_request(const DryRunRequest& r) {
  ZT_CHECK(r.world_size >= 1, "dry run: world_size = ", r.world_size, " (expected >= 1)");
  ZT_CHECK(r.rank >= 0 && r.rank < r.world_size, "dry run: rank = ", r.rank, " is not a rank of ", r.world_size);
  ZT_CHECK(r.nodes >= 1 && r.world_size % r.nodes == 0, "dry run: nodes = ", r.nodes, " does not divide world_size ",
           r.world_size, " (nodes of equal size)");
  ZT_CHECK(r.threads >= 1, "dry run: threads = ", r.threads, " (expected >= 1)");
  ZT_CHECK(r.steps >= 2, "dry run: steps = ", r.steps, " (expected >= 2: the recording step and a steady one)");
}

}  // namespace

std::vector<int> dry_run_ranks(int world_size) {
  if (world_size > 1) return {0, world_size - 1};
  return {0};
}

DryRunRequest dry_run_of_rank(const RunConfig& run, const ModelConfig& model, const ProcessGroup& g, int threads) {
  DryRunRequest r;
  r.model = model;
  r.run = run;
  r.world_size = g.size();
  r.rank = g.rank();
  r.threads = threads;
  const Topology& t = g.topology();
  const bool equal_nodes = g.size() % t.num_nodes() == 0 &&
                           topology_of_equal_nodes(g.size(), t.num_nodes(), 0).node_of == t.node_of;
  r.nodes = equal_nodes ? t.num_nodes() : 1;
  return r;
}

DryRun dry_run(const DryRunRequest& req) {
  check_request(req);
  RunConfig cfg = req.run;
  DryRun out;
  out.nodes = req.nodes;
  MetaScope meta(req.threads, req.observer);
  SimulatedProcessGroup group(req.rank, topology_of_equal_nodes(req.world_size, req.nodes, req.rank));
  group.set_observer(req.observer);
  auto phase = [&](int s, DryRunObserver::Phase p) {
    if (req.observer) req.observer->phase(s, p);
  };
  {
    // A tensor- or sequence-parallel run's grid, as the Trainer makes it: the blocks cut over the
    // tensor group, the sequences over the sequence group, ZeRO over the replica group (docs/parallel.md).
    std::unique_ptr<ProcessGrid> grid;
    if (cfg.grid_size() > 1) {
      ZT_CHECK(!req.build, "dry run: a model of your own with tensor_parallel_size ", cfg.tensor_parallel_size,
               " (the grid is built for the bundled families)");
      grid = std::make_unique<ProcessGrid>(make_process_grid(group, static_cast<int>(cfg.tensor_parallel_size),
                                                             static_cast<int>(cfg.sequence_parallel_size)));
    }
    ProcessGroup& zero_group = grid ? *grid->replica : group;
    // Construction as the real program does it: zt-train's Trainer lays the model out without
    // bytes and the engine creates what this rank's stage keeps, unit by unit; a model of your
    // own is built by `build`.
    std::unique_ptr<Model> model;
    if (req.build) {
      model = req.build(req.world_size);
      ZT_CHECK(model, "dry run: the model's build function returned no model");
    } else {
      ModelOptions opt;
      opt.world_size = zero_group.size();
      opt.tensor_parallel = grid ? grid->tensor.get() : nullptr;
      opt.megatron_sequence_parallel = cfg.megatron_sequence_parallel;
      opt.sequence_parallel = grid ? grid->sequence.get() : nullptr;
      opt.alignment = kShardAlignment;
      opt.dtype = cfg.compute_dtype;
      opt.materialize = false;
      model = make_model(req.model, opt);
    }
    if (cfg.seq_len == 0) cfg.seq_len = model->max_seq_len();
    ZT_CHECK(cfg.seq_len <= model->max_seq_len(), "dry run: seq_len ", cfg.seq_len, " exceeds the model's context ",
             model->max_seq_len());
    NoValues initial;
    ZT_CHECK(!model->units().empty(), "dry run: the model has no units (nothing to train)");
    const Tensor& first = model->units().front()->params().flat();
    const bool holds_values = first.defined() && first.storage()->resident();
    std::unique_ptr<Engine> engine = initialize(*model, cfg.engine, zero_group, holds_values ? nullptr : &initial,
                                                grid ? grid->tensor.get() : nullptr);
    out.setup_device = meta.device();
    out.setup_host = meta.host();
    const MemoryReport rep = engine->memory_report();
    out.psi = rep.psi;
    out.psi_padded = rep.psi_padded;

    // The steps, as Trainer::step runs them. The batch (B, T) ids and targets are where the CPU
    // target's data loader puts them, in the device's allocator (the CPU is its own host),
    // allocated at the first step.
    Tensor whole_idx, whole_targets, idx, targets;
    for (int s = 0; s < req.steps; ++s) {
      meta.reset_peaks();
      const CommCounters before = group.counters();
      if (!whole_idx.defined()) {
        whole_idx = Tensor::empty({cfg.batch(), cfg.seq_len}, DType::i32, Category::activations);
        whole_targets = Tensor::empty({cfg.batch(), cfg.seq_len}, DType::i32, Category::activations);
      }
      if (cfg.sequence_parallel_size == 1) {
        idx = whole_idx, targets = whole_targets;
      } else {  // each step this rank's share of the sequences, copied from the whole batch (Trainer::next_batch)
        const int64_t T = cfg.seq_len / cfg.sequence_parallel_size;
        idx = Tensor::empty({cfg.batch(), T}, DType::i32, Category::activations);
        targets = Tensor::empty({cfg.batch(), T}, DType::i32, Category::activations);
      }
      for (int64_t micro = 0; micro < cfg.grad_accum(); ++micro) {
        phase(s, DryRunObserver::Phase::forward);
        Var loss = engine->forward(idx, targets);
        phase(s, DryRunObserver::Phase::backward);
        engine->backward(loss);
      }
      phase(s, DryRunObserver::Phase::optimizer);
      engine->step(
          scheduled_lr(cfg.engine.scheduler, cfg.engine.optimizer.lr, s, engine->optimizer_steps(), cfg.steps));
      phase(s, DryRunObserver::Phase::end);
      out.steps.push_back({meta.device(), meta.host(), group.counters() - before});
    }
    out.nvme = engine->memory_report().nvme;
  }
  // Over the whole run: the peaks of construction and of every step; held, what the last step left.
  out.device = out.setup_device;
  out.host = out.setup_host;
  for (const DryRunStep& s : out.steps) {
    for (Category c : kAllCategories) {
      const int i = static_cast<int>(c);
      out.device.peak[i] = std::max(out.device.peak[i], s.device.peak[i]);
      out.host.peak[i] = std::max(out.host.peak[i], s.host.peak[i]);
    }
    out.device.peak_total = std::max(out.device.peak_total, s.device.peak_total);
    out.host.peak_total = std::max(out.host.peak_total, s.host.peak_total);
  }
  out.device.current = out.steps.back().device.current;
  out.host.current = out.steps.back().host.current;
  return out;
}

}  // namespace zt
