// defines: Optimizer — the one face of every optimizer: flat shards in, step(), lr, and the state a
//          checkpoint saves, by name.
//
// An optimizer owns no parameters: it updates FlatShards (optim/flat_shard.h), each split into
// runs of one weight-decay flag (DecaySegment). step() counts the step, then hands every segment
// of every shard to the subclass's update(). The subclass keeps its per-shard state tensors
// (AdamW: exp_avg, exp_avg_sq; SGD: momentum) and names them; state() and load_state() use those
// names, so a trainer (and later the ZeRO engine) saves and restores any optimizer the same way:
// "<shard name>/<state name>" -> a 1-D tensor of the shard's size.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "optim/flat_shard.h"

namespace zt {

class Optimizer {
 public:
  Optimizer(std::vector<FlatShard> shards, const char* name);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  Optimizer(Optimizer&&) = default;

  // One update of every shard with the current lr (set it from a schedule with set_lr first).
  // Weight decay applies to the elements of parameters with FlatParam::decay only.
  void step();
  // The same step in pieces, for an engine that makes each shard's gradient just in time (the
  // ZeRO engine: a float32 copy of a 2-byte gradient shard, unscaled and clipped, or the float32
  // shard scaled in place):
  // begin_step() counts the step, then update_shard(i, grad) updates shard i from `grad` (1-D,
  // the shard's size and dtype) instead of the shard's own grad. Same arithmetic as step().
  void begin_step() { ++step_; }
  void update_shard(int i, const Tensor& grad);

  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;

  int64_t step_count() const { return step_; }  // updates done so far (PyTorch's state['step'])
  // Sets the update count alone (the ZeRO engine restores state tensors in place, shard by shard).
  void set_step_count(int64_t n) { step_ = n; }
  int num_shards() const { return static_cast<int>(shards_.size()); }
  const FlatShard& shard(int i) const { return shards_.at(i); }

  // ---- state by name (what a checkpoint saves) ----
  // Every state tensor: {"<shard name>/<state name>", tensor}, shards in order.
  std::vector<std::pair<std::string, Tensor>> state() const;
  // Restores step_count and every state tensor from `get(name)` (names as in state()); each must
  // be 1-D of its shard's size (any float dtype, converted). Throws naming the tensor otherwise.
  void load_state(int64_t step_count, const std::function<Tensor(const std::string&)>& get);

 protected:
  // Updates elements [seg.begin, seg.end) of shard i; step_count() is already this step's number.
  virtual void update(int i, const DecaySegment& seg) = 0;
  // The state tensors of shard i with their names (empty when the optimizer keeps none).
  virtual std::vector<std::pair<const char*, Tensor>> shard_state(int i) const = 0;

  const char* name_;
  int64_t step_ = 0;
  std::vector<FlatShard> shards_;
  std::vector<std::vector<DecaySegment>> segments_;  // per shard
};

}  // namespace zt
