// defines: RunConfig, run_config_from_json, data_parallel_size, run_config_keys, to_json(RunConfig), compute_dtype_from_name,
//          compute_dtype_name — the settings of one training run
//          (zt-train's flags and JSON config): the model, the data, the schedule and the engine's
//          settings beside them. Layer train/.
//
// One of three configs, each with its own name: ModelConfig (the shape of a model,
// models/model_config.h), EngineConfig (the DeepSpeed-style engine config, zero/engine_config.h),
// and RunConfig (this one: the run's own settings, with the EngineConfig inside it — each setting
// has one owner and one default). A checkpoint records it as meta.json's "training"
// (train/trainer.cpp): the run's keys and "engine", the DeepSpeed config written back.
#pragma once
#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "zero/engine_config.h"

namespace zt {

struct RunConfig {
  // ---- the run: what to train, on what, for how long, and where it is saved ----
  std::string model = "gpt-mini";  // a named config (models/model_config.h), ignored with init_from
  std::string init_from;           // weights to start from (optional): llm.c .bin or HF dir/.safetensors
  std::string train_data, val_data;  // token shard or text file (val optional)
  // The tokenizer of text data (formats/tokenizer.h's load_tokenizer: "bytes", a tokenizer.json,
  // vocab.json + merges.txt, a SentencePiece .model, or a directory); empty: bytes. A named model
  // takes its vocabulary size; pretrained weights must have room for it. JSON: "tokenizer".
  std::string tokenizer;
  int64_t seq_len = 0;  // 0: the model's context length
  int64_t steps = 100;
  uint64_t seed = 1337;
  int64_t eval_interval = 0, eval_batches = 8;  // 0 = no evaluation
  std::string ckpt_dir;
  int64_t ckpt_interval = 0;  // 0 = save only at the end (when ckpt_dir is set)
  bool resume = false;        // continue from ckpt_dir/latest
  int64_t keep_last = 0;      // after each save keep the newest N step directories (and latest's); 0 = all
  int64_t memory_limit = 0;  // bytes; 0 = no cap on the device allocator (from the first byte: train/memory_caps.h)
  // bytes; 0 = no cap on the host tier's allocators, from process start (train/memory_caps.h).
  // JSON: top-level "host_memory_limit_mib" (MiB); zt-train --host-memory-limit-mib.
  int64_t host_memory_limit = 0;
  // seconds one collective may wait before the job is aborted with a report of the ranks it waits
  // for (dist/mpi_watchdog.h; PyTorch's NCCL default of 10 minutes; 0 = no limit).
  // JSON: top-level "collective_timeout_s"; zt-train --collective-timeout-s.
  double collective_timeout_s = 600;
  // The dtype the model is built and computes in: f32, or bf16 (needs bf16 precision; the engine
  // then keeps no float32 copies besides the master: zero/engine.h). JSON: "compute_dtype",
  // "f32" | "bf16"; zt-train's "auto" picks bf16 on a GPU with bf16 precision, else f32.
  DType compute_dtype = DType::f32;
  // The process grid (dist/process_grid.h, docs/parallel.md): each block split over
  // tensor_parallel_size ranks (Megatron's tensor parallelism), each sequence over
  // sequence_parallel_size ranks (DeepSpeed-Ulysses); the rest of the world is data
  // parallel, and the batch keys count per data-parallel rank (DeepSpeed's train_batch_size =
  // micro-batch x accumulation x the data-parallel degree). JSON: top-level
  // "tensor_parallel_size", "sequence_parallel_size"; zt-train --tensor-parallel-size, ...
  int64_t tensor_parallel_size = 1, sequence_parallel_size = 1;
  // Megatron's sequence parallelism over the tensor group (parallel/tensor_parallel.h): between the
  // sub-layers each rank keeps seq_len / (sequence_parallel_size x tensor_parallel_size) tokens.
  // Off by default, as in Megatron. JSON: "megatron_sequence_parallel"; zt-train
  // --megatron-sequence-parallel.
  bool megatron_sequence_parallel = false;
  int64_t grid_size() const { return tensor_parallel_size * sequence_parallel_size; }
  std::string config_file;  // the JSON config these settings came from, if any (for the record)

  // ---- the engine: every DeepSpeed key (batch, accumulation, clipping, optimizer, scheduler,
  // precision, ZeRO, aio, activation checkpointing, printing), DeepSpeed's defaults; its one owner ----
  EngineConfig engine;

  int64_t batch() const { return engine.train_micro_batch_size_per_gpu; }  // sequences per rank per micro-step
  int64_t grad_accum() const { return engine.gradient_accumulation_steps; }
  void validate() const;  // throws naming the field
};
void to_json(nlohmann::json& j, const RunConfig& c);

// compute_dtype's spelling in configs, flags and checkpoints: "f32" | "bf16"; another name throws
// naming it and the choices (`what` says where it came from).
DType compute_dtype_from_name(const std::string& name, const std::string& what = "compute_dtype");
const char* compute_dtype_name(DType t);

// Reads a DeepSpeed-style JSON config (zero/engine_config.h; docs/config.md) into `c`: the engine
// keys into c.engine, and the run keys beside them ("model", "train_data", "val_data", "tokenizer", "seq_len",
// "steps", "seed", "eval_interval", "eval_batches", "compute_dtype", "host_memory_limit_mib",
// "collective_timeout_s", "tensor_parallel_size", "sequence_parallel_size"). world_size: the job's
// ranks; the batch keys are checked against its data-parallel part (world / the grid's degrees).
// Errors name the file and the key.
void run_config_from_json(const std::string& path, int world_size, RunConfig& c);
// world_size / (tensor_parallel_size x sequence_parallel_size): the ranks that see different
// batches. Throws (starting with `where`) when the degrees do not divide the world.
int data_parallel_size(int world_size, const RunConfig& c, const std::string& where = "");
// Those run keys: the top-level keys a config file may hold beside the engine's (zt-estimate
// reads the same files).
const std::set<std::string>& run_config_keys();

}  // namespace zt
