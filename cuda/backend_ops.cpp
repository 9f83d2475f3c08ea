// defines: CudaBackend (binary, scale, scale_by, mul_backward, sum_all, fill_scaled and 25 more);
//          file-local: Need, Rows, rows_of, ptr, ce_rows, device_float
//
// CudaBackend (cuda/backend.h): the elementwise, reduction, activation (with the fused bias + GELU),
// softmax, embedding, loss and normalization (with the fused residual + norms) entries of the
// table (core/backend.h), each a thin adapter that ZT_CHECKs its
// tensors (this device, a compute dtype, contiguous, consistent sizes: cheap checks only — the
// user-facing checks are autograd/ops') and launches kernels of cuda/kernels on stream().
//
// Row ops (softmax, norms, sum_last, cross-entropy) take the last dimension as the row: x of any
// rank >= 1 is (R, N) with N = x.size(-1) and R the product of the other dimensions.
// Statistics (norm mean / rstd, cross-entropy lse) are float32 (stats_dtype of f32 and bf16).
// Workspaces (norm backward partials, sum_all partials, cross-entropy row losses) come from
// scratch(): freed when the entry returns, which is safe without waiting because the caching
// allocator hands a block freed on stream() back only to later work on stream() (cuda/backend.h).
#include <cstdint>

#include "cuda/backend.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/kernels/activation.h"
#include "cuda/kernels/bias_grad.h"  // bias_grad_workspace_bytes (bias_gelu_backward's db partials)
#include "cuda/kernels/cast.h"
#include "cuda/kernels/elementwise.h"
#include "cuda/kernels/embedding_rope.h"
#include "cuda/kernels/norm.h"
#include "cuda/kernels/softmax_ce.h"

namespace zt {

namespace {

// The checks of one entry: `op` names it in messages.
struct Need {
  const CudaBackend& b;
  const char* op;

  // t defined, on this device, contiguous, of dtype dt.
  void on(const Tensor& t, const char* name, DType dt) const {
    ZT_CHECK(t.defined(), "cuda ", op, ": ", name, " is undefined");
    ZT_CHECK(t.device() == b.device(), "cuda ", op, ": ", name, " ", t.str(), " is on ", t.device().str(),
             ", expected ", b.device().str());
    ZT_CHECK(t.is_contiguous(), "cuda ", op, ": ", name, " ", t.str(), " is not contiguous");
    ZT_CHECK(t.dtype() == dt, "cuda ", op, ": ", name, " ", t.str(), " has dtype ", dtype_name(t.dtype()),
             ", expected ", dtype_name(dt));
  }
  // The input that fixes the entry's dtype: also a compute dtype of this backend.
  void compute(const Tensor& t, const char* name) const {
    ZT_CHECK(t.defined(), "cuda ", op, ": ", name, " is undefined");
    ZT_CHECK(b.computes(t.dtype()), "cuda ", op, ": ", name, " ", t.str(), " has dtype ", dtype_name(t.dtype()),
             ", expected float32 or bfloat16");
    on(t, name, t.dtype());
  }
  // A norm's per-channel and per-row tensors, shared by its six entries: w (and b when defined)
  // (N) in x's dtype; mean (when defined) and rstd (R) in the stats dtype.
  void norm_params(const Tensor& x, int64_t R, int64_t N, const Tensor& w, const Tensor& bias, const Tensor& mean,
                   const Tensor& rstd) const {
    const DType stats = b.stats_dtype(x.dtype());
    on(w, "w", x.dtype());
    numel(w, "w", N);
    if (bias.defined()) on(bias, "b", x.dtype()), numel(bias, "b", N);
    if (mean.defined()) on(mean, "mean", stats), numel(mean, "mean", R);
    on(rstd, "rstd", stats);
    numel(rstd, "rstd", R);
  }
  // on(), plus the same shape as ref.
  void like(const Tensor& t, const char* name, const Tensor& ref) const {
    on(t, name, ref.dtype());
    ZT_CHECK(t.shape() == ref.shape(), "cuda ", op, ": ", name, " ", t.str(), ", expected shape ",
             shape_str(ref.shape()));
  }
  void numel(const Tensor& t, const char* name, int64_t n) const {
    ZT_CHECK(t.numel() == n, "cuda ", op, ": ", name, " ", t.str(), " has ", t.numel(), " elements, expected ", n);
  }
  // A norm backward's dres (when defined): like dx, which it needs, and apart from it.
  void residual_grad(const Tensor& dx, const Tensor& dres) const {
    if (!dres.defined()) return;
    ZT_CHECK(dx.defined(), "cuda ", op, ": dres ", dres.str(), " without dx");
    like(dres, "dres", dx);
    const auto* a = static_cast<const char*>(dx.raw());
    const auto* c = static_cast<const char*>(dres.raw());
    ZT_CHECK(a + dx.nbytes() <= c || c + dres.nbytes() <= a, "cuda ", op, ": dres ", dres.str(), " overlaps dx ",
             dx.str());
  }
  // One float32 or bfloat16 element on this device (a loss, or a gradient that stays there).
  void scalar(const Tensor& t, const char* name) const {
    ZT_CHECK(t.defined() && t.numel() == 1, "cuda ", op, ": ", name, " ", t.str(), ", expected one element");
    ZT_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::bf16, "cuda ", op, ": ", name, " ", t.str(),
             ", expected float32 or bfloat16");
    on(t, name, t.dtype());
  }
};

// x as (R, N) rows over its last dimension.
struct Rows {
  int64_t R = 0, N = 0;
};
Rows rows_of(const Tensor& x, const char* op) {
  ZT_CHECK(x.dim() >= 1, "cuda ", op, ": ", x.str(), " needs at least one dimension");
  Rows r;
  r.N = x.size(-1);
  r.R = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) r.R *= x.shape()[d];
  return r;
}

