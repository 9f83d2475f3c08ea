// defines: 1 Catch2 test case tagged [memory]
//
// Memory accounting of a training step: every byte lands in the category the architecture says,
// and the model-state categories hold exactly the flat buffers (the numbers ZeRO's formulas
// will be checked against in the next issue).
#include <catch2/catch.hpp>

#include "models/init.h"
#include "optim/adamw.h"
#include "zero/param_layout.h"

using namespace zt;

TEST_CASE("a training step allocates params, grads and optim state exactly as the flat buffers", "[memory]") {
  Allocator& a = cpu_allocator();
  const MemoryStats before = a.stats();
  auto m = make_model(model_config("gpt2-nano"));
  Rng rng(3);
  init_model(*m, rng);
  std::vector<ParamSet*> sets;
  int64_t padded = 0;
  for (Unit* u : m->units()) {
    sets.push_back(&u->params());
    padded += u->params().padded_numel();
  }
  AdamW opt(full_shards(sets, "AdamW"), AdamWHyper{});
  Tensor idx = Tensor::zeros({2, 16}, DType::i32), tgt = Tensor::zeros({2, 16}, DType::i32);
  for (int64_t i = 0; i < 32; ++i) {
    idx.data<int32_t>()[i] = static_cast<int32_t>((7 * i) % 256);
    tgt.data<int32_t>()[i] = static_cast<int32_t>((7 * i + 1) % 256);
  }
  a.reset_peaks();
  for (int step = 0; step < 2; ++step) {
    m->zero_grad();
    m->loss(idx, tgt).backward();
    opt.step();
  }
  const MemoryStats after = a.stats();
  const int64_t bytes = padded * 4;  // float32
  auto delta = [&](Category c) { return after.cur(c) - before.cur(c); };
  CHECK(delta(Category::params) == bytes);
  CHECK(delta(Category::grads) == bytes);
  CHECK(delta(Category::optim) == 2 * bytes);  // AdamW's m and v
  // No transient allocation was tagged as model state during the steps: peaks equal currents.
  CHECK(after.max(Category::params) == after.cur(Category::params));
  CHECK(after.max(Category::grads) == after.cur(Category::grads));
  CHECK(after.max(Category::optim) == after.cur(Category::optim));
  CHECK(after.max(Category::activations) > after.cur(Category::activations));  // activations came and went
  CHECK(delta(Category::activations) >= 0);
}
