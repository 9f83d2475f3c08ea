// defines: PackedQkv, packed_qkv (the checked shape of a packed projection),
//          attention_packed_by_copies, attention_packed_backward_by_copies
//
// Attention over one packed projection qkv (B, T, (Hq + 2 Hkv) D) — each token's row
// [q heads | k heads | v heads], GPT-2's c_attn — for a backend whose attention kernel reads
// contiguous q, k, v: the three column blocks copied out (B, T, H*, D), attention() /
// attention_backward() on them, and in the backward dq, dk, dv copied into dqkv's blocks.
// The copies live for one call. The CPU backend always runs this; the CUDA backend when cuDNN
// cannot read the packed rows in place (cuda/backend_attention.cpp).
#pragma once
#include <cstdint>

#include "core/backend.h"
#include "core/tensor.h"

namespace zt {

struct PackedQkv {
  int64_t B, T, Hq, Hkv, D;
  int64_t width() const { return (Hq + 2 * Hkv) * D; }  // the packed row
};
// qkv's dims, checked: 3-d, Hkv >= 1 dividing Hq, last dim (Hq + 2 Hkv) D with D >= 1; `op` names
// the caller in the error.
PackedQkv packed_qkv(const Tensor& qkv, int64_t Hq, int64_t Hkv, const char* op);

Tensor attention_packed_by_copies(Backend& be, const Tensor& out, const Tensor& qkv, int64_t Hq, int64_t Hkv,
                                  bool keep_for_backward);
void attention_packed_backward_by_copies(Backend& be, const Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                         const Tensor& out, const Tensor& saved, int64_t Hq, int64_t Hkv);

}  // namespace zt
