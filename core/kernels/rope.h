// defines: rope_tables, rope_apply — rotary position embedding (Su et al. 2021), HF Llama layout,
//          with Llama 3's frequency scaling (core/rope.h).
//
// Hugging Face Llama's convention ("rotate_half"), not the interleaved one of the paper: within a
// head of D elements, the pair (x[d], x[d + D/2]) for d < D/2 at position t rotates by
//   angle(t, d) = t * inv_freq(d),   inv_freq(d) = theta^(-2d/D) (unscaled):
//   out[d]       = x[d] cos - x[d + D/2] sin
//   out[d + D/2] = x[d + D/2] cos + x[d] sin
// The backward of a rotation is the inverse rotation (sin -> -sin), so one kernel does both.
#pragma once
#include <cstdint>

#include "core/rope.h"  // RopeScaling, RopeParams, rope_inv_freq

namespace zt {

// cos_t, sin_t: (T, D/2), angle(t, d) = t * rope_inv_freq(d) computed in double then cast to the
// kernel type.
template <class T>
void rope_tables(T* cos_t, T* sin_t, int64_t T_len, int64_t D, const RopeParams& p);

// x, out: (B, T, H, D) contiguous, D even (out may alias x). inverse: rotate by -angle (backward).
// Heads [0, rot_heads) rotate; heads [rot_heads, H) are copied (a packed q | k | v: v passes).
template <class T>
void rope_apply(T* out, const T* x, const T* cos_t, const T* sin_t, int64_t B, int64_t T_len, int64_t H, int64_t D,
                bool inverse, int64_t rot_heads);

}  // namespace zt
