// defines: 9 Catch2 test cases tagged [config]; helpers: cfg_path, parse, error_of
//
// zero/engine_config.h: the DeepSpeed-style config parser. The ready configs in configs/ parse with the
// expected fields at several world sizes; to_json -> parse is the identity; every error case of
// docs/config.md is refused with a message that names the key path and the allowed values.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "core/check.h"
#include "tests/temp_dir.h"
#include "zero/engine_config.h"
#include "zero/zeropp.h"  // defines: qgz_runs, qgz_summary

using namespace zt;
using nlohmann::json;
using Catch::Contains;

namespace {

const std::set<std::string> kCallerKeys = {"model", "train_data", "val_data", "seq_len", "steps",
                                           "seed", "eval_interval", "eval_batches", "checkpoint"};

std::string cfg_path(const std::string& name) { return std::string(ZT_SOURCE_DIR) + "/configs/" + name; }

EngineConfig parse(const std::string& text, int world = 1) {
  return parse_engine_config(json::parse(text), "test.json", world);
}

// Parses `text` expecting failure; returns the message.
std::string error_of(const std::string& text, int world = 1) {
  try {
    parse(text, world);
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("config parsed but an error was expected: " << text);
  return "";
}

}  // namespace

TEST_CASE("ready configs parse with the expected fields", "[config]") {
  for (int world : {1, 2, 4}) {
    for (int stage = 0; stage <= 3; ++stage) {
      const std::string name = "zero" + std::to_string(stage) + ".json";
      INFO(name << " world " << world);
      const EngineConfig c = engine_config_from_file(cfg_path(name), world, kCallerKeys);
      CHECK(c.zero.stage == stage);
      CHECK(c.train_micro_batch_size_per_gpu == 4);
      CHECK(c.gradient_accumulation_steps == 1);
      CHECK(c.train_batch_size == 4 * world);
      CHECK(c.gradient_clipping == 1.0);
      CHECK(c.precision == Precision::f32);
      CHECK(c.optimizer.type == OptimizerType::adamw);
      CHECK(c.optimizer.lr == 1e-3);
      CHECK(c.optimizer.beta1 == 0.9);
      CHECK(c.optimizer.beta2 == 0.95);
      CHECK(c.optimizer.weight_decay == 0.1);
      CHECK(c.scheduler.type == SchedulerType::cosine);
      CHECK(c.scheduler.cos_min_ratio == 0.1);
      CHECK(c.zero.contiguous_gradients);
      CHECK(c.zero.overlap_comm == (stage == 3));
      CHECK_FALSE(c.zero.offload_optimizer.enabled());
      CHECK_FALSE(c.zero.offload_param.enabled());
      if (stage == 3) {
        CHECK(c.zero.stage3_param_persistence_threshold == 1000);
        CHECK(c.zero.stage3_max_live_parameters == 4000000);
        CHECK(c.zero.stage3_prefetch_bucket_size == 2000000);
        CHECK(c.zero.stage3_max_reuse_distance == 0);
        CHECK(c.zero.reduce_bucket_size == 500000);
      }
    }
    const EngineConfig b = engine_config_from_file(cfg_path("zero3-bf16.json"), world, kCallerKeys);
    CHECK(b.precision == Precision::bf16);
    CHECK(b.zero.stage == 3);
    CHECK(b.zero.stage3_max_live_parameters == 4000000);
    if (world % 2 == 0) {  // hpZ over 2 ranks: an even world
      const EngineConfig z = engine_config_from_file(cfg_path("zero3-zeropp.json"), world, kCallerKeys);
      CHECK(z.zero.zero_quantized_weights);
      CHECK(z.zero.zero_hpz_partition_size == 2);
      CHECK(z.zero.zero_quantized_gradients);
      CHECK(z.zero.zero_quantized_gradients_bits == 4);  // DeepSpeed's int4
      CHECK(z.zero.zero_quantization_block_size == 4096);
      CHECK(z.zero.zero_quantized_gradients_format == "deepspeed");
      CHECK(z.zero.zeropp());
      CHECK(!b.zero.zeropp());
      CHECK_FALSE(z.zero.zero_quantized_gradients_one_node);  // DeepSpeed's: qgZ across nodes only
    }
    const EngineConfig h = engine_config_from_file(cfg_path("zero2-fp16.json"), world, kCallerKeys);
    CHECK(h.precision == Precision::f16);
    CHECK(h.fp16.enabled);
    CHECK(h.fp16.loss_scale == 0);  // dynamic
    CHECK(h.fp16.initial_scale_power == 16);
    CHECK(h.zero.stage == 2);
  }
  CHECK(std::string(precision_name(Precision::f32)) == "fp32");
  CHECK(std::string(precision_name(Precision::bf16)) == "bf16");
  CHECK(std::string(precision_name(Precision::f16)) == "fp16");
}

TEST_CASE("ready configs need the caller keys", "[config]") {
  CHECK_THROWS_WITH(engine_config_from_file(cfg_path("zero1.json"), 1),
                    Contains("unknown key 'model'") && Contains("zero_optimization"));
}

TEST_CASE("defaults are DeepSpeed's", "[config]") {
  const EngineConfig c = parse("{}", 2);
  CHECK(c == [] {
    EngineConfig d;
    d.train_batch_size = 2;
    return d;
  }());
  CHECK(c.train_micro_batch_size_per_gpu == 1);
  CHECK(c.gradient_accumulation_steps == 1);
  CHECK_FALSE(c.zero.overlap_comm);
  CHECK(parse(R"({"zero_optimization": {"stage": 3}})").zero.overlap_comm);
  CHECK_FALSE(parse(R"({"zero_optimization": {"stage": 3, "overlap_comm": false}})").zero.overlap_comm);
  CHECK(parse(R"({"zero_optimization": {"stage": 1, "overlap_comm": true}})").zero.overlap_comm);
  // SGD: torch's weight decay default 0
  const EngineConfig s = parse(R"({"optimizer": {"type": "sgd", "params": {"lr": 0.1, "momentum": 0.5}}})");
  CHECK(s.optimizer.type == OptimizerType::sgd);
  CHECK(s.optimizer.weight_decay == 0);
  CHECK(s.optimizer.momentum == 0.5);
  CHECK(parse(R"({"optimizer": {"type": "adam"}})").optimizer.type == OptimizerType::adam);
  CHECK(parse(R"({"optimizer": {"type": "ADAMW"}})").optimizer.type == OptimizerType::adamw);
  CHECK(parse(R"({"optimizer": {"type": "SGD"}})").optimizer.momentum == 0);  // torch.optim.SGD's default
  // ZeRO++ as DeepSpeed reads it: hpZ 0 is off like 1; qgZ at stage 3 across nodes only
  CHECK_FALSE(parse(R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 0}})").zero.zeropp());
  CHECK(parse(R"({"zero_optimization": {"stage": 3, "zero_quantized_nontrainable_weights": true}})")
            .zero.zero_quantized_nontrainable_weights);
  ZeroOptimization q = parse(R"({"zero_optimization": {"stage": 3, "zero_quantized_gradients": true}})").zero;
  CHECK_FALSE(qgz_runs(q, 1));
  CHECK(qgz_runs(q, 2));
  CHECK(qgz_summary(q, 1).find("qgZ off on one node") == 0);
  CHECK(qgz_summary(q, 2) == "qgZ int4 (DeepSpeed's groups, fp16 sums) across 2 nodes");
  q.zero_quantized_gradients_one_node = true;
  CHECK(qgz_runs(q, 1));
  q.stage = 2;  // a config made in code: still never below stage 3
  CHECK_FALSE(qgz_runs(q, 2));
  // DeepSpeed's exact tensors: 1-D ones, and sizes not a multiple of 2 x world; the others in
  // max(d0, d1, world) groups
  const std::vector<ParamInfo> ps = {{"w", {8, 6}, 0, 48, true, {}},
                                     {"b", {8}, 48, 8, true, {}},
                                     {"odd", {5, 3}, 56, 15, true, {}},
                                     {"w2", {4, 4}, 71, 16, true, {}}};
  const QgzLayout four = qgz_layout(ps, 4), three = qgz_layout(ps, 3);
  CHECK(four.exact == ExactRanges{{48, 56}, {56, 71}});  // 48, 16: multiples of 8
  CHECK(four.quantized == std::vector<QgzLayout::Run>{{0, 48, 6}, {71, 87, 4}});
  CHECK(three.exact == ExactRanges{{48, 56}, {56, 71}, {71, 87}});  // 16 is not a multiple of 6
  CHECK(three.quantized == std::vector<QgzLayout::Run>{{0, 48, 6}});
  CHECK(qgz_layout({{"w", {2, 3, 8}, 0, 48, true, {}}}, 12).quantized ==
        std::vector<QgzLayout::Run>{{0, 48, 4}});  // world
  q.stage = 3;
  q.zero_quantized_gradients_format = "blocks";
  CHECK(qgz_summary(q, 2) == "qgZ int4 (blocks of 4096, float32 sums) across 2 nodes");
}

