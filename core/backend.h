// defines: Backend (the table of kernels one device provides), BinaryOp, F32Matmul,
//          f32_matmul_name, parse_f32_matmul, GemmShape,
//          AdamWArgs, backend(Device), backend_of(Tensor), register_backend, default_device,
//          set_default_device, DefaultDeviceScope.
//
// ggml's idea (ARCHITECTURE.md, "Devices and backends"): a backend is a small table of
// functions. autograd/ops, Tensor's copies, and optim's shard updates check their arguments at
// the boundary, allocate outputs on the inputs' device (backend.allocator()), and call one entry
// of this table. Models and the ZeRO engine never name a device's kernels; they run wherever
// their tensors are.
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
#include "core/tensor.h"

namespace zt {

enum class BinaryOp : uint8_t { add, sub, mul };

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

  // The float32 GEMM precision of this device (F32Matmul above). The base accepts only highest:
  // high throws a zt::Error naming the device (a CPU has no TF32); CudaBackend takes both.
  virtual void set_f32_matmul_precision(F32Matmul p);
  F32Matmul f32_matmul_precision() const { return f32_matmul_; }

  // ---- memory: copies, fills, casts ----------------------------------------------------------
  // dst = src, converted to dst's dtype (any dtypes, exact where the value fits, bf16/f16 rounded
  // to nearest even); same shape; dst and src may have any strides (views).
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;
  // Between the host and this device: same shape, dtype and byte count, both contiguous; src_host
  // and dst_host are cpu tensors. Both return after the copy ended: the host buffer may be reused
  // (or read) at once.
  virtual void copy_from_host(const Tensor& dst, const Tensor& src_host) = 0;
  virtual void copy_to_host(const Tensor& dst_host, const Tensor& src) = 0;
  virtual void fill(const Tensor& dst, double value) = 0;  // any strides
  // dst += alpha * src, same shape and dtype (a compute dtype); any strides.
  virtual void accumulate(const Tensor& dst, const Tensor& src, double alpha) = 0;
  // dst = round(float(src) * factor) between f32, bf16, f16 (core/kernels/cast.h's cast_).
  virtual void cast(const Tensor& dst, const Tensor& src, double factor) = 0;
  // dst = round_to(dst's dtype, float(dst) + float(src)) (core/kernels/cast.h's accumulate_cast_):
  // dst f32, bf16 or f16; src f32 or dst's dtype (a unit's float32 gradient into a 2-byte buffer).
  virtual void accumulate_cast(const Tensor& dst, const Tensor& src) = 0;
  virtual bool all_finite(const Tensor& t) = 0;  // f32, f64, bf16, f16
  // sum of x^2 in float64, over fixed 2^14-element chunks combined in order (optim/clip.h), so a
  // shard's sum is reproducible; f32, f64, bf16, f16.
  virtual double sum_of_squares(const Tensor& t) = 0;
  virtual void scale_(const Tensor& t, double factor) = 0;  // t *= factor, in place

