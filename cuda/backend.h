// defines: CudaBackend (core/backend.h's table on one GPU), CudaBackend::AttentionImpl,
//          register_cuda_backend.
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
//   cuda/backend.cpp            memory, copies, casts, norms of shards, AdamW, registration
//   cuda/backend_ops.cpp        elementwise, reductions, activations, softmax, embedding, loss,
//                               LayerNorm, RMSNorm
//   cuda/backend_attention.cpp  GEMM, linear, RoPE, attention (cuDNN's or ours: the rule is at
//                               the top of that file)
#pragma once
#include <cuda_runtime_api.h>

#include <initializer_list>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "core/backend.h"
#include "cuda/allocator.h"

namespace zt {

class CudaGemm;
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
  // float32 GEMMs (gemm, linear, linear_backward): highest = CUBLAS_COMPUTE_32F, high = TF32.
  void set_f32_matmul_precision(F32Matmul p) override { f32_matmul_ = p; }

  void set_attention_impl(AttentionImpl impl) { attention_impl_ = impl; }
  AttentionImpl attention_impl() const { return attention_impl_; }
  // What attention() would run for q (B, T, Hq, D) of dtype dt with Hkv kv heads (aligned
  // pointers assumed): "cudnn 9.19.0", or "own: <why not cuDNN>" (forced, not built, or cuDNN's
  // reason). Throws like attention() when impl is cudnn and cuDNN cannot run it.
  std::string attention_impl_name(DType dt, int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D);
  // Whether this build has cuDNN's attention (CMake found cuDNN: ZT_HAVE_CUDNN).
  static bool cudnn_built();

  cudaStream_t stream() const { return alloc_.stream(); }
  CudaAllocator& cuda_alloc() { return alloc_; }
  CudaGemm& gemm_engine();  // created on first use (cuBLASLt handle, workspace)

  // ---- backend.cpp ----
  void copy(const Tensor& dst, const Tensor& src) override;
  void copy_from_host(const Tensor& dst, const Tensor& src_host) override;
  void copy_to_host(const Tensor& dst_host, const Tensor& src) override;
  void fill(const Tensor& dst, double value) override;
  void accumulate(const Tensor& dst, const Tensor& src, double alpha) override;
  void cast(const Tensor& dst, const Tensor& src, double factor) override;
  void accumulate_cast(const Tensor& dst, const Tensor& src) override;
  bool all_finite(const Tensor& t) override;
  double sum_of_squares(const Tensor& t) override;
  void scale_(const Tensor& t, double factor) override;
  void adamw_step(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamWArgs& h,
                  const Tensor& out_lowp) override;

  // ---- backend_ops.cpp ----
  void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) override;
  void scale(const Tensor& out, const Tensor& x, double s) override;
  void mul_backward(const Tensor& da, const Tensor& db, const Tensor& dout, const Tensor& a,
                    const Tensor& b) override;
  void sum_all(const Tensor& out, const Tensor& x, double factor) override;
  void fill_scaled(const Tensor& dx, const Tensor& g, double factor) override;
  void sum_last(const Tensor& out, const Tensor& x) override;
  void sum_last_backward(const Tensor& dx, const Tensor& dout) override;
  void gelu(const Tensor& out, const Tensor& x) override;
  void gelu_backward(const Tensor& dx, const Tensor& dout, const Tensor& x) override;
  void silu(const Tensor& out, const Tensor& x) override;
  void silu_backward(const Tensor& dx, const Tensor& dout, const Tensor& x) override;
  void swiglu(const Tensor& out, const Tensor& gate, const Tensor& up) override;
  void swiglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dout, const Tensor& gate,
                       const Tensor& up) override;
  void softmax(const Tensor& out, const Tensor& x) override;
  void softmax_backward(const Tensor& dx, const Tensor& dout, const Tensor& out) override;
  void embedding(const Tensor& out, const Tensor& ids, const Tensor& table) override;
  void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids) override;
  void cross_entropy(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& targets,
                     int64_t valid_vocab, int64_t count) override;
  void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets,
                              const Tensor& dloss, int64_t valid_vocab, int64_t count) override;
  void layernorm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& w,
                 const Tensor& b, double eps) override;
  void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& x,
                          const Tensor& w, const Tensor& mean, const Tensor& rstd) override;
  void rmsnorm(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w, double eps) override;
  void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x, const Tensor& w,
                        const Tensor& rstd) override;

  // ---- backend_attention.cpp ----
  void gemm(const GemmShape& g, const Tensor& A, const Tensor& B, const Tensor& C) override;
  void linear(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b) override;
  void linear_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy, const Tensor& x,
                       const Tensor& w, bool accumulate) override;
  void rope_tables(const Tensor& cos_t, const Tensor& sin_t, double theta) override;
  void rope(const Tensor& out, const Tensor& x, const Tensor& cos_t, const Tensor& sin_t, bool inverse) override;
  Tensor attention(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                   bool keep_for_backward) override;
  void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout, const Tensor& q,
                          const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& saved) override;

  // A device scratch buffer of at least `bytes` (Category::workspace), owned by the caller.
  Tensor scratch(size_t bytes);

 private:
  int index_;
  CudaAllocator& alloc_;
  std::unique_ptr<CudaGemm> gemm_;
  std::once_flag gemm_once_;
  // attention: the choice, cuDNN's plans (created on first use), shapes already reported
  AttentionImpl attention_impl_ = AttentionImpl::automatic;
  std::unique_ptr<CudnnAttention, CudnnAttentionDeleter> cudnn_attn_;
  std::set<std::string> fallback_reported_;
  // true: cuDNN runs this call; false with *why: our kernel (automatic); throws when forced
  bool use_cudnn(DType dt, int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D,
                 std::initializer_list<const void*> ptrs, const char* op, std::string* why);
};

// Registers CudaBackend for DeviceType::cuda (core/backend.h). Call once, early, in programs
// that may use a GPU (zt-train --device cuda, the GPU tests); without a usable device the
// registration still succeeds and backend(Device::cuda()) then throws with
// cuda_runtime_summary()'s reason.
void register_cuda_backend();

}  // namespace zt
