// defines: CpuBackend (binary, scale, scale_by, mul_backward, sum_all, fill_scaled and 24 more);
//          file-local: add_residual
//
// CpuBackend, part 2 (core/cpu_backend.h): elementwise, reductions, GEMM and linear, activations,
// softmax, embedding, cross-entropy, norms (RoPE and attention: core/cpu_backend_attention.cpp;
// the fused entries: part 3, core/cpu_backend_fused.cpp) — each entry one call (or one loop
// of calls) of a raw-pointer kernel of core/kernels, float / double by the tensors' dtype
// (dispatch_float, core/dispatch.h: another dtype is a zt::Error naming the entry and the dtype).
//
// Shapes were checked by the caller (autograd/ops); here only ZT_CHECKs guard the kernels'
// preconditions. Sizes come from the tensors as the table documents them: (R, N) row layouts,
// (N, C) norm inputs.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "core/cpu_backend.h"
#include "core/cpu_backend_util.h"  // opt, need_contiguous, rows_cols
#include "core/cpu_bf16.h"          // defines: Bf16StandIns (bfloat16 entries on float32 stand-ins)
#include "core/dispatch.h"          // dispatch_float: float / double kernels by the dtype
#include "core/kernels/activation.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/embedding.h"
#include "core/kernels/gemm.h"
#include "core/kernels/norm.h"
#include "core/kernels/softmax.h"
#include "core/parallel.h"

namespace zt {

using cpu_detail::need_contiguous;
using cpu_detail::opt;
using cpu_detail::rows_cols;

// ---------------------------------------------------------------------------------------------
// elementwise

void CpuBackend::binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (Bf16StandIns f{&out, &a, &b}; f.active()) {
    binary(op, f(out), f(a), f(b));
    return f.store({&out});
  }
  need_contiguous("binary", {&out, &a, &b});
  ZT_CHECK(a.numel() == out.numel() && b.numel() == out.numel(), "cpu backend binary: sizes differ");
  const int64_t n = out.numel();
  dispatch_float(out.dtype(), "cpu backend ", "binary", [&](auto tag) {
    using T = decltype(tag);
    if (op == BinaryOp::add) add_forward(out.data<T>(), a.data<T>(), b.data<T>(), n);
    else if (op == BinaryOp::sub) sub_forward(out.data<T>(), a.data<T>(), b.data<T>(), n);
    else mul_forward(out.data<T>(), a.data<T>(), b.data<T>(), n);
  });
}

void CpuBackend::scale(const Tensor& out, const Tensor& x, double s) {
  if (Bf16StandIns f{&out, &x}; f.active()) {
    scale(f(out), f(x), s);
    return f.store({&out});
  }
  need_contiguous("scale", {&out, &x});
  ZT_CHECK(x.numel() == out.numel(), "cpu backend scale: sizes differ");
  dispatch_float(out.dtype(), "cpu backend ", "scale", [&](auto tag) {
    using T = decltype(tag);
    scale_forward(out.data<T>(), x.data<T>(), static_cast<T>(s), out.numel());
  });
}

void CpuBackend::mul_backward(const Tensor& da, const Tensor& db, const Tensor& dout, const Tensor& a,
                              const Tensor& b) {
  if (Bf16StandIns f{&da, &db, &dout, &a, &b}; f.active()) {
    mul_backward(f(da), f(db), f(dout), f(a), f(b));
    return f.store({&da, &db});
  }
  need_contiguous("mul_backward", {&da, &db, &dout, &a, &b});
  ZT_CHECK(da.defined() || db.defined(), "cpu backend mul_backward: neither da nor db wanted");
  const int64_t n = dout.numel();
  ZT_CHECK(a.numel() == n && b.numel() == n, "cpu backend mul_backward: sizes differ");
  dispatch_float(dout.dtype(), "cpu backend ", "mul_backward", [&](auto tag) {
    using T = decltype(tag);
    zt::mul_backward(opt<T>(da), opt<T>(db), dout.data<T>(), a.data<T>(), b.data<T>(), n);
  });
}