  // ---- elementwise, same shape and dtype ----------------------------------------------------
  virtual void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) = 0;
  virtual void scale(const Tensor& out, const Tensor& x, double s) = 0;  // out = s x
  // da = dout * b, db = dout * a (either may be undefined, not both)
  virtual void mul_backward(const Tensor& da, const Tensor& db, const Tensor& dout, const Tensor& a,
                            const Tensor& b) = 0;

  // ---- reductions -----------------------------------------------------------------------------
  // out () = factor * sum(x), the sum in float64 in the CPU kernel's fixed order.
  virtual void sum_all(const Tensor& out, const Tensor& x, double factor) = 0;
  // dx (any shape) = factor * g, g of shape () and dx's dtype — the backward of sum/mean (g stays
  // on the device).
  virtual void fill_scaled(const Tensor& dx, const Tensor& g, double factor) = 0;
  virtual void sum_last(const Tensor& out /* (R) */, const Tensor& x /* (R, N) */) = 0;
  virtual void sum_last_backward(const Tensor& dx /* (R, N) */, const Tensor& dout /* (R) */) = 0;

  // ---- matrix products --------------------------------------------------------------------
  virtual void gemm(const GemmShape& g, const Tensor& A, const Tensor& B, const Tensor& C) = 0;
  // nn.Linear: y (M, out) = x (M, in) w^T (w is (out, in)) + b (out; undefined: no bias).
  virtual void linear(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b) = 0;
  // dx (M, in) = dy w (written); dw (out, in) = dy^T x and db (out) = column sums of dy, each
  // written, or added to what dw / db hold when accumulate (a parameter's gradient buffer).
  // Any of dx, dw, db may be undefined.
  virtual void linear_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy,
                               const Tensor& x, const Tensor& w, bool accumulate) = 0;

  // ---- activations (core/kernels/activation.h's formulas) ------------------------------------
  virtual void gelu(const Tensor& out, const Tensor& x) = 0;  // tanh approximation
  virtual void gelu_backward(const Tensor& dx, const Tensor& dout, const Tensor& x) = 0;
  virtual void silu(const Tensor& out, const Tensor& x) = 0;
  virtual void silu_backward(const Tensor& dx, const Tensor& dout, const Tensor& x) = 0;
  virtual void swiglu(const Tensor& out, const Tensor& gate, const Tensor& up) = 0;
  virtual void swiglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dout, const Tensor& gate,
                               const Tensor& up) = 0;
  // softmax over the last dimension: x, out (R, N)
  virtual void softmax(const Tensor& out, const Tensor& x) = 0;
  virtual void softmax_backward(const Tensor& dx, const Tensor& dout, const Tensor& out) = 0;

  // ---- embedding and loss -------------------------------------------------------------------
  // out (n, C) = table (V, C) rows at ids (n, int32, already checked to lie in [0, V)).
  virtual void embedding(const Tensor& out, const Tensor& ids, const Tensor& table) = 0;
  // dtable (V, C) += the rows of dout (n, C) at ids, in a deterministic order (accumulates).
  virtual void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids) = 0;
  // Fused softmax cross-entropy over the first `valid_vocab` of V logits: logits (N, V), targets
  // (N) int32 in [0, valid_vocab) or -1 (ignored), already checked. Writes lse (N) (stats dtype)
  // and loss () = sum over non-ignored rows of (lse - logit[target]) / count (count = number of
  // non-ignored rows, counted by the caller; 0 gives NaN, as PyTorch's mean over nothing).
  virtual void cross_entropy(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& targets,
                             int64_t valid_vocab, int64_t count) = 0;
  // dlogits (N, V) = dloss () / count * (softmax(logits) - onehot(target)) on valid columns, 0 on
  // padded columns [valid_vocab, V) and on ignored rows. dloss stays on the device.
  virtual void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                                      const Tensor& targets, const Tensor& dloss, int64_t valid_vocab,
                                      int64_t count) = 0;

  // ---- normalization over the last dim C of x (N, C) -----------------------------------------
  // mean, rstd (N) in stats_dtype; b may be undefined (no bias).
  virtual void layernorm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                         const Tensor& w, const Tensor& b, double eps) = 0;
  // dx written; dw, db (C) written (not accumulated); any of the three may be undefined.
  virtual void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout,
                                  const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd) = 0;
  virtual void rmsnorm(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w, double eps) = 0;
  virtual void rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                                const Tensor& w, const Tensor& rstd) = 0;

  // ---- attention ------------------------------------------------------------------------------
  // RoPE (core/kernels/rope.h): cos_t, sin_t (T, D/2) in stats_dtype; x, out (B, T, H, D);
  // inverse = true rotates by the negative angle (the backward).
  virtual void rope_tables(const Tensor& cos_t, const Tensor& sin_t, double theta) = 0;
  virtual void rope(const Tensor& out, const Tensor& x, const Tensor& cos_t, const Tensor& sin_t, bool inverse) = 0;
  // Causal grouped-query attention, scale 1/sqrt(D): q (B, T, Hq, D), k, v (B, T, Hkv, D),
  // out (B, T, Hq, D). Returns what the backward needs besides q, k, v, out (the CPU keeps the
  // probabilities (B, Hq, T, T); a flash-style kernel keeps the row log-sum-exp (B, Hq, T)), or
  // an undefined tensor when keep_for_backward is false.
  virtual Tensor attention(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                           bool keep_for_backward) = 0;
  // dq, dk, dv written (all three defined); `saved` is what attention() returned.
  virtual void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                                  const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                  const Tensor& saved) = 0;

  // ---- optimizer (flat shards) --------------------------------------------------------------
  // One AdamW update of n = master.numel() elements: master, grad, m, v contiguous, one dtype
  // (f32, or f64 on the cpu). out_lowp: undefined, or n elements of bf16 / f16 that receive the
  // rounded new master (the 2-byte parameter shard of mixed precision).
  virtual void adamw_step(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
                          const AdamWArgs& h, const Tensor& out_lowp) = 0;

 protected:
  F32Matmul f32_matmul_ = F32Matmul::highest;
};

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