TEST_CASE("batch sizes: any two of three determine the third", "[config]") {
  auto check = [](const std::string& text, int world, int64_t t, int64_t m, int64_t a) {
    INFO(text << " world " << world);
    const EngineConfig c = parse(text, world);
    CHECK(c.train_batch_size == t);
    CHECK(c.train_micro_batch_size_per_gpu == m);
    CHECK(c.gradient_accumulation_steps == a);
  };
  check(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2})", 4, 32, 4, 2);
  check(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4})", 4, 32, 4, 2);
  check(R"({"train_batch_size": 32, "gradient_accumulation_steps": 4})", 2, 32, 4, 4);
  check(R"({"train_batch_size": 12})", 3, 12, 4, 1);
  check(R"({"train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 5})", 2, 30, 3, 5);
  check(R"({"train_micro_batch_size_per_gpu": 3})", 4, 12, 3, 1);
  check(R"({"gradient_accumulation_steps": 3})", 2, 6, 1, 3);
  check(R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 2})",
        2, 4, 1, 2);
  check(R"({"train_micro_batch_size_per_gpu": 2e0})", 1, 2, 2, 1);  // integral float accepted
}

TEST_CASE("auto resolves to the defaults", "[config]") {
  const EngineConfig c = parse(R"({
    "gradient_clipping": "auto",
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": "auto", "warmup_max_lr": "auto", "warmup_min_lr": "auto"}},
    "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "allgather_bucket_size": "auto",
      "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
      "stage3_max_live_parameters": "auto", "stage3_max_reuse_distance": "auto", "sub_group_size": "auto"}})");
  const EngineConfig d;
  CHECK(c.gradient_clipping == d.gradient_clipping);
  CHECK(c.optimizer == d.optimizer);
  CHECK(c.scheduler == [&] {  // WarmupLR's own defaults, and "auto" warmup_max_lr: the optimizer's lr
    SchedulerConfig s = SchedulerConfig::defaults(SchedulerType::warmup_lr);
    s.warmup_max_lr = d.optimizer.lr;
    return s;
  }());
  CHECK(c.zero.reduce_bucket_size == d.zero.reduce_bucket_size);
  CHECK(c.zero.stage3_prefetch_bucket_size == d.zero.stage3_prefetch_bucket_size);
  CHECK(c.zero.stage3_param_persistence_threshold == d.zero.stage3_param_persistence_threshold);
  CHECK(c.zero.stage3_max_live_parameters == d.zero.stage3_max_live_parameters);
  CHECK(c.zero.sub_group_size == d.zero.sub_group_size);
}

