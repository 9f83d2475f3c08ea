// defines: Trainer (constructor, own_dry_run, lr_at, step, evaluate, save, resume_from), load_trained_model
//          (train/trainer.h)
#include "train/trainer.h"

#include <omp.h>

#include <algorithm>

#include "core/backend.h"             // defines: default_device
#include "core/json.h"                // defines: json_integer
#include "formats/hf_weights.h"       // defines: pretrained_config, pretrained_source (HF or llm.c)
#include "models/init.h"              // defines: make_model, ModelInit
#include "optim/schedule.h"           // defines: scheduled_lr
#include "parallel/sequence_parallel.h"  // defines: sequence_shard
#include "parallel/sliced_params.h"   // defines: SlicedParams
#include "train/dry_run.h"            // defines: dry_run, dry_run_of_rank
#include "zero/checkpoint.h"          // defines: save_sharded_checkpoint, load_sharded_checkpoint
#include "zero/checkpoint_source.h"   // defines: CheckpointParams

namespace zt {

Trainer::Trainer(const RunConfig& cfg, ProcessGroup& group) : cfg_(cfg), group_(group), rng_(cfg.seed) {
  cfg_.validate();
  // Tensor or sequence parallelism: the grid's groups, and ZeRO over the replica group (the ranks
  // holding the same parameters); N and rank below are this rank's data-parallel degree and index.
  ProcessGroup* zero_group = &group_;
  ProcessGroup* tensor_group = nullptr;
  if (cfg_.grid_size() > 1) {
    grid_ = std::make_unique<ProcessGrid>(make_process_grid(group_, static_cast<int>(cfg_.tensor_parallel_size),
                                                            static_cast<int>(cfg_.sequence_parallel_size)));
    zero_group = grid_->replica.get();
    tensor_group = grid_->tensor.get();
  }
  const int N = grid_ ? grid_->dp : group_.size(), rank = grid_ ? grid_->dp_rank : group_.rank();
  // Before anything is built, the caps that hold from the first byte (train/memory_caps.h): the
  // device's (construction, training, evaluation, checkpoints) and the host tier's.
  caps_ = std::make_unique<MemoryCaps>(cfg_, default_device());
  caps_->apply(CapStart::process_start);

  // Model: from pretrained weights (HF or llm.c: formats/hf_weights.h), or a named config with our
  // deterministic init. Partitioned construction (DeepSpeed's zero.Init): the model is laid out
  // without bytes, padded so each unit splits into N shards, and the engine creates only what
  // this rank's stage keeps, unit by unit, from the ParamSource (stage 3: this rank's shard of
  // each unit; the whole model never exists on any rank).
  mcfg_ = cfg_.init_from.empty() ? zt::model_config(cfg_.model) : pretrained_config(cfg_.init_from);
  // The tokenizer of text data: a named model takes its vocabulary (padded to a multiple of 128,
  // as llm.c pads GPT-2's); pretrained weights must have room for every id it makes.
  if (!cfg_.tokenizer.empty()) {
    tokenizer_ = load_tokenizer(cfg_.tokenizer);
    if (cfg_.init_from.empty()) {
      mcfg_.vocab_size = tokenizer_->vocab_size();
      mcfg_.padded_vocab_size = (mcfg_.vocab_size + 127) / 128 * 128;
      mcfg_.validate();
    } else {
      check_tokenizer_fits_model(*tokenizer_, mcfg_.vocab_size, "the model of --init-from '" + cfg_.init_from + "'");
    }
  }
  if (cfg_.seq_len == 0) cfg_.seq_len = mcfg_.max_seq_len;
  if (cfg_.seq_len > mcfg_.max_seq_len)
    ZT_THROW("seq_len ", cfg_.seq_len, " exceeds the model's context length ", mcfg_.max_seq_len);
  if (cfg_.seq_len % cfg_.sequence_parallel_size != 0)
    ZT_THROW("seq_len ", cfg_.seq_len, " is not a multiple of sequence_parallel_size ", cfg_.sequence_parallel_size,
             " (each rank of a sequence group keeps seq_len / sequence_parallel_size tokens)");
  ModelOptions opt;
  opt.world_size = zero_group->size();
  opt.tensor_parallel = tensor_group;
  opt.megatron_sequence_parallel = cfg_.megatron_sequence_parallel;
  opt.sequence_parallel = grid_ ? grid_->sequence.get() : nullptr;
  opt.alignment = kShardAlignment;
  opt.dtype = cfg_.compute_dtype;
  opt.materialize = false;
  model_ = make_model(mcfg_, opt);
  std::unique_ptr<Model> whole_layout;  // the pretrained source's model under tensor parallelism
  std::unique_ptr<ParamSource> initial;
  if (cfg_.init_from.empty()) {
    initial = std::make_unique<ModelInit>(*model_, rng_);  // advances rng_ past the whole model's draws
  } else {
    // an HF directory / .safetensors, or an llm.c .bin; under tensor parallelism read for the
    // whole model (its layout, no bytes) and cut into this rank's slices (parallel/sliced_params.h)
    if (!grid_) {
      initial = pretrained_source(cfg_.init_from, *model_);
    } else {
      ModelOptions whole = opt;
      whole.tensor_parallel = whole.sequence_parallel = nullptr;
      whole.megatron_sequence_parallel = false;
      whole.world_size = 1;
      whole_layout = make_model(mcfg_, whole);
      initial = std::make_unique<SlicedParams>(*model_, *whole_layout,
                                               pretrained_source(cfg_.init_from, *whole_layout));
    }
  }

  // Data: llm.c's loader, no shuffling; rank r reads its B rows of each global batch of N*B.
  TokenIds tokens = load_tokens(cfg_.train_data, tokenizer_.get());
  check_tokens_fit_vocab(tokens, mcfg_.vocab_size, cfg_.train_data);
  train_ = std::make_unique<DataLoader>(std::move(tokens), cfg_.batch(), cfg_.seq_len, rank, N);
  if (!cfg_.val_data.empty()) {
    TokenIds vt = load_tokens(cfg_.val_data, tokenizer_.get());
    check_tokens_fit_vocab(vt, mcfg_.vocab_size, cfg_.val_data);
    val_ = std::make_unique<DataLoader>(std::move(vt), cfg_.batch(), cfg_.seq_len, rank, N);
  }

  // Under a host cap, this very run is dry-run first (train/dry_run.h: the model laid out on the
  // meta device, the engine's setup and steps counted, nothing computed), and a cap below its host
  // tier's peak is refused before a byte of the engine is allocated; an OutOfMemory of the host
  // tier during the real setup is rethrown naming the key and that need.
  MemoryStats host_need;
  if (cfg_.host_memory_limit > 0) {
    host_need = own_dry_run().host;
    caps_->check_host_need(host_need);
  }
  try {
    engine_ = initialize(*model_, cfg_.engine, *zero_group, initial.get(), tensor_group);
  } catch (const OutOfMemory& e) {
    caps_->rethrow_setup_failure(e, host_need);
  }
  if (cfg_.resume) resume_from(cfg_.ckpt_dir);
  // The caps that start once the engine is set up (none today: both hold from the first byte,
  // train/memory_caps.h); a device cap starting here is checked against what the engine holds.
  caps_->apply(CapStart::end_of_setup);
}

Trainer::~Trainer() = default;

void Trainer::next_batch(DataLoader& loader, Tensor& idx, Tensor& targets) {
  if (!grid_ || grid_->sp == 1) return loader.next_batch(idx, targets);
  loader.next_batch(whole_idx_, whole_targets_);  // the whole sequences, as every rank of the group reads them
  const SequenceParallel sp{grid_->sequence.get()};
  idx = sequence_shard(whole_idx_, sp);
  targets = sequence_shard(whole_targets_, sp);
}

const DryRun& Trainer::own_dry_run() {
  if (!dry_) dry_ = std::make_unique<DryRun>(dry_run(dry_run_of_rank(cfg_, mcfg_, group_, omp_get_max_threads())));
  return *dry_;
}

// The scheduler's lr for the coming step (optim/schedule.h): DeepSpeed's count the steps applied
// so far (an fp16 step skipped on overflow does not advance them), llm.c's every step.
double Trainer::next_lr() const {
  return scheduled_lr(cfg_.engine.scheduler, cfg_.engine.optimizer.lr, step_, engine_->optimizer_steps(), cfg_.steps);
}

StepStats Trainer::step(const std::function<void(const StepStats&)>& report) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  default_allocator().reset_peaks();  // the memory in the log is this step's peak
  StepStats s;
  StepResult r;
  // Adds the time since `from` to `into` (ms) and restarts it; wall_clock_breakdown waits for the device first.
  auto lap = [&, sync = cfg_.engine.wall_clock_breakdown](double& into, Clock::time_point& from) {
    if (sync) backend(default_device()).synchronize();
    const auto now = Clock::now();
    into += std::chrono::duration<double, std::milli>(now - from).count();
    from = now;
  };
  {
    // The trace (core/trace.h): the step and its micro-steps enclose the engine's unit spans.
    TraceScope step_scope(engine_->tracer(), TraceTrack::compute, "step " + std::to_string(step_ + 1), "step");
    auto t = Clock::now();
    for (int64_t micro = 0; micro < cfg_.grad_accum(); ++micro) {
      next_batch(*train_, idx_, targets_);
      Var loss;
      {
        TraceScope fwd(engine_->tracer(), TraceTrack::compute, "forward pass", "step", {{"micro_step", micro}});
        loss = engine_->forward(idx_, targets_);  // mean over this rank's B*T tokens
      }
      lap(s.forward_ms, t);
      TraceScope bwd(engine_->tracer(), TraceTrack::compute, "backward pass", "step", {{"micro_step", micro}});
      engine_->backward(loss);
      lap(s.backward_ms, t);
    }
    s.lr = next_lr();
    r = engine_->step(s.lr);
    lap(s.optimizer_ms, t);
  }
  ++step_;
  const auto t1 = Clock::now();
  s.step = step_;
  s.loss = r.loss;
  s.grad_norm = r.grad_norm;
  s.loss_scale = r.loss_scale;
  s.skipped = r.skipped;
  s.step_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const int64_t tokens = cfg_.batch() * cfg_.seq_len * cfg_.grad_accum() * data_parallel_size();  // global
  s.tokens_per_s = static_cast<double>(tokens) / (s.step_ms / 1000.0);
  if (val_ && cfg_.eval_interval > 0 && (step_ % cfg_.eval_interval == 0 || step_ == cfg_.steps)) {
    TraceScope eval(engine_->tracer(), TraceTrack::compute, "evaluate", "eval");
    s.val_loss = evaluate();
  }
  if (report) report(s);
  if (!cfg_.ckpt_dir.empty() && ((cfg_.ckpt_interval > 0 && step_ % cfg_.ckpt_interval == 0) || step_ == cfg_.steps))
  {
    TraceScope ckpt(engine_->tracer(), TraceTrack::compute, "checkpoint save", "checkpoint");
    save();
  }
  return s;
}