// ---------------------------------------------------------------------------------------------
// reductions

void CpuBackend::sum_all(const Tensor& out, const Tensor& x, double factor) {
  if (Bf16StandIns f{&out, &x}; f.active()) {
    sum_all(f(out), f(x), factor);
    return f.store({&out});
  }
  need_contiguous("sum_all", {&x});
  ZT_CHECK(out.numel() == 1, "cpu backend sum_all: out ", out.str(), " must hold one element");
  dispatch_float(x.dtype(), "cpu backend ", "sum_all", [&](auto tag) {
    using T = decltype(tag);
    const double s = zt::sum_all(x.data<T>(), x.numel());
    out.data<T>()[0] = static_cast<T>(s * factor);
  });
}

void CpuBackend::scale_by(const Tensor& out, const Tensor& x, const Tensor& s) {
  if (Bf16StandIns f{&out, &x}; f.active()) {
    scale_by(f(out), f(x), s);
    return f.store({&out});
  }
  need_contiguous("scale_by", {&out, &x});
  ZT_CHECK(x.numel() == out.numel(), "cpu backend scale_by: sizes differ");
  ZT_CHECK(s.defined() && s.numel() == 1, "cpu backend scale_by: s ", s.str(), " must hold one element");
  const double v = s.item();
  dispatch_float(out.dtype(), "cpu backend ", "scale_by", [&](auto tag) {
    using T = decltype(tag);
    scale_forward(out.data<T>(), x.data<T>(), static_cast<T>(v), out.numel());
  });
}

void CpuBackend::fill_scaled(const Tensor& dx, const Tensor& g, double factor) {
  if (Bf16StandIns f{&dx, &g}; f.active()) {
    fill_scaled(f(dx), f(g), factor);
    return f.store({&dx});
  }
  need_contiguous("fill_scaled", {&dx});
  ZT_CHECK(g.numel() == 1, "cpu backend fill_scaled: g ", g.str(), " must hold one element");
  const double v = g.item() * factor;
  dispatch_float(dx.dtype(), "cpu backend ", "fill_scaled", [&](auto tag) {
    using T = decltype(tag);
    zt::fill(dx.data<T>(), static_cast<T>(v), dx.numel());
  });
}

void CpuBackend::sum_last(const Tensor& out, const Tensor& x) {
  if (Bf16StandIns f{&out, &x}; f.active()) {
    sum_last(f(out), f(x));
    return f.store({&out});
  }
  need_contiguous("sum_last", {&out, &x});
  ZT_CHECK(x.dim() >= 1, "cpu backend sum_last: x ", x.str(), " needs a last dimension");
  const int64_t R = out.numel(), N = x.size(-1);  // R from out: rows exist even when N == 0
  ZT_CHECK(R * N == x.numel(), "cpu backend sum_last: out ", out.str(), " does not match x ", x.str());
  dispatch_float(x.dtype(), "cpu backend ", "sum_last", [&](auto tag) {
    using T = decltype(tag);
    sum_last_forward(out.data<T>(), x.data<T>(), R, N);
  });
}

void CpuBackend::sum_last_backward(const Tensor& dx, const Tensor& dout) {
  if (Bf16StandIns f{&dx, &dout}; f.active()) {
    sum_last_backward(f(dx), f(dout));
    return f.store({&dx});
  }
  need_contiguous("sum_last_backward", {&dx, &dout});
  ZT_CHECK(dx.dim() >= 1, "cpu backend sum_last_backward: dx ", dx.str(), " needs a last dimension");
  const int64_t R = dout.numel(), N = dx.size(-1);
  ZT_CHECK(R * N == dx.numel(), "cpu backend sum_last_backward: dout ", dout.str(), " does not match dx ", dx.str());
  dispatch_float(dx.dtype(), "cpu backend ", "sum_last_backward", [&](auto tag) {
    using T = decltype(tag);
    zt::sum_last_backward(dx.data<T>(), dout.data<T>(), R, N);
  });
}

// ---------------------------------------------------------------------------------------------
// matrix products