TEST_CASE("to_json then parse gives the same config", "[config]") {
  const char* texts[] = {
      "{}",
      R"({"train_batch_size": 24, "gradient_accumulation_steps": 3, "gradient_clipping": 0.5,
          "steps_per_print": 7, "wall_clock_breakdown": true,
          "fp16": {"enabled": true, "loss_scale": 128, "initial_scale_power": 12, "loss_scale_window": 50,
                   "hysteresis": 3, "min_loss_scale": 0.25},
          "optimizer": {"type": "Adam", "params": {"lr": 3e-4, "betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 0}},
          "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 17, "warmup_max_lr": 3e-4}},
          "zero_optimization": {"stage": 2, "overlap_comm": true, "reduce_bucket_size": 1234,
                                "allgather_bucket_size": 777, "sub_group_size": 99,
                                "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp/x", "pin_memory": true,
                                                      "buffer_count": 3, "buffer_size": 4096}},
          "activation_checkpointing": {"enabled": true, "cpu_checkpointing": true}})",
      R"({"bf16": {"enabled": true}, "optimizer": {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.8, "weight_decay": 1e-4}},
          "scheduler": {"type": "WarmupCosineLR", "params": {"warmup_num_steps": 5, "total_num_steps": 100, "cos_min_ratio": 0.05}},
          "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 0, "stage3_param_persistence_threshold": 5,
                                "stage3_max_live_parameters": 100, "stage3_max_reuse_distance": 3,
                                "offload_param": {"device": "none"}, "offload_optimizer": {"device": "none"},
                                "zero_quantized_weights": true, "zero_quantized_gradients": true,
                                "zero_quantized_gradients_bits": 8, "zero_quantization_block_size": 512,
                                "zero_quantized_gradients_format": "blocks"}})",
      R"({"bf16": {"enabled": true}, "aio": {"block_size": 262144, "queue_depth": 32},
          "zero_optimization": {"stage": 3, "sub_group_size": 5000,
                                "offload_param": {"device": "cpu", "pin_memory": true},
                                "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp/y", "buffer_count": 2}}})",
  };
  for (const char* text : texts) {
    for (int world : {1, 4}) {
      INFO(text << " world " << world);
      const EngineConfig a = parse(text, world);
      json j = a;
      const EngineConfig b = parse_engine_config(j, "round trip", world);
      CHECK(a == b);
      CHECK(json(b) == j);
    }
  }
  // the second text really set the non-defaults (the round trip is not of defaults only)
  const EngineConfig c = parse(texts[1], 2);
  CHECK(c.train_micro_batch_size_per_gpu == 4);
  CHECK(c.precision == Precision::f16);
  CHECK(c.fp16.loss_scale == 128);
  CHECK(c.optimizer.beta1 == 0.8);
  CHECK(c.scheduler.warmup_num_steps == 17);
  CHECK(c.zero.offload_optimizer.device == OffloadDevice::nvme);
  CHECK(c.zero.offload_optimizer.nvme_path == "/tmp/x");
  CHECK(c.activation_checkpointing);
  CHECK(c.cpu_checkpointing);
  CHECK(!parse(texts[0], 2).cpu_checkpointing);  // off unless asked
  CHECK(c.wall_clock_breakdown);
  const EngineConfig e = parse(texts[2], 2);
  CHECK(e.zero.zero_quantized_weights);
  CHECK(e.zero.zero_quantized_gradients_bits == 8);
  CHECK(e.zero.zero_quantization_block_size == 512);
  CHECK(e.zero.zero_quantized_gradients_format == "blocks");
  const EngineConfig d = parse(texts[3], 2);
  CHECK(d.aio.block_size == 262144);
  CHECK(d.aio.queue_depth == 32);
  CHECK(d.zero.offload_param.pin_memory);
  CHECK(d.zero.offload_optimizer.buffer_count == 2);
  // the ready configs round-trip too
  for (const char* name : {"zero0.json", "zero3.json", "zero3-bf16.json", "zero2-fp16.json", "zero3-zeropp.json"}) {
    const EngineConfig r = engine_config_from_file(cfg_path(name), 2, kCallerKeys);
    CHECK(parse_engine_config(json(r), "round trip", 2) == r);
  }
}

