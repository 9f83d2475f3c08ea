// defines: TrainConfig, StepStats, Trainer, train_config_from_json — the training loop behind
//          zt-train, one process per rank, on the ZeRO engine (zero/engine.h).
//
// One step (llm.c's loop, on flat buffers, the ZeRO engine in between):
//   for each of grad_accum micro-batches: loss = engine.forward(x, y) (this rank's B sequences);
//   engine.backward(loss) (scaled by 1/grad_accum; reductions start as units finish)
//   -> engine.step(lr): global L2 norm across shards, clipped to grad_clip, AdamW on the shards.
// Each rank reads its own slice of the global batch (llm.c's loader with process_rank), so N ranks
// with batch B see the same tokens as one rank with batch N*B.
// Deterministic: the same config, seed, data and world size give bitwise the same losses, and a
// run resumed from a checkpoint continues bitwise identically (the checkpoint holds parameters,
// optimizer state, step, RNG and data position). Resuming on another world size reshards.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "models/model_config.h"
#include "models/token_data.h"
#include "nn/model.h"
#include "zero/engine_config.h"
#include "zero/engine.h"

namespace zt {

struct TrainConfig {
  std::string model = "gpt-mini";  // a named config (models/model_config.h), ignored with init_from
  std::string init_from;           // weights to start from (optional): llm.c .bin or HF dir/.safetensors
  std::string train_data, val_data;  // token shard or text file (val optional)
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
  bool activation_checkpointing = false;
  int64_t memory_limit = 0;  // bytes; 0 = no cap on the device allocator (from the end of setup on: trainer.cpp)
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
void to_json(nlohmann::json& j, const TrainConfig& c);

// Reads a DeepSpeed-style JSON config (zero/engine_config.h; docs/config.md) into `c`: the engine keys
// (batch, accumulation, clipping, optimizer, scheduler, zero_optimization, precision, activation
// checkpointing) and the run keys beside them ("model", "train_data", "val_data", "seq_len",
// "steps", "seed", "eval_interval", "eval_batches"). Errors name the file and the key.
void train_config_from_json(const std::string& path, int world_size, TrainConfig& c);

struct StepStats {
  int64_t step = 0;  // 1-based: the number of optimizer steps done after this one
  double loss = 0, lr = 0, grad_norm = 0;
  double loss_scale = 1;  // fp16: the scale this step's gradients were computed with
  bool skipped = false;   // fp16: the gradients overflowed, no update (the batch is consumed)
  double step_ms = 0, tokens_per_s = 0;
  double val_loss = -1;  // >= 0 when an evaluation ran after this step
};

class Trainer {
 public:
  // Every rank of `group` constructs a Trainer with the same config (collective from here on).
  explicit Trainer(const TrainConfig& cfg, ProcessGroup& group = init_process_group());
  ~Trainer();

  // One optimizer step. `report`, when given, sees the step's stats before its checkpoint (if one
  // is due) is written: a log line written there exists whenever the checkpoint does, so a run
  // killed right after a save resumes with every step's line (tests/cli/test_zero_resume.sh).
  StepStats step(const std::function<void(const StepStats&)>& report = {});
  double evaluate();                  // mean loss over eval_batches of the validation data
  std::string save();                 // a checkpoint of the current state into ckpt_dir
  bool done() const { return step_ >= cfg_.steps; }

  Model& model() { return *model_; }
  Engine& engine() { return *engine_; }
  ProcessGroup& group() { return group_; }
  const ModelConfig& model_config() const { return mcfg_; }
  const TrainConfig& config() const { return cfg_; }
  int64_t step_count() const { return step_; }
  double lr_at(int64_t step) const;  // learning rate used for optimizer step `step` (0-based)

 private:
  void resume_from(const std::string& dir);

  TrainConfig cfg_;
  ProcessGroup& group_;
  ModelConfig mcfg_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<DataLoader> train_, val_;
  Rng rng_;
  int64_t step_ = 0;
  Tensor idx_, targets_;
};

// The model saved in a training checkpoint (a step directory, or a root holding `latest`, of any
// world size): built from meta.json's config and filled with the consolidated parameters. Throws
// naming the checkpoint on any mismatch.
std::unique_ptr<Model> load_trained_model(const std::string& path);

}  // namespace zt
