// defines: KVCache — the keys and values a generation keeps for each layer; rope_at (RoPE at
//          absolute positions) and attend_cached (queries over the cache): the two steps in which
//          a cached attention differs from the training one (nn/layers.h's CausalSelfAttention).
//
// Inference only: nothing here records a gradient (callers run under no_grad). The cache is
// owned by the caller (train/sampling.cpp's generate), not by the model: a model can serve
// several generations, and the cache's bytes are visible where they are made.
//
// Layout, per layer l (allocated on the first append, in k's dtype and on k's device):
//   K[l], V[l]   (B, Hkv, T_max, D)    positions [0, length()) filled
// Head-major, as Hugging Face's and llama.cpp's caches are: one (batch b, kv head h) is a
// contiguous (T_max, D) matrix, so the decode step's two GEMMs read its first L rows directly
// (leading dimension D), batched over B * Hkv with stride T_max * D. Only Hkv heads are stored
// (grouped-query attention): the Hq / Hkv query heads of a group read the same rows.
//
// One step of a model over T new tokens at positions [p, p + T), p = length():
//   every layer l: append(l, k, v)           k, v (B, T, Hkv, D) written at [p, p + T)
//                  attend_cached(q, k, v, l)  q (B, T, Hq, D) over positions [0, p + T)
//   after the last layer: advance(T)
// Two kinds of step are supported, the two a generation makes:
//   prefill  p == 0, any T: the training kernel (causal_attention) over the T fresh k, v;
//   decode   p > 0, T == 1: the one query attends to every cached position (no mask needed).
// A step with p > 0 and T > 1 (chunked prefill, speculative decoding) is refused with an error.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/rope.h"  // RopeParams
#include "core/tensor.h"

namespace zt {

class KVCache {
 public:
  // n_layer caches of (B, n_kv_head, capacity, head_dim); B, the dtype and the device are taken
  // from the first append. capacity: the most positions it holds (a model's max_seq_len).
  KVCache(int64_t n_layer, int64_t n_kv_head, int64_t head_dim, int64_t capacity);

  int64_t n_layer() const { return n_layer_; }
  int64_t n_kv_head() const { return n_kv_head_; }
  int64_t head_dim() const { return head_dim_; }
  int64_t capacity() const { return capacity_; }
  int64_t length() const { return length_; }  // positions filled, the next step's first position
  int64_t batch() const { return batch_; }     // 0 before the first append
  // The bytes held by K and V of every layer (0 before the first append).
  size_t bytes() const;

  // Forgets every position (length() = 0); keeps the allocation for the next prefill.
  void reset() { length_ = 0; }
  // Ends a step of n tokens: every layer must have appended them.
  void advance(int64_t n);

  // Writes k, v (B, T, Hkv, D) at positions [length(), length() + T) of layer `layer`.
  void append(int64_t layer, const Tensor& k, const Tensor& v);
  const Tensor& keys(int64_t layer) const;    // (B, Hkv, T_max, D)
  const Tensor& values(int64_t layer) const;  // (B, Hkv, T_max, D)

  // RoPE's cos and sin tables (capacity, D/2) for `p`, on the cache's device, built once on
  // first use (every layer shares them).
  std::pair<Tensor, Tensor> rope_tables(const RopeParams& p, DType dt, Device dev);

 private:
  int64_t n_layer_, n_kv_head_, head_dim_, capacity_;
  int64_t length_ = 0, batch_ = 0;
  std::vector<Tensor> k_, v_;
  std::vector<int64_t> appended_;  // per layer: positions written in the current step
  Tensor rope_cos_, rope_sin_;
  RopeParams rope_params_{0.0};
};

// RoPE (autograd/ops.h's rope: Hugging Face's rotate_half) at absolute positions
// [pos0, pos0 + T): x (B, T, H, D) -> (B, T, H, D). The tables come from `cache`.
Tensor rope_at(const Tensor& x, int64_t pos0, const RopeParams& p, KVCache& cache);

// Attention of one step (see the top of this file): q (B, T, Hq, D) at positions [p, p + T),
// p = cache.length(); k, v (B, T, Hkv, D) the step's own keys and values, already appended to
// `layer`. Scale 1/sqrt(D); query head h reads kv head h / (Hq / Hkv). Returns (B, T, Hq, D).
Tensor attend_cached(const Tensor& q, const Tensor& k, const Tensor& v, const KVCache& cache, int64_t layer);

}  // namespace zt
