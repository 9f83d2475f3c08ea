// The ZeRO engine's offload tiers (zero/engine.h, zero/offload.h; docs/offload.md):
//
//   offload_optimizer cpu   ZeRO-Offload (Ren et al. 2021): master weights, m and v on the host;
//                           each reduced gradient shard copied to the host as soon as it is
//                           reduced; the CPU AdamW; the new parameters copied back per sub-group.
//   offload_optimizer nvme  ZeRO-Infinity (Rajbhandari et al. 2021): the same, with master, m
//                           and v in this rank's swap file, streamed through buffer_count
//                           sub-group buffers with read-ahead.
//   offload_param cpu/nvme  stage 3: the parameter shard lives on the host (or in the swap file)
//                           and acquire brings it in: (read ->) copy to a shard-sized device
//                           buffer -> all-gather, prefetched ahead in the recorded unit order.
//
// On a machine without a GPU the "device" is the capped cpu_allocator() and the host tier is
// host_allocator() (core/memory.h), so every byte shows where it lives.
#include <filesystem>

#include "core/backend.h"
#include "core/kernels/cast.h"  // defines: cast_
#include "zero/aio.h"           // defines: SwapFile, kAioAlignment
#include "zero/engine.h"
#include "zero/engine_unit.h"   // defines: Engine::UnitState
#include "zero/offload.h"       // defines: OffloadedAdamW

