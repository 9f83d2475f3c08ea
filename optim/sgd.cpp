// defines: SgdHyper (validate), sgd_args, Sgd (constructor, set_lr, update, shard_state, load_state)
//          (optim/sgd.h)
#include "optim/sgd.h"

#include "core/backend.h"

namespace zt {

void SgdHyper::validate() const {
  if (!(lr >= 0)) ZT_THROW("SGD: lr = ", lr, ", expected >= 0");
  if (!(momentum >= 0)) ZT_THROW("SGD: momentum = ", momentum, ", expected >= 0");
  if (!(weight_decay >= 0)) ZT_THROW("SGD: weight_decay = ", weight_decay, ", expected >= 0");
  if (nesterov && !(momentum > 0)) ZT_THROW("SGD: nesterov = true needs momentum > 0 (got ", momentum, ")");
}

SgdArgs sgd_args(const SgdHyper& h, bool decay) {
  SgdArgs a;
  a.lr = h.lr;
  a.momentum = h.momentum;
  a.weight_decay = h.weight_decay;
  a.nesterov = h.nesterov;
  a.decay = decay;
  return a;
}

Sgd::Sgd(std::vector<FlatShard> shards, const SgdHyper& h) : Optimizer(std::move(shards), "SGD"), h_(h) {
  h_.validate();
  for (const FlatShard& s : shards_) {
    if (!(h_.momentum > 0)) {  // plain SGD keeps no state
      buf_.emplace_back();
      continue;
    }
    Allocator& a = backend_of(s.param).allocator();  // the state lives with the shard
    buf_.push_back(Tensor::zeros({s.numel()}, s.param.dtype(), Category::optim, a));
  }
}

void Sgd::set_lr(double lr) {
  if (!(lr >= 0)) ZT_THROW("SGD::set_lr: lr = ", lr, ", expected >= 0");
  h_.lr = lr;
}

// Elements [seg.begin, seg.end) of shard i, on the shard's device (core/backend.h's sgd_step; the
// cpu backend runs core/kernels/sgd.h's sgd_update) on flat views of param, grad and the buffer.
void Sgd::update(int i, const DecaySegment& seg) {
  const FlatShard& s = shards_[i];
  const Shape shape{seg.end - seg.begin};
  const Tensor& buf = buf_[i];
  backend_of(s.param).sgd_step(s.param.flat_view(seg.begin, shape), s.grad.flat_view(seg.begin, shape),
                               buf.defined() ? buf.flat_view(seg.begin, shape) : Tensor(), sgd_args(h_, seg.decay));
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
