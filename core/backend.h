// defines: Backend (the table of kernels one device provides), Transfer, TransferPtr, BinaryOp, F32Matmul,
//          f32_matmul_name, parse_f32_matmul, GemmShape,
//          AdamWArgs, SgdArgs, backend(Device), backend_of(Tensor), register_backend, default_device,
//          set_default_device, DefaultDeviceScope.
//
// ggml's idea (docs/architecture.md, "Devices and backends"): a backend is a small table of
// functions. autograd/ops, Tensor's copies, and optim's shard updates check their arguments at
// the boundary, allocate outputs on the inputs' device (backend.allocator()), and call one entry
// of this table. Models and the ZeRO engine never name a device's kernels; they run wherever
// their tensors are.
//
// The entries themselves — every op, with its shapes and semantics — are listed once, in
// core/backend_ops.def: one row per op, from which Backend's pure virtual functions below and the
// overrides of CpuBackend and CudaBackend are declared. Adding an op is a row there plus its
// kernels in each backend.
//
//   cpu   core/cpu_backend.{h,cpp}: the kernels of core/kernels (OpenMP, OpenBLAS). Always there.
//   cuda  cuda/backend.{h,cpp}: cuda/kernels + cuBLASLt (cuda/gemm.h). Registered by
//         zt::cuda::register_cuda_backend() (CUDA builds only); backend(Device::cuda()) before
//         that, or in a build without CUDA, throws a zt::Error that says which.
//
// Conventions of every entry, unless it says otherwise:
// - Every tensor is on this backend's device, defined, and contiguous; shapes are checked by the
//   caller (autograd/ops checks them with messages for users), the backend only ZT_CHECKs.
// - Outputs are allocated by the caller and are written, not accumulated; they never overlap an
//   input. An output passed undefined (Tensor()) is not wanted and is not computed.
// - Compute dtypes: computes(dt) says which float dtypes the kernels take (cpu: f32, f64; cuda:
//   f32, bf16 with float32 math). Statistics saved for a backward (norm mean/rstd, softmax lse,
//   RoPE tables) have dtype stats_dtype(x.dtype()): float32 for bf16 inputs, else the input's.
// - Asynchronous on a device: an entry may return before its kernels ran (in stream order on
//   the device's current stream). An entry that returns a host value (all_finite,
//   sum_of_squares, copy_to_host) waits for it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/device.h"
#include "core/memory.h"
#include "core/rope.h"  // RopeParams
#include "core/tensor.h"

namespace zt {

enum class BinaryOp : uint8_t { add, sub, mul };

// How ZeRO++'s quantize rounds a block of values to b-bit codes (core/kernels/quantize.h has both
// formulas and their error bounds): symmetric = codes in [-(2^(b-1) - 1), 2^(b-1) - 1], scale
// max / (2^(b-1) - 1), half away from zero (ours; qwZ, and qgZ's "blocks" format); deepspeed =
// DeepSpeed's symmetric quantizer (csrc/quantization): codes in [-2^(b-1), 2^(b-1) - 1], scale
// max / 2^(b-1), half to even (qgZ's default "deepspeed" format).
enum class QuantScheme : uint8_t { symmetric, deepspeed };

// How float32 GEMMs (gemm, linear, linear_backward) may compute, with PyTorch's names
// (torch.set_float32_matmul_precision): highest = IEEE float32 products and sums (every backend's
// default); high = TF32 tensor cores (inputs rounded to 10 mantissa bits, ~1e-3 relative; float32
// accumulation), a GPU mode. bfloat16 GEMMs are not affected.
enum class F32Matmul : uint8_t { highest, high };
const char* f32_matmul_name(F32Matmul p);  // "highest", "high"
// "highest" or "high"; anything else is a zt::Error naming the text and the choices.
F32Matmul parse_f32_matmul(const std::string& text);

// C = alpha op(A) op(B) + beta C, row-major, `batch` independent products (batch >= 1).
// A is (M, K), or (K, M) when trans_a; B is (K, N), or (N, K) when trans_b; C is (M, N); leading
// dimensions are the natural row-major ones (K or M; N or K; N). Product p reads A at element
// p * stride_a, B at p * stride_b, writes C at p * stride_c (a stride of 0 reuses one matrix).
struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  double alpha = 1.0, beta = 0.0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// The hyperparameters and step of one AdamW update (optim/adamw.h's AdamWHyper and semantics:
// torch.optim.AdamW; Loshchilov & Hutter 2019, Algorithm 2). step is 1-based.
struct AdamWArgs {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
  int64_t step = 1;
  bool decay = true;  // weight decay applies to every element of this call
};

// The hyperparameters of one SGD update (optim/sgd.h's SgdHyper and semantics: torch.optim.SGD
// with dampening 0). momentum == 0: plain SGD, no momentum buffer; nesterov needs momentum > 0.
struct SgdArgs {
  double lr = 1e-2, momentum = 0, weight_decay = 0;
  bool nesterov = false;
  bool decay = true;  // weight decay applies to every element of this call
};

// A copy between host memory and a device, in flight (Backend::copy_from_host_async,
// copy_to_host_async). wait(): the host waits until it has landed; then its destination may be
// used anywhere and its source reused. The transfer holds its source until then (and, on a GPU,
// its device buffer: dropped without wait(), that buffer is reused only after the copy).
// A point in a device's work, recorded on one of its queues (a CUDA event), that a copy may be
// queued after without the host waiting for it: a collective's completion on its own stream
// (dist/process_group.h's Work::done_event), handed to copy_to_host_async. Made by the device's
// own components only; a backend refuses another's.
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
};
using DeviceEventPtr = std::shared_ptr<DeviceEvent>;

