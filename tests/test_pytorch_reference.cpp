// defines: 1 Catch2 test case tagged [models], [reference]
//
// GPT-2 against PyTorch: 10 AdamW steps in float32 from the same llm.c checkpoint and token shard
// give the same losses as PyTorch's GPT-2 (nanoGPT definition) within 1e-4 absolute.
//
// The expected numbers were generated ONCE by tests/data/make_gpt2_reference.py with Debian's
// python3-torch (1.13) and are shipped as test data (tests/data/gpt2_tiny_reference.json, with
// gpt2_tiny.bin and tiny_tokens.bin); they are an independent source, not output of this code.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "train/trainer.h"

using namespace zt;

TEST_CASE("GPT-2 trains like PyTorch's nanoGPT for 10 AdamW steps", "[models][reference]") {
  const std::string dir = std::string(ZT_SOURCE_DIR) + "/tests/data/";
  std::ifstream f(dir + "gpt2_tiny_reference.json");
  REQUIRE(f.good());
  const nlohmann::json ref = nlohmann::json::parse(f);
  const nlohmann::json& tr = ref.at("train");

  RunConfig c;
  c.init_from = dir + "gpt2_tiny.bin";
  c.train_data = dir + "tiny_tokens.bin";
  c.engine.train_micro_batch_size_per_gpu = tr.at("B");
  c.seq_len = tr.at("T");
  c.steps = tr.at("steps");
  c.engine.optimizer.type = OptimizerType::adamw;
  c.engine.optimizer.lr = tr.at("lr");
  c.engine.scheduler.type = SchedulerType::constant;
  c.engine.optimizer.beta1 = tr.at("beta1");
  c.engine.optimizer.beta2 = tr.at("beta2");
  c.engine.optimizer.eps = tr.at("eps");
  c.engine.optimizer.weight_decay = tr.at("weight_decay");
  c.engine.gradient_clipping = 0;  // the reference does not clip
  Trainer trainer(c);

  const std::vector<double> expected = ref.at("losses").get<std::vector<double>>();
  REQUIRE(expected.size() == 10);
  for (size_t k = 0; k < expected.size(); ++k) {
    StepStats s = trainer.step();
    INFO("step " << k << ": ours " << s.loss << ", PyTorch " << expected[k]);
    CHECK(std::abs(s.loss - expected[k]) <= 1e-4);
  }
}
