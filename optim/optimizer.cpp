// defines: Optimizer (constructor, step, update_shard, state, load_state) (optim/optimizer.h)
#include "optim/optimizer.h"

namespace zt {

Optimizer::Optimizer(std::vector<FlatShard> shards, const char* name) : name_(name), shards_(std::move(shards)) {
  for (const FlatShard& s : shards_) {
    check_shard(s, name_);
    segments_.push_back(decay_segments(s));
  }
}

void Optimizer::step() {
  ++step_;
  for (int i = 0; i < num_shards(); ++i)
    for (const DecaySegment& seg : segments_[i]) update(i, seg);
}

void Optimizer::update_shard(int i, const Tensor& grad) {
  FlatShard& s = shards_.at(i);
  ZT_CHECK(step_ > 0, name_, "::update_shard before begin_step");
  ZT_CHECK(grad.dim() == 1 && grad.is_contiguous() && grad.numel() == s.numel() && grad.dtype() == s.param.dtype(),
           name_, "::update_shard: gradient ", grad.str(), " for shard '", s.name, "' of ", s.numel(), " ",
           dtype_name(s.param.dtype()), " elements");
  Tensor own = s.grad;
  s.grad = grad;
  try {
    for (const DecaySegment& seg : segments_[i]) update(i, seg);
  } catch (...) {
    s.grad = own;
    throw;
  }
  s.grad = own;
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (int i = 0; i < num_shards(); ++i)
    for (auto& [name, t] : shard_state(i)) out.emplace_back(shards_[i].name + "/" + name, t);
  return out;
}

void Optimizer::load_state(int64_t step_count, const std::function<Tensor(const std::string&)>& get) {
  if (step_count < 0) ZT_THROW(name_, "::load_state: step = ", step_count, ", expected >= 0");
  std::vector<std::pair<Tensor, Tensor>> copies;  // (destination, source): check all, then copy
  for (auto& [name, dst] : state()) {
    Tensor src = get(name);
    if (!src.defined() || src.shape() != dst.shape())
      ZT_THROW(name_, "::load_state: '", name, "' is ", src.defined() ? src.str() : std::string("undefined"),
               ", expected ", shape_str(dst.shape()));
    copies.emplace_back(dst, src);
  }
  for (auto& [dst, src] : copies) dst.copy_(src);
  step_ = step_count;
}

}  // namespace zt