// The mean loss over eval_batches global batches of the validation data (each rank its slice).
double Trainer::evaluate() {
  ZT_CHECK(val_, "evaluate() without validation data");
  val_->reset();  // every evaluation reads the same batches
  Tensor x, y;
  const int64_t n = std::min<int64_t>(cfg_.eval_batches, val_->num_batches());
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    next_batch(*val_, x, y);
    sum += engine_->eval_loss(x, y);
  }
  return group_.all_reduce_sum(sum) / static_cast<double>(n * group_.size());
}

std::string Trainer::save() {
  ZT_CHECK(!cfg_.ckpt_dir.empty(), "save() without a checkpoint directory");
  nlohmann::json meta;
  meta["model"] = mcfg_;
  meta["training"] = cfg_;
  meta["rng_state"] = std::to_string(rng_.state());
  meta["data_position"] = train_->position();  // batch index: the same on every rank
  meta["optimizer_steps"] = engine_->optimizer_steps();
  meta["global_batch"] = cfg_.batch() * data_parallel_size();
  meta["zero_stage"] = cfg_.engine.zero.stage;
  meta["units"] = units_meta(*model_);
  meta["engine"] = engine_->state_meta();  // the fp16 loss scaler
  const std::string saved = save_sharded_checkpoint(group_, cfg_.ckpt_dir, step_, meta, engine_->shards(),
                                                    static_cast<int>(cfg_.tensor_parallel_size));
  if (cfg_.keep_last > 0 && group_.rank() == 0) prune_checkpoints(cfg_.ckpt_dir, cfg_.keep_last);
  return saved;
}

