// defines: StorageTiers, ParamTier, make_param_tier — every place a rank's bytes can live, and
//          where stage 3's parameter shards live (docs/offload.md).
//
//   tier     allocator                       accounting                     holds
//   device   default_allocator()             its MemoryStats                everything, without offload
//   host     backend.host_allocator(pinned)  its MemoryStats                offload: optimizer state,
//                                                                           gradient shards, param shards;
//                                                                           cpu_checkpointing: activation
//                                                                           checkpoints
//   nvme     the swap files (zero/aio.h)     bytes reserved per category    offload to nvme
//
// StorageTiers owns the host allocator's choice and this rank's swap files (the optimizer's and,
// with another path, the parameters'); it reports and traces the three tiers' bytes. On the meta
// device (a dry run) the swap files are dry (zero/aio.h's SwapMode): counted alike, no file, no IO.
//
// ParamTier: where the engine keeps a unit's S-element parameter shard in the working dtype, and
// how it reaches the device for the all-gather (stage 3's acquire, prefetched ahead):
//   device  the shard is on the device; the all-gather reads it where it is (no fetch)
//   host    offload_param cpu: the shard in host memory; fetch = copy to a shard-sized device
//           buffer, then the all-gather
//   nvme    offload_param nvme: the shard in its swap-file region; fetch = read (async) into a
//           host bounce buffer, then as host. At most buffer_count reads and writes in flight.
// The tier holds each unit's shard (ParamTier::shard; at stages 0-2 a view of the stage's full
// parameters, given with hold()). put() is where the offloaded optimizer's new parameters land
// (any stage with offload_optimizer).
#pragma once
#include <deque>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "zero/footprint.h"
#include "zero/sharded_unit.h"

namespace zt {

class SwapFile;

class StorageTiers {
 public:
  // Without offload: the device only. With offload_optimizer: the host tier, and the swap files
  // the config names (an offload_param path equal to the optimizer's shares its file). The
  // offload combinations are checked first (a zt::Error naming the key, before any file exists).
  StorageTiers(ZeroContext& cx, Device device);
  ~StorageTiers();
  Allocator& device() const;
  Allocator* host() const { return host_; }          // null without offload
  // activation_checkpointing.cpu_checkpointing's host memory (zero/activation_offload.h): the
  // offload's host allocator when there is one (one host tier), else the backend's pinned one.
  Allocator& activation_host() const;
  // The host tier the memory report and the trace show: host(), else activation_host() with
  // cpu_checkpointing, else null.
  Allocator* host_tier() const;
  SwapFile* optimizer_swap() const { return opt_swap_.get(); }
  SwapFile* param_swap() const { return param_swap_; }
  void allocate_swap_files();  // every region reserved: take the disk space (a full disk fails now)
  MemoryStats nvme_stats() const;
  void set_tracer(Tracer* t);
  void trace_memory(Tracer* t) const;  // one sample of each tier's counters

 private:
  ZeroContext& cx_;
  Device device_;
  Allocator* host_ = nullptr;
  std::unique_ptr<SwapFile> opt_swap_, own_param_swap_;  // nvme: this rank's swap files
  SwapFile* param_swap_ = nullptr;                        // opt_swap_ when the paths agree
};

class ParamTier {
 public:
  virtual ~ParamTier() = default;
  // Stage 3: a new S-element shard of dtype dt for unit s, in this tier, held and returned for
  // filling (nvme: a host buffer the size of the file region, written out by park()).
  virtual Tensor new_shard(const ShardedUnit& s, DType dt) = 0;
  // Stages 0-2: the shard is `view`, elements [lo, lo + S) of the stage's full parameters.
  void hold(const ShardedUnit& s, const Tensor& view);
  // This rank's working parameters of unit s (undefined while parked on nvme).
  const Tensor& shard(const ShardedUnit& s) const { return shards_.at(s.index); }
  // Where this tier makes a shard's bytes: the device's allocator, or the host tier's (offload:
  // nvme shards are staged there before they are parked). The engine builds a stage-3 shard's
  // initial values there too, so an offloaded shard never touches the device.
  virtual Allocator& shard_memory() const = 0;
  // After the shard was filled at setup: nvme writes it to its region and drops the buffer.
  virtual void park(const ShardedUnit&) {}
  // Whether the shard lives off the device (host, nvme) and must be fetched before its
  // all-gather; false: the all-gather reads shard() where it is.
  virtual bool offloaded() const { return true; }
  // Makes a device copy of the shard and calls gather(s, device_shard, q), which issues the
  // all-gather; what is asynchronous (the nvme read) is queued in q.
  using Gather = std::function<void(ShardedUnit&, const Tensor&, std::deque<Pending>&)>;
  virtual void fetch(ShardedUnit& s, std::deque<Pending>& q, const Gather& gather) = 0;
  // [a, a + master.numel()) of unit s's shard has new float32 parameters `master` (host): rounded
  // into the working shard; `last`: the unit's last piece.
  virtual void put(const ShardedUnit& s, int64_t a, const Tensor& master, bool last) = 0;
  virtual void finish_writes() {}  // every write of put() on disk, its buffers freed
  // How many fetches may be in flight at once (nvme: buffer_count reads); -1: no limit.
  virtual int64_t fetch_limit() const { return -1; }
  virtual void wait(const ShardedUnit&) {}  // nothing of s's left in flight (the engine's destructor)

 protected:
  Tensor& held(const ShardedUnit& s);  // the slot of unit s (made on first use)
  std::vector<Tensor> shards_;         // by unit index
};

// Where the parameter shard lives, from the config (zero/footprint.h's answer; make_param_tier
// makes that tier): the device, the host (offload_param cpu) or the swap file (nvme).
MemoryTier param_shard_tier(const ZeroOptimization& z);

// The parameter tier the config asks for: offload_param.device none / cpu / nvme. nvme reserves
// one swap-file region per unit of `units` now (before the optimizer's regions).
std::unique_ptr<ParamTier> make_param_tier(ZeroContext& cx, StorageTiers& tiers, DType working,
                                           const std::vector<Unit*>& units);

}  // namespace zt
