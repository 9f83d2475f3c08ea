// defines: Embed, Block, Head, ChainModel, main — a model of your own, made of nn layers, trained
//          with the ZeRO engine at stage 3 on MPI ranks:  mpirun -np 2 ./train_custom
//
// Before anything is allocated, each rank runs its training step on the meta device (a dry run,
// train/dry_run.h: shapes without bytes, the real engine) and prints the peaks it predicts; after
// training it holds them against the peaks it measured, and fails if one differs.
// The task: sequences that follow x[t+1] = (5 x[t] + 3) mod V from a random start; the model
// learns the map, so the loss falls from ln(V) = 4.16 towards 0. A model is a list of units,
// each owning one flat ParamSet: what ZeRO shards, gathers and frees, one unit at a time.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <zt/core/parallel.h>
#include <zt/core/rng.h>
#include <zt/nn/layers.h>
#include <zt/train/dry_run.h>
#include <zt/zero/engine.h>

constexpr int64_t V = 64, C = 64, T = 16, kBlocks = 3;  // vocabulary, width, sequence, depth

// Each layer adds its parameters to the ParamSet of the unit it is built in (params_).
struct Embed : zt::Unit {
  Embed() : Unit("embed") {}
  zt::Embedding wte{params_, "wte", V, C};  // (B, T) ids -> (B, T, C)
};
struct Block : zt::Unit {
  explicit Block(int i) : Unit("block." + std::to_string(i)) {}
  zt::GeluMLP mlp{params_, "mlp", C, 4 * C};  // x + mlp(x): (B, T, C) -> (B, T, C)
};
struct Head : zt::Unit {
  Head() : Unit("head") {}
  zt::Linear proj{params_, "proj", C, V, /*bias=*/false};  // (B, T, C) -> (B, T, V)
};

class ChainModel final : public zt::Model {
 public:
  explicit ChainModel(int64_t world_size) {
    for (int i = 0; i < kBlocks; ++i) blocks_.push_back(std::make_unique<Block>(i));
    finalize_params(world_size, zt::kShardAlignment, /*materialize=*/true);  // flat, padded for N ranks
  }
  std::string family() const override { return "chain-mlp"; }
  std::vector<zt::Unit*> units() override {
    std::vector<zt::Unit*> u{&embed_};
    for (auto& b : blocks_) u.push_back(b.get());
    u.push_back(&head_);
    return u;
  }
  // Each unit runs inside its residency scope: at stage 3 the engine gathers the unit's
  // parameters before and frees them after (and again around its backward).
  zt::Var logits(const zt::Tensor& idx) override {  // idx (B, T) -> (B, T, V)
    Embed* e = &embed_;
    zt::Var x = zt::run_unit(*residency_, *e, {}, [e, idx](const zt::Var&) { return e->wte.forward(idx); });
    for (auto& bp : blocks_) {
      Block* b = bp.get();
      x = zt::run_unit(*residency_, *b, x, [b](const zt::Var& in) { return zt::add(in, b->mlp.forward(in)); });
    }
    Head* h = &head_;
    return zt::run_unit(*residency_, *h, x, [h](const zt::Var& in) { return h->proj.forward(in); });
  }
  zt::Var loss(const zt::Tensor& idx, const zt::Tensor& targets) override {
    return zt::cross_entropy(logits(idx), targets);
  }
  int64_t vocab_size() const override { return V; }
  int64_t max_seq_len() const override { return T; }

 private:
  Embed embed_;
  std::vector<std::unique_ptr<Block>> blocks_;
  Head head_;
};

