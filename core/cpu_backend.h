// defines: CpuBackend (core/backend.h's table on the host), cpu_backend().
//
// The kernels of core/kernels behind the table: OpenMP across cores (static schedules, so every
// result is bitwise reproducible), GEMMs through OpenBLAS (core/kernels/gemm.h). Compute dtypes
// float32, float64 (for gradient checks) and bfloat16. bfloat16 runs the float32 kernels on
// float32 copies of the arguments and rounds each output once (core/cpu_bf16.h): the semantics of
// a GPU's bf16 kernels, the reference they are checked against, and slow. float16 is a storage
// dtype here (cast, accumulate_cast, all_finite, sum_of_squares take it; the kernels do not).
// attention() keeps the probabilities P (B, Hq, T, T) for the backward (core/kernels/attention.h).
#pragma once
#include "core/backend.h"

namespace zt {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu(); }
  Allocator& allocator() override { return cpu_allocator(); }
  bool computes(DType dt) const override { return dt == DType::f32 || dt == DType::f64 || dt == DType::bf16; }
  void synchronize() override {}

  // ---- cpu_backend.cpp: memory, casts, shard norms, AdamW ----
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

  // ---- cpu_backend_ops.cpp: elementwise ... RMSNorm ----
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

  // ---- cpu_backend_ops.cpp: GEMM, linear, RoPE, attention ----
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

};

CpuBackend& cpu_backend();  // the one instance (backend(Device::cpu()) returns it)

}  // namespace zt
