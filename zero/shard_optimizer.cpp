// defines: DeviceOptimizer, HostOptimizer, make_shard_optimizer — the two places the optimizer
//          step runs (zero/shard_optimizer.h).
#include "zero/shard_optimizer.h"

#include <cctype>

#include "optim/adamw.h"   // defines: AdamW
#include "optim/sgd.h"     // defines: Sgd
#include "zero/gradient_landing.h"  // defines: land_now, HowToLand
#include "zero/offload.h"  // defines: OffloadedAdamW
#include "zero/param_layout.h"  // defines: flat_layout
#include "zero/tiers.h"    // defines: StorageTiers, ParamTier

namespace zt {

namespace {

AdamWHyper adamw_hyper(const OptimizerConfig& c) {
  AdamWHyper h;
  h.lr = c.lr; h.beta1 = c.beta1; h.beta2 = c.beta2; h.eps = c.eps; h.weight_decay = c.weight_decay;
  return h;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, std::vector<FlatShard> shards) {
  if (c.sgd()) {
    SgdHyper h;
    h.lr = c.lr; h.momentum = c.momentum; h.weight_decay = c.weight_decay;
    return std::make_unique<Sgd>(std::move(shards), h);
  }
  // "AdamW" and "Adam" (DeepSpeed's adam_w_mode: decoupled decay)
  return std::make_unique<AdamW>(std::move(shards), adamw_hyper(c));
}

// A tensor of n float32 elements whose storage holds no memory (mixed precision: the optimizer's
// gradient slot, filled per shard by Optimizer::update_shard).
Tensor released(int64_t n) {
  Tensor t = Tensor::empty({n}, DType::f32, Category::workspace);
  t.storage()->release();
  return t;
}

// The optimizer of optim/ on the device. fp32: it updates the working tensors themselves; mixed
// precision: the float32 master (PrecisionPolicy owns it), through PrecisionPolicy::update.
class DeviceOptimizer final : public ShardOptimizer {
 public:
  DeviceOptimizer(ZeroContext& cx, PrecisionPolicy& precision, const std::vector<std::unique_ptr<ShardedUnit>>& units)
      : cx_(cx), precision_(precision), units_(units) {}

  void begin_unit(const ShardedUnit& s, const InitialValues& init, int64_t lo, int64_t hi) override {
    precision_.make_master(s, init, lo, hi - lo);
  }
  void add_unit(const ShardedUnit& s, int64_t lo, int64_t hi, const Tensor& param, const Tensor& grad) override {
    FlatShard fs;
    fs.name = s.unit->name();
    fs.layout = flat_layout(*s.ps);
    fs.lo = lo;
    fs.hi = hi;
    fs.param = precision_.updated(s, param);
    fs.grad = precision_.mixed() ? released(hi - lo) : grad;
    shards_.push_back(std::move(fs));
  }
  void finish_setup() override { opt_ = make_optimizer(cx_.cfg.optimizer, std::move(shards_)); }
  bool offloaded() const override { return false; }
  Tensor grad_shard(const ShardedUnit& s, DType working) override {
    return Tensor::zeros({s.S}, working, Category::grads);
  }

  void step(double lr, double clip, double unscale, const std::vector<Tensor>& grads,
            const std::vector<Tensor>& params) override {
    precision_.update(*opt_, lr, clip, unscale, grads, params, units_);
  }

  // "param" is what the optimizer updates: the parameters themselves (fp32) or the float32
  // master (mixed precision), so a checkpoint holds float32 parameters either way. Stage 0 holds
  // every tensor whole: this rank's part.
  std::vector<std::pair<std::string, Tensor>> state(const ShardedUnit& s) override {
    std::vector<std::pair<std::string, Tensor>> out;
    out.push_back({"param", part(opt_->shard(s.index).param, s)});
    const std::string prefix = s.unit->name() + "/";
    for (auto& [name, t] : opt_->state())  // "<unit>/exp_avg" -> this rank's part
      if (name.rfind(prefix, 0) == 0) out.push_back({name.substr(prefix.size()), part(t, s)});
    return out;
  }
  std::vector<std::pair<std::string, Tensor>> whole_state() const override { return opt_->state(); }
  int64_t step_count() const override { return opt_->step_count(); }
  void set_step_count(int64_t n) override { opt_->set_step_count(n); }

 private:
  Tensor part(const Tensor& t, const ShardedUnit& s) const { return t.numel() == s.S ? t : range(t, s.lo, s.S); }
  ZeroContext& cx_;
  PrecisionPolicy& precision_;
  const std::vector<std::unique_ptr<ShardedUnit>>& units_;
  std::vector<FlatShard> shards_;  // collected during setup
  std::unique_ptr<Optimizer> opt_;
};

// ZeRO-Offload / ZeRO-Infinity: the CPU AdamW on host (or swap-file) copies; the new parameters
// published per sub-group into the ParamTier.
class HostOptimizer final : public ShardOptimizer {
 public:
  HostOptimizer(ZeroContext& cx, StorageTiers& tiers, ParamTier& params, DType working,
                const std::vector<std::unique_ptr<ShardedUnit>>& units, const std::vector<Unit*>& model_units)
      : cx_(cx), params_(params), units_(units) {
    std::vector<OffloadedShard> ou;
    for (Unit* u : model_units) {
      const int64_t S = u->params().padded_numel() / cx.N;
      ou.push_back({u->name(), cx.r * S, S, flat_layout(u->params())});
    }
    offload_ = std::make_unique<OffloadedAdamW>(std::move(ou), adamw_hyper(cx.cfg.optimizer),
                                                cx.cfg.zero.offload_optimizer, cx.cfg.zero.sub_group_size, working,
                                                *tiers.host(), tiers.optimizer_swap());
    // Every region is reserved: take the disk space now, so a full disk is an error before training.
    tiers.allocate_swap_files();
  }

