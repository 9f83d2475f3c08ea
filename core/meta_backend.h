// defines: OpClass, kNumOpClasses, op_class_name, ReplayBuffers, MetaOpRecord, MetaOpObserver, MetaAllocator,
//          MetaBackend, meta_backend — the meta device (PyTorch's meta device, and
//          its FakeTensor): shapes and dtypes without bytes. Every op is checked and no arithmetic
//          is done; every allocation is counted by category exactly as the real device counts it,
//          and none is held.
//
// What it is for: a dry run of the real training step (train/dry_run.h). A model built on the
// meta device and trained by the real ZeRO engine over a simulated process group
// (dist/simulated_process_group.h) allocates, frees, gathers, reduces and offloads exactly as a
// run with bytes does, so the allocators' peaks are the run's peaks — for a model of any size,
// on any rank count, in milliseconds per step — without a second, hand-written description of
// what the engine keeps.
//
// Two allocators, each with its own counters: the device's (allocator()) and the host tier's
// (host_allocator(): offloaded model states, activation checkpoints in host memory). Both are on
// the meta device, as on the CPU target both are the cpu: the host tier is the device's own
// memory there, counted apart (core/memory.h's host_allocator()), and every path of the engine
// that asks "is this the device's memory?" answers as it does on the CPU.
//
// The target: the meta device reproduces the CPU backend's allocations (core/cpu_backend.h), the
// one backend every run here can be measured on: its compute dtypes (f32, f64, bf16), its kernels'
// scratch (declared beside the kernels: core/kernels/attention.h's attention_forward_scratch,
// core/kernels/norm.h's norm_backward_chunks; the per-op test tests/test_meta_backend.cpp holds each
// row's peak against the CPU's measured one), bfloat16's float32 stand-ins (core/cpu_bf16.h), and
// exact byte counts (the CPU allocator does not round). A GPU target (the caching allocator's
// size classes, cuDNN's workspaces) is not modelled yet.
//
// Answers of the rows that return a value, fixed and documented: all_finite is true,
// sum_of_squares is 0 (a finite norm: clipping leaves the gradients alone), attention returns a
// saved tensor of the real shape; copy_to_host into real host memory writes zeros (so a loss read
// with item() is 0). Nothing else is written anywhere.
//
// Addresses: each allocation is a distinct range of address space reserved with no access
// (mmap PROT_NONE, MAP_NORESERVE): pointers compare and overlap-check as real ones do, no
// memory is committed, and host code that touches meta bytes faults at once instead of reading
// garbage.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include "core/backend.h"

