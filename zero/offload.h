// defines: OffloadedShard, OffloadedAdamW — the optimizer state of ZeRO-Offload (Ren et al. 2021,
//          "ZeRO-Offload: Democratizing Billion-Scale Model Training", section 4) in host memory,
//          or of ZeRO-Infinity (Rajbhandari et al. 2021, section 5) in an NVMe swap file, and its
//          AdamW step on the CPU in sub-groups.
//
// What lives where, for one rank's shard of unit i (n_i elements, float32):
//
//              master (the fp32 parameters), exp_avg (m), exp_avg_sq (v)     gradient
//   cpu        host memory, 3 x 4 n_i bytes (Category::optim)                host, n_i of the
//   nvme       the swap file, one region per sub-group (Category::optim);    working dtype
//              host memory holds buffer_count sub-group buffers only         (Category::grads)
//
// The device keeps no optimizer state at all: its `optim` bytes are 0. The engine copies each
// unit's reduced gradient shard into grad(i) as soon as it is reduced; step() walks the
// sub-groups — the shards cut into pieces of at most sub_group_size elements, unit by unit — and
// for each one: (nvme) waits for its read, issues the read of the next sub-group (read-ahead),
// makes the float32 gradient, runs the fused AdamW (core/kernels/adamw.h, SIMD + OpenMP inside
// the sub-group), hands the new master to `publish` (the engine rounds it into the working
// parameters, on the device or on the host / NVMe with parameter offload) and (nvme) writes the
// sub-group back. Only the sub-groups in the buffers are in host memory at once.
//
// The arithmetic is the device optimizer's, through the same two functions: the float32 gradient
// from PrecisionPolicy::float32_gradient (zero/precision.h) and each decay segment's update from
// adamw_apply (optim/adamw.h), the cpu backend's adamw_step. On a CPU "device" an offloaded run therefore equals the
// run without offload bit for bit (tests/mpi/test_offload.cpp checks 1e-6 and measures 0).
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "dist/process_group.h"  // WorkPtr
#include "optim/adamw.h"
#include "optim/flat_shard.h"  // defines: FlatParam, DecaySegment
#include "zero/engine_config.h"

namespace zt {

class SwapFile;

struct OffloadedShard {
  std::string name;              // the unit's name (checkpoint keys, messages)
  int64_t lo = 0, n = 0;         // this rank's shard: flat elements [lo, lo + n)
  std::vector<FlatParam> layout;  // the unit's whole flat layout (decay flags)
};

class OffloadedAdamW {
 public:
  // grad_dtype: the working dtype of the gradients (f32, bf16 or f16). `swap` is the
  // rank's swap file when where.nvme() (its regions are reserved here; the caller
  // calls swap->allocate() once everything is reserved, then init() for every unit), else null.
  OffloadedAdamW(std::vector<OffloadedShard> units, const AdamWHyper& h, const OffloadConfig& where,
                 int64_t sub_group_size, DType grad_dtype, Allocator& host, SwapFile* swap);
  ~OffloadedAdamW();
  OffloadedAdamW(const OffloadedAdamW&) = delete;
  OffloadedAdamW& operator=(const OffloadedAdamW&) = delete;

  // Unit i's initial state: master = master0 (its n_i float32 parameters, any device; copied),
  // m = v = 0 (nvme: written to the swap file).
  void init(int i, const Tensor& master0);

  int num_units() const { return static_cast<int>(units_.size()); }
  const OffloadedShard& unit(int i) const { return units_.at(i); }
  // Unit i's host gradient shard (n_i elements of grad_dtype): the engine fills it.
  const Tensor& grad(int i) const { return grads_.at(i); }

  // publish(i, a, master, last): [a, a + master.numel()) of unit i's shard has new float32
  // parameters `master` (host); `last` says it is the unit's last sub-group.
  using Publish = std::function<void(int, int64_t, const Tensor&, bool)>;
  // One AdamW step of every sub-group at `lr`. The float32 gradient is grad(i) times `factor`
  // (the fp16 unscale and the clipping coefficient): float32 gradients are scaled in place when
  // factor != 1, 2-byte ones converted with it.
  void step(double lr, double factor, const Publish& publish);
  // Calls publish for every sub-group with the current master (after a checkpoint load).
  void publish_all(const Publish& publish);

  int64_t step_count() const { return step_; }
  void set_step_count(int64_t n) { step_ = n; }
  double lr() const { return h_.lr; }

  // Unit i's state as a checkpoint names it: {"param", master}, {"exp_avg", m}, {"exp_avg_sq",
  // v}, n_i float32 elements each. cpu: views of the state itself (a load writes into them).
  // nvme: host copies read from the swap file now; a load fills them and calls store().
  std::vector<std::pair<std::string, Tensor>> state(int i);
  // nvme: writes a loaded state (as returned by state(i), filled) back to the swap file; cpu: no-op.
  void store(int i, const std::vector<std::pair<std::string, Tensor>>& loaded);

  int64_t num_sub_groups() const { return static_cast<int64_t>(pieces_.size()); }

 private:
  struct Piece {            // one sub-group: [a, a + len) of unit i's shard
    int unit = 0;
    int64_t a = 0, len = 0;
    int64_t offset = 0;     // nvme: its region in the swap file: master | m | v, len floats each
    int64_t bytes = 0;      // nvme: the region's size (3 * 4 * len rounded up to the IO alignment)
  };
  // Views of piece p's master, m, v: into the unit's host tensors (cpu) or into buffer b (nvme).
  std::array<Tensor, 3> views(const Piece& p, int b) const;
  void update(const Piece& p, const std::array<Tensor, 3>& mmv, double factor);
  WorkPtr read(const Piece& p, int b);
  WorkPtr write(const Piece& p, int b);
  void wait_all();
  void put_unit(int i, const std::array<Tensor, 3>& src);

  std::vector<OffloadedShard> units_;
  std::vector<std::vector<DecaySegment>> segments_;  // per unit, shard-local
  AdamWHyper h_;
  int64_t step_ = 0;
  DType grad_dtype_;
  Allocator& host_;
  SwapFile* swap_ = nullptr;
  std::vector<Piece> pieces_;
  std::vector<Tensor> grads_;                 // per unit, host
  std::vector<std::array<Tensor, 3>> state_;  // cpu: per unit master, m, v (host)
  std::vector<Tensor> buffers_;               // nvme: buffer_count sub-group buffers (host)
  std::vector<WorkPtr> reads_, writes_;  // nvme: per buffer, in flight
};

}  // namespace zt