// Batched: one GEMM per product, the products split across threads (each GEMM single-threaded
// inside the parallel region) when there are at least as many as threads; else in turn, each
// GEMM threaded. One product: one GEMM, threaded inside.
void CpuBackend::gemm(const GemmShape& g, const Tensor& A, const Tensor& B, const Tensor& C) {
  if (Bf16StandIns f{&A, &B, &C}; f.active()) {
    gemm(g, f(A), f(B), f(C));
    return f.store({&C});
  }
  need_contiguous("gemm", {&A, &B, &C});
  ZT_CHECK(g.batch >= 1, "cpu backend gemm: batch = ", g.batch);
  const int64_t M = g.M, N = g.N, K = g.K, P = g.batch;
  ZT_CHECK(A.numel() >= (P - 1) * g.stride_a + M * K && B.numel() >= (P - 1) * g.stride_b + K * N &&
               C.numel() >= (P - 1) * g.stride_c + M * N,
           "cpu backend gemm: operands ", A.str(), ", ", B.str(), ", ", C.str(), " too small for M=", M, " N=", N,
           " K=", K, " batch=", P);
  const int64_t lda = g.trans_a ? M : K, ldb = g.trans_b ? K : N, ldc = N;
  dispatch_float(C.dtype(), "cpu backend ", "gemm", [&](auto tag) {
    using T = decltype(tag);
    const T *pa = A.data<T>(), *pb = B.data<T>();
    T* pc = C.data<T>();
    const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
    if (P == 1) {
      zt::gemm<T>(g.trans_a, g.trans_b, M, N, K, alpha, pa, lda, pb, ldb, beta, pc, ldc);
      return;
    }
    const bool par = P >= omp_get_max_threads();
#pragma omp parallel for schedule(static) if (par)
    for (int64_t p = 0; p < P; ++p)
      zt::gemm<T>(g.trans_a, g.trans_b, M, N, K, alpha, pa + p * g.stride_a, lda, pb + p * g.stride_b, ldb, beta,
                  pc + p * g.stride_c, ldc);
  });
}

void CpuBackend::linear(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b) {
  if (Bf16StandIns f{&y, &x, &w, &b}; f.active()) {
    linear(f(y), f(x), f(w), f(b));
    return f.store({&y});
  }
  need_contiguous("linear", {&y, &x, &w, &b});
  ZT_CHECK(x.dim() == 2 && w.dim() == 2 && y.dim() == 2, "cpu backend linear: x ", x.str(), ", w ", w.str(), ", y ",
           y.str(), " (2-D expected)");
  const int64_t M = x.size(0), in_f = x.size(1), out = w.size(0);
  ZT_CHECK(w.size(1) == in_f && y.size(0) == M && y.size(1) == out && (!b.defined() || b.numel() == out),
           "cpu backend linear: shapes x ", x.str(), ", w ", w.str(), ", y ", y.str());
  dispatch_float(y.dtype(), "cpu backend ", "linear", [&](auto tag) {
    using T = decltype(tag);
    T* py = y.data<T>();
    if (b.defined()) {  // y rows start as the bias; the GEMM adds x w^T on top (beta = 1)
      const T* pb = b.data<T>();
#pragma omp parallel for schedule(static) if (M * out > kParallelMinElements)
      for (int64_t r = 0; r < M; ++r) std::copy(pb, pb + out, py + r * out);
    }
    // y (M, out) = x (M, in) @ w^T, w stored (out, in): no transposed copy, BLAS reads it as is
    zt::gemm<T>(false, true, M, out, in_f, T(1), x.data<T>(), in_f, w.data<T>(), in_f, b.defined() ? T(1) : T(0), py,
                out);
  });
}