namespace zt {

namespace {

int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

bool same_dir(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  return fs::path(a).lexically_normal() == fs::path(b).lexically_normal();
}

// dst (any device) = src (host float32), rounded to dst's dtype: cast_ where both are on one
// device (exactly the device optimizer's rounding), else through a host copy of dst's dtype.
void put(const Tensor& dst, const Tensor& src, Allocator& host) {
  if (dst.device() == src.device()) return cast_(dst, src);
  Tensor tmp = Tensor::empty({src.numel()}, dst.dtype(), Category::comm, host);
  cast_(tmp, src);
  Tensor(dst).copy_(tmp);
}

}  // namespace

void Engine::setup_offload() {
  const OffloadConfig& oo = cfg_.zero.offload_optimizer;
  const OffloadConfig& op = cfg_.zero.offload_param;
  if (cfg_.zero.stage < 1)
    ZT_THROW("config: zero_optimization.offload_optimizer needs stage 1, 2 or 3 (stage is ", cfg_.zero.stage, ")");
  if (op.enabled() && cfg_.zero.stage != 3)
    ZT_THROW("config: zero_optimization.offload_param needs stage 3 (stage is ", cfg_.zero.stage, ")");
  std::string type = cfg_.optimizer.type;
  if (type != "AdamW" && type != "Adam")
    ZT_THROW("config: zero_optimization.offload_optimizer needs optimizer.type AdamW or Adam, got ", type);
  const Device dev = model_.units().empty() ? default_device() : model_.units().front()->params().flat().device();
  host_ = &backend(dev).host_allocator(oo.pin_memory || op.pin_memory);
  param_offload_ = op.enabled();

  if (oo.device == "nvme") opt_swap_ = std::make_unique<SwapFile>(oo.nvme_path, r_, cfg_.aio);
  if (op.device == "nvme") {
    if (opt_swap_ && same_dir(oo.nvme_path, op.nvme_path)) {
      param_swap_ = opt_swap_.get();
    } else {
      own_param_swap_ = std::make_unique<SwapFile>(op.nvme_path, r_, cfg_.aio);
      param_swap_ = own_param_swap_.get();
    }
  }

  AdamWHyper h;
  h.lr = cfg_.optimizer.lr; h.beta1 = cfg_.optimizer.beta1; h.beta2 = cfg_.optimizer.beta2;
  h.eps = cfg_.optimizer.eps; h.weight_decay = cfg_.optimizer.weight_decay;
  std::vector<OffloadUnit> units;
  const DType working = mixed_ ? half_ : DType::f32;
  for (Unit* u : model_.units()) {
    const ParamSet& ps = u->params();
    const int64_t S = ps.padded_numel() / N_;
    units.push_back({u->name(), r_ * S, S, ps.infos()});
    if (param_swap_) {
      const int64_t esize = static_cast<int64_t>(dtype_size(working));
      if (S > op.buffer_size)
        ZT_THROW("config: zero_optimization.offload_param.buffer_size = ", op.buffer_size,
                 " elements is smaller than unit '", u->name(), "''s parameter shard of ", S,
                 " elements: raise it to at least ", S);
      const int64_t bytes = round_up(S * esize, kAioAlignment);
      param_regions_.push_back({param_swap_->reserve(bytes, Category::params), bytes});
    }
  }
  offload_ = std::make_unique<OffloadedAdamW>(std::move(units), h, oo, cfg_.zero.sub_group_size, working, *host_,
                                              opt_swap_.get());
  // Every region is reserved: take the disk space now, so a full disk is an error before training.
  if (opt_swap_) opt_swap_->allocate();
  if (own_param_swap_) own_param_swap_->allocate();
}

// Stage 3's shard of S elements in the working dtype: on the device, on the host (offload_param
// cpu), or (nvme) a host buffer the size of the file region, written out by park_param_shard.
Tensor Engine::new_param_shard(UnitState& s) {
  const DType dt = mixed_ ? half_ : DType::f32;
  if (!param_offload_) return Tensor::empty({s.S}, dt, Category::params);
  if (!param_swap_) return Tensor::empty({s.S}, dt, Category::params, *host_);
  const auto [offset, bytes] = param_regions_.at(s.index);
  s.param_offset = offset;
  s.param_bytes = bytes;
  Tensor buf = Tensor::zeros({bytes / static_cast<int64_t>(dtype_size(dt))}, dt, Category::params, *host_);
  return range(buf, 0, s.S);
}

void Engine::park_param_shard(UnitState& s) {
  if (!param_swap_) return;
  param_swap_->write_async(s.param_offset, s.param_shard.raw(), s.param_bytes)->wait();
  s.param_shard = Tensor();  // the host buffer goes: the shard lives in the file
}

int Engine::param_reads_in_flight() const {
  int n = 0;
  for (const auto& s : units_) n += !s->gathers.empty();
  return n;
}

// offload_param: the shard -> a shard-sized device buffer (Category::params) -> the all-gather.
// nvme reads it first, asynchronously; the copy and the gather are issued when the read lands
// (its Pending's completion, which appends them to the same queue).
void Engine::fetch_offloaded_params(UnitState& s, std::deque<Pending>& q) {
  const DType dt = mixed_ ? half_ : DType::f32;
  // Timed (EngineTimes::offload_fetch_s) and traced: the copy to the device, the issue of the gather.
  auto stage_and_gather = [this, dt](UnitState& u, const Tensor& host_shard, std::deque<Pending>& out) {
    const auto t0 = Tracer::Clock::now();
    TraceScope scope(active_tracer(), TraceTrack::compute, "shard to device " + u.unit->name(), "offload");
    Tensor dev = Tensor::empty({u.S}, dt, Category::params);
    dev.copy_(host_shard);
    CommLabel label(group_, u.unit->name());
    gather_from(u, dev, out);
    out.push_back({completed_work(), [dev] {}});  // the device buffer lives until the gather landed
    times_.offload_fetch_s += std::chrono::duration<double>(Tracer::Clock::now() - t0).count();
  };
  if (!param_swap_) return stage_and_gather(s, s.param_shard, q);
  if (s.param_write) {  // the step's write of this shard must be on disk before it is read
    WorkPtr w = timed_wait(std::move(s.param_write), &times_.offload_fetch_s, active_tracer(),
                           "wait nvme write " + s.unit->name());
    w->wait();
    s.param_staging = Tensor();
  }
  Tensor bounce = Tensor::empty({s.param_bytes / static_cast<int64_t>(dtype_size(dt))}, dt, Category::params, *host_);
  WorkPtr r = timed_wait(param_swap_->read_async(s.param_offset, bounce.raw(), s.param_bytes), &times_.offload_fetch_s,
                         active_tracer(), "wait nvme read " + s.unit->name());
  UnitState* sp = &s;
  std::deque<Pending>* qp = &q;
  q.push_back({r, [sp, qp, bounce, stage_and_gather] { stage_and_gather(*sp, range(bounce, 0, sp->S), *qp); }});
}

void Engine::grad_to_host(UnitState& s) {
  Tensor g = offload_->grad(s.index);
  g.copy_(s.grad_shard);
}

// The new float32 parameters of [a, a + n) of unit s's shard, from the CPU AdamW, rounded into
// the working parameters: the device shard (stages 1-2: a view of the full parameters), the host
// shard (offload_param cpu), or a host buffer written to the swap file once the unit is complete.
void Engine::publish_piece(UnitState& s, int64_t a, const Tensor& master, bool last) {
  const int64_t n = master.numel();
  if (!param_swap_) return put(range(s.param_shard, a, n), master, *host_);
  if (s.param_write) {  // last step's write of this unit must end before its buffer is refilled
    WorkPtr w = std::move(s.param_write);
    w->wait();
  }
  const DType dt = mixed_ ? half_ : DType::f32;
  if (!s.param_staging.defined())
    s.param_staging = Tensor::zeros({s.param_bytes / static_cast<int64_t>(dtype_size(dt))}, dt, Category::params, *host_);
  put(range(s.param_staging, a, n), master, *host_);
  if (!last) return;
  s.param_write = param_swap_->write_async(s.param_offset, s.param_staging.raw(), s.param_bytes);
  // At most buffer_count units' buffers wait for their writes; the oldest is finished first.
  param_writes_.push_back(&s);
  while (static_cast<int64_t>(param_writes_.size()) > cfg_.zero.offload_param.buffer_count) {
    finish_param_write(*param_writes_.front());
    param_writes_.pop_front();
  }
}

void Engine::finish_param_write(UnitState& s) {
  if (!s.param_write) return;
  WorkPtr w = std::move(s.param_write);
  w->wait();
  s.param_staging = Tensor();
}

void Engine::finish_param_writes() {
  for (UnitState* s : param_writes_) finish_param_write(*s);
  param_writes_.clear();
}

}  // namespace zt
