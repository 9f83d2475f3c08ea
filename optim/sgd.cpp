// defines: SgdHyper (validate), sgd_update, Sgd (constructor, set_lr, update, shard_state, load_state)
//          (optim/sgd.h)
#include "optim/sgd.h"

#include "core/parallel.h"  // defines: kParallelMinElements

namespace zt {

void SgdHyper::validate() const {
  if (!(lr >= 0)) ZT_THROW("SGD: lr = ", lr, ", expected >= 0");
  if (!(momentum >= 0)) ZT_THROW("SGD: momentum = ", momentum, ", expected >= 0");
  if (!(weight_decay >= 0)) ZT_THROW("SGD: weight_decay = ", weight_decay, ", expected >= 0");
  if (nesterov && !(momentum > 0)) ZT_THROW("SGD: nesterov = true needs momentum > 0 (got ", momentum, ")");
}

template <class T>
void sgd_update(T* __restrict param, const T* __restrict grad, T* __restrict buf, int64_t n, const SgdHyper& h,
                bool decay) {
  ZT_CHECK(n >= 0, "sgd_update: n = ", n);
  ZT_CHECK(buf != nullptr || h.momentum == 0, "sgd_update: momentum ", h.momentum, " needs a buffer");
  const T lr = static_cast<T>(h.lr), mu = static_cast<T>(h.momentum);
  const T wd = decay ? static_cast<T>(h.weight_decay) : T(0);
  const bool nesterov = h.nesterov;
  if (h.momentum == 0) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) param[i] = param[i] - lr * (grad[i] + wd * param[i]);
    return;
  }
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) {
    const T d = grad[i] + wd * param[i];
    const T b = mu * buf[i] + d;
    buf[i] = b;
    const T u = nesterov ? d + mu * b : b;
    param[i] = param[i] - lr * u;
  }
}

template void sgd_update<float>(float*, const float*, float*, int64_t, const SgdHyper&, bool);
template void sgd_update<double>(double*, const double*, double*, int64_t, const SgdHyper&, bool);

Sgd::Sgd(std::vector<FlatShard> shards, const SgdHyper& h) : Optimizer(std::move(shards), "SGD"), h_(h) {
  h_.validate();
  for (const FlatShard& s : shards_)
    if (!s.param.device().is_cpu())
      ZT_THROW("SGD: shard '", s.name, "' is on ", s.param.device().str(),
               "; the SGD update runs on the CPU only (use AdamW on a GPU)");
  for (const FlatShard& s : shards_)
    buf_.push_back(h_.momentum > 0 ? Tensor::zeros({s.numel()}, s.param.dtype(), Category::optim) : Tensor());
}

void Sgd::set_lr(double lr) {
  if (!(lr >= 0)) ZT_THROW("SGD::set_lr: lr = ", lr, ", expected >= 0");
  h_.lr = lr;
}

void Sgd::update(int i, const DecaySegment& seg) {
  const FlatShard& s = shards_[i];
  const int64_t n = seg.end - seg.begin, o = seg.begin;
  if (s.param.dtype() == DType::f32)
    sgd_update<float>(s.param.data<float>() + o, s.grad.data<float>() + o,
                      buf_[i].defined() ? buf_[i].data<float>() + o : nullptr, n, h_, seg.decay);
  else
    sgd_update<double>(s.param.data<double>() + o, s.grad.data<double>() + o,
                       buf_[i].defined() ? buf_[i].data<double>() + o : nullptr, n, h_, seg.decay);
}

std::vector<std::pair<const char*, Tensor>> Sgd::shard_state(int i) const {
  if (!buf_.at(i).defined()) return {};
  return {{"momentum", buf_[i]}};
}

void Sgd::load_state(int64_t step_count, const std::vector<Tensor>& momentum_buffers) {
  if (step_count < 0) ZT_THROW("SGD::load_state: step = ", step_count, ", expected >= 0");
  const size_t want = h_.momentum > 0 ? shards_.size() : 0;
  if (momentum_buffers.size() != want)
    ZT_THROW("SGD::load_state: got ", momentum_buffers.size(), " momentum buffers, expected ", want,
             h_.momentum > 0 ? " (one per shard)" : " (momentum is 0: no state)");
  for (size_t i = 0; i < want; ++i) {
    const Tensor& t = momentum_buffers[i];
    if (!t.defined() || t.dim() != 1 || t.numel() != shards_[i].numel())
      ZT_THROW("SGD::load_state: shard '", shards_[i].name, "': momentum buffer is ",
               t.defined() ? t.str() : std::string("undefined"), ", expected (", shards_[i].numel(), ")");
  }
  for (size_t i = 0; i < want; ++i) buf_[i].copy_(momentum_buffers[i]);
  step_ = step_count;
}

}  // namespace zt