void CpuBackend::linear_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy,
                                 const Tensor& x, const Tensor& w, bool accumulate) {
  if (Bf16StandIns f{&dx, &dw, &db, &dy, &x, &w}; f.active()) {
    linear_backward(f(dx), f(dw), f(db), f(dy), f(x), f(w), accumulate);
    return f.store({&dx, &dw, &db});
  }
  need_contiguous("linear_backward", {&dx, &dw, &db, &dy, &x, &w});
  ZT_CHECK(dy.dim() == 2, "cpu backend linear_backward: dy ", dy.str(), " (2-D expected)");
  const int64_t M = dy.size(0), out = dy.size(1);
  const int64_t in_f = w.defined() ? w.size(1) : x.size(1);
  ZT_CHECK(!dx.defined() || (w.defined() && dx.numel() == M * in_f), "cpu backend linear_backward: dx ", dx.str());
  ZT_CHECK(!dw.defined() || (x.defined() && dw.numel() == out * in_f && x.numel() == M * in_f),
           "cpu backend linear_backward: dw ", dw.str(), ", x ", x.str());
  ZT_CHECK(!db.defined() || db.numel() == out, "cpu backend linear_backward: db ", db.str());
  dispatch_float(dy.dtype(), "cpu backend ", "linear_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* pg = dy.data<T>();
    if (dx.defined())  // dx (M, in) = dy (M, out) @ w (out, in)
      zt::gemm<T>(false, false, M, in_f, out, T(1), pg, out, w.data<T>(), in_f, T(0), dx.data<T>(), in_f);
    if (dw.defined())  // dw (out, in) (+)= dy^T (out, M) @ x (M, in)
      zt::gemm<T>(true, false, out, in_f, M, T(1), pg, out, x.data<T>(), in_f, accumulate ? T(1) : T(0),
                  dw.data<T>(), in_f);
    if (db.defined()) col_sum(db.data<T>(), pg, M, out, accumulate);  // db (out) (+)= column sums, rows in order
  });
}

// ---------------------------------------------------------------------------------------------
// activations, softmax

void CpuBackend::gelu(const Tensor& out, const Tensor& x) {
  if (Bf16StandIns f{&out, &x}; f.active()) {
    gelu(f(out), f(x));
    return f.store({&out});
  }
  need_contiguous("gelu", {&out, &x});
  dispatch_float(x.dtype(), "cpu backend ", "gelu", [&](auto tag) {
    using T = decltype(tag);
    gelu_forward(out.data<T>(), x.data<T>(), x.numel());
  });
}

void CpuBackend::gelu_backward(const Tensor& dx, const Tensor& dout, const Tensor& x) {
  if (Bf16StandIns f{&dx, &dout, &x}; f.active()) {
    gelu_backward(f(dx), f(dout), f(x));
    return f.store({&dx});
  }
  need_contiguous("gelu_backward", {&dx, &dout, &x});
  dispatch_float(x.dtype(), "cpu backend ", "gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    zt::gelu_backward(dx.data<T>(), dout.data<T>(), x.data<T>(), x.numel());
  });
}

void CpuBackend::silu(const Tensor& out, const Tensor& x) {
  if (Bf16StandIns f{&out, &x}; f.active()) {
    silu(f(out), f(x));
    return f.store({&out});
  }
  need_contiguous("silu", {&out, &x});
  dispatch_float(x.dtype(), "cpu backend ", "silu", [&](auto tag) {
    using T = decltype(tag);
    silu_forward(out.data<T>(), x.data<T>(), x.numel());
  });
}

void CpuBackend::silu_backward(const Tensor& dx, const Tensor& dout, const Tensor& x) {
  if (Bf16StandIns f{&dx, &dout, &x}; f.active()) {
    silu_backward(f(dx), f(dout), f(x));
    return f.store({&dx});
  }
  need_contiguous("silu_backward", {&dx, &dout, &x});
  dispatch_float(x.dtype(), "cpu backend ", "silu_backward", [&](auto tag) {
    using T = decltype(tag);
    zt::silu_backward(dx.data<T>(), dout.data<T>(), x.data<T>(), x.numel());
  });
}