namespace zt {

// ---- What a step simulator sees of each op (train/step_time.h) ----

// The kind of work a row does: the classes of the cost model (a profile's rates are per class).
enum class OpClass : uint8_t { gemm, attention, norm, loss, elementwise, optimizer, transfer };
inline constexpr int kNumOpClasses = 7;
const char* op_class_name(OpClass c);  // "gemm", ...

// The real buffers a replay of several rows shares (MetaOpRecord::prepare), one per meta allocation
// (its address, its bytes, the dtype it is viewed as): a row that reads what an earlier row of the
// same replay wrote reads the same real bytes, as the step does, and finds them where the step finds
// them (in the cache, when they were written just before). The meta allocations' addresses are
// reused when freed ranges are handed out again, as the real heap reuses its freed blocks.
// A buffer is a whole allocation (a view into a flat buffer of parameters makes all of it), so
// the buffers together are capped: an allocation that would take them past max_bytes is not
// shared, and each row using it gets tensors of its own, as without sharing.
struct ReplayBuffers {
  std::map<std::tuple<const void*, size_t, DType>, Tensor> by_allocation;
  int64_t max_bytes = INT64_MAX;  // zt-profile caps it at its replay window
  int64_t bytes = 0;              // held in by_allocation
};

// One row as the meta device ran it: the outermost call only (a composite row's inner rows and
// bfloat16's stand-in run are part of it, not reported apart).
struct MetaOpRecord {
  const char* row = "";  // the row of core/backend_ops.def ("linear_backward")
  OpClass cls = OpClass::elementwise;
  // The row's arithmetic (a multiply-add is 2): 2 M N K per GEMM; causal attention 2 B H T^2 D
  // forward (QK^T and PV, half the square), 5 B H T^2 D backward (five products); the other rows
  // a few operations per element of their largest tensor (they are bound by memory, not by this).
  double flops = 0;
  int64_t bytes = 0;  // the bytes of its tensor arguments, each read or written once
  // The row runs on the host tier's tensors (every tensor argument allocated from
  // host_allocator(): the offloaded optimizer's step on the CPU), not on the device's: a GPU
  // profile costs it at the host's rates (train/device_profile.h's host_classes). Its key starts
  // with "host ". A row whose tensors are in both tiers (copy_from_host, copy_to_host, and on the
  // CPU target, where the host tier is the device's own memory, the plain copies and casts the
  // engine writes into it: the offload's gradients and parameters) is neither: its class is
  // transfer, costed at the link between the tiers (a GPU's PCIe).
  bool host = false;
  // The row's signature: its name, every tensor's dtype and shape, every scalar that changes the
  // work. Two records with the same key do the same work.
  std::string key;
  // The same row on a real backend: makes contiguous tensors of the same shapes and dtypes (filled
  // as core/meta_op_record.h's replay_fill_value says, or with values like a step's for the rows
  // whose time depends on them: make_varied) on `be`'s device and returns a call that runs
  // the row on them with the same scalars, as often as it is called (zt-profile times the real
  // kernels on the shapes of a real step). With `shared`, a contiguous tensor argument is a view of
  // its meta allocation's buffer there (made and filled at its first use), so the rows prepared
  // with one ReplayBuffers pass their data along as the step does (core/meta_op_record.h's make
  // says which rows keep buffers of their own); without, every argument is a buffer of its own.
  std::function<std::function<void()>(Backend& be, ReplayBuffers* shared)> prepare;
};

class MetaOpObserver {
 public:
  virtual ~MetaOpObserver() = default;
  // Called before the row runs, on the thread that runs it: the training thread, and the worker
  // that copies activation checkpoints to the host (an observer that keeps state locks it).
  virtual void on_op(const MetaOpRecord& op) = 0;
  // Called for every block either allocator hands out (the device's and the host tier's), on the
  // thread that asks for it. What the real allocator would do with it (a fresh mapping the kernel
  // fills at first touch: core/memory.h's cpu_maps) is the observer's to cost.
  virtual void on_alloc(size_t /*bytes*/, Category /*c*/) {}
};

// Counts like the allocator it stands for (core/memory.h's Allocator: per category, peaks, the
// cap), holds nothing. Zero bytes give nullptr, as CpuAllocator does.
class MetaAllocator final : public Allocator {
 public:
  MetaAllocator(const char* name, Device d) : name_(name), device_(d) {}
  void* allocate(size_t bytes, Category c) override;
  void deallocate(void* p, size_t bytes, Category c) override;
  const char* name() const override { return name_; }
  Device device() const override { return device_; }
  void set_observer(MetaOpObserver* o) { observer_ = o; }

 private:
  const char* name_;
  Device device_;
  MetaOpObserver* observer_ = nullptr;
};

class MetaBackend final : public Backend {
 public:
  MetaBackend();
  Device device() const override { return Device::meta(); }
  Allocator& allocator() override { return alloc_; }
  // The host tier's counters (pinned or not: one allocator, as on the CPU).
  Allocator& host_allocator(bool /*pinned*/) override { return host_alloc_; }
  bool computes(DType dt) const override { return dt == DType::f32 || dt == DType::f64 || dt == DType::bf16; }
  void synchronize() override {}

  // The OpenMP threads of the rank being simulated: the CPU kernels' scratch is per thread
  // (attention). Default: this process's omp_get_max_threads().
  void set_threads(int threads);
  int threads() const { return threads_; }
  // Told of every row this backend runs (null: nobody; the dry run's step simulator sets one).
  void set_observer(MetaOpObserver* o) {
    observer_ = o;
    alloc_.set_observer(o);
    host_alloc_.set_observer(o);
  }
  MetaOpObserver* observer() const { return observer_; }

#define ZT_BACKEND_OP(ret, name, params, args) ret name params override;
#include "core/backend_ops.def"

 private:
  int threads_;
  MetaOpObserver* observer_ = nullptr;
  MetaAllocator alloc_, host_alloc_;
};

// The meta backend (backend(Device::meta()) returns it).
MetaBackend& meta_backend();

}  // namespace zt
