// defines: CudaBackend (core/backend.h's table on one GPU), CudaBackend::AttentionImpl,
//          CudaDeviceEvent, register_cuda_backend.
//
// Every entry launches kernels of cuda/kernels (or cuBLASLt through cuda/gemm.h) on the
// backend's compute stream, stream(): the stream that cuda_allocator(index) allocates on, so a
// buffer freed by the host is reused only after the kernels queued before the free (the caching
// allocator's stream rule, cuda/allocator.h). Entries return before the kernels ran, except
// those that return a host value (all_finite, sum_of_squares) and copy_to_host, which wait.
//
// Compute dtypes: float32 and bfloat16 (float32 math; statistics in float32). float64 is not a
// GPU compute dtype here: gradient checks in float64 run on the CPU, and every GPU op is checked
// against its CPU op (tests/gpu/).
//
// The implementation is split by concern:
//   cuda/backend.cpp            memory, copies, casts, norms of shards, AdamW, SGD, registration
//   cuda/backend_ops.cpp        elementwise, reductions, activations (bias + GELU), softmax,
//                               embedding, loss, LayerNorm, RMSNorm (residual + norm)
//   cuda/backend_attention.cpp  GEMM, linear, RoPE, attention (cuDNN's or ours: the rule is at
//                               the top of that file)
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "core/backend.h"
#include "cuda/allocator.h"
#include "cuda/stream.h"

namespace zt {

class CudaGemm;

// A recorded CudaEvent as core's DeviceEvent (core/backend.h): work of another component (a
// collective on the NCCL stream) that CudaBackend's copies may be queued after.
struct CudaDeviceEvent final : DeviceEvent {
  CudaEvent event;
};
class CudnnAttention;  // cuda/cudnn_attention.h (builds with cuDNN only)
struct CudnnAttentionDeleter {
  void operator()(CudnnAttention* p) const;  // backend_attention.cpp
};

class CudaBackend final : public Backend {
 public:
  // Which attention runs (backend_attention.cpp's top comment has the rule): automatic = cuDNN's
  // SDPA where it supports the dtype and shape (bfloat16, D % 8 == 0, D <= 128, an engine that
  // finalizes, 16-byte aligned pointers), else our kernel, saying so once per shape on stderr;
  // cudnn = cuDNN or a zt::Error naming why not; own = always cuda/kernels/attention.h.
  enum class AttentionImpl : uint8_t { automatic, cudnn, own };

  explicit CudaBackend(int index);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::cuda(index_); }
  Allocator& allocator() override { return alloc_; }
  Allocator& host_allocator(bool pinned) override;  // pinned: pinned_allocator() (page-locked, async copies)
  bool computes(DType dt) const override { return dt == DType::f32 || dt == DType::bf16; }
  void synchronize() override;
  // From page-locked memory: on transfer_stream(), after an event of the compute stream; the
  // Transfer's wait() synchronizes on an event recorded after the copy (cuda/backend.cpp).
  TransferPtr copy_from_host_async(const Tensor& dst, const Tensor& src_host) override;
  // Into page-locked memory: the same on to_host_stream().
  TransferPtr copy_to_host_async(const Tensor& dst_host, const Tensor& src,
                                 const DeviceEvent* after = nullptr) override;
  bool copies_to_host_async(const Tensor& dst_host) const override;  // into page-locked memory
  // float32 GEMMs (gemm, linear, linear_backward): highest = CUBLAS_COMPUTE_32F, high = TF32.
  void set_f32_matmul_precision(F32Matmul p) override { f32_matmul_ = p; }

  // linear_gelu (GPT-2's MLP forward): true (default) runs the bias and the GELU in cuBLASLt's
  // GELU_AUX_BIAS epilogue; false runs the bias-epilogue GEMM and then our GELU kernel (one more
  // pass over the hidden activations) — the comparison bench/train_step --gelu-epilogue off
  // measures. Widths the epilogue cannot take (hidden % 8 != 0: cuBLASLt's aux ld) run our kernel.
  void set_gelu_epilogue(bool on) { gelu_epilogue_ = on; }
  bool gelu_epilogue() const { return gelu_epilogue_; }