void* ptr(const Tensor& t) { return t.defined() ? t.raw() : nullptr; }

// The cross-entropy entries' common arguments: logits (R, N) of a compute dtype, targets (R) int32,
// 1 <= valid_vocab <= N, count >= 0.
Rows ce_rows(const Need& n, const Tensor& logits, const Tensor& targets, int64_t valid_vocab, int64_t count) {
  n.compute(logits, "logits");
  const Rows r = rows_of(logits, n.op);
  n.on(targets, "targets", DType::i32);
  n.numel(targets, "targets", r.R);
  ZT_CHECK(valid_vocab >= 1 && valid_vocab <= r.N && count >= 0, "cuda ", n.op, ": valid_vocab ", valid_vocab,
           ", count ", count, " for logits ", logits.str());
  return r;
}

// A () tensor of float32 or bfloat16 on the device as one device float (a gradient that stays
// there): its own pointer, or a float32 copy in `staged` (bf16 -> f32 is exact).
const float* device_float(CudaBackend& be, const Need& n, const Tensor& t, const char* name, Tensor& staged) {
  n.scalar(t, name);
  if (t.dtype() == DType::f32) return t.data<float>();
  staged = be.scratch(sizeof(float));
  cuda_kernels::cast(DType::f32, staged.raw(), t.dtype(), t.raw(), 1, 1.0f, be.stream());
  return static_cast<const float*>(staged.raw());
}

}  // namespace

// ---- elementwise ----------------------------------------------------------------------------

void CudaBackend::binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const Need n{*this, "binary"};
  n.compute(a, "a");
  n.like(b, "b", a);
  n.like(out, "out", a);
  DeviceGuard g(index_);
  const cuda_kernels::EwOp k = op == BinaryOp::add ? cuda_kernels::EwOp::add
                               : op == BinaryOp::sub ? cuda_kernels::EwOp::sub
                                                     : cuda_kernels::EwOp::mul;
  cuda_kernels::binary(k, a.dtype(), out.raw(), a.raw(), b.raw(), a.numel(), stream());
}