TEST_CASE("the caller keys are skipped and only those", "[config]") {
  const json j = json::parse(R"({"model": "gpt-mini", "steps": 10, "zero_optimization": {"stage": 1}})");
  CHECK(parse_engine_config(j, "x", 1, {"model", "steps"}).zero.stage == 1);
  CHECK_THROWS_WITH(parse_engine_config(j, "x", 1, {"model"}), Contains("unknown key 'steps'"));
}

TEST_CASE("invalid configs are errors naming the key and the allowed values", "[config]") {
  struct Case {
    const char* text;
    std::vector<std::string> parts;
    int world = 1;
  };
  const std::vector<Case> cases = {
      // unknown keys
      {R"({"zero_optimisation": {}})", {"config 'test.json'", "unknown key 'zero_optimisation'", "zero_optimization"}},
      {R"({"zero_optimization": {"stag": 3}})",
       {"unknown key 'zero_optimization.stag'", "known keys: stage, overlap_comm"}},
      {R"({"fp16": {"enable": true}})", {"unknown key 'fp16.enable'", "enabled"}},
      {R"({"optimizer": {"type": "AdamW", "params": {"momentum": 0.9}}})",
       {"unknown key 'optimizer.params.momentum'", "for AdamW", "betas"}},
      {R"({"zero_optimization": {"offload_param": {"device": "cpu", "max_in_cpu": 1}, "stage": 3}})",
       {"unknown key 'zero_optimization.offload_param.max_in_cpu'", "buffer_size"}},
      // wrong types
      {R"({"zero_optimization": {"stage": "3"}})", {"zero_optimization.stage must be an integer, got \"3\""}},
      {R"({"zero_optimization": {"overlap_comm": 1}})", {"zero_optimization.overlap_comm must be a boolean, got 1"}},
      {R"({"zero_optimization": {"stage": 2.5}})", {"zero_optimization.stage must be an integer, got 2.5"}},
      {R"({"zero_optimization": 3})", {"zero_optimization must be a JSON object, got 3"}},
      {R"({"optimizer": {"type": 1}})", {"optimizer.type must be a string, got 1"}},
      {R"({"gradient_clipping": "1.0"})", {"gradient_clipping must be a number, got \"1.0\""}},
      {R"([1, 2])", {"the top level must be a JSON object"}},
      // out of range
      {R"({"zero_optimization": {"stage": 4}})", {"zero_optimization.stage = 4 is invalid: expected 0, 1, 2 or 3"}},
      {R"({"zero_optimization": {"stage": -1}})", {"zero_optimization.stage = -1 is invalid: expected 0, 1, 2 or 3"}},
      {R"({"zero_optimization": {"reduce_bucket_size": 0}})",
       {"zero_optimization.reduce_bucket_size = 0 is invalid: expected an integer >= 1"}},
      {R"({"zero_optimization": {"reduce_bucket_size": -5}})",
       {"zero_optimization.reduce_bucket_size = -5 is invalid", ">= 1"}},
      {R"({"zero_optimization": {"allgather_bucket_size": 0}})",
       {"zero_optimization.allgather_bucket_size = 0 is invalid", ">= 1"}},
      {R"({"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": -1}})",
       {"zero_optimization.stage3_prefetch_bucket_size = -1 is invalid", ">= 0"}},
      {R"({"zero_optimization": {"sub_group_size": 0}})", {"zero_optimization.sub_group_size = 0 is invalid", ">= 1"}},
      {R"({"fp16": {"enabled": true, "loss_scale": -1}})",
       {"fp16.loss_scale = -1 is invalid", "0 (dynamic) or a positive"}},
      {R"({"fp16": {"min_loss_scale": 0}})", {"fp16.min_loss_scale = 0 is invalid", "> 0"}},
      {R"({"gradient_clipping": -1})", {"gradient_clipping = -1 is invalid", ">= 0"}},
      {R"({"train_micro_batch_size_per_gpu": 0})", {"train_micro_batch_size_per_gpu = 0 is invalid", ">= 1"}},
      // unsupported DeepSpeed values
      {R"({"zero_optimization": {"contiguous_gradients": false}})",
       {"zero_optimization.contiguous_gradients = false is not supported", "expected true",
        "always true: gradients live in flat buffers"}},
      {R"({"zero_optimization": {"reduce_scatter": false}})",
       {"zero_optimization.reduce_scatter = false is not supported", "expected true"}},
      {R"({"zero_optimization": {"allgather_partitions": false}})",
       {"zero_optimization.allgather_partitions = false is not supported"}},
      {R"({"zero_optimization": {"round_robin_gradients": true}})",
       {"zero_optimization.round_robin_gradients = true is not supported", "expected false"}},
      {R"({"fp16": {"enabled": true, "auto_cast": true}})",
       {"fp16.auto_cast = true is not supported", "expected false"}},
      {R"({"activation_checkpointing": {"partition_activations": true}})",
       {"activation_checkpointing.partition_activations = true is not supported", "expected false"}},
      {R"({"activation_checkpointing": {"number_checkpoints": 4}})",
       {"activation_checkpointing.number_checkpoints must be null, got 4"}},
      {R"({"activation_checkpointing": {"cpu_checkpointing": true}})",
       {"activation_checkpointing.cpu_checkpointing = true needs activation_checkpointing.enabled = true",
        "got enabled = false"}},
      {R"({"activation_checkpointing": {"enabled": false, "cpu_checkpointing": true}})",
       {"activation_checkpointing.cpu_checkpointing = true needs activation_checkpointing.enabled = true"}},
      {R"({"activation_checkpointing": {"enabled": true, "cpu_checkpointing": 1}})",
       {"activation_checkpointing.cpu_checkpointing must be a boolean, got 1"}},
      {R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "fast_init": false}}})",
       {"zero_optimization.offload_optimizer.fast_init is not supported"}},
      {R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.5}}})",
       {"zero_optimization.offload_optimizer.ratio is not supported"}},
      {R"({"optimizer": {"type": "Adam", "params": {"adam_w_mode": false}}})",
       {"optimizer.params.adam_w_mode = false is not supported", "expected true"}},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "cosine"}}})",
       {"scheduler.params.warmup_type = \"cosine\" is invalid", "expected \"log\" or \"linear\""}},
      // impossible combinations
      {R"({"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}})",
       {"zero_optimization.offload_param.device = \"cpu\" requires zero_optimization.stage = 3", "stage is 2"}},
      {R"({"zero_optimization": {"stage": 0, "offload_optimizer": {"device": "cpu"}}})",
       {"zero_optimization.offload_optimizer.device = \"cpu\" requires zero_optimization.stage 1, 2 or 3"}},
      {R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "gpu"}}})",
       {"zero_optimization.offload_param.device = \"gpu\" is invalid: expected \"none\", \"cpu\" or \"nvme\""}},
      {R"({"optimizer": {"type": "SGD"}, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}})",
       {"zero_optimization.offload_optimizer.device = \"cpu\" needs optimizer.type \"AdamW\" or \"Adam\"", "SGD"}},
      {R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}})",
       {"zero_optimization.offload_param.device = \"cpu\" needs zero_optimization.offload_optimizer.device"}},
      {R"({"zero_optimization": {"stage": 1, "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp/z", "buffer_count": 1}}})",
       {"zero_optimization.offload_optimizer.buffer_count = 1 is invalid with device \"nvme\": expected >= 2"}},
      // ZeRO++ (zero/zeropp.h)
      {R"({"zero_optimization": {"stage": 2, "zero_quantized_weights": true}})",
       {"zero_optimization.zero_quantized_weights = true requires zero_optimization.stage = 3", "stage is 2"}},
      {R"({"zero_optimization": {"stage": 2, "zero_hpz_partition_size": 2}})",
       {"zero_optimization.zero_hpz_partition_size = 2 requires zero_optimization.stage = 3"},
       2},
      {R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 3}})",
       {"zero_optimization.zero_hpz_partition_size = 3 does not divide the world size 4"},
       4},
      {R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": -1}})",
       {"zero_optimization.zero_hpz_partition_size = -1 is invalid"}},
      {R"({"zero_optimization": {"stage": 1, "zero_quantized_gradients": true}})",
       {"zero_optimization.zero_quantized_gradients = true requires zero_optimization.stage = 3", "stage is 1",
        "DeepSpeed reads it at stage 3 only"}},
      {R"({"zero_optimization": {"stage": 2, "zero_quantized_gradients": true}})",
       {"zero_optimization.zero_quantized_gradients = true requires zero_optimization.stage = 3", "stage is 2"}},
      {R"({"zero_optimization": {"stage": 3, "zero_quantized_weights": true, "zero_hpz_secondary_exact": true}})",
       {"zero_optimization.zero_hpz_secondary_exact = true needs zero_optimization.zero_quantized_weights = true and "
        "zero_optimization.zero_hpz_partition_size > 1"}},
      {R"({"zero_optimization": {"stage": 3, "zero_quantized_gradients_one_node": true}})",
       {"zero_optimization.zero_quantized_gradients_one_node = true needs "
        "zero_optimization.zero_quantized_gradients = true"}},
      {R"({"zero_optimization": {"stage": 3, "zero_quantized_gradients": true, "zero_quantized_gradients_bits": 6}})",
       {"zero_optimization.zero_quantized_gradients_bits = 6 is invalid: expected 4 or 8"}},
      {R"({"zero_optimization": {"stage": 3, "zero_quantized_gradients_format": "fp8"}})",
       {"zero_optimization.zero_quantized_gradients_format", "fp8", "deepspeed", "blocks"}},
      {R"({"zero_optimization": {"stage": 3, "zero_quantization_block_size": 0}})",
       {"zero_optimization.zero_quantization_block_size = 0 is invalid"}},
      {R"({"zero_optimization": {"stage": 3, "zero_quantized_weights": 1}})",
       {"zero_optimization.zero_quantized_weights must be a boolean"}},
      {R"({"aio": {"block_size": 5000}})", {"aio.block_size = 5000 is invalid", "multiple of 4096"}},
      {R"({"aio": {"queue_depth": 0}})", {"aio.queue_depth"}},
      {R"({"aio": {"thread_count": 4}})", {"aio.thread_count"}},
      {R"({"aio": {"blocksize": 4096}})", {"unknown key 'aio.blocksize'"}},
      {R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}})",
       {"zero_optimization.offload_param.device = \"nvme\" requires zero_optimization.offload_param.nvme_path"}},
      {R"({"bf16": {"enabled": true}, "fp16": {"enabled": true}})", {"bf16.enabled and fp16.enabled are both true"}},
      {R"({"bfloat16": {"enabled": true}, "fp16": {"enabled": true}})",
       {"bf16.enabled and fp16.enabled are both true"}},
      {R"({"bf16": {"enabled": true}, "bfloat16": {"enabled": true}})", {"bf16 and its alias bfloat16"}},
      {R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1})",
       {"train_batch_size = 16 is invalid",
        "train_micro_batch_size_per_gpu x gradient_accumulation_steps x world_size = 4 x 1 x 2 = 8"},
       2},
      {R"({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 4})",
       {"train_batch_size = 10 is invalid: expected a multiple of train_micro_batch_size_per_gpu x world_size"},
       1},
      {R"({"train_batch_size": 6, "gradient_accumulation_steps": 4})",
       {"train_batch_size = 6 is invalid: expected a multiple of gradient_accumulation_steps x world_size"},
       1},
      {R"({"train_batch_size": 5})", {"train_batch_size = 5 is invalid: expected a multiple of world_size = 2"}, 2},
      // optimizer and scheduler
      {R"({"optimizer": {"type": "Lamb"}})",
       {"optimizer.type = \"Lamb\" is invalid: expected \"AdamW\", \"Adam\" or \"SGD\""}},
      {R"({"optimizer": {"params": {"lr": 1}}})", {"optimizer.type is missing"}},
      {R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9]}}})",
       {"optimizer.params.betas must be an array of 2 numbers in [0, 1)", "[0.9]"}},
      {R"({"optimizer": {"type": "AdamW", "params": {"betas": 0.9}}})",
       {"optimizer.params.betas must be an array of 2 numbers"}},
      {R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9, 1.5]}}})",
       {"optimizer.params.betas must be an array of 2 numbers"}},
      {R"({"scheduler": {"type": "OneCycle"}})",
       {"scheduler.type = \"OneCycle\" is invalid: expected \"WarmupLR\", \"WarmupDecayLR\", \"WarmupCosineLR\", "
        "\"constant\", \"cosine\" or \"none\""}},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": -0.5}}})",
       {"scheduler.params.warmup_max_lr = -0.5 is invalid: expected a number >= 0"}},
      // a parameter the type does not use would be ignored: refused by name
      {R"({"scheduler": {"type": "WarmupLR", "params": {"cos_min_ratio": 0.1}}})",
       {"unknown key 'scheduler.params.cos_min_ratio' (known keys for WarmupLR: warmup_num_steps, warmup_type, "
        "warmup_min_lr, warmup_max_lr)"}},
      {R"({"scheduler": {"type": "WarmupCosineLR", "params": {"warmup_max_lr": 0.1}}})",
       {"unknown key 'scheduler.params.warmup_max_lr'", "for WarmupCosineLR"}},
      {R"({"scheduler": {"type": "cosine", "params": {"warmup_type": "log"}}})",
       {"unknown key 'scheduler.params.warmup_type'", "for cosine"}},
      {R"({"scheduler": {"type": "none", "params": {"warmup_num_steps": 3}}})",
       {"unknown key 'scheduler.params.warmup_num_steps' (known keys for none: none)"}},
      {R"({"scheduler": {"type": "WarmupCosineLR", "params": {"warmup_num_steps": 10, "total_num_steps": 5}}})",
       {"scheduler.params.total_num_steps = 5 is invalid for WarmupCosineLR", "max(2, warmup_num_steps) = 10"}},
      {R"({"scheduler": {"type": "WarmupCosineLR", "params": {"warmup_num_steps": 0, "total_num_steps": 2}}})",
       {"scheduler.params.total_num_steps = 2 is invalid for WarmupCosineLR", "= 2"}},
      {R"({"scheduler": {"type": "cosine", "params": {"warmup_num_steps": 10, "total_num_steps": 5}}})",
       {"scheduler.params.total_num_steps = 5 is invalid for cosine", "warmup_num_steps = 10"}},
      {R"({"scheduler": {"type": "WarmupCosineLR", "params": {"cos_min_ratio": 2}}})",
       {"scheduler.params.cos_min_ratio = 2 is invalid: expected a number in [0, 1]"}},
      // "auto" where DeepSpeed does not accept it
      {R"({"zero_optimization": {"stage": "auto"}})",
       {"zero_optimization.stage = \"auto\" is invalid", "expected 0, 1, 2 or 3"}},
      {R"({"bf16": {"enabled": "auto"}})", {"bf16.enabled = \"auto\" is invalid", "expected true or false"}},
      {R"({"fp16": {"loss_scale": "auto"}})", {"fp16.loss_scale = \"auto\" is invalid"}},
      {R"({"steps_per_print": "auto"})", {"steps_per_print = \"auto\" is invalid", ">= 1"}},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    const std::string msg = error_of(c.text, c.world);
    INFO(msg);
    for (const auto& part : c.parts) CHECK_THAT(msg, Contains(part));
  }
  CHECK_THROWS_WITH(parse_engine_config(json::object(), "x", 0), Contains("world_size = 0"));
}

