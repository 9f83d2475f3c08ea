#include "optim/adamw.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#if defined(__AVX__)
#include <immintrin.h>

#include "core/parallel.h"  // defines: kParallelMinElements
#endif

namespace zt {

namespace {
// Below this many elements one thread is faster than waking the team (a bias, a norm gain).

template <class T>
struct AdamWScalars {
  T step_size, bc2_sqrt, keep, b1, b2, c1, c2, eps;
};

// One element, in the order of the header's formula.
template <class T>
inline void adamw_one(T& p, T g, T& m, T& v, const AdamWScalars<T>& s) {
  const T mi = s.b1 * m + s.c1 * g;
  const T vi = s.b2 * v + s.c2 * (g * g);
  m = mi;
  v = vi;
  const T denom = std::sqrt(vi) / s.bc2_sqrt + s.eps;
  p = p * s.keep - s.step_size * mi / denom;
}

#if defined(__AVX__)
// 8 float elements. Written with intrinsics because GCC keeps a scalar errno path for std::sqrt
// (no -fno-math-errno in the build) and then vectorizes nothing.
inline void adamw8(float* p, const float* g, float* m, float* v, const AdamWScalars<float>& s) {
  const __m256 gi = _mm256_loadu_ps(g);
  const __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(s.b1), _mm256_loadu_ps(m)),
                                  _mm256_mul_ps(_mm256_set1_ps(s.c1), gi));
  const __m256 vi = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(s.b2), _mm256_loadu_ps(v)),
                                  _mm256_mul_ps(_mm256_set1_ps(s.c2), _mm256_mul_ps(gi, gi)));
  _mm256_storeu_ps(m, mi);
  _mm256_storeu_ps(v, vi);
  const __m256 denom =
      _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), _mm256_set1_ps(s.bc2_sqrt)), _mm256_set1_ps(s.eps));
  const __m256 upd = _mm256_div_ps(_mm256_mul_ps(_mm256_set1_ps(s.step_size), mi), denom);
  _mm256_storeu_ps(p, _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(p), _mm256_set1_ps(s.keep)), upd));
}
#endif

// Elements [b, e). float with AVX: 8 at a time, and the tail (< 8) through the same vector code
// on a zero-padded copy, so every element sees the identical instruction sequence whatever its
// position (a shard's update equals the full update bitwise). Otherwise a plain loop.
template <class T>
void adamw_range(T* __restrict param, const T* __restrict grad, T* __restrict m, T* __restrict v, int64_t b,
                 int64_t e, const AdamWScalars<T>& s) {
#if defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) {
    int64_t i = b;
    for (; i + 8 <= e; i += 8) adamw8(param + i, grad + i, m + i, v + i, s);
    if (i < e) {
      const size_t k = static_cast<size_t>(e - i);
      float tp[8] = {}, tg[8] = {}, tm[8] = {}, tv[8] = {};
      std::memcpy(tp, param + i, k * sizeof(float));
      std::memcpy(tg, grad + i, k * sizeof(float));
      std::memcpy(tm, m + i, k * sizeof(float));
      std::memcpy(tv, v + i, k * sizeof(float));
      adamw8(tp, tg, tm, tv, s);
      std::memcpy(param + i, tp, k * sizeof(float));
      std::memcpy(m + i, tm, k * sizeof(float));
      std::memcpy(v + i, tv, k * sizeof(float));
    }
    return;
  }
#endif
  for (int64_t i = b; i < e; ++i) adamw_one(param[i], grad[i], m[i], v[i], s);
}

}  // namespace

void AdamWHyper::validate() const {
  if (!(lr >= 0)) ZT_THROW("AdamW: lr = ", lr, ", expected >= 0");
  if (!(beta1 >= 0 && beta1 < 1)) ZT_THROW("AdamW: beta1 = ", beta1, ", expected in [0, 1)");
  if (!(beta2 >= 0 && beta2 < 1)) ZT_THROW("AdamW: beta2 = ", beta2, ", expected in [0, 1)");
  if (!(eps >= 0)) ZT_THROW("AdamW: eps = ", eps, ", expected >= 0");
  if (!(weight_decay >= 0)) ZT_THROW("AdamW: weight_decay = ", weight_decay, ", expected >= 0");
}

