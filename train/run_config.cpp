// defines: RunConfig::validate, data_parallel_size, run_config_from_json, run_config_keys, to_json, compute_dtype_from_name,
//          compute_dtype_name (train/run_config.h)
//
// RunConfig (train/run_config.h): validation, and the run keys read beside the engine keys of a
// DeepSpeed-style JSON file (the engine keys are zero/engine_config.cpp's).
#include "train/run_config.h"

#include <cmath>
#include <type_traits>

#include "core/check.h"
#include "core/json.h"  // defines: read_json_file, json_integer

namespace zt {

DType compute_dtype_from_name(const std::string& name, const std::string& what) {
  if (name == "f32") return DType::f32;
  if (name == "bf16") return DType::bf16;
  ZT_THROW(what, " = \"", name, "\" is invalid: expected \"f32\" or \"bf16\"");
}

const char* compute_dtype_name(DType t) {
  if (t == DType::f32) return "f32";
  if (t == DType::bf16) return "bf16";
  ZT_THROW("compute_dtype: ", dtype_name(t), " is not a compute dtype (expected f32 or bf16)");
}

void RunConfig::validate() const {
  auto need = [](bool ok, const char* field, const auto& value, const char* expected) {
    if (!ok) ZT_THROW("training config: ", field, " = ", value, " is invalid: expected ", expected);
  };
  const EngineConfig& e = engine;
  need(!train_data.empty(), "train_data", "''", "a token shard or text file");
  need(e.train_micro_batch_size_per_gpu >= 1, "train_micro_batch_size_per_gpu", e.train_micro_batch_size_per_gpu,
       ">= 1");
  need(seq_len >= 0, "seq_len", seq_len, ">= 1 (or 0: the model's context length)");
  need(e.gradient_accumulation_steps >= 1, "gradient_accumulation_steps", e.gradient_accumulation_steps, ">= 1");
  need(steps >= 0, "steps", steps, ">= 0");
  need(e.optimizer.lr >= 0, "optimizer.params.lr", e.optimizer.lr, ">= 0");
  need(e.gradient_clipping >= 0, "gradient_clipping", e.gradient_clipping, ">= 0 (0 = off)");
  need(e.steps_per_print >= 1, "steps_per_print", e.steps_per_print, ">= 1");
  need(eval_interval >= 0, "eval_interval", eval_interval, ">= 0");
  need(eval_batches >= 1, "eval_batches", eval_batches, ">= 1");
  need(ckpt_interval >= 0, "ckpt_interval", ckpt_interval, ">= 0");
  need(keep_last >= 0, "keep_last", keep_last, ">= 0 (0 = keep every checkpoint)");
  need(!resume || !ckpt_dir.empty(), "resume", "true", "a ckpt_dir to resume from");
  need(memory_limit >= 0, "memory_limit", memory_limit, ">= 0");
  need(host_memory_limit >= 0, "host_memory_limit", host_memory_limit, ">= 0 (0 = no cap)");
  need(std::isfinite(collective_timeout_s) && collective_timeout_s >= 0, "collective_timeout_s", collective_timeout_s,
       "a number of seconds >= 0 (0 = no timeout)");
  need(!e.cpu_checkpointing || e.activation_checkpointing, "activation_checkpointing.cpu_checkpointing", "true",
       "activation_checkpointing.enabled too (zt-train: --cpu-checkpointing needs --activation-checkpointing: it "
       "moves the checkpoints that activation checkpointing keeps to host memory)");
  need(tensor_parallel_size >= 1, "tensor_parallel_size", tensor_parallel_size, ">= 1 (1: no tensor parallelism)");
  need(sequence_parallel_size >= 1, "sequence_parallel_size", sequence_parallel_size, ">= 1 (1: none)");
  if (sequence_parallel_size >= 1 && seq_len % sequence_parallel_size != 0)
    ZT_THROW("training config: seq_len = ", seq_len, " is invalid: expected a multiple of sequence_parallel_size ",
             sequence_parallel_size, " (each rank of a sequence group keeps seq_len / sequence_parallel_size tokens)");
  need(!megatron_sequence_parallel || tensor_parallel_size > 1, "megatron_sequence_parallel", "true",
       "tensor_parallel_size > 1 (it splits the tokens over the tensor-parallel group)");
  if (megatron_sequence_parallel && seq_len % (sequence_parallel_size * tensor_parallel_size) != 0)
    ZT_THROW("training config: seq_len = ", seq_len,
             " is invalid with megatron_sequence_parallel: expected a multiple of ",
             "sequence_parallel_size x tensor_parallel_size = ", sequence_parallel_size * tensor_parallel_size,
             " (each rank of a tensor group keeps its share of the sequence between the sub-layers)");
  need(e.zero.stage >= 0 && e.zero.stage <= 3, "zero_optimization.stage", e.zero.stage, "0, 1, 2 or 3");
  need(compute_dtype == DType::f32 || compute_dtype == DType::bf16, "compute_dtype", dtype_name(compute_dtype),
       "f32 or bf16");
  need(compute_dtype == DType::f32 || e.precision == Precision::bf16, "compute_dtype",
       compute_dtype_name(compute_dtype),
       "f32 unless bf16 is enabled (bf16 compute keeps a float32 master: it needs bf16 mixed precision)");
  e.scheduler.validate(steps);
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
                                             "tokenizer",
                                             "tensor_parallel_size",
                                             "sequence_parallel_size",
                                             "megatron_sequence_parallel"};
  return keys;
}