void CudaBackend::scale(const Tensor& out, const Tensor& x, double s) {
  const Need n{*this, "scale"};
  n.compute(x, "x");
  n.like(out, "out", x);
  DeviceGuard g(index_);
  cuda_kernels::scale(x.dtype(), out.raw(), x.raw(), s, x.numel(), stream());
}

void CudaBackend::scale_by(const Tensor& out, const Tensor& x, const Tensor& s) {
  const Need n{*this, "scale_by"};
  n.compute(x, "x");
  n.like(out, "out", x);
  DeviceGuard g(index_);
  Tensor staged;
  const float* f = device_float(*this, n, s, "s", staged);
  cuda_kernels::scale_by(x.dtype(), out.raw(), x.raw(), f, x.numel(), stream());
}

void CudaBackend::mul_backward(const Tensor& da, const Tensor& db, const Tensor& dout, const Tensor& a,
                               const Tensor& b) {
  const Need n{*this, "mul_backward"};
  ZT_CHECK(da.defined() || db.defined(), "cuda mul_backward: da and db are both undefined");
  n.compute(dout, "dout");
  n.like(a, "a", dout);
  n.like(b, "b", dout);
  if (da.defined()) n.like(da, "da", dout);
  if (db.defined()) n.like(db, "db", dout);
  DeviceGuard g(index_);
  cuda_kernels::mul_backward(dout.dtype(), ptr(da), ptr(db), dout.raw(), a.raw(), b.raw(), dout.numel(), stream());
}

// ---- reductions -----------------------------------------------------------------------------

void CudaBackend::sum_all(const Tensor& out, const Tensor& x, double factor) {
  const Need n{*this, "sum_all"};
  n.compute(x, "x");
  n.on(out, "out", x.dtype());
  n.numel(out, "out", 1);
  DeviceGuard g(index_);
  Tensor ws = scratch(static_cast<size_t>(cuda_kernels::sum_all_workspace_bytes(x.numel())));
  cuda_kernels::sum_all(x.dtype(), out.raw(), x.raw(), x.numel(), factor, ws.raw(), stream());
}

void CudaBackend::fill_scaled(const Tensor& dx, const Tensor& g, double factor) {
  const Need n{*this, "fill_scaled"};
  n.compute(g, "g");
  n.numel(g, "g", 1);
  n.on(dx, "dx", g.dtype());
  DeviceGuard guard(index_);
  cuda_kernels::fill_scaled(g.dtype(), dx.raw(), g.raw(), factor, dx.numel(), stream());
}

void CudaBackend::sum_last(const Tensor& out, const Tensor& x) {
  const Need n{*this, "sum_last"};
  n.compute(x, "x");
  const Rows r = rows_of(x, "sum_last");
  n.on(out, "out", x.dtype());
  n.numel(out, "out", r.R);
  DeviceGuard g(index_);
  cuda_kernels::sum_last_forward(x.dtype(), out.raw(), x.raw(), r.R, r.N, stream());
}

void CudaBackend::sum_last_backward(const Tensor& dx, const Tensor& dout) {
  const Need n{*this, "sum_last_backward"};
  n.compute(dout, "dout");
  n.on(dx, "dx", dout.dtype());
  const Rows r = rows_of(dx, "sum_last_backward");
  n.numel(dout, "dout", r.R);
  DeviceGuard g(index_);
  cuda_kernels::sum_last_backward(dx.dtype(), dx.raw(), dout.raw(), r.R, r.N, stream());
}

// ---- activations ----------------------------------------------------------------------------

void CudaBackend::gelu(const Tensor& out, const Tensor& x) {
  const Need n{*this, "gelu"};
  n.compute(x, "x");
  n.like(out, "out", x);
  DeviceGuard g(index_);
  cuda_kernels::gelu_forward(x.dtype(), out.raw(), x.raw(), x.numel(), stream());
}

void CudaBackend::gelu_backward(const Tensor& dx, const Tensor& dout, const Tensor& x) {
  const Need n{*this, "gelu_backward"};
  n.compute(x, "x");
  n.like(dout, "dout", x);
  n.like(dx, "dx", x);
  DeviceGuard g(index_);
  cuda_kernels::gelu_backward(x.dtype(), dx.raw(), dout.raw(), x.raw(), x.numel(), stream());
}

