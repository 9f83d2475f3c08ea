// defines: RunConfig, run_config_from_json, run_config_keys, to_json(RunConfig) — the settings of one training run
//          (zt-train's flags and JSON config): the model, the data, the schedule and the engine's
//          settings beside them. Layer train/.
//
// One of three configs, each with its own name: ModelConfig (the shape of a model,
// models/model_config.h), EngineConfig (the DeepSpeed-style ZeRO engine config,
// zero/engine_config.h), and RunConfig (this one: everything of a run; engine_config() gives the
// engine its view). A checkpoint records it as meta.json's "training" (train/trainer.cpp).
#pragma once
#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "zero/engine_config.h"

namespace zt {

struct RunConfig {
  std::string model = "gpt-mini";  // a named config (models/model_config.h), ignored with init_from
  std::string init_from;           // weights to start from (optional): llm.c .bin or HF dir/.safetensors
  std::string train_data, val_data;  // token shard or text file (val optional)
  // The tokenizer of text data (formats/tokenizer.h's load_tokenizer: "bytes", a tokenizer.json,
  // vocab.json + merges.txt, a SentencePiece .model, or a directory); empty: bytes. A named model
  // takes its vocabulary size; pretrained weights must have room for it. JSON: "tokenizer".
  std::string tokenizer;
  int64_t batch = 8, seq_len = 0, grad_accum = 1;  // batch: sequences per rank per micro-step
                                                    // (DeepSpeed's train_micro_batch_size_per_gpu);
                                                    // seq_len 0: the model's context length
  int64_t steps = 100;
  std::string optimizer = "adamw";  // "adamw" | "sgd"
  double lr = 1e-3, min_lr_frac = 0.1;
  int64_t warmup = 0;
  std::string schedule = "cosine";  // "cosine" | "constant"
  double weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, momentum = 0.9;
  double grad_clip = 1.0;  // 0 = off
  uint64_t seed = 1337;
  int64_t eval_interval = 0, eval_batches = 8;  // 0 = no evaluation
  std::string ckpt_dir;
  int64_t ckpt_interval = 0;  // 0 = save only at the end (when ckpt_dir is set)
  bool resume = false;        // continue from ckpt_dir/latest
  int64_t keep_last = 0;      // after each save keep the newest N step directories (and latest's); 0 = all
  bool activation_checkpointing = false;
  bool cpu_checkpointing = false;  // the checkpoints in the host tier (needs activation_checkpointing)
  int64_t memory_limit = 0;  // bytes; 0 = no cap on the device allocator (from the first byte: train/memory_caps.h)
  // bytes; 0 = no cap on the host tier's allocators, from process start (train/memory_caps.h).
  // JSON: top-level "host_memory_limit_mib" (MiB); zt-train --host-memory-limit-mib.
  int64_t host_memory_limit = 0;
  // seconds one collective may wait before the job is aborted with a report of the ranks it waits
  // for (dist/mpi_watchdog.h; PyTorch's NCCL default of 10 minutes; 0 = no limit).
  // JSON: top-level "collective_timeout_s"; zt-train --collective-timeout-s.
  double collective_timeout_s = 600;
  // ZeRO (zero_optimization.* of a DeepSpeed-style config; stage 0 = plain data parallelism)
  ZeroOptimization zero;
  AioConfig aio;  // aio.*: the NVMe tier's IO (offload to nvme)
  Precision precision = Precision::f32;
  // The dtype the model is built and computes in: "f32", or "bf16" (needs precision bf16; the
  // engine then keeps no float32 copies besides the master: zero/engine.h). zt-train resolves its
  // "auto" to bf16 on a GPU with bf16 precision, else f32.
  std::string compute_dtype = "f32";
  Fp16Config fp16;
  std::string config_file;  // the JSON config these settings came from, if any (for the record)

  void validate() const;  // throws naming the field
  EngineConfig engine_config() const;  // the engine's view of these settings
};
void to_json(nlohmann::json& j, const RunConfig& c);

// Reads a DeepSpeed-style JSON config (zero/engine_config.h; docs/config.md) into `c`: the engine
// keys (batch, accumulation, clipping, optimizer, scheduler, zero_optimization, precision,
// activation checkpointing) and the run keys beside them ("model", "train_data", "val_data", "tokenizer", "seq_len",
// "steps", "seed", "eval_interval", "eval_batches", "compute_dtype", "host_memory_limit_mib",
// "collective_timeout_s").
// Errors name the file and the key.
void run_config_from_json(const std::string& path, int world_size, RunConfig& c);
// Those run keys: the top-level keys a config file may hold beside the engine's (zt-estimate
// reads the same files).
const std::set<std::string>& run_config_keys();

}  // namespace zt