  // The master, before the stage frees the initial parameters.
  void begin_unit(const ShardedUnit& s, const InitialValues& init, int64_t, int64_t) override {
    offload_->init(s.index, init.slice(s.lo, s.S));
  }
  void add_unit(const ShardedUnit&, int64_t, int64_t, const Tensor&, const Tensor&) override {}
  bool offloaded() const override { return true; }
  Tensor grad_shard(const ShardedUnit& s, DType) override { return offload_->grad(s.index); }
  // Stage 1: the chunks land in the device's view when they are drained, so the copy to the host
  // follows them there (synchronous: zero/gradient_landing.h).
  void gradient_reduced(const ShardedUnit& s, const Tensor& shard, std::deque<Pending>& q) override {
    q.push_back({completed_work(), [cx = &cx_, host = offload_->grad(s.index), shard, unit = s.unit->name()] {
                   land_now(*cx, host, shard, HowToLand{}, unit);
                 }});
  }

  void step(double lr, double clip, double unscale, const std::vector<Tensor>&, const std::vector<Tensor>&) override {
    TraceScope scope(cx_.active_tracer(), TraceTrack::compute, "offloaded AdamW (host)", "offload");
    const auto t0 = Tracer::Clock::now();
    offload_->step(lr, clip * unscale, publish());
    params_.finish_writes();  // nvme: the shards on disk, their host buffers gone
    cx_.times.offload_step_s += std::chrono::duration<double>(Tracer::Clock::now() - t0).count();
  }

  // master, m, v of the host tier (views), or read from the swap file (copies)
  std::vector<std::pair<std::string, Tensor>> state(const ShardedUnit& s) override { return offload_->state(s.index); }
  // nvme: the loaded state to the swap file; then the working parameters from the master
  void loaded(const std::vector<std::vector<std::pair<std::string, Tensor>>>& filled) override {
    for (int i = 0; i < static_cast<int>(filled.size()); ++i) offload_->store(i, filled[i]);
    offload_->publish_all(publish());
    params_.finish_writes();
  }
  int64_t step_count() const override { return offload_->step_count(); }
  void set_step_count(int64_t n) override { offload_->set_step_count(n); }

 private:
  OffloadedAdamW::Publish publish() {
    return [this](int i, int64_t a, const Tensor& master, bool last) { params_.put(*units_[i], a, master, last); };
  }
  ZeroContext& cx_;
  ParamTier& params_;
  const std::vector<std::unique_ptr<ShardedUnit>>& units_;
  std::unique_ptr<OffloadedAdamW> offload_;
};

}  // namespace

bool optimizer_offloaded(const ZeroOptimization& z) { return z.offload_optimizer.enabled(); }

void optimizer_keeps(const OptimizerConfig& o, const ZeroOptimization& z, Precision p, int64_t slice_x_n,
                     int64_t shard_x_n, int64_t elem, Footprint& f) {
  if (!optimizer_offloaded(z)) {
    // float32 state per element: AdamW's exp_avg and exp_avg_sq; SGD's momentum buffer, if any
    const int64_t state = o.sgd() ? (o.momentum > 0 ? 4 : 0) : 8;
    f.add(MemoryTier::device, Category::optim, (state + PrecisionPolicy::master_bytes(p)) * slice_x_n);
    return;
  }
  // OffloadedAdamW (zero/offload.h): master, m, v float32, and the gradient shard on the host
  f.add(z.offload_optimizer.nvme() ? MemoryTier::nvme : MemoryTier::host, Category::optim, 12 * shard_x_n);
  f.add(MemoryTier::host, Category::grads, elem * shard_x_n);
}

void grad_shard_keeps(const ZeroOptimization& z, int64_t bytes_x_n, Footprint& f) {
  if (!optimizer_offloaded(z)) f.add(MemoryTier::device, Category::grads, bytes_x_n);  // DeviceOptimizer::grad_shard
}

std::unique_ptr<ShardOptimizer> make_shard_optimizer(ZeroContext& cx, PrecisionPolicy& precision, StorageTiers& tiers,
                                                     ParamTier& params,
                                                     const std::vector<std::unique_ptr<ShardedUnit>>& units,
                                                     const std::vector<Unit*>& model_units) {
  if (!optimizer_offloaded(cx.cfg.zero)) return std::make_unique<DeviceOptimizer>(cx, precision, units);
  return std::make_unique<HostOptimizer>(cx, tiers, params, precision.working(), units, model_units);
}

}  // namespace zt