void CudaBackend::bias_gelu(const Tensor& out, const Tensor& x, const Tensor& b) {
  const Need n{*this, "bias_gelu"};
  n.compute(x, "x");
  const Rows r = rows_of(x, "bias_gelu");
  n.like(out, "out", x);
  n.on(b, "b", x.dtype());
  n.numel(b, "b", r.N);
  DeviceGuard g(index_);
  cuda_kernels::bias_gelu_forward(x.dtype(), out.raw(), x.raw(), b.raw(), r.R, r.N, stream());
}

void CudaBackend::bias_gelu_backward(const Tensor& dx, const Tensor& db, const Tensor& dout, const Tensor& x,
                                     const Tensor& b, bool accumulate) {
  const Need n{*this, "bias_gelu_backward"};
  ZT_CHECK(dx.defined() || db.defined(), "cuda bias_gelu_backward: dx and db are both undefined");
  n.compute(x, "x");
  const Rows r = rows_of(x, "bias_gelu_backward");
  n.like(dout, "dout", x);
  n.on(b, "b", x.dtype());
  n.numel(b, "b", r.N);
  if (dx.defined()) n.like(dx, "dx", x);
  if (db.defined()) n.on(db, "db", x.dtype()), n.numel(db, "db", r.N);
  DeviceGuard g(index_);
  Tensor ws;  // db's chunk partials (float32), freed on return (stream-ordered reuse)
  if (db.defined() && r.R > 0)
    ws = scratch(static_cast<size_t>(cuda_kernels::bias_grad_workspace_bytes(r.R, r.N)));
  cuda_kernels::bias_gelu_backward(x.dtype(), ptr(dx), ptr(db), dout.raw(), x.raw(), b.raw(), r.R, r.N, accumulate,
                                   ptr(ws), stream());
}

void CudaBackend::silu(const Tensor& out, const Tensor& x) {
  const Need n{*this, "silu"};
  n.compute(x, "x");
  n.like(out, "out", x);
  DeviceGuard g(index_);
  cuda_kernels::silu_forward(x.dtype(), out.raw(), x.raw(), x.numel(), stream());
}

void CudaBackend::silu_backward(const Tensor& dx, const Tensor& dout, const Tensor& x) {
  const Need n{*this, "silu_backward"};
  n.compute(x, "x");
  n.like(dout, "dout", x);
  n.like(dx, "dx", x);
  DeviceGuard g(index_);
  cuda_kernels::silu_backward(x.dtype(), dx.raw(), dout.raw(), x.raw(), x.numel(), stream());
}

void CudaBackend::swiglu(const Tensor& out, const Tensor& gate, const Tensor& up) {
  const Need n{*this, "swiglu"};
  n.compute(gate, "gate");
  n.like(up, "up", gate);
  n.like(out, "out", gate);
  DeviceGuard g(index_);
  cuda_kernels::swiglu_forward(gate.dtype(), out.raw(), gate.raw(), up.raw(), gate.numel(), stream());
}

void CudaBackend::swiglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dout, const Tensor& gate,
                                  const Tensor& up) {
  const Need n{*this, "swiglu_backward"};
  ZT_CHECK(dgate.defined() || dup.defined(), "cuda swiglu_backward: dgate and dup are both undefined");
  n.compute(gate, "gate");
  n.like(up, "up", gate);
  n.like(dout, "dout", gate);
  if (dgate.defined()) n.like(dgate, "dgate", gate);
  if (dup.defined()) n.like(dup, "dup", gate);
  DeviceGuard g(index_);
  cuda_kernels::swiglu_backward(gate.dtype(), ptr(dgate), ptr(dup), dout.raw(), gate.raw(), up.raw(), gate.numel(),
                                stream());
}

