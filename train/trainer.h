// defines: StepStats, Trainer, load_trained_model — the training loop behind zt-train, one
//          process per rank, on the ZeRO engine (zero/engine.h); its settings: RunConfig
//          (train/run_config.h). Layer train/, above zero/ and formats/.
//
// One step (llm.c's loop, on flat buffers, the ZeRO engine in between):
//   for each of grad_accum micro-batches: loss = engine.forward(x, y) (this rank's B sequences);
//   engine.backward(loss) (scaled by 1/grad_accum; reductions start as units finish)
//   -> engine.step(lr): global L2 norm across shards, clipped to grad_clip, AdamW on the shards.
// Each rank reads its own slice of the global batch (llm.c's loader with process_rank), so N ranks
// with batch B see the same tokens as one rank with batch N*B. With tensor_parallel_size tp the N
// ranks form a grid (dist/process_grid.h): the tp ranks of a tensor group read the same sequences
// and each computes its slice of every block (docs/parallel.md), so N / tp data-parallel ranks
// with batch B see the same tokens as one rank with batch (N / tp) * B.
// Deterministic: the same config, seed, data and world size give bitwise the same losses, and a
// run resumed from a checkpoint continues bitwise identically (the checkpoint holds parameters,
// optimizer state, step, RNG and data position). Resuming on another world size reshards.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "core/rng.h"
#include "dist/process_grid.h"
#include "formats/token_data.h"
#include "formats/tokenizer.h"
#include "models/model_config.h"
#include "nn/model.h"
#include "train/dry_run.h"  // defines: DryRun
#include "train/memory_caps.h"
#include "train/run_config.h"
#include "zero/engine.h"

namespace zt {

struct StepStats {
  int64_t step = 0;  // 1-based: the number of optimizer steps done after this one
  double loss = 0, lr = 0, grad_norm = 0;
  double loss_scale = 1;  // fp16: the scale this step's gradients were computed with
  bool skipped = false;   // fp16: the gradients overflowed, no update (the batch is consumed)
  double step_ms = 0, tokens_per_s = 0;
  // The step's phases (DeepSpeed's wall_clock_breakdown: forward and backward summed over the
  // micro-steps, then the optimizer step). With wall_clock_breakdown the device is synchronized at
  // each phase's end, as DeepSpeed's timers do, so that a GPU's time lands in its phase; without
  // it they are the host's times and a GPU's queued work shows up in whichever phase waits for it.
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  double val_loss = -1;  // >= 0 when an evaluation ran after this step
};

class Trainer {
 public:
  // Every rank of `group` constructs a Trainer with the same config (collective from here on).
  explicit Trainer(const RunConfig& cfg, ProcessGroup& group = init_process_group());
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
  // The process grid when tensor_parallel_size > 1 (dist/process_grid.h; null otherwise): the
  // engine then runs over its replica group, and the data is read by its data index.
  const ProcessGrid* grid() const { return grid_.get(); }
  // The ranks that see different batches: the grid's data degree, else the whole group.
  int data_parallel_size() const { return grid_ ? grid_->dp : group_.size(); }
  const ModelConfig& model_config() const { return mcfg_; }
  const RunConfig& config() const { return cfg_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }  // null: text is read as bytes
  int64_t step_count() const { return step_; }
  double next_lr() const;  // the learning rate of the coming step (the config's scheduler)
  // This run's own dry run (train/dry_run.h: this rank of its job, on the meta device), made once:
  // at setup under a host cap (the check it needs), else when first asked (zt-train's tables).
  const DryRun& own_dry_run();

 private:
  void resume_from(const std::string& dir);
  // The loader's next batch; under sequence parallelism this rank's T / P tokens of its sequences
  // (every rank of a sequence group reads the same batch, into whole_idx_ / whole_targets_).
  void next_batch(DataLoader& loader, Tensor& idx, Tensor& targets);

  RunConfig cfg_;
  ProcessGroup& group_;
  std::unique_ptr<ProcessGrid> grid_;  // tensor parallelism's groups (null without it)
  ModelConfig mcfg_;
  std::unique_ptr<MemoryCaps> caps_;  // first built, last gone: the caps hold for the Trainer's life
  std::unique_ptr<DryRun> dry_;       // own_dry_run(), once made
  std::unique_ptr<Model> model_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<DataLoader> train_, val_;
  std::unique_ptr<Tokenizer> tokenizer_;  // of text data (RunConfig::tokenizer); null: bytes
  Rng rng_;
  int64_t step_ = 0;
  Tensor idx_, targets_;
  Tensor whole_idx_, whole_targets_;  // sequence parallelism: the batch before each rank's share
};

// The model saved in a training checkpoint (a step directory, or a root holding `latest`, of any
// world size): built from meta.json's config and filled with the consolidated parameters. Throws
// naming the checkpoint on any mismatch.
std::unique_ptr<Model> load_trained_model(const std::string& path);

}  // namespace zt