void CpuBackend::swiglu(const Tensor& out, const Tensor& gate, const Tensor& up) {
  if (Bf16StandIns f{&out, &gate, &up}; f.active()) {
    swiglu(f(out), f(gate), f(up));
    return f.store({&out});
  }
  need_contiguous("swiglu", {&out, &gate, &up});
  dispatch_float(gate.dtype(), "cpu backend ", "swiglu", [&](auto tag) {
    using T = decltype(tag);
    swiglu_forward(out.data<T>(), gate.data<T>(), up.data<T>(), gate.numel());
  });
}

void CpuBackend::swiglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dout, const Tensor& gate,
                                 const Tensor& up) {
  if (Bf16StandIns f{&dgate, &dup, &dout, &gate, &up}; f.active()) {
    swiglu_backward(f(dgate), f(dup), f(dout), f(gate), f(up));
    return f.store({&dgate, &dup});
  }
  need_contiguous("swiglu_backward", {&dgate, &dup, &dout, &gate, &up});
  dispatch_float(gate.dtype(), "cpu backend ", "swiglu_backward", [&](auto tag) {
    using T = decltype(tag);
    zt::swiglu_backward(opt<T>(dgate), opt<T>(dup), dout.data<T>(), gate.data<T>(), up.data<T>(), gate.numel());
  });
}

void CpuBackend::swiglu_packed(const Tensor& out, const Tensor& gu) {
  if (Bf16StandIns f{&out, &gu}; f.active()) {
    swiglu_packed(f(out), f(gu));
    return f.store({&out});
  }
  need_contiguous("swiglu_packed", {&out, &gu});
  const PackedRows r = swiglu_packed_rows("cpu backend swiglu_packed", out, gu);
  const int64_t N = r.N, F = r.F;  // named copies: clang 14 cannot capture structured bindings in a lambda
  dispatch_float(gu.dtype(), "cpu backend ", "swiglu_packed", [&](auto tag) {
    using T = decltype(tag);
    T* y = out.data<T>();
    const T* x = gu.data<T>();
#pragma omp parallel for schedule(static) if (N * F > 32768)
    for (int64_t i = 0; i < N; ++i) swiglu_forward(y + i * F, x + i * 2 * F, x + i * 2 * F + F, F);
  });
}

void CpuBackend::swiglu_packed_backward(const Tensor& dgu, const Tensor& dout, const Tensor& gu) {
  if (Bf16StandIns f{&dgu, &dout, &gu}; f.active()) {
    swiglu_packed_backward(f(dgu), f(dout), f(gu));
    return f.store({&dgu});
  }
  need_contiguous("swiglu_packed_backward", {&dgu, &dout, &gu});
  ZT_CHECK(dgu.shape() == gu.shape(), "cpu backend swiglu_packed_backward: dgu ", dgu.str(), " for gu ", gu.str());
  const PackedRows r = swiglu_packed_rows("cpu backend swiglu_packed_backward", dout, gu);
  const int64_t N = r.N, F = r.F;
  dispatch_float(gu.dtype(), "cpu backend ", "swiglu_packed_backward", [&](auto tag) {
    using T = decltype(tag);
    T* dx = dgu.data<T>();
    const T *x = gu.data<T>(), *dy = dout.data<T>();
#pragma omp parallel for schedule(static) if (N * F > 32768)
    for (int64_t i = 0; i < N; ++i)
      zt::swiglu_backward(dx + i * 2 * F, dx + i * 2 * F + F, dy + i * F, x + i * 2 * F, x + i * 2 * F + F, F);
  });
}

void CpuBackend::softmax(const Tensor& out, const Tensor& x) {
  if (Bf16StandIns f{&out, &x}; f.active()) {
    softmax(f(out), f(x));
    return f.store({&out});
  }
  need_contiguous("softmax", {&out, &x});
  const auto rc = rows_cols(x);
  const int64_t R = rc.first, N = rc.second;
  dispatch_float(x.dtype(), "cpu backend ", "softmax", [&](auto tag) {
    using T = decltype(tag);
    softmax_forward(out.data<T>(), x.data<T>(), R, N);
  });
}