int main() {
  zt::ProcessGroup& group = zt::init_process_group();  // MPI under mpirun; one process without
  // A DeepSpeed-style config (docs/config.md); threshold 0: no unit stays gathered.
  const zt::EngineConfig cfg = zt::parse_engine_config(nlohmann::json::parse(R"({
      "train_micro_batch_size_per_gpu": 8, "gradient_clipping": 1.0,
      "optimizer": {"type": "AdamW", "params": {"lr": 0.003, "weight_decay": 0.0}},
      "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}})"), "train_custom", group.size());

  // What this rank will hold, before a byte is allocated: the same model and steps, dry.
  zt::DryRunRequest dry;
  dry.build = [](int64_t world_size) { return std::make_unique<ChainModel>(world_size); };
  dry.run.engine = cfg;
  dry.run.seq_len = T;
  dry.world_size = group.size();
  dry.nodes = group.topology().num_nodes();
  dry.rank = group.rank();
  dry.threads = zt::num_threads();
  const zt::DryRun predicted = zt::dry_run(dry);
  if (group.rank() == 0)
    std::printf("dry run, rank 0: a step peaks at params %lld, grads %lld, optim %lld, activations %lld bytes\n",
                static_cast<long long>(predicted.steady().device.max(zt::Category::params)),
                static_cast<long long>(predicted.steady().device.max(zt::Category::grads)),
                static_cast<long long>(predicted.steady().device.max(zt::Category::optim)),
                static_cast<long long>(predicted.steady().device.max(zt::Category::activations)));

  ChainModel model(group.size());
  zt::Rng init(1234);  // the same seed on every rank: the same initial model
  for (zt::Unit* u : model.units())
    for (int i = 0; i < u->params().size(); ++i)
      if (zt::Tensor w = u->params().value(i); u->params().infos()[i].decay) init.fill_normal(w, 0.0, 0.02);
  std::unique_ptr<zt::Engine> engine = zt::initialize(model, cfg, group);
  zt::default_allocator().reset_peaks();  // from here on: the training steps' peaks (the init above is ours)

  const int64_t B = cfg.train_micro_batch_size_per_gpu;
  zt::Rng data(42 + group.rank());  // each rank draws its own batches
  zt::Tensor idx = zt::Tensor::empty({B, T}, zt::DType::i32), targets = zt::Tensor::empty({B, T}, zt::DType::i32);
  for (int step = 1; step <= 60; ++step) {
    int32_t *x = idx.data<int32_t>(), *y = targets.data<int32_t>();
    for (int64_t i = 0; i < B * T; ++i) {
      x[i] = i % T == 0 ? static_cast<int32_t>(data.next_u32() % V) : y[i - 1];
      y[i] = (5 * x[i] + 3) % V;
    }
    engine->backward(engine->forward(idx, targets));  // gradients reduce-scattered unit by unit
    const zt::StepResult r = engine->step(cfg.optimizer.lr);  // AdamW on this rank's shards
    if (group.rank() == 0 && (step == 1 || step % 10 == 0)) std::printf("step %2d  loss %.4f\n", step, r.loss);
  }
  const zt::MemoryReport mem = engine->memory_report();
  std::printf("rank %d holds %lld bytes of parameters: its shard of %lld (padded) on %d ranks\n", group.rank(),
              static_cast<long long>(mem.measured.cur(zt::Category::params)),
              static_cast<long long>(mem.psi_padded), group.size());
  // The steps' peaks measured (the device's allocator) against the dry run's steps, every category.
  int wrong = 0;
  for (zt::Category c : zt::kAllCategories) {
    int64_t said = 0;
    for (const zt::DryRunStep& s : predicted.steps) said = std::max(said, s.device.max(c));
    if (mem.measured.max(c) != said) {
      std::printf("rank %d: %s peaked at %lld bytes, the dry run said %lld\n", group.rank(), zt::category_name(c),
                  static_cast<long long>(mem.measured.max(c)), static_cast<long long>(said));
      ++wrong;
    }
  }
  if (wrong == 0) std::printf("rank %d: every peak as the dry run predicted\n", group.rank());
  engine.reset();  // the engine's collectives end before MPI does
  zt::finalize_process_group();
  return wrong == 0 ? 0 : 1;
}