  void set_attention_impl(AttentionImpl impl) { attention_impl_ = impl; }
  AttentionImpl attention_impl() const { return attention_impl_; }
  // What attention() would run for q (B, T, Hq, D) of dtype dt with Hkv kv heads (aligned
  // pointers assumed): "cudnn 9.19.0", or "own: <why not cuDNN>" (forced, not built, or cuDNN's
  // reason). Throws like attention() when impl is cudnn and cuDNN cannot run it.
  std::string attention_impl_name(DType dt, int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D);
  // Whether this build has cuDNN's attention (CMake found cuDNN: ZT_HAVE_CUDNN).
  static bool cudnn_built();

  cudaStream_t stream() const { return alloc_.stream(); }
  // The host-to-device and device-to-host transfer streams (their own, non-blocking; created on
  // first use).
  cudaStream_t transfer_stream();
  cudaStream_t to_host_stream();
  CudaAllocator& cuda_alloc() { return alloc_; }
  CudaGemm& gemm_engine();  // created on first use (cuBLASLt handle, workspace)

  // The host's waits for the compute stream since construction: synchronize(), copy_to_host,
  // copy_from_host and the entries that return a host value (all_finite, sum_of_squares); how
  // many and how long. Read around a phase of a step (bench/train_step.cpp): the host time the
  // phase takes outside these waits is the time the host spent queueing work, and where that is
  // close to the phase's own time the GPU waited for launches (the case CUDA graphs are for).
  struct HostWaits {
    int64_t count = 0;
    double seconds = 0;
  };
  HostWaits host_waits() const;

  // Every op of core/backend_ops.def, split by concern over backend.cpp, backend_ops.cpp and
  // backend_attention.cpp (the top of this file says which holds which).
#define ZT_BACKEND_OP(ret, name, params, args) ret name params override;
#include "core/backend_ops.def"

  // A device scratch buffer of at least `bytes` (Category::workspace), owned by the caller.
  Tensor scratch(size_t bytes);

 private:
  int index_;
  CudaAllocator& alloc_;
  std::unique_ptr<CudaGemm> gemm_;
  std::once_flag gemm_once_;
  std::atomic<int64_t> waits_{0}, waited_ns_{0};  // host_waits()
  void wait_for_stream();                         // cudaStreamSynchronize(stream()), counted
  CudaStream transfer_, to_host_;
  std::once_flag transfer_once_, to_host_once_;
  // host <-> device on stream t after the compute stream's queued work (both transfers above)
  // (and after `after`, a CudaDeviceEvent, when given)
  TransferPtr copy_async(cudaStream_t t, const Tensor& host, const Tensor& device, cudaMemcpyKind kind,
                         const CudaEvent* after = nullptr);
  // attention: the choice, cuDNN's plans (created on first use), shapes already reported
  bool gelu_epilogue_ = true;
  AttentionImpl attention_impl_ = AttentionImpl::automatic;
  std::unique_ptr<CudnnAttention, CudnnAttentionDeleter> cudnn_attn_;
  std::set<std::string> fallback_reported_;
  // true: cuDNN runs this call; false with *why: our kernel (automatic); throws when forced
  // (qkv_row: CudnnAttnShape::qkv_row, 0 for contiguous q, k, v)
  bool use_cudnn(DType dt, int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D, int64_t qkv_row,
                 std::initializer_list<const void*> ptrs, const char* op, std::string* why);
};

// Registers CudaBackend for DeviceType::cuda (core/backend.h). Call once, early, in programs
// that may use a GPU (zt-train --device cuda, the GPU tests); without a usable device the
// registration still succeeds and backend(Device::cuda()) then throws with
// cuda_runtime_summary()'s reason.
void register_cuda_backend();

}  // namespace zt
