// defines: CpuBackend (rope_tables, rope, attention, attention_backward, attention_packed,
//          attention_packed_backward)
//
// CpuBackend, part 4 (core/cpu_backend.h): RoPE and causal attention — RoPE's tables and rotation
// (core/kernels/rope.h), the tiled attention forward and backward (core/kernels/attention.h) and its
// packed q | k | v form (core/attention_packed.h), float / double by the tensors' dtype (bfloat16 on
// float32 stand-ins, core/cpu_bf16.h). Tensors are (B, T, H, D); the tables (T, D/2).
#include "core/attention_packed.h"
#include "core/cpu_backend.h"
#include "core/cpu_backend_util.h"  // opt, need_contiguous
#include "core/cpu_bf16.h"          // defines: Bf16StandIns (bfloat16 entries on float32 stand-ins)
#include "core/dispatch.h"          // dispatch_float: float / double kernels by the dtype
#include "core/kernels/attention.h"
#include "core/kernels/rope.h"

namespace zt {

using cpu_detail::need_contiguous;
using cpu_detail::opt;

void CpuBackend::rope_tables(const Tensor& cos_t, const Tensor& sin_t, const RopeParams& p) {
  need_contiguous("rope_tables", {&cos_t, &sin_t});
  ZT_CHECK(cos_t.dim() == 2 && sin_t.shape() == cos_t.shape(), "cpu backend rope_tables: ", cos_t.str(), ", ",
           sin_t.str(), " ((T, D/2) expected)");
  const int64_t T_len = cos_t.size(0), D = 2 * cos_t.size(1);
  dispatch_float(cos_t.dtype(), "cpu backend ", "rope_tables", [&](auto tag) {
    using T = decltype(tag);
    zt::rope_tables<T>(cos_t.data<T>(), sin_t.data<T>(), T_len, D, p);
  });
}

void CpuBackend::rope(const Tensor& out, const Tensor& x, const Tensor& cos_t, const Tensor& sin_t, bool inverse,
                      int64_t rot_heads) {
  if (Bf16StandIns f{&out, &x, &cos_t, &sin_t}; f.active()) {
    rope(f(out), f(x), f(cos_t), f(sin_t), inverse, rot_heads);
    return f.store({&out});
  }
  need_contiguous("rope", {&out, &x, &cos_t, &sin_t});
  ZT_CHECK(x.dim() == 4 && out.shape() == x.shape(), "cpu backend rope: x ", x.str(), " ((B, T, H, D) expected)");
  const int64_t B = x.size(0), T_len = x.size(1), H = x.size(2), D = x.size(3);
  ZT_CHECK(cos_t.numel() == T_len * (D / 2) && sin_t.numel() == cos_t.numel(), "cpu backend rope: tables ", cos_t.str(),
           " for x ", x.str());
  ZT_CHECK(rot_heads >= 0 && rot_heads <= H, "cpu backend rope: rot_heads = ", rot_heads, " for x ", x.str(),
           " (expected 0 .. H)");
  dispatch_float(x.dtype(), "cpu backend ", "rope", [&](auto tag) {
    using T = decltype(tag);
    rope_apply<T>(out.data<T>(), x.data<T>(), cos_t.data<T>(), sin_t.data<T>(), B, T_len, H, D, inverse, rot_heads);
  });
}

Tensor CpuBackend::attention(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                             bool keep_for_backward) {
  if (Bf16StandIns f{&out, &q, &k, &v}; f.active()) {
    Tensor saved = attention(f(out), f(q), f(k), f(v), keep_for_backward);
    f.store({&out});
    return saved;
  }
  need_contiguous("attention", {&out, &q, &k, &v});
  ZT_CHECK(q.dim() == 4 && k.dim() == 4 && v.shape() == k.shape() && out.shape() == q.shape(),
           "cpu backend attention: q ", q.str(), ", k ", k.str(), ", v ", v.str());
  const int64_t B = q.size(0), T_len = q.size(1), Hq = q.size(2), D = q.size(3), Hkv = k.size(2);
  // lse (B, Hq, T): the row log-sum-exp the tiled backward recomputes P from
  // (core/kernels/attention.h); O(T), not the (B, Hq, T, T) probabilities
  Tensor lse = keep_for_backward ? Tensor::empty({B, Hq, T_len}, q.dtype(), Category::activations, allocator())
                                 : Tensor();
  dispatch_float(q.dtype(), "cpu backend ", "attention", [&](auto tag) {
    using T = decltype(tag);
    attention_forward<T>(out.data<T>(), opt<T>(lse), q.data<T>(), k.data<T>(), v.data<T>(), B, T_len, Hq, Hkv, D);
  });
  return lse;
}

void CpuBackend::attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                                    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                    const Tensor& saved) {
  if (Bf16StandIns f{&dq, &dk, &dv, &dout, &q, &k, &v, &out, &saved}; f.active()) {
    // The tiled backward takes Dl = rowsum(dout * out) from `out`; a bfloat16 out's 2^-9 rounding
    // would enter dP - Dl, a cancellation (~1e-2 relative error in dq, dk: cuda/kernels/
    // attention.h measured it). So the float32 out is recomputed from the stand-ins (one more
    // forward), as the GPU's bf16 kernel computes Dl in float32.
    Tensor out32 = out.dtype() == DType::bf16 ? Tensor::empty(q.shape(), DType::f32, Category::workspace) : f(out);
    if (out.dtype() == DType::bf16) attention(out32, f(q), f(k), f(v), /*keep_for_backward=*/false);
    attention_backward(f(dq), f(dk), f(dv), f(dout), f(q), f(k), f(v), out32, f(saved));
    return f.store({&dq, &dk, &dv});
  }
  ZT_CHECK(saved.defined(),
           "cpu backend attention_backward: `saved` is undefined (the forward ran with "
           "keep_for_backward = false)");
  need_contiguous("attention_backward", {&dq, &dk, &dv, &dout, &q, &k, &v, &out, &saved});
  const int64_t B = q.size(0), T_len = q.size(1), Hq = q.size(2), D = q.size(3), Hkv = k.size(2);
  ZT_CHECK(saved.shape() == Shape({B, Hq, T_len}) && saved.dtype() == q.dtype() && out.shape() == q.shape(),
           "cpu backend attention_backward: saved ", saved.str(), " is not the forward's row log-sum-exp (B, Hq, T) ",
           "for q ", q.str(), ", or out ", out.str(), " is not q's shape");
  dispatch_float(q.dtype(), "cpu backend ", "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    zt::attention_backward<T>(dq.data<T>(), dk.data<T>(), dv.data<T>(), dout.data<T>(), q.data<T>(), k.data<T>(),
                              v.data<T>(), out.data<T>(), saved.data<T>(), B, T_len, Hq, Hkv, D);
  });
}

// The packed projection: its blocks copied out for the kernels above (core/attention_packed.h).
Tensor CpuBackend::attention_packed(const Tensor& out, const Tensor& qkv, int64_t Hq, int64_t Hkv,
                                    bool keep_for_backward) {
  return attention_packed_by_copies(*this, out, qkv, Hq, Hkv, keep_for_backward);
}

void CpuBackend::attention_packed_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                                           const Tensor& saved, int64_t Hq, int64_t Hkv) {
  attention_packed_backward_by_copies(*this, dqkv, dout, qkv, out, saved, Hq, Hkv);
}

}  // namespace zt
