// defines: 2 Catch2 test cases tagged [partitioned]; helpers: engine_config, train_step
//
// Partitioned construction (zero/engine.cpp's load_initial, models/init.h's ModelInit) on N
// ranks: an engine built from a model that holds no bytes ends up with exactly the shards of an
// engine built from the whole, initialized model (every stage, fp32 and bf16, with and without
// parameter offload), trains to the same losses bit for bit, and at stage 3 never holds more
// parameters than its shards plus the units being computed.
#include <catch2/catch.hpp>

#include <filesystem>

#include "models/init.h"
#include "tests/bitwise.h"
#include "train/trainer.h"

using namespace zt;

namespace {

const std::string kCorpus = std::string(ZT_SOURCE_DIR) + "/data/corpus/train.txt";

EngineConfig engine_config(int stage, Precision p, const std::string& offload, const std::string& dir) {
  RunConfig c;
  c.model = "gpt2-nano";
  c.train_data = kCorpus;
  c.engine.train_micro_batch_size_per_gpu = 2;
  c.seq_len = 32;
  c.engine.precision = p;
  c.engine.zero.stage = stage;
  c.engine.zero.reduce_bucket_size = 1000;
  c.engine.zero.allgather_bucket_size = 1500;
  c.engine.zero.stage3_param_persistence_threshold = 100;
  if (!offload.empty()) {
    c.engine.zero.offload_optimizer.device = offload_device_from_name(offload);
    c.engine.zero.offload_optimizer.nvme_path = offload == "nvme" ? dir : "";
    if (stage == 3) {  // offload_param is stage 3's
      c.engine.zero.offload_param.device = offload_device_from_name(offload);
      c.engine.zero.offload_param.nvme_path = c.engine.zero.offload_optimizer.nvme_path;
    }
  }
  return c.engine;
}

double train_step(Engine& e, DataLoader& data) {
  Tensor x, y;
  data.next_batch(x, y);
  e.backward(e.forward(x, y));
  return e.step(1e-3).loss;
}

}  // namespace

TEST_CASE("partitioned construction equals building the whole model, then sharding", "[partitioned]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size();
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("zt_partitioned_np" + std::to_string(N))).string();
  struct Case {
    int stage;
    Precision precision;
    const char* offload;
  };
  const Case cases[] = {{1, Precision::f32, ""},     {2, Precision::f32, ""},     {3, Precision::f32, ""},
                        {1, Precision::bf16, ""},    {2, Precision::bf16, ""},    {3, Precision::bf16, ""},
                        {3, Precision::f32, "cpu"},  {3, Precision::f32, "nvme"}, {2, Precision::f32, "cpu"}};
  for (const char* model : {"gpt2-nano", "llama-nano"})
    for (const Case& k : cases) {
      INFO(model << ", stage " << k.stage << ", " << precision_name(k.precision) << ", offload '" << k.offload
                  << "', " << N << " ranks");
      ModelOptions o;
      o.world_size = N;
      o.alignment = kShardAlignment;
      auto whole = make_model(model_config(model), o);
      Rng r1(1337);
      init_model(*whole, r1);
      auto a = initialize(*whole, engine_config(k.stage, k.precision, k.offload, dir + "_a"), g);

      o.materialize = false;
      auto lazy = make_model(model_config(model), o);
      Rng r2(1337);
      ModelInit init(*lazy, r2);
      auto b = initialize(*lazy, engine_config(k.stage, k.precision, k.offload, dir + "_b"), g, &init);
      CHECK(r1.state() == r2.state());

      CHECK(test::bitwise_equal(a->shards(), b->shards()));
      TokenIds tokens = load_tokens(kCorpus);
      DataLoader da(tokens, 2, 32, g.rank(), N), db(tokens, 2, 32, g.rank(), N);
      for (int step = 0; step < 2; ++step) CHECK(train_step(*a, da) == train_step(*b, db));
      a.reset();
      b.reset();
    }
  std::filesystem::remove_all(dir + "_a");
  std::filesystem::remove_all(dir + "_b");
}

TEST_CASE("stage 3 with partitioned construction never holds the whole model's parameters", "[partitioned]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size();
  ModelOptions o;
  o.world_size = N;
  o.alignment = kShardAlignment;
  o.materialize = false;
  ModelConfig cfg = model_config("gpt-mini");  // 6 blocks: the whole model is far above a shard + 2 units
  auto model = make_model(cfg, o);
  int64_t padded = 0, largest = 0;
  for (Unit* u : model->units()) {
    padded += u->params().padded_numel();
    largest = std::max(largest, u->params().padded_numel());
  }
  cpu_allocator().reset_peaks();
  const int64_t before = cpu_allocator().stats().cur(Category::params);
  Rng rng(7);
  ModelInit init(*model, rng);
  RunConfig c;
  c.model = "gpt-mini";
  c.train_data = kCorpus;
  c.engine.train_micro_batch_size_per_gpu = 1;
  c.seq_len = 16;
  c.engine.zero.stage = 3;
  c.engine.zero.stage3_param_persistence_threshold = 0;
  c.engine.zero.stage3_prefetch_bucket_size = largest;  // one unit ahead
  c.engine.zero.stage3_max_live_parameters = 2 * largest;
  c.engine.zero.stage3_max_reuse_distance = 0;
  auto e = initialize(*model, c.engine, g, &init);
  const int64_t shards = padded / N * 4;  // float32
  const int64_t setup_peak = cpu_allocator().stats().max(Category::params) - before;
  INFO("shards " << shards << " B, largest unit " << largest * 4 << " B, whole model " << padded * 4 << " B");
  CHECK(setup_peak <= shards + largest / N * 4);  // the shards + one unit's shard being made
  TokenIds tokens = load_tokens(kCorpus);
  DataLoader data(tokens, 1, 16, g.rank(), N);
  cpu_allocator().reset_peaks();
  train_step(*e, data);
  const int64_t step_peak = cpu_allocator().stats().max(Category::params) - before;
  CHECK(step_peak <= shards + 3 * largest * 4);  // + the live units: the one computing, the prefetched, the tied embedding
  if (N > 1) CHECK(step_peak < padded * 4);
}