void CpuBackend::softmax_backward(const Tensor& dx, const Tensor& dout, const Tensor& out) {
  if (Bf16StandIns f{&dx, &dout, &out}; f.active()) {
    softmax_backward(f(dx), f(dout), f(out));
    return f.store({&dx});
  }
  need_contiguous("softmax_backward", {&dx, &dout, &out});
  const auto rc = rows_cols(out);
  const int64_t R = rc.first, N = rc.second;
  dispatch_float(out.dtype(), "cpu backend ", "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    zt::softmax_backward(dx.data<T>(), dout.data<T>(), out.data<T>(), R, N);
  });
}

// ---------------------------------------------------------------------------------------------
// embedding, cross-entropy

void CpuBackend::embedding(const Tensor& out, const Tensor& ids, const Tensor& table) {
  if (Bf16StandIns f{&out, &ids, &table}; f.active()) {
    embedding(f(out), f(ids), f(table));
    return f.store({&out});
  }
  need_contiguous("embedding", {&out, &ids, &table});
  ZT_CHECK(table.dim() == 2 && out.numel() == ids.numel() * table.size(1), "cpu backend embedding: out ", out.str(),
           ", ids ", ids.str(), ", table ", table.str());
  dispatch_float(table.dtype(), "cpu backend ", "embedding", [&](auto tag) {
    using T = decltype(tag);
    embedding_forward(out.data<T>(), ids.data<int32_t>(), table.data<T>(), ids.numel(), table.size(1));
  });
}

void CpuBackend::embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids) {
  if (Bf16StandIns f{&dtable, &dout, &ids}; f.active()) {
    embedding_backward(f(dtable), f(dout), f(ids));
    return f.store({&dtable});
  }
  need_contiguous("embedding_backward", {&dtable, &dout, &ids});
  ZT_CHECK(dtable.dim() == 2 && dout.numel() == ids.numel() * dtable.size(1), "cpu backend embedding_backward: dout ",
           dout.str(), ", ids ", ids.str(), ", dtable ", dtable.str());
  dispatch_float(dtable.dtype(), "cpu backend ", "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    zt::embedding_backward(dtable.data<T>(), dout.data<T>(), ids.data<int32_t>(), ids.numel(), dtable.size(1));
  });
}

void CpuBackend::cross_entropy(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& targets,
                               int64_t valid_vocab, int64_t count, int64_t v0) {
  if (Bf16StandIns f{&loss, &lse, &logits, &targets}; f.active()) {
    cross_entropy(f(loss), f(lse), f(logits), f(targets), valid_vocab, count, v0);
    return f.store({&loss, &lse});
  }
  need_contiguous("cross_entropy", {&loss, &lse, &logits, &targets});
  const auto rc = rows_cols(logits);
  const int64_t N = rc.first, V = rc.second;
  ZT_CHECK(targets.numel() == N && lse.numel() == N && loss.numel() == 1 && valid_vocab >= 1 && valid_vocab <= V,
           "cpu backend cross_entropy: logits ", logits.str(), ", targets ", targets.str(), ", valid_vocab ",
           valid_vocab);
  dispatch_float(logits.dtype(), "cpu backend ", "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const double total = cross_entropy_forward(lse.data<T>(), logits.data<T>(), targets.data<int32_t>(), N, V,
                                               valid_vocab, v0);
    // mean over non-ignored rows; with every row ignored the mean is 0/0 = NaN, as in PyTorch
    loss.data<T>()[0] = static_cast<T>(count ? total / static_cast<double>(count) : std::nan(""));
  });
}

