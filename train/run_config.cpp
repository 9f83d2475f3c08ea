// defines: RunConfig (validate, engine_config), run_config_from_json, to_json (train/run_config.h)
//
// RunConfig (train/run_config.h): validation, the engine's view (EngineConfig), and the run keys
// read beside the engine keys of a DeepSpeed-style JSON file.
#include "train/run_config.h"

#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <type_traits>

#include "core/check.h"
#include "core/json.h"  // defines: read_json_file, json_integer

namespace zt {

void RunConfig::validate() const {
  auto need = [](bool ok, const char* field, const auto& value, const char* expected) {
    if (!ok) ZT_THROW("training config: ", field, " = ", value, " is invalid: expected ", expected);
  };
  need(!train_data.empty(), "train_data", "''", "a token shard or text file");
  need(batch >= 1, "batch", batch, ">= 1");
  need(seq_len >= 0, "seq_len", seq_len, ">= 1 (or 0: the model's context length)");
  need(grad_accum >= 1, "grad_accum", grad_accum, ">= 1");
  need(steps >= 0, "steps", steps, ">= 0");
  need(optimizer == "adamw" || optimizer == "sgd", "optimizer", optimizer, "adamw or sgd");
  need(schedule == "cosine" || schedule == "constant", "schedule", schedule, "cosine or constant");
  need(lr >= 0, "lr", lr, ">= 0");
  need(grad_clip >= 0, "grad_clip", grad_clip, ">= 0 (0 = off)");
  need(eval_interval >= 0, "eval_interval", eval_interval, ">= 0");
  need(eval_batches >= 1, "eval_batches", eval_batches, ">= 1");
  need(ckpt_interval >= 0, "ckpt_interval", ckpt_interval, ">= 0");
  need(keep_last >= 0, "keep_last", keep_last, ">= 0 (0 = keep every checkpoint)");
  need(!resume || !ckpt_dir.empty(), "resume", "true", "a ckpt_dir to resume from");
  need(memory_limit >= 0, "memory_limit", memory_limit, ">= 0");
  need(host_memory_limit >= 0, "host_memory_limit", host_memory_limit, ">= 0 (0 = no cap)");
  need(std::isfinite(collective_timeout_s) && collective_timeout_s >= 0, "collective_timeout_s", collective_timeout_s,
       "a number of seconds >= 0 (0 = no timeout)");
  need(!cpu_checkpointing || activation_checkpointing, "cpu_checkpointing", "true",
       "activation_checkpointing too (zt-train: --cpu-checkpointing needs --activation-checkpointing: it moves "
       "the checkpoints that activation checkpointing keeps to host memory)");
  need(zero.stage >= 0 && zero.stage <= 3, "zero.stage", zero.stage, "0, 1, 2 or 3");
  need(compute_dtype == "f32" || compute_dtype == "bf16", "compute_dtype", compute_dtype, "f32 or bf16");
  need(compute_dtype == "f32" || precision == Precision::bf16, "compute_dtype", compute_dtype,
       "f32 unless bf16 is enabled (bf16 compute keeps a float32 master: it needs bf16 mixed precision)");
}

EngineConfig RunConfig::engine_config() const {
  EngineConfig e;
  e.train_micro_batch_size_per_gpu = batch;
  e.gradient_accumulation_steps = grad_accum;
  e.gradient_clipping = grad_clip;
  e.precision = precision;
  e.fp16 = fp16;
  e.optimizer.type = optimizer == "sgd" ? "SGD" : "AdamW";
  e.optimizer.lr = lr;
  e.optimizer.beta1 = beta1;
  e.optimizer.beta2 = beta2;
  e.optimizer.eps = eps;
  e.optimizer.weight_decay = weight_decay;
  e.optimizer.momentum = momentum;
  e.scheduler.type = schedule == "cosine" ? "WarmupCosineLR" : (warmup > 0 ? "WarmupLR" : "none");
  e.scheduler.warmup_num_steps = warmup;
  e.scheduler.total_num_steps = steps;
  e.scheduler.cos_min_ratio = min_lr_frac;
  e.zero = zero;
  e.aio = aio;
  e.activation_checkpointing = activation_checkpointing;
  e.cpu_checkpointing = cpu_checkpointing;
  return e;
}

const std::set<std::string>& run_config_keys() {
  static const std::set<std::string> keys = {"model",
                                             "train_data",
                                             "val_data",
                                             "seq_len",
                                             "steps",
                                             "seed",
                                             "eval_interval",
                                             "eval_batches",
                                             "compute_dtype",
                                             "host_memory_limit_mib",
                                             "collective_timeout_s",
                                             "tokenizer"};
  return keys;
}

void run_config_from_json(const std::string& path, int world_size, RunConfig& c) {
  const EngineConfig e = engine_config_from_file(path, world_size, run_config_keys());
  const nlohmann::json j = read_json_file(path, "config '" + path + "'");  // parsed once already
  auto run = [&](const char* key, auto& field) {
    if (!j.contains(key)) return;
    using T = std::decay_t<decltype(field)>;
    try {
      if constexpr (std::is_integral_v<T>)  // checked: a float such as 1e46 is refused (core/json.h)
        field = static_cast<T>(json_integer(j.at(key), "config '" + path + "': " + key,
                                            std::is_signed_v<T> ? INT64_MIN : 0, INT64_MAX));
      else
        j.at(key).get_to(field);
    } catch (const nlohmann::json::exception&) {
      ZT_THROW("config '", path, "': ", key, " has the wrong type: ", j.at(key).dump());
    }
  };
  run("model", c.model);
  run("train_data", c.train_data);
  run("val_data", c.val_data);
  run("tokenizer", c.tokenizer);
  run("seq_len", c.seq_len);
  run("steps", c.steps);
  run("seed", c.seed);
  run("eval_interval", c.eval_interval);
  run("eval_batches", c.eval_batches);
  run("compute_dtype", c.compute_dtype);
  run("collective_timeout_s", c.collective_timeout_s);
  // The host tier's cap (train/memory_caps.h): a process setting beside the engine's keys, in MiB
  // as zt-train's flag (DeepSpeed has no such key; docs/config.md says why it is top-level).
  if (j.contains("host_memory_limit_mib")) {
    const nlohmann::json& v = j.at("host_memory_limit_mib");
    if (!v.is_number() || v.get<double>() < 0)
      ZT_THROW("config '", path, "': host_memory_limit_mib = ", v.dump(),
               " is invalid: expected a number of MiB >= 0 (0 = no cap)");
    c.host_memory_limit = static_cast<int64_t>(v.get<double>() * 1024 * 1024);
  }
  c.batch = e.train_micro_batch_size_per_gpu;
  c.grad_accum = e.gradient_accumulation_steps;
  c.grad_clip = e.gradient_clipping;
  std::string type = e.optimizer.type;
  for (char& ch : type) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  c.optimizer = type == "sgd" ? "sgd" : "adamw";
  c.lr = e.optimizer.lr;
  c.beta1 = e.optimizer.beta1;
  c.beta2 = e.optimizer.beta2;
  c.eps = e.optimizer.eps;
  c.weight_decay = e.optimizer.weight_decay;
  c.momentum = e.optimizer.momentum;
  c.warmup = e.scheduler.warmup_num_steps;
  if (e.scheduler.type == "WarmupCosineLR") {
    c.schedule = "cosine";
    c.min_lr_frac = e.scheduler.cos_min_ratio;
    if (e.scheduler.total_num_steps != 0 && e.scheduler.total_num_steps != c.steps)
      ZT_THROW("config '", path, "': scheduler.params.total_num_steps = ", e.scheduler.total_num_steps,
               " differs from steps = ", c.steps, ": give the same value, or leave total_num_steps out");
  } else {
    c.schedule = "constant";  // WarmupLR: linear warmup, then constant; none: constant
  }
  c.zero = e.zero;
  c.aio = e.aio;
  c.precision = e.precision;
  c.fp16 = e.fp16;
  c.activation_checkpointing = e.activation_checkpointing;
  c.cpu_checkpointing = e.cpu_checkpointing;
  c.config_file = path;
}

void to_json(nlohmann::json& j, const RunConfig& c) {
  j = {{"model", c.model}, {"init_from", c.init_from}, {"train_data", c.train_data}, {"val_data", c.val_data},
       {"tokenizer", c.tokenizer},
       {"batch", c.batch}, {"seq_len", c.seq_len}, {"grad_accum", c.grad_accum}, {"steps", c.steps},
       {"optimizer", c.optimizer}, {"lr", c.lr}, {"min_lr_frac", c.min_lr_frac}, {"warmup", c.warmup},
       {"schedule", c.schedule}, {"weight_decay", c.weight_decay}, {"beta1", c.beta1}, {"beta2", c.beta2},
       {"eps", c.eps}, {"momentum", c.momentum}, {"grad_clip", c.grad_clip}, {"seed", c.seed},
       {"eval_interval", c.eval_interval}, {"eval_batches", c.eval_batches},
       {"activation_checkpointing", c.activation_checkpointing}, {"cpu_checkpointing", c.cpu_checkpointing},
       {"memory_limit", c.memory_limit}, {"host_memory_limit", c.host_memory_limit},
       {"collective_timeout_s", c.collective_timeout_s}, {"zero_stage", c.zero.stage},
       {"precision", precision_name(c.precision)}, {"compute_dtype", c.compute_dtype},
       {"config_file", c.config_file}};
  nlohmann::json e = c.engine_config();
  j["engine"] = e;
}

}  // namespace zt