void CudaBackend::swiglu_packed(const Tensor& out, const Tensor& gu) {
  const Need n{*this, "swiglu_packed"};
  n.compute(gu, "gu");
  n.on(out, "out", gu.dtype());
  const auto [N, F] = swiglu_packed_rows("cuda swiglu_packed", out, gu);
  DeviceGuard g(index_);
  cuda_kernels::swiglu_packed_forward(gu.dtype(), out.raw(), gu.raw(), N, F, stream());
}

void CudaBackend::swiglu_packed_backward(const Tensor& dgu, const Tensor& dout, const Tensor& gu) {
  const Need n{*this, "swiglu_packed_backward"};
  n.compute(gu, "gu");
  n.like(dgu, "dgu", gu);
  n.on(dout, "dout", gu.dtype());
  const auto [N, F] = swiglu_packed_rows("cuda swiglu_packed_backward", dout, gu);
  DeviceGuard g(index_);
  cuda_kernels::swiglu_packed_backward(gu.dtype(), dgu.raw(), dout.raw(), gu.raw(), N, F, stream());
}

void CudaBackend::softmax(const Tensor& out, const Tensor& x) {
  const Need n{*this, "softmax"};
  n.compute(x, "x");
  n.like(out, "out", x);
  const Rows r = rows_of(x, "softmax");
  DeviceGuard g(index_);
  cuda_kernels::softmax_forward(x.dtype(), out.raw(), x.raw(), r.R, r.N, stream());
}

void CudaBackend::softmax_backward(const Tensor& dx, const Tensor& dout, const Tensor& out) {
  const Need n{*this, "softmax_backward"};
  n.compute(out, "out");
  n.like(dout, "dout", out);
  n.like(dx, "dx", out);
  const Rows r = rows_of(out, "softmax_backward");
  DeviceGuard g(index_);
  cuda_kernels::softmax_backward(out.dtype(), dx.raw(), dout.raw(), out.raw(), r.R, r.N, stream());
}

// ---- embedding and loss ---------------------------------------------------------------------

void CudaBackend::embedding(const Tensor& out, const Tensor& ids, const Tensor& table) {
  const Need n{*this, "embedding"};
  n.compute(table, "table");
  ZT_CHECK(table.dim() == 2, "cuda embedding: table ", table.str(), ", expected (V, C)");
  n.on(ids, "ids", DType::i32);
  n.on(out, "out", table.dtype());
  const int64_t V = table.size(0), C = table.size(1);
  n.numel(out, "out", ids.numel() * C);
  DeviceGuard g(index_);
  cuda_kernels::embedding_forward(table.dtype(), out.raw(), ids.data<int32_t>(), table.raw(), ids.numel(), V, C,
                                  stream());
}

void CudaBackend::embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids) {
  const Need n{*this, "embedding_backward"};
  n.compute(dtable, "dtable");
  ZT_CHECK(dtable.dim() == 2, "cuda embedding_backward: dtable ", dtable.str(), ", expected (V, C)");
  n.on(ids, "ids", DType::i32);
  n.on(dout, "dout", dtable.dtype());
  const int64_t V = dtable.size(0), C = dtable.size(1);
  n.numel(dout, "dout", ids.numel() * C);
  DeviceGuard g(index_);
  // the sort's scratch (sorted ids, token indices, CUB's): workspace, freed on return (stream-ordered)
  const int64_t ws_bytes = cuda_kernels::embedding_backward_workspace_bytes(ids.numel());
  Tensor ws = Tensor::empty({(ws_bytes + 3) / 4}, DType::f32, Category::workspace, allocator());
  cuda_kernels::embedding_backward(dtable.dtype(), dtable.raw(), dout.raw(), ids.data<int32_t>(), ids.numel(), V, C,
                                   ws_bytes > 0 ? ws.raw() : nullptr, stream());
}