void CpuBackend::cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                                        const Tensor& targets, const Tensor& dloss, int64_t valid_vocab, int64_t count,
                                        int64_t v0) {
  if (Bf16StandIns f{&dlogits, &logits, &lse, &targets, &dloss}; f.active()) {
    cross_entropy_backward(f(dlogits), f(logits), f(lse), f(targets), f(dloss), valid_vocab, count, v0);
    return f.store({&dlogits});
  }
  need_contiguous("cross_entropy_backward", {&dlogits, &logits, &lse, &targets});
  const auto rc = rows_cols(logits);
  const int64_t N = rc.first, V = rc.second;
  ZT_CHECK(targets.numel() == N && lse.numel() == N && dloss.numel() == 1 && dlogits.numel() == logits.numel(),
           "cpu backend cross_entropy_backward: logits ", logits.str(), ", targets ", targets.str());
  const double scale = count ? dloss.item() / static_cast<double>(count) : 0.0;
  dispatch_float(logits.dtype(), "cpu backend ", "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    zt::cross_entropy_backward(dlogits.data<T>(), logits.data<T>(), lse.data<T>(), targets.data<int32_t>(),
                               static_cast<T>(scale), N, V, valid_vocab, v0);
  });
}

void CpuBackend::cross_entropy_and_grad(const Tensor& loss, const Tensor& logits, const Tensor& targets,
                                        int64_t valid_vocab, int64_t count) {
  if (Bf16StandIns f{&loss, &logits, &targets}; f.active()) {
    cross_entropy_and_grad(f(loss), f(logits), f(targets), valid_vocab, count);
    return f.store({&loss, &logits});
  }
  need_contiguous("cross_entropy_and_grad", {&loss, &logits, &targets});
  const auto rc = rows_cols(logits);
  const int64_t N = rc.first, V = rc.second;
  ZT_CHECK(targets.numel() == N && loss.numel() == 1 && valid_vocab >= 1 && valid_vocab <= V && count >= 0,
           "cpu backend cross_entropy_and_grad: logits ", logits.str(), ", targets ", targets.str(), ", valid_vocab ",
           valid_vocab, ", count ", count);
  // cross_entropy, then cross_entropy_backward with dloss = 1 writing over the logits it reads
  // (each element is read before it is written, row by row): the two ops' bits.
  const double scale = count ? 1.0 / static_cast<double>(count) : 0.0;
  dispatch_float(logits.dtype(), "cpu backend ", "cross_entropy_and_grad", [&](auto tag) {
    using T = decltype(tag);
    Tensor lse = Tensor::empty({N}, logits.dtype(), Category::workspace, cpu_allocator());
    T* x = logits.data<T>();
    const double total = cross_entropy_forward(lse.data<T>(), x, targets.data<int32_t>(), N, V, valid_vocab);
    loss.data<T>()[0] = static_cast<T>(count ? total / static_cast<double>(count) : std::nan(""));
    zt::cross_entropy_backward(x, x, lse.data<T>(), targets.data<int32_t>(), static_cast<T>(scale), N, V, valid_vocab);
  });
}

// ---------------------------------------------------------------------------------------------
// norms over the last dimension C of x (N, C)

void CpuBackend::layernorm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                           const Tensor& w, const Tensor& b, double eps) {
  if (Bf16StandIns f{&out, &mean, &rstd, &x, &w, &b}; f.active()) {
    layernorm(f(out), f(mean), f(rstd), f(x), f(w), f(b), eps);
    return f.store({&out, &mean, &rstd});
  }
  need_contiguous("layernorm", {&out, &mean, &rstd, &x, &w, &b});
  const auto rc = rows_cols(x);
  const int64_t N = rc.first, C = rc.second;
  ZT_CHECK(C >= 1 && w.numel() == C && mean.numel() == N && rstd.numel() == N, "cpu backend layernorm: x ", x.str(),
           ", w ", w.str());
  dispatch_float(x.dtype(), "cpu backend ", "layernorm", [&](auto tag) {
    using T = decltype(tag);
    layernorm_forward<T>(out.data<T>(), mean.data<T>(), rstd.data<T>(), x.data<T>(), w.data<T>(), opt<T>(b), N, C,
                         eps);
  });
}