int data_parallel_size(int world_size, const RunConfig& c, const std::string& where) {
  const int64_t grid = c.grid_size();
  if (c.tensor_parallel_size < 1 || c.sequence_parallel_size < 1 || world_size % grid != 0)
    ZT_THROW(where, "tensor_parallel_size ", c.tensor_parallel_size, " x sequence_parallel_size ",
             c.sequence_parallel_size, " does not divide the ", world_size,
             " rank(s) of the job: each degree >= 1, their product a divisor of the ranks");
  return static_cast<int>(world_size / grid);
}

void run_config_from_json(const std::string& path, int world_size, RunConfig& c) {
  const nlohmann::json j = read_json_file(path, "config '" + path + "'");
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
  // The grid first: the engine's batch keys count per data-parallel rank.
  run("tensor_parallel_size", c.tensor_parallel_size);
  run("sequence_parallel_size", c.sequence_parallel_size);
  c.engine = engine_config_from_file(path, data_parallel_size(world_size, c, "config '" + path + "': "),
                                     run_config_keys());
  run("model", c.model);
  run("train_data", c.train_data);
  run("val_data", c.val_data);
  run("tokenizer", c.tokenizer);
  run("seq_len", c.seq_len);
  run("megatron_sequence_parallel", c.megatron_sequence_parallel);
  run("steps", c.steps);
  run("seed", c.seed);
  run("eval_interval", c.eval_interval);
  run("eval_batches", c.eval_batches);
  run("collective_timeout_s", c.collective_timeout_s);
  if (j.contains("compute_dtype")) {
    std::string name;
    run("compute_dtype", name);
    c.compute_dtype = compute_dtype_from_name(name, "config '" + path + "': compute_dtype");
  }
  // The host tier's cap (train/memory_caps.h): a process setting beside the engine's keys, in MiB
  // as zt-train's flag (DeepSpeed has no such key; docs/config.md says why it is top-level).
  if (j.contains("host_memory_limit_mib")) {
    const nlohmann::json& v = j.at("host_memory_limit_mib");
    if (!v.is_number() || v.get<double>() < 0)
      ZT_THROW("config '", path, "': host_memory_limit_mib = ", v.dump(),
               " is invalid: expected a number of MiB >= 0 (0 = no cap)");
    c.host_memory_limit = static_cast<int64_t>(v.get<double>() * 1024 * 1024);
  }
  c.config_file = path;
}

void to_json(nlohmann::json& j, const RunConfig& c) {
  j = {{"model", c.model},
       {"init_from", c.init_from},
       {"train_data", c.train_data},
       {"val_data", c.val_data},
       {"tokenizer", c.tokenizer},
       {"seq_len", c.seq_len},
       {"steps", c.steps},
       {"seed", c.seed},
       {"eval_interval", c.eval_interval},
       {"eval_batches", c.eval_batches},
       {"memory_limit", c.memory_limit},
       {"host_memory_limit", c.host_memory_limit},
       {"collective_timeout_s", c.collective_timeout_s},
       {"compute_dtype", compute_dtype_name(c.compute_dtype)},
       {"tensor_parallel_size", c.tensor_parallel_size},
       {"sequence_parallel_size", c.sequence_parallel_size},
       {"megatron_sequence_parallel", c.megatron_sequence_parallel},
       {"config_file", c.config_file},
       {"engine", c.engine}};
}

}  // namespace zt