void CudaBackend::cross_entropy(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& targets,
                                int64_t valid_vocab, int64_t count, int64_t v0) {
  const Need n{*this, "cross_entropy"};
  const Rows r = ce_rows(n, logits, targets, valid_vocab, count);
  n.on(lse, "lse", stats_dtype(logits.dtype()));
  n.numel(lse, "lse", r.R);
  n.scalar(loss, "loss");
  DeviceGuard g(index_);
  // [mean (1 float) | row losses (R floats)]
  Tensor ws = scratch(sizeof(float) * static_cast<size_t>(r.R + 1));
  float* mean = static_cast<float*>(ws.raw());
  float* mean_out = loss.dtype() == DType::f32 ? loss.data<float>() : mean;
  cuda_kernels::cross_entropy_forward(logits.dtype(), mean_out, mean + 1, lse.data<float>(), logits.raw(),
                                      targets.data<int32_t>(), r.R, r.N, valid_vocab, count, v0, stream());
  if (loss.dtype() != DType::f32)
    cuda_kernels::cast(loss.dtype(), loss.raw(), DType::f32, mean, 1, 1.0f, stream());
}

void CudaBackend::cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                                         const Tensor& targets, const Tensor& dloss, int64_t valid_vocab, int64_t count,
                                         int64_t v0) {
  const Need n{*this, "cross_entropy_backward"};
  const Rows r = ce_rows(n, logits, targets, valid_vocab, count);
  n.like(dlogits, "dlogits", logits);
  n.on(lse, "lse", stats_dtype(logits.dtype()));
  n.numel(lse, "lse", r.R);
  DeviceGuard g(index_);
  Tensor staged;
  const float* d = device_float(*this, n, dloss, "dloss", staged);
  cuda_kernels::cross_entropy_backward(logits.dtype(), dlogits.raw(), logits.raw(), lse.data<float>(),
                                       targets.data<int32_t>(), d, count, r.R, r.N, valid_vocab, v0, stream());
}

void CudaBackend::cross_entropy_and_grad(const Tensor& loss, const Tensor& logits, const Tensor& targets,
                                         int64_t valid_vocab, int64_t count) {
  const Need n{*this, "cross_entropy_and_grad"};
  const Rows r = ce_rows(n, logits, targets, valid_vocab, count);
  n.scalar(loss, "loss");
  DeviceGuard g(index_);
  Tensor ws = scratch(sizeof(float) * static_cast<size_t>(r.R + 1));  // [mean | row losses]
  float* mean = static_cast<float*>(ws.raw());
  float* mean_out = loss.dtype() == DType::f32 ? loss.data<float>() : mean;
  cuda_kernels::cross_entropy_and_grad(logits.dtype(), mean_out, mean + 1, logits.raw(), targets.data<int32_t>(), r.R,
                                       r.N, valid_vocab, count, stream());
  if (loss.dtype() != DType::f32) cuda_kernels::cast(loss.dtype(), loss.raw(), DType::f32, mean, 1, 1.0f, stream());
}

// ---- normalization ------------------------------------------------------------------------

void CudaBackend::layernorm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                            const Tensor& w, const Tensor& b, double eps) {
  const Need n{*this, "layernorm"};
  n.compute(x, "x");
  const Rows r = rows_of(x, "layernorm");
  n.like(out, "out", x);
  n.norm_params(x, r.R, r.N, w, b, mean, rstd);
  DeviceGuard g(index_);
  cuda_kernels::layernorm_forward(x.dtype(), out.raw(), mean.data<float>(), rstd.data<float>(), x.raw(), w.raw(),
                                  ptr(b), r.R, r.N, static_cast<float>(eps), stream());
}