namespace {
// dres given: the norm's own dx into a scratch buffer, then dx = dres + it (one add: the bits the
// table promises). The GPU does both in one pass; on the CPU the reference is the two steps.
template <class F>
bool add_residual(CpuBackend& be, const char* who, const Tensor& dx, const Tensor& dres, F&& backward) {
  if (!dres.defined()) return false;
  ZT_CHECK(dx.defined() && dres.shape() == dx.shape() && dres.dtype() == dx.dtype(), "cpu backend ", who, ": dres ",
           dres.str(), " needs dx ", dx.str(), " of its shape and dtype");
  Tensor own = Tensor::empty(dx.shape(), dx.dtype(), Category::activations, cpu_allocator());
  backward(own);
  be.binary(BinaryOp::add, dx, dres, own);
  return true;
}
}  // namespace

void CpuBackend::layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout,
                                    const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                                    const Tensor& dres) {
  if (add_residual(*this, "layernorm_backward", dx, dres,
                   [&](const Tensor& own) { layernorm_backward(own, dw, db, dout, x, w, mean, rstd); }))
    return;
  if (Bf16StandIns f{&dx, &dw, &db, &dout, &x, &w, &mean, &rstd}; f.active()) {
    layernorm_backward(f(dx), f(dw), f(db), f(dout), f(x), f(w), f(mean), f(rstd));
    return f.store({&dx, &dw, &db});
  }
  need_contiguous("layernorm_backward", {&dx, &dw, &db, &dout, &x, &w, &mean, &rstd});
  const auto rc = rows_cols(x);
  const int64_t N = rc.first, C = rc.second;
  ZT_CHECK(C >= 1 && w.numel() == C && mean.numel() == N && rstd.numel() == N, "cpu backend layernorm_backward: x ",
           x.str(), ", w ", w.str());
  dispatch_float(x.dtype(), "cpu backend ", "layernorm_backward", [&](auto tag) {
    using T = decltype(tag);
    zt::layernorm_backward<T>(opt<T>(dx), opt<T>(dw), opt<T>(db), dout.data<T>(), x.data<T>(), w.data<T>(),
                              mean.data<T>(), rstd.data<T>(), N, C);
  });
}

void CpuBackend::rmsnorm(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& w, double eps) {
  if (Bf16StandIns f{&out, &rstd, &x, &w}; f.active()) {
    rmsnorm(f(out), f(rstd), f(x), f(w), eps);
    return f.store({&out, &rstd});
  }
  need_contiguous("rmsnorm", {&out, &rstd, &x, &w});
  const auto rc = rows_cols(x);
  const int64_t N = rc.first, C = rc.second;
  ZT_CHECK(C >= 1 && w.numel() == C && rstd.numel() == N, "cpu backend rmsnorm: x ", x.str(), ", w ", w.str());
  dispatch_float(x.dtype(), "cpu backend ", "rmsnorm", [&](auto tag) {
    using T = decltype(tag);
    rmsnorm_forward<T>(out.data<T>(), rstd.data<T>(), x.data<T>(), w.data<T>(), N, C, eps);
  });
}

void CpuBackend::rmsnorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& dout, const Tensor& x,
                                  const Tensor& w, const Tensor& rstd, const Tensor& dres) {
  if (add_residual(*this, "rmsnorm_backward", dx, dres,
                   [&](const Tensor& own) { rmsnorm_backward(own, dw, dout, x, w, rstd); }))
    return;
  if (Bf16StandIns f{&dx, &dw, &dout, &x, &w, &rstd}; f.active()) {
    rmsnorm_backward(f(dx), f(dw), f(dout), f(x), f(w), f(rstd));
    return f.store({&dx, &dw});
  }
  need_contiguous("rmsnorm_backward", {&dx, &dw, &dout, &x, &w, &rstd});
  const auto rc = rows_cols(x);
  const int64_t N = rc.first, C = rc.second;
  ZT_CHECK(C >= 1 && w.numel() == C && rstd.numel() == N, "cpu backend rmsnorm_backward: x ", x.str(), ", w ",
           w.str());
  dispatch_float(x.dtype(), "cpu backend ", "rmsnorm_backward", [&](auto tag) {
    using T = decltype(tag);
    zt::rmsnorm_backward<T>(opt<T>(dx), opt<T>(dw), dout.data<T>(), x.data<T>(), w.data<T>(), rstd.data<T>(), N, C);
  });
}

}  // namespace zt