class Transfer {
 public:
  virtual ~Transfer() = default;
  virtual void wait() = 0;
};
using TransferPtr = std::shared_ptr<Transfer>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual Allocator& allocator() = 0;  // where outputs on this device come from
  // The host memory that offloaded model states of this device live in (zero/offload.h): the
  // "host" CPU allocator (core/memory.h); a GPU backend gives page-locked memory when `pinned`.
  virtual Allocator& host_allocator(bool pinned);
  virtual bool computes(DType dt) const = 0;
  DType stats_dtype(DType x) const { return x == DType::bf16 ? DType::f32 : x; }
  virtual void synchronize() = 0;  // the host waits for every queued kernel of this device

  // dst (this device) := src_host (a cpu tensor; same dtype, numel, both contiguous), started now
  // and landed by the returned Transfer's wait(), which must come before dst is used or src_host
  // written. On a GPU from page-locked memory: on the device's transfer stream (a copy engine of
  // its own), after the work queued so far on the compute stream (dst's block may still be in use
  // there), so that it overlaps the compute queued after this call (ZeRO-Offload's parameter
  // fetch, Ren et al. 2021, section 4.2). From pageable memory, and on the CPU: copy_from_host,
  // done on return.
  virtual TransferPtr copy_from_host_async(const Tensor& dst, const Tensor& src_host);
  // The other way: dst_host (a cpu tensor) := src (this device), started now and landed by
  // wait(), which must come before dst_host is read or src written. On a GPU into page-locked
  // memory: on the device's to-host transfer stream (a copy engine of its own, apart from the
  // to-device stream's), after the work queued so far on the compute stream (what writes src),
  // so that it overlaps the compute queued after this call (ZeRO-Offload's gradient copies, Ren
  // et al. 2021, section 4.2), and after `after` when given (src written by a collective on its
  // own stream). Into pageable memory, and on the CPU: copy_to_host, done on return (`after`
  // then waited for on the host first; the CPU has none and refuses one).
  virtual TransferPtr copy_to_host_async(const Tensor& dst_host, const Tensor& src, const DeviceEvent* after = nullptr);
  // Whether copy_to_host_async into dst_host runs beside the compute (a GPU into page-locked
  // memory) rather than being done on return (the CPU; pageable memory).
  virtual bool copies_to_host_async(const Tensor& /*dst_host*/) const { return false; }

  // The float32 GEMM precision of this device (F32Matmul above). The base accepts only highest:
  // high throws a zt::Error naming the device (a CPU has no TF32); CudaBackend takes both.
  virtual void set_f32_matmul_precision(F32Matmul p);
  F32Matmul f32_matmul_precision() const { return f32_matmul_; }

  // The kernel entries: one pure virtual function per row of core/backend_ops.def, where each op
  // is declared once with its shapes and semantics (read it there).
#define ZT_BACKEND_OP(ret, name, params, args) virtual ret name params = 0;
#include "core/backend_ops.def"

 protected:
  F32Matmul f32_matmul_ = F32Matmul::highest;
};

// The rows of the packed SwiGLU entries (swiglu_packed, swiglu_packed_backward): gu (..., 2F) and
// out (..., F) with the same leading dimensions -> N rows of F; a zt::Error naming `who` otherwise.
// One shape check for every backend.
struct PackedRows {
  int64_t N = 0, F = 0;
};
PackedRows swiglu_packed_rows(const char* who, const Tensor& out, const Tensor& gu);

// The backend of a device: the cpu one always; another once registered (see above), else a
// zt::Error naming the device and why it has none.
Backend& backend(const Device& d);
inline Backend& backend_of(const Tensor& t) { return backend(t.device()); }

// Installs the backend for every device of `type` (a function from the device index to its
// backend, called once per index; the backend lives until exit). A second registration of the
// same type replaces the first only for devices not yet created.
using BackendFactory = Backend* (*)(int index);
void register_backend(DeviceType type, BackendFactory factory);
bool backend_registered(DeviceType type);

// The device that Tensor::empty / zeros / full / from_vector allocate on when no allocator is
// named (torch.set_default_device): cpu unless set. zt-train --device cuda sets it once, before
// the model is built, so models, the ZeRO engine and the optimizer allocate there unchanged.
// Host-only buffers (token batches, checkpoint IO, staging) name cpu_allocator() explicitly.
Device default_device();
void set_default_device(const Device& d);  // its backend must exist (throws otherwise)

// Sets the default device for a scope, restores the previous one at the end.
class DefaultDeviceScope {
 public:
  explicit DefaultDeviceScope(const Device& d) : previous_(default_device()) { set_default_device(d); }
  ~DefaultDeviceScope() { set_default_device(previous_); }
  DefaultDeviceScope(const DefaultDeviceScope&) = delete;
  DefaultDeviceScope& operator=(const DefaultDeviceScope&) = delete;

 private:
  Device previous_;
};

}  // namespace zt