void CudaBackend::layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout,
                                     const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                                     const Tensor& dres) {
  const Need n{*this, "layernorm_backward"};
  n.compute(x, "x");
  const Rows r = rows_of(x, "layernorm_backward");
  n.like(dout, "dout", x);
  n.norm_params(x, r.R, r.N, w, Tensor(), mean, rstd);
  if (dx.defined()) n.like(dx, "dx", x);
  n.residual_grad(dx, dres);
  if (dw.defined()) n.on(dw, "dw", x.dtype()), n.numel(dw, "dw", r.N);
  if (db.defined()) n.on(db, "db", x.dtype()), n.numel(db, "db", r.N);
  if (!dx.defined() && !dw.defined() && !db.defined()) return;
  DeviceGuard g(index_);
  Tensor ws;
  if (dw.defined() || db.defined())
    ws = scratch(static_cast<size_t>(cuda_kernels::norm_backward_workspace_bytes(r.R, r.N)));
  cuda_kernels::layernorm_backward(x.dtype(), ptr(dx), ptr(dw), ptr(db), dout.raw(), x.raw(), w.raw(),
                                   mean.data<float>(), rstd.data<float>(), ptr(dres), r.R, r.N, ptr(ws), stream());
}

void CudaBackend::residual_layernorm(const Tensor& h, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                     const Tensor& x, const Tensor& y, const Tensor& w, const Tensor& b, double eps) {
  const Need n{*this, "residual_layernorm"};
  n.compute(x, "x");
  const Rows r = rows_of(x, "residual_layernorm");
  n.like(y, "y", x);
  n.like(h, "h", x);
  n.like(out, "out", x);
  n.norm_params(x, r.R, r.N, w, b, mean, rstd);
  DeviceGuard g(index_);
  cuda_kernels::residual_layernorm_forward(x.dtype(), h.raw(), out.raw(), mean.data<float>(), rstd.data<float>(),
                                           x.raw(), y.raw(), w.raw(), ptr(b), r.R, r.N, static_cast<float>(eps),
                                           stream());
}

void CudaBackend::residual_rmsnorm(const Tensor& h, const Tensor& out, const Tensor& rstd, const Tensor& x,
                                   const Tensor& y, const Tensor& w, double eps) {
  const Need n{*this, "residual_rmsnorm"};
  n.compute(x, "x");
  const Rows r = rows_of(x, "residual_rmsnorm");
  n.like(y, "y", x);
  n.like(h, "h", x);
  n.like(out, "out", x);
  n.norm_params(x, r.R, r.N, w, Tensor(), Tensor(), rstd);
  DeviceGuard g(index_);
  cuda_kernels::residual_rmsnorm_forward(x.dtype(), h.raw(), out.raw(), rstd.data<float>(), x.raw(), y.raw(), w.raw(),
                                         r.R, r.N, static_cast<float>(eps), stream());
}

void CudaBackend::rmsnorm(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w, double eps) {
  const Need n{*this, "rmsnorm"};
  n.compute(x, "x");
  const Rows r = rows_of(x, "rmsnorm");
  n.like(out, "out", x);
  n.norm_params(x, r.R, r.N, w, Tensor(), Tensor(), rstd);
  DeviceGuard g(index_);
  cuda_kernels::rmsnorm_forward(x.dtype(), out.raw(), rstd.data<float>(), x.raw(), w.raw(), r.R, r.N,
                                static_cast<float>(eps), stream());
}

void CudaBackend::rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                                   const Tensor& w, const Tensor& rstd, const Tensor& dres) {
  const Need n{*this, "rmsnorm_backward"};
  n.compute(x, "x");
  const Rows r = rows_of(x, "rmsnorm_backward");
  n.like(dout, "dout", x);
  n.norm_params(x, r.R, r.N, w, Tensor(), Tensor(), rstd);
  if (dx.defined()) n.like(dx, "dx", x);
  n.residual_grad(dx, dres);
  if (dw.defined()) n.on(dw, "dw", x.dtype()), n.numel(dw, "dw", r.N);
  if (!dx.defined() && !dw.defined()) return;
  DeviceGuard g(index_);
  Tensor ws;
  if (dw.defined()) ws = scratch(static_cast<size_t>(cuda_kernels::norm_backward_workspace_bytes(r.R, r.N)));
  cuda_kernels::rmsnorm_backward(x.dtype(), ptr(dx), ptr(dw), dout.raw(), x.raw(), w.raw(), rstd.data<float>(),
                                 ptr(dres), r.R, r.N, ptr(ws), stream());
}

}  // namespace zt
