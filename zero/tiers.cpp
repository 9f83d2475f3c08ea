// defines: StorageTiers, the parameter tiers (DeviceParams, HostParams, NvmeParams),
//          make_param_tier (zero/tiers.h).
//
// The storage tiers (zero/tiers.h): the host allocator and the swap files of offload, and the
// three places stage 3's parameter shards can live (ZeRO-Infinity, Rajbhandari et al. 2021,
// section 5: parameters offloaded to host memory or NVMe, brought in ahead of use).
//
// On a machine without a GPU the "device" is the capped cpu_allocator() and the host tier is
// host_allocator() (core/memory.h), so every byte shows where it lives.
#include "zero/tiers.h"

#include <filesystem>

#include "core/backend.h"
#include "core/kernels/cast.h"  // defines: cast_
#include "zero/aio.h"           // defines: SwapFile, kAioAlignment

namespace zt {

namespace {

int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

bool same_dir(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  return fs::path(a).lexically_normal() == fs::path(b).lexically_normal();
}

// dst (any device) = src (host float32), rounded to dst's dtype: cast_ where both are on one
// device (exactly the device optimizer's rounding; nothing in flight), else through a host copy
// of dst's dtype, sent with Backend::copy_from_host_async: the returned transfer must be waited
// for before dst is used (on a GPU it overlaps the host's work on the next sub-group).
TransferPtr put_rounded(const Tensor& dst, const Tensor& src, Allocator& host) {
  if (dst.device() == src.device()) {
    cast_(dst, src);
    return nullptr;
  }
  Tensor tmp = Tensor::empty({src.numel()}, dst.dtype(), Category::comm, host);
  cast_(tmp, src);
  return backend_of(dst).copy_from_host_async(dst, tmp);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// StorageTiers

StorageTiers::StorageTiers(ZeroContext& cx, Device device) : cx_(cx), device_(device) {
  const ZeroOptimization& z = cx.cfg.zero;
  const OffloadConfig& oo = z.offload_optimizer;
  const OffloadConfig& op = z.offload_param;
  if (!oo.enabled()) return;
  if (z.stage < 1)
    ZT_THROW("config: zero_optimization.offload_optimizer needs stage 1, 2 or 3 (stage is ", z.stage, ")");
  if (op.enabled() && z.stage != 3)
    ZT_THROW("config: zero_optimization.offload_param needs stage 3 (stage is ", z.stage, ")");
  if (cx.cfg.optimizer.sgd())
    ZT_THROW("config: zero_optimization.offload_optimizer needs optimizer.type AdamW or Adam, got ",
             optimizer_type_name(cx.cfg.optimizer.type));
  host_ = &backend(device).host_allocator(oo.pin_memory || op.pin_memory);
  // On the meta device (a dry run) the swap files keep their books only: no file, no IO.
  const SwapMode mode = device.is_meta() ? SwapMode::dry : SwapMode::disk;
  if (oo.nvme()) opt_swap_ = std::make_unique<SwapFile>(oo.nvme_path, cx.r, cx.cfg.aio, mode);
  if (op.nvme()) {
    if (opt_swap_ && same_dir(oo.nvme_path, op.nvme_path)) {
      param_swap_ = opt_swap_.get();
    } else {
      own_param_swap_ = std::make_unique<SwapFile>(op.nvme_path, cx.r, cx.cfg.aio, mode);
      param_swap_ = own_param_swap_.get();
    }
  }
}

StorageTiers::~StorageTiers() = default;

Allocator& StorageTiers::device() const { return default_allocator(); }

Allocator& StorageTiers::activation_host() const { return host_ ? *host_ : backend(device_).host_allocator(true); }

Allocator* StorageTiers::host_tier() const {
  if (host_) return host_;
  return cx_.cfg.cpu_checkpointing ? &activation_host() : nullptr;
}

void StorageTiers::allocate_swap_files() {
  if (opt_swap_) opt_swap_->allocate();
  if (own_param_swap_) own_param_swap_->allocate();
}

MemoryStats StorageTiers::nvme_stats() const {
  MemoryStats m;
  for (const SwapFile* f : {opt_swap_.get(), own_param_swap_.get()}) {
    if (!f) continue;
    const MemoryStats st = f->stats();
    for (int c = 0; c < kNumCategories; ++c) {
      m.current[c] += st.current[c];
      m.peak[c] += st.peak[c];
    }
    m.peak_total += st.peak_total;
  }
  return m;
}

void StorageTiers::set_tracer(Tracer* t) {
  for (SwapFile* f : {opt_swap_.get(), own_param_swap_.get()})
    if (f) f->set_tracer(t);
}

// The counter tracks: the device allocator by category; with offload or cpu_checkpointing the
// host tier, and the swap files' reserved bytes.
void StorageTiers::trace_memory(Tracer* t) const {
  if (!t) return;
  t->memory(std::string("memory: device (") + device().name() + ")", device().stats());
  if (Allocator* h = host_tier()) t->memory(std::string("memory: host (") + h->name() + ")", h->stats());
  if (opt_swap_ || own_param_swap_) t->memory("memory: nvme (swap files)", nvme_stats());
}

// ---------------------------------------------------------------------------------------------
// Parameter tiers

Tensor& ParamTier::held(const ShardedUnit& s) {
  if (shards_.size() <= static_cast<size_t>(s.index)) shards_.resize(s.index + 1);
  return shards_[s.index];
}

void ParamTier::hold(const ShardedUnit& s, const Tensor& view) { held(s) = view; }

namespace {

// A shard held in memory (the device's or the host's): the offloaded optimizer's new parameters
// are rounded straight into it.
class ShardInMemory : public ParamTier {
 public:
  explicit ShardInMemory(StorageTiers& tiers) : tiers_(tiers) {}
  // A device shard: the sub-group's new parameters go over while the host updates the next one,
  // at most two copies (and their host staging buffers) in flight.
  void put(const ShardedUnit& s, int64_t a, const Tensor& master, bool) override {
    if (sending_.size() >= 2) {  // first: the oldest's staging buffer is freed before a third exists
      sending_.front()->wait();
      sending_.pop_front();
    }
    TransferPtr t = put_rounded(range(shard(s), a, master.numel()), master, *tiers_.host());
    if (t) sending_.push_back(std::move(t));
  }
  // The new parameters have landed on the device (and their host staging buffers are freed).
  void finish_writes() override {
    for (TransferPtr& t : sending_) t->wait();
    sending_.clear();
  }
  ~ShardInMemory() override {
    for (TransferPtr& t : sending_) {  // nothing may still read a freed staging buffer
      try {
        t->wait();
      } catch (...) {  // a destructor does not throw: the device is gone
      }
    }
  }

 protected:
  StorageTiers& tiers_;
  std::deque<TransferPtr> sending_;  // put()'s copies to the device, until finish_writes()
};

// The shard on the device. put() serves offload_optimizer without offload_param: the new
// parameters go from the host optimizer straight into the device shard (stages 1-2: a view of
// the full parameters).
class DeviceParams final : public ShardInMemory {
 public:
  using ShardInMemory::ShardInMemory;
  Allocator& shard_memory() const override { return tiers_.device(); }
  Tensor new_shard(const ShardedUnit& s, DType dt) override {
    return held(s) = Tensor::empty({s.S}, dt, Category::params, shard_memory());
  }
  bool offloaded() const override { return false; }
  void fetch(ShardedUnit& s, std::deque<Pending>& q, const Gather& gather) override { gather(s, shard(s), q); }
};

// offload_param cpu, and the base of nvme: a host shard reaches the device through a shard-sized
// device buffer (Category::params) that lives until its all-gather landed.
class HostParams : public ShardInMemory {
 public:
  HostParams(ZeroContext& cx, StorageTiers& tiers, DType working) : ShardInMemory(tiers), cx_(cx), working_(working) {}
  Allocator& shard_memory() const override { return *tiers_.host(); }
  Tensor new_shard(const ShardedUnit& s, DType dt) override {
    return held(s) = Tensor::empty({s.S}, dt, Category::params, shard_memory());
  }
  void fetch(ShardedUnit& s, std::deque<Pending>& q, const Gather& gather) override {
    to_device_and_gather(s, shard(s), q, gather);
  }

 protected:
  // Timed (EngineTimes::offload_fetch_s) and traced: the copy to the device, the issue of the gather.
  //
  // One rank: the gather is a copy on the device, so nothing has to happen at once. The copy
  // from the host starts now (on a GPU on its own transfer stream, Backend::copy_from_host_async)
  // and the gather is issued when it has landed, at the unit's acquire (or an earlier drain): the
  // transfer of a prefetched unit overlaps the compute queued meanwhile (ZeRO-Offload, Ren et al.
  // 2021, section 4.2). Several ranks: the copy, then the all-gather at once (its own overlap).
  void to_device_and_gather(ShardedUnit& u, const Tensor& host_shard, std::deque<Pending>& out, const Gather& gather) {
    const auto t0 = Tracer::Clock::now();
    TraceScope scope(cx_.active_tracer(), TraceTrack::compute, "shard to device " + u.unit->name(), "offload");
    Tensor dev = Tensor::empty({u.S}, working_, Category::params);
    if (cx_.N == 1) {
      WorkPtr copy = timed_wait(transfer_work(backend_of(dev).copy_from_host_async(dev, host_shard)),
                                &cx_.times.offload_fetch_s, cx_.active_tracer(),
                                "wait shard to device " + u.unit->name());
      ShardedUnit* up = &u;
      std::deque<Pending>* qp = &out;
      out.push_back({std::move(copy), [this, up, qp, dev, gather] { gather_from(*up, dev, *qp, gather); }});
    } else {
      dev.copy_(host_shard);
      gather_from(u, dev, out, gather);
    }
    cx_.times.offload_fetch_s += std::chrono::duration<double>(Tracer::Clock::now() - t0).count();
  }
  void gather_from(ShardedUnit& u, const Tensor& dev, std::deque<Pending>& out, const Gather& gather) {
    CommLabel label(cx_.group, u.unit->name());
    gather(u, dev, out);
    out.push_back({completed_work(), [dev] {}});  // the device buffer lives until the gather landed
  }
  ZeroContext& cx_;
  DType working_;
};

class NvmeParams final : public HostParams {
 public:
  NvmeParams(ZeroContext& cx, StorageTiers& tiers, DType working, const std::vector<Unit*>& units)
      : HostParams(cx, tiers, working), swap_(*tiers.param_swap()) {
    const OffloadConfig& op = cx.cfg.zero.offload_param;
    const int64_t esize = static_cast<int64_t>(dtype_size(working));
    for (Unit* u : units) {
      const int64_t S = u->params().padded_numel() / cx.N;
      if (S > op.buffer_size)
        ZT_THROW("config: zero_optimization.offload_param.buffer_size = ", op.buffer_size,
                 " elements is smaller than unit '", u->name(), "''s parameter shard of ", S,
                 " elements: raise it to at least ", S);
      Region r;
      r.bytes = round_up(S * esize, kAioAlignment);
      r.offset = swap_.reserve(r.bytes, Category::params);
      regions_.push_back(std::move(r));
    }
  }

  Tensor new_shard(const ShardedUnit& s, DType dt) override {
    const Region& r = regions_.at(s.index);
    Tensor buf = Tensor::zeros({r.bytes / static_cast<int64_t>(dtype_size(dt))}, dt, Category::params, shard_memory());
    return held(s) = range(buf, 0, s.S);
  }
  void park(const ShardedUnit& s) override {
    const Region& r = regions_.at(s.index);
    swap_.write_async(r.offset, held(s).raw(), r.bytes)->wait();
    held(s) = Tensor();  // the host buffer goes: the shard lives in the file
  }
  // The read is asynchronous: the copy and the gather are issued when it lands (its Pending's
  // completion, which appends them to the same queue).
  void fetch(ShardedUnit& s, std::deque<Pending>& q, const Gather& gather) override {
    Region& r = regions_.at(s.index);
    if (r.write) {  // the step's write of this shard must be on disk before it is read
      WorkPtr w = timed_wait(std::move(r.write), &cx_.times.offload_fetch_s, cx_.active_tracer(),
                             "wait nvme write " + s.unit->name());
      w->wait();
      r.staging = Tensor();
    }
    Tensor bounce = Tensor::empty({elements(r)}, working_, Category::params, *tiers_.host());
    WorkPtr rd = timed_wait(swap_.read_async(r.offset, bounce.raw(), r.bytes), &cx_.times.offload_fetch_s,
                            cx_.active_tracer(), "wait nvme read " + s.unit->name());
    ShardedUnit* sp = &s;
    std::deque<Pending>* qp = &q;
    q.push_back(
        {rd, [this, sp, qp, bounce, gather] { to_device_and_gather(*sp, range(bounce, 0, sp->S), *qp, gather); }});
  }
  // The new parameters are assembled in a host buffer and written once the unit is complete.
  void put(const ShardedUnit& s, int64_t a, const Tensor& master, bool last) override {
    Region& r = regions_.at(s.index);
    if (r.write) {  // last step's write of this unit must end before its buffer is refilled
      WorkPtr w = std::move(r.write);
      w->wait();
    }
    if (!r.staging.defined()) r.staging = Tensor::zeros({elements(r)}, working_, Category::params, *tiers_.host());
    put_rounded(range(r.staging, a, master.numel()), master, *tiers_.host());
    if (!last) return;
    r.write = swap_.write_async(r.offset, r.staging.raw(), r.bytes);
    // At most buffer_count units' buffers wait for their writes; the oldest is finished first.
    writes_.push_back(&r);
    while (static_cast<int64_t>(writes_.size()) > cx_.cfg.zero.offload_param.buffer_count) {
      finish_write(*writes_.front());
      writes_.pop_front();
    }
  }
  void finish_writes() override {
    for (Region* r : writes_) finish_write(*r);
    writes_.clear();
  }
  int64_t fetch_limit() const override { return cx_.cfg.zero.offload_param.buffer_count; }
  void wait(const ShardedUnit& s) override {
    Region& r = regions_.at(s.index);
    if (!r.write) return;
    try {
      r.write->wait();
    } catch (const std::exception&) {  // called from a destructor, which does not throw; the run failed already
    }
  }

 private:
  // One unit's swap-file region and what is in flight for it.
  struct Region {
    int64_t offset = 0, bytes = 0;  // the shard's bytes at [offset, offset + bytes) of the swap file
    Tensor staging;                 // the new parameters being assembled (step), then written
    WorkPtr write;                  // the write of staging in flight
  };
  int64_t elements(const Region& r) const { return r.bytes / static_cast<int64_t>(dtype_size(working_)); }
  static void finish_write(Region& r) {
    if (!r.write) return;
    WorkPtr w = std::move(r.write);
    w->wait();
    r.staging = Tensor();
  }
  SwapFile& swap_;
  std::vector<Region> regions_;  // by unit index; sized at construction, never moved
  std::deque<Region*> writes_;   // regions whose write is in flight
};

}  // namespace

MemoryTier param_shard_tier(const ZeroOptimization& z) {
  if (!z.offload_optimizer.enabled() || !z.offload_param.enabled()) return MemoryTier::device;
  return z.offload_param.nvme() ? MemoryTier::nvme : MemoryTier::host;
}

std::unique_ptr<ParamTier> make_param_tier(ZeroContext& cx, StorageTiers& tiers, DType working,
                                           const std::vector<Unit*>& units) {
  switch (param_shard_tier(cx.cfg.zero)) {
    case MemoryTier::device: return std::make_unique<DeviceParams>(tiers);
    case MemoryTier::host: return std::make_unique<HostParams>(cx, tiers, working);
    case MemoryTier::nvme: return std::make_unique<NvmeParams>(cx, tiers, working, units);
  }
  ZT_THROW("offload_param.device '", offload_device_name(cx.cfg.zero.offload_param.device), "'");
}

}  // namespace zt
