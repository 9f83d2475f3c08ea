// defines: adamw_args, AdamWHyper (validate), adamw_update, AdamW (constructor, set_lr, update,
//          shard_state, load_state, state_bytes) (optim/adamw.h)
#include "optim/adamw.h"

#include "core/backend.h"
#include "core/kernels/adamw.h"

namespace zt {

AdamWArgs adamw_args(const AdamWHyper& h, int64_t step, bool decay) {
  AdamWArgs a;
  a.lr = h.lr;
  a.beta1 = h.beta1;
  a.beta2 = h.beta2;
  a.eps = h.eps;
  a.weight_decay = h.weight_decay;
  a.step = step;
  a.decay = decay;
  return a;
}

void AdamWHyper::validate() const {
  if (!(lr >= 0)) ZT_THROW("AdamW: lr = ", lr, ", expected >= 0");
  if (!(beta1 >= 0 && beta1 < 1)) ZT_THROW("AdamW: beta1 = ", beta1, ", expected in [0, 1)");
  if (!(beta2 >= 0 && beta2 < 1)) ZT_THROW("AdamW: beta2 = ", beta2, ", expected in [0, 1)");
  if (!(eps >= 0)) ZT_THROW("AdamW: eps = ", eps, ", expected >= 0");
  if (!(weight_decay >= 0)) ZT_THROW("AdamW: weight_decay = ", weight_decay, ", expected >= 0");
}

// The kernel lives in core/kernels/adamw.h (the cpu backend's adamw_step); this is its
// public face with optim's hyperparameter struct.
template <class T>
void adamw_update(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWHyper& h, int64_t step, bool decay) {
  adamw_update<T>(param, grad, m, v, n, adamw_args(h, step, decay));
}

template void adamw_update<float>(float*, const float*, float*, float*, int64_t, const AdamWHyper&, int64_t, bool);
template void adamw_update<double>(double*, const double*, double*, double*, int64_t, const AdamWHyper&, int64_t,
                                   bool);

AdamW::AdamW(std::vector<FlatShard> shards, const AdamWHyper& h) : Optimizer(std::move(shards), "AdamW"), h_(h) {
  h_.validate();
  for (const FlatShard& s : shards_) {
    Allocator& a = backend_of(s.param).allocator();  // the state lives with the shard
    m_.push_back(Tensor::zeros({s.numel()}, s.param.dtype(), Category::optim, a));
    v_.push_back(Tensor::zeros({s.numel()}, s.param.dtype(), Category::optim, a));
  }
}

void AdamW::set_lr(double lr) {
  if (!(lr >= 0)) ZT_THROW("AdamW::set_lr: lr = ", lr, ", expected >= 0");
  h_.lr = lr;
}

// Elements [seg.begin, seg.end) of shard i, on the shard's device (core/backend.h's adamw_step;
// the cpu backend runs core/kernels/adamw.h's adamw_update). The optimizer keeps no 2-byte
// parameter copy: mixed precision casts the updated master shard itself (no out_lowp here).
void AdamW::update(int i, const DecaySegment& seg) {
  const FlatShard& s = shards_[i];
  adamw_apply(backend_of(s.param), s.param, s.grad, m_[i], v_[i], seg.begin, seg.end - seg.begin, h_, step_, seg.decay);
}

void adamw_apply(Backend& be, const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, int64_t o,
                 int64_t n, const AdamWHyper& h, int64_t step, bool decay) {
  const Shape shape{n};
  be.adamw_step(param.flat_view(o, shape), grad.flat_view(o, shape), m.flat_view(o, shape), v.flat_view(o, shape),
                adamw_args(h, step, decay), Tensor());
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
