// defines: packed_qkv, attention_packed_by_copies, attention_packed_backward_by_copies
//          (core/attention_packed.h); file-local: Blocks, cut_out
#include "core/attention_packed.h"

#include "core/check.h"

namespace zt {

PackedQkv packed_qkv(const Tensor& qkv, int64_t Hq, int64_t Hkv, const char* op) {
  ZT_CHECK(qkv.dim() == 3, op, ": qkv: expected shape (B, T, (Hq + 2 Hkv) D), got ", shape_str(qkv.shape()));
  ZT_CHECK(Hq >= 1 && Hkv >= 1 && Hq % Hkv == 0, op, ": heads Hq = ", Hq, ", Hkv = ", Hkv,
           ": expected Hkv >= 1 dividing Hq");
  const int64_t H = Hq + 2 * Hkv, W = qkv.size(2);
  ZT_CHECK(W % H == 0 && W / H >= 1, op, ": qkv: the last dim ", W, " is not (Hq + 2 Hkv) = ", H,
           " heads of one head dim, in shape ", shape_str(qkv.shape()));
  return {qkv.size(0), qkv.size(1), Hq, Hkv, W / H};
}

namespace {

struct Blocks {
  Tensor q, k, v;  // (B, T, Hq, D), (B, T, Hkv, D) x 2, contiguous
};

// The three column blocks of X (B, T, W), copied out contiguous.
Blocks cut_out(Backend& be, const Tensor& X, const PackedQkv& p) {
  auto block = [&](int64_t c0, int64_t heads) {
    Tensor t = Tensor::empty({p.B, p.T, heads, p.D}, X.dtype(), Category::activations, be.allocator());
    be.copy(t.view({p.B, p.T, heads * p.D}), X.slice(2, c0, c0 + heads * p.D));
    return t;
  };
  const int64_t nq = p.Hq * p.D, nkv = p.Hkv * p.D;
  return {block(0, p.Hq), block(nq, p.Hkv), block(nq + nkv, p.Hkv)};
}

}  // namespace

Tensor attention_packed_by_copies(Backend& be, const Tensor& out, const Tensor& qkv, int64_t Hq, int64_t Hkv,
                                  bool keep_for_backward) {
  const Blocks b = cut_out(be, qkv, packed_qkv(qkv, Hq, Hkv, "attention_packed"));
  return be.attention(out, b.q, b.k, b.v, keep_for_backward);
}

void attention_packed_backward_by_copies(Backend& be, const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                         const Tensor& out, const Tensor& saved, int64_t Hq, int64_t Hkv) {
  const PackedQkv p = packed_qkv(qkv, Hq, Hkv, "attention_packed_backward");
  ZT_CHECK(dqkv.shape() == qkv.shape(), "attention_packed_backward: dqkv ", shape_str(dqkv.shape()),
           " must have qkv's shape ", shape_str(qkv.shape()));
  const Blocks b = cut_out(be, qkv, p);
  auto like = [&](const Tensor& t) {
    return Tensor::empty(t.shape(), t.dtype(), Category::activations, be.allocator());
  };
  Tensor dq = like(b.q), dk = like(b.k), dv = like(b.v);
  be.attention_backward(dq, dk, dv, dout, b.q, b.k, b.v, out, saved);
  // dqkv = [dq | dk | dv] along the last dim: three strided copies, no zero fill
  const int64_t nq = p.Hq * p.D, nkv = p.Hkv * p.D;
  be.copy(dqkv.slice(2, 0, nq), dq.view({p.B, p.T, nq}));
  be.copy(dqkv.slice(2, nq, nq + nkv), dk.view({p.B, p.T, nkv}));
  be.copy(dqkv.slice(2, nq + nkv, p.width()), dv.view({p.B, p.T, nkv}));
}

}  // namespace zt