template <class T>
void adamw_update(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWHyper& h, int64_t step, bool decay) {
  ZT_CHECK(step >= 1, "adamw_update: step is 1-based, got ", step);
  ZT_CHECK(n >= 0, "adamw_update: n = ", n);
  // Scalars in double, as PyTorch computes them in Python floats, then rounded once to T.
  const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(step));
  AdamWScalars<T> s;
  s.step_size = static_cast<T>(h.lr / bc1);
  s.bc2_sqrt = static_cast<T>(std::sqrt(bc2));
  s.keep = decay ? static_cast<T>(1.0 - h.lr * h.weight_decay) : T(1);
  s.b1 = static_cast<T>(h.beta1);
  s.b2 = static_cast<T>(h.beta2);
  s.c1 = static_cast<T>(1.0 - h.beta1);
  s.c2 = static_cast<T>(1.0 - h.beta2);
  s.eps = static_cast<T>(h.eps);
  if (n < kParallelMinElements) return adamw_range(param, grad, m, v, 0, n, s);
  // Static split into equal contiguous blocks starting at multiples of 16 elements; every element
  // takes the same instructions wherever it lands, so the result does not depend on the split.
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t per = ((n + nt - 1) / nt + 15) / 16 * 16;
    const int64_t b = std::min(n, t * per), e = std::min(n, b + per);
    adamw_range(param, grad, m, v, b, e, s);
  }
}

template void adamw_update<float>(float*, const float*, float*, float*, int64_t, const AdamWHyper&, int64_t, bool);
template void adamw_update<double>(double*, const double*, double*, double*, int64_t, const AdamWHyper&, int64_t,
                                   bool);

AdamW::AdamW(const std::vector<ParamSet*>& sets, const AdamWHyper& h) : AdamW(full_shards(sets, "AdamW"), h) {}

AdamW::AdamW(std::vector<FlatShard> shards, const AdamWHyper& h) : Optimizer(std::move(shards), "AdamW"), h_(h) {
  h_.validate();
  for (const FlatShard& s : shards_) {
    m_.push_back(Tensor::zeros({s.numel()}, s.param.dtype(), Category::optim));
    v_.push_back(Tensor::zeros({s.numel()}, s.param.dtype(), Category::optim));
  }
}

void AdamW::set_lr(double lr) {
  if (!(lr >= 0)) ZT_THROW("AdamW::set_lr: lr = ", lr, ", expected >= 0");
  h_.lr = lr;
}

void AdamW::update(int i, const DecaySegment& seg) {
  const FlatShard& s = shards_[i];
  const int64_t n = seg.end - seg.begin, o = seg.begin;
  if (s.param.dtype() == DType::f32)
    adamw_update<float>(s.param.data<float>() + o, s.grad.data<float>() + o, m_[i].data<float>() + o,
                        v_[i].data<float>() + o, n, h_, step_, seg.decay);
  else
    adamw_update<double>(s.param.data<double>() + o, s.grad.data<double>() + o, m_[i].data<double>() + o,
                         v_[i].data<double>() + o, n, h_, step_, seg.decay);
}

std::vector<std::pair<const char*, Tensor>> AdamW::shard_state(int i) const {
  return {{"exp_avg", m_.at(i)}, {"exp_avg_sq", v_.at(i)}};
}

void AdamW::load_state(int64_t step_count, const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq) {
  if (step_count < 0) ZT_THROW("AdamW::load_state: step = ", step_count, ", expected >= 0");
  if (exp_avg.size() != shards_.size() || exp_avg_sq.size() != shards_.size())
    ZT_THROW("AdamW::load_state: got ", exp_avg.size(), " exp_avg and ", exp_avg_sq.size(),
             " exp_avg_sq tensors, expected one each per shard (", shards_.size(), ")");
  for (size_t i = 0; i < shards_.size(); ++i) {
    for (const Tensor* t : {&exp_avg[i], &exp_avg_sq[i]})
      if (!t->defined() || t->dim() != 1 || t->numel() != shards_[i].numel())
        ZT_THROW("AdamW::load_state: shard '", shards_[i].name, "' [", shards_[i].lo, ", ", shards_[i].hi,
                 "): state tensor is ", t->defined() ? t->str() : std::string("undefined"), ", expected (",
                 shards_[i].numel(), ")");
  }
  for (size_t i = 0; i < shards_.size(); ++i) {
    m_[i].copy_(exp_avg[i]);
    v_[i].copy_(exp_avg_sq[i]);
  }
  step_ = step_count;
}

int64_t AdamW::state_bytes() const {
  int64_t b = 0;
  for (size_t i = 0; i < m_.size(); ++i) b += static_cast<int64_t>(m_[i].nbytes() + v_[i].nbytes());
  return b;
}

}  // namespace zt
