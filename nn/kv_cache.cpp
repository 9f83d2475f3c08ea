// defines: KVCache, rope_at, attend_cached (nn/kv_cache.h).
//
// Everything here is composed from existing backend entries (core/backend_ops.def): copy (the
// strided write into the cache), rope_tables / rope, gemm (batched, strided) and softmax, and the
// training attention kernel for a prefill. No new op: a CUDA build runs the same code through
// its own table.
#include "nn/kv_cache.h"

#include <cmath>

#include "autograd/ops.h"
#include "core/backend.h"
#include "core/check.h"

namespace zt {

KVCache::KVCache(int64_t n_layer, int64_t n_kv_head, int64_t head_dim, int64_t capacity)
    : n_layer_(n_layer), n_kv_head_(n_kv_head), head_dim_(head_dim), capacity_(capacity) {
  if (n_layer < 1 || n_kv_head < 1 || head_dim < 1 || capacity < 1)
    ZT_THROW("KVCache: n_layer, n_kv_head, head_dim and capacity must be >= 1, got ", n_layer, ", ", n_kv_head, ", ",
             head_dim, ", ", capacity);
  k_.resize(static_cast<size_t>(n_layer));
  v_.resize(static_cast<size_t>(n_layer));
  appended_.assign(static_cast<size_t>(n_layer), 0);
}

size_t KVCache::bytes() const {
  size_t n = 0;
  for (size_t l = 0; l < k_.size(); ++l)
    if (k_[l].defined()) n += k_[l].nbytes() + v_[l].nbytes();
  return n;
}

void KVCache::advance(int64_t n) {
  for (int64_t l = 0; l < n_layer_; ++l)
    ZT_CHECK(appended_[static_cast<size_t>(l)] == n, "KVCache::advance(", n, "): layer ", l, " appended ",
             appended_[static_cast<size_t>(l)], " positions in this step");
  length_ += n;
  appended_.assign(static_cast<size_t>(n_layer_), 0);
}

void KVCache::append(int64_t layer, const Tensor& k, const Tensor& v) {
  ZT_CHECK(layer >= 0 && layer < n_layer_, "KVCache::append: layer ", layer, " outside [0, ", n_layer_, ")");
  if (k.dim() != 4 || k.size(2) != n_kv_head_ || k.size(3) != head_dim_ || v.shape() != k.shape())
    ZT_THROW("KVCache::append: k and v must have shape (B, T, ", n_kv_head_, ", ", head_dim_, "), got k ",
             shape_str(k.shape()), ", v ", shape_str(v.shape()));
  const int64_t B = k.size(0), T = k.size(1), p = length_;
  if (p + T > capacity_)
    ZT_THROW("KVCache: ", T, " new position(s) after ", p, " exceed the cache's capacity of ", capacity_,
             " (the model's max_seq_len): reset() the cache and prefill a shorter context");
  const size_t l = static_cast<size_t>(layer);
  ZT_CHECK(appended_[l] == 0, "KVCache::append: layer ", layer, " appended twice in one step");
  Tensor& K = k_[l];
  const bool fits = K.defined() && K.size(0) == B && K.dtype() == k.dtype() && K.device() == k.device();
  if (!fits) {
    if (p > 0)
      ZT_THROW("KVCache::append: k ", k.str(), " does not match the cache (", K.defined() ? K.str() : "empty",
               ") holding ", p, " positions; reset() before changing batch, dtype or device");
    // First use (or a new batch size after reset()): allocate on k's device. Category activations:
    // the cache is what a generation keeps between forwards, as training keeps its activations.
    Allocator& a = backend(k.device()).allocator();
    K = Tensor::empty({B, n_kv_head_, capacity_, head_dim_}, k.dtype(), Category::activations, a);
    v_[l] = Tensor::empty({B, n_kv_head_, capacity_, head_dim_}, k.dtype(), Category::activations, a);
    batch_ = B;
  }
  // (B, T, Hkv, D) -> the strided view (B, Hkv, T, D) of positions [p, p + T): one copy each.
  K.slice(2, p, p + T).copy_(k.permute({0, 2, 1, 3}));
  v_[l].slice(2, p, p + T).copy_(v.permute({0, 2, 1, 3}));
  appended_[l] = T;
}

const Tensor& KVCache::keys(int64_t layer) const {
  ZT_CHECK(layer >= 0 && layer < n_layer_ && k_[static_cast<size_t>(layer)].defined(), "KVCache: layer ", layer,
           " holds no keys");
  return k_[static_cast<size_t>(layer)];
}
const Tensor& KVCache::values(int64_t layer) const {
  ZT_CHECK(layer >= 0 && layer < n_layer_ && v_[static_cast<size_t>(layer)].defined(), "KVCache: layer ", layer,
           " holds no values");
  return v_[static_cast<size_t>(layer)];
}

std::pair<Tensor, Tensor> KVCache::rope_tables(const RopeParams& p, DType dt, Device dev) {
  if (!(p.theta > 0)) ZT_THROW("KVCache::rope_tables: theta must be > 0, got ", p.theta);
  if (head_dim_ % 2 != 0) ZT_THROW("KVCache::rope_tables: head dim ", head_dim_, " is odd (RoPE rotates pairs)");
  Backend& be = backend(dev);
  const DType st = be.stats_dtype(dt);
  if (!rope_cos_.defined() || !(rope_params_ == p) || rope_cos_.dtype() != st || rope_cos_.device() != dev) {
    rope_cos_ = Tensor::empty({capacity_, head_dim_ / 2}, st, Category::activations, be.allocator());
    rope_sin_ = Tensor::empty({capacity_, head_dim_ / 2}, st, Category::activations, be.allocator());
    be.rope_tables(rope_cos_, rope_sin_, p);  // rows are positions 0 .. capacity - 1
    rope_params_ = p;
  }
  return {rope_cos_, rope_sin_};
}

Tensor rope_at(const Tensor& x, int64_t pos0, const RopeParams& p, KVCache& cache) {
  if (x.dim() != 4 || x.size(3) != cache.head_dim())
    ZT_THROW("rope_at: x: expected shape (B, T, H, ", cache.head_dim(), "), got ", shape_str(x.shape()));
  const int64_t T = x.size(1);
  if (pos0 < 0 || pos0 + T > cache.capacity())
    ZT_THROW("rope_at: positions [", pos0, ", ", pos0 + T, ") outside the cache's [0, ", cache.capacity(), ")");
  auto [cos_t, sin_t] = cache.rope_tables(p, x.dtype(), x.device());
  // Rows [pos0, pos0 + T) of a contiguous (capacity, D/2) table are themselves contiguous: the
  // training kernel, handed them, rotates position t by the angle of position pos0 + t.
  Backend& be = backend(x.device());
  Tensor out = Tensor::empty(x.shape(), x.dtype(), Category::activations, be.allocator());
  be.rope(out, x.contiguous(), cos_t.slice(0, pos0, pos0 + T), sin_t.slice(0, pos0, pos0 + T), /*inverse=*/false,
          x.size(2));
  return out;
}

Tensor attend_cached(const Tensor& q, const Tensor& k, const Tensor& v, const KVCache& cache, int64_t layer) {
  const int64_t p = cache.length();
  if (q.dim() != 4 || q.size(3) != cache.head_dim() || q.size(2) % cache.n_kv_head() != 0)
    ZT_THROW("attend_cached: q: expected shape (B, T, Hq, ", cache.head_dim(), ") with Hq a multiple of ",
             cache.n_kv_head(), ", got ", shape_str(q.shape()));
  const int64_t B = q.size(0), T = q.size(1), Hq = q.size(2), D = q.size(3);
  if (p == 0)  // prefill: the tiled causal kernel over the step's own keys and values
    return causal_attention(Var(q), Var(k), Var(v)).value();
  if (T != 1)
    ZT_THROW("attend_cached: a step of T = ", T, " tokens after ", p,
             " cached positions; after a prefill the cache decodes one token per step (reset() and prefill "
             "again for a new context)");

  // Decode: one query per head over L = p + 1 positions (the newest is this step's own, just
  // appended), so nothing is masked. With G = Hq / Hkv query heads per kv head, q (B, 1, Hq, D)
  // is already (B * Hkv, G, D): query head h = kv * G + g.
  const Tensor& K = cache.keys(layer);  // (B, Hkv, T_max, D)
  const Tensor& V = cache.values(layer);
  const int64_t Hkv = cache.n_kv_head(), G = Hq / Hkv, L = p + 1, Tmax = cache.capacity();
  ZT_CHECK(K.size(0) == B, "attend_cached: q has batch ", B, ", the cache ", K.size(0));
  Backend& be = backend(q.device());
  Allocator& a = be.allocator();
  Tensor qc = q.contiguous();
  Tensor scores = Tensor::empty({B * Hkv, G, L}, q.dtype(), Category::activations, a);
  Tensor probs = Tensor::empty({B * Hkv, G, L}, q.dtype(), Category::activations, a);
  Tensor out = Tensor::empty({B, 1, Hq, D}, q.dtype(), Category::activations, a);
  // scores (G, L) = q (G, D) K[:L]^T / sqrt(D), per (b, kv head); K's rows have leading dim D.
  GemmShape s;
  s.trans_b = true;
  s.M = G, s.N = L, s.K = D;
  s.alpha = 1.0 / std::sqrt(static_cast<double>(D));
  s.batch = B * Hkv, s.stride_a = G * D, s.stride_b = Tmax * D, s.stride_c = G * L;
  be.gemm(s, qc, K, scores);
  be.softmax(probs.view({B * Hkv * G, L}), scores.view({B * Hkv * G, L}));
  // out (G, D) = probs (G, L) V[:L] (L, D), per (b, kv head).
  GemmShape o;
  o.M = G, o.N = D, o.K = L;
  o.batch = B * Hkv, o.stride_a = G * L, o.stride_b = Tmax * D, o.stride_c = G * D;
  be.gemm(o, probs, V, out);
  return out;
}

}  // namespace zt