TEST_CASE("file errors name the file", "[config]") {
  zt::test::TempDir tmp("zero_config");
  const std::string bad = tmp.file("bad.json");
  {
    std::ofstream f(bad);
    f << "{\n  \"zero_optimization\": {\"stage\": 3,}\n}\n";
  }
  CHECK_THROWS_WITH(engine_config_from_file(bad, 1), Contains("config '" + bad + "' is not valid JSON") && Contains("line 2"));
  CHECK_THROWS_WITH(engine_config_from_file(tmp.file("missing.json"), 1),
                    Contains("config '" + tmp.file("missing.json") + "': cannot open"));
  // nesting is bounded while parsing (core/json.h): 100000 levels, once a stack overflow
  const std::string deep = tmp.file("deep.json");
  {
    std::ofstream f(deep);
    f << "{\"a\": " << std::string(100000, '[') << std::string(100000, ']') << "}";
  }
  CHECK_THROWS_WITH(engine_config_from_file(deep, 1),
                    Contains("config '" + deep + "' nests JSON deeper than 64 levels"));
  const std::string wrong = tmp.file("wrong.json");
  {
    std::ofstream f(wrong);
    f << R"({"zero_optimization": {"stage": 9}})";
  }
  CHECK_THROWS_WITH(engine_config_from_file(wrong, 1),
                    Contains("config '" + wrong + "': zero_optimization.stage = 9 is invalid"));
}