std::unique_ptr<Model> load_trained_model(const std::string& path) {
  CheckpointParams src(path);  // each unit is read from the rank files straight into the model
  try {
    std::unique_ptr<Model> m = make_model(src.meta().meta.at("model").get<ModelConfig>());
    std::vector<Unit*> us = m->units();
    if (static_cast<int>(us.size()) != src.units())
      ZT_THROW("checkpoint '", path, "' holds ", src.units(), " units, its model config builds ", us.size());
    for (int i = 0; i < src.units(); ++i) {
      ParamSet& ps = us[i]->params();
      if (src.unit_name(i) != ps.unit_name() || src.unit_numel(i) != ps.numel())
        ZT_THROW("checkpoint '", path, "': unit ", i, " is '", src.unit_name(i), "' with ", src.unit_numel(i),
                 " parameters, the model has '", ps.unit_name(), "' with ", ps.numel());
      src.fill(i, 0, ps.flat().flat_view(0, {ps.numel()}));
    }
    return m;
  } catch (const nlohmann::json::exception& e) {
    ZT_THROW("checkpoint '", path, "': meta.json lacks or mistypes a field: ", e.what());
  }
}

void Trainer::resume_from(const std::string& dir) {
  std::vector<CheckpointShard> shards = engine_->shards();
  // Each rank its ZeRO shard (its place in the replica group) of its own slice, whatever grid the
  // checkpoint was saved on.
  const nlohmann::json meta = grid_ ? load_sharded_checkpoint(group_, dir, shards, grid_->replica->rank(),
                                                              grid_->replica->size())
                                    : load_sharded_checkpoint(group_, dir, shards);
  try {
    ModelConfig saved = meta.at("model").get<ModelConfig>();
    if (!(saved == mcfg_))
      ZT_THROW("checkpoint in '", dir, "' holds a different model: ", meta.at("model").dump(),
               ", this run builds ", nlohmann::json(mcfg_).dump());
    // Everything that shapes the trajectory must match, or the "continuation" would silently be
    // another run: the data position counts global batches, the schedule depends on steps, etc.
    // (Where the run writes checkpoints, logs or evaluates, activation checkpointing, which
    // recomputes bitwise the same values, the ZeRO stage, the world size and the grid may change:
    // the checkpoint's shards are resharded, its slices recut. The global batch dp x B must stay.)
    const nlohmann::json saved_tr = meta.at("training"), now_tr = cfg_;
    // compute_dtype: checkpoints written before it existed computed in float32; tokenizer: before
    // it existed every run read text as bytes (""). The engine's keys: as DeepSpeed writes them.
    auto same = [&](const nlohmann::json& was, const nlohmann::json& now, const std::string& key) {
      if (was.is_null() || was != now)
        ZT_THROW("checkpoint in '", dir, "' was trained with ", key, " = ", was.is_null() ? "(missing)" : was.dump(),
                 ", this run has ", key, " = ", now.dump(), ": resume with the same value");
    };
    for (const char* key :
         {"model", "init_from", "train_data", "tokenizer", "seq_len", "steps", "seed", "compute_dtype"})
      same(saved_tr.contains(key)                ? saved_tr.at(key)
           : std::string(key) == "compute_dtype" ? nlohmann::json("f32")
           : std::string(key) == "tokenizer"     ? nlohmann::json("")
                                                 : nlohmann::json(),
           now_tr.at(key), key);
    const nlohmann::json saved_engine = saved_tr.value("engine", nlohmann::json::object());
    const nlohmann::json& now_engine = now_tr.at("engine");
    for (const char* key : {"gradient_accumulation_steps", "gradient_clipping", "optimizer", "bf16", "fp16"})
      same(saved_engine.value(key, nlohmann::json()), now_engine.at(key), key);
    // No scheduler is written as no "scheduler" key (DeepSpeed's spelling of a constant lr).
    const nlohmann::json none = "none";
    same(saved_engine.value("scheduler", none), now_engine.value("scheduler", none), "scheduler");
    const int64_t global_batch = cfg_.batch() * data_parallel_size();
    const std::string where = "checkpoint in '" + dir + "': meta.json";
    const int64_t saved_batch = json_integer(meta.at("global_batch"), where + " global_batch", 1);
    if (saved_batch != global_batch)
      ZT_THROW("checkpoint in '", dir, "' was trained with a global batch of ", saved_batch,
               " sequences (batch x data-parallel ranks), this run has ", cfg_.batch(), " x ", data_parallel_size(),
               " = ", global_batch, ": choose --batch so that the global batch stays the same");
    engine_->shards_loaded(shards);
    step_ = json_integer(meta.at("step"), where + " step", 0);
    engine_->set_optimizer_steps(json_integer(meta.at("optimizer_steps"), where + " optimizer_steps", 0));
    if (meta.contains("engine")) engine_->load_state_meta(meta.at("engine"));
    rng_.set_state(std::stoull(meta.at("rng_state").get<std::string>()));
    train_->set_position(json_integer(meta.at("data_position"), where + " data_position", 0));
  } catch (const nlohmann::json::exception& e) {
    ZT_THROW("checkpoint in '", dir, "': meta.json lacks or mistypes a field: ", e.what());
  }
}

}  // namespace zt
