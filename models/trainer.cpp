#include "models/trainer.h"

#include "models/gpt2.h"              // defines: GPT2 (llm.c checkpoints hold GPT-2)
#include "models/init.h"              // defines: make_model, init_model
#include "models/llmc_checkpoint.h"   // defines: read_llmc_header, load_llmc_checkpoint
#include "models/train_checkpoint.h"  // defines: save_checkpoint, load_checkpoint, latest_checkpoint
#include "optim/adamw.h"              // defines: AdamW (an Optimizer)
#include "optim/clip.h"               // defines: clip_grad_norm, global_norm
#include "optim/schedule.h"           // defines: LrSchedule (warmup + cosine)
#include "optim/sgd.h"                // defines: Sgd

namespace zt {

namespace {
std::unique_ptr<Optimizer> make_optimizer(const TrainConfig& c, const std::vector<ParamSet*>& sets) {
  if (c.optimizer == "adamw") {
    AdamWHyper h;
    h.lr = c.lr; h.beta1 = c.beta1; h.beta2 = c.beta2; h.eps = c.eps; h.weight_decay = c.weight_decay;
    return std::make_unique<AdamW>(sets, h);
  }
  SgdHyper h;
  h.lr = c.lr; h.momentum = c.momentum; h.weight_decay = c.weight_decay;
  return std::make_unique<Sgd>(sets, h);
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// Config

void TrainConfig::validate() const {
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
  need(!resume || !ckpt_dir.empty(), "resume", "true", "a ckpt_dir to resume from");
  need(memory_limit >= 0, "memory_limit", memory_limit, ">= 0");
}

void to_json(nlohmann::json& j, const TrainConfig& c) {
  j = {{"model", c.model}, {"init_from", c.init_from}, {"train_data", c.train_data}, {"val_data", c.val_data},
       {"batch", c.batch}, {"seq_len", c.seq_len}, {"grad_accum", c.grad_accum}, {"steps", c.steps},
       {"optimizer", c.optimizer}, {"lr", c.lr}, {"min_lr_frac", c.min_lr_frac}, {"warmup", c.warmup},
       {"schedule", c.schedule}, {"weight_decay", c.weight_decay}, {"beta1", c.beta1}, {"beta2", c.beta2},
       {"eps", c.eps}, {"momentum", c.momentum}, {"grad_clip", c.grad_clip}, {"seed", c.seed},
       {"eval_interval", c.eval_interval}, {"eval_batches", c.eval_batches},
       {"activation_checkpointing", c.activation_checkpointing}};
}

// ---------------------------------------------------------------------------------------------
// Trainer

Trainer::Trainer(const TrainConfig& cfg) : cfg_(cfg), rng_(cfg.seed) {
  cfg_.validate();
  if (cfg_.memory_limit > 0) cpu_allocator().set_limit(cfg_.memory_limit);

  // Model: from an llm.c checkpoint's header, or a named config with our deterministic init.
  mcfg_ = cfg_.init_from.empty() ? zt::model_config(cfg_.model) : read_llmc_header(cfg_.init_from);
  if (cfg_.seq_len == 0) cfg_.seq_len = mcfg_.max_seq_len;
  if (cfg_.seq_len > mcfg_.max_seq_len)
    ZT_THROW("seq_len ", cfg_.seq_len, " exceeds the model's context length ", mcfg_.max_seq_len);
  model_ = make_model(mcfg_);
  if (cfg_.init_from.empty()) {
    init_model(*model_, rng_);
  } else {
    auto* gpt = dynamic_cast<GPT2*>(model_.get());
    ZT_CHECK(gpt, "llm.c checkpoints hold GPT-2 models");
    load_llmc_checkpoint(cfg_.init_from, *gpt);
  }
  model_->set_activation_checkpointing(cfg_.activation_checkpointing);

  // Data: llm.c's loader, no shuffling. Every id must fit the model's vocabulary.
  std::vector<uint16_t> tokens = load_tokens(cfg_.train_data);
  check_tokens_fit_vocab(tokens, mcfg_.vocab_size, cfg_.train_data);
  train_ = std::make_unique<DataLoader>(std::move(tokens), cfg_.batch, cfg_.seq_len);
  if (!cfg_.val_data.empty()) {
    std::vector<uint16_t> vt = load_tokens(cfg_.val_data);
    check_tokens_fit_vocab(vt, mcfg_.vocab_size, cfg_.val_data);
    val_ = std::make_unique<DataLoader>(std::move(vt), cfg_.batch, cfg_.seq_len);
  }

  std::vector<ParamSet*> sets;
  for (Unit* u : model_->units()) sets.push_back(&u->params());
  opt_ = make_optimizer(cfg_, sets);
  if (cfg_.resume) resume_from(cfg_.ckpt_dir);
}

Trainer::~Trainer() = default;

double Trainer::lr_at(int64_t step) const {
  LrSchedule s;
  s.kind = lr_kind_from_name(cfg_.schedule);
  s.lr = cfg_.lr;
  s.warmup_steps = cfg_.warmup;
  s.max_steps = std::max<int64_t>(cfg_.steps, std::max<int64_t>(cfg_.warmup, 1));
  s.min_lr_frac = cfg_.min_lr_frac;
  return s.at(step);
}

StepStats Trainer::step() {
  const auto t0 = std::chrono::steady_clock::now();
  cpu_allocator().reset_peaks();  // the memory in the log is this step's peak
  model_->zero_grad();
  double loss_sum = 0;
  for (int64_t micro = 0; micro < cfg_.grad_accum; ++micro) {
    train_->next_batch(idx_, targets_);
    Var loss = model_->loss(idx_, targets_);  // mean over B*T
    loss_sum += loss.value().item();
    // d(mean over all micro-batches)/d(loss of this one) = 1 / grad_accum
    loss.backward(Tensor::full({}, 1.0 / static_cast<double>(cfg_.grad_accum), loss.dtype()));
  }
  std::vector<Tensor> grads;
  for (Unit* u : model_->units()) grads.push_back(u->params().flat_grad());
  StepStats s;
  s.grad_norm = cfg_.grad_clip > 0 ? clip_grad_norm(grads, cfg_.grad_clip) : global_norm(grads);
  s.lr = lr_at(step_);
  opt_->set_lr(s.lr);
  opt_->step();
  ++step_;
  const auto t1 = std::chrono::steady_clock::now();
  s.step = step_;
  s.loss = loss_sum / static_cast<double>(cfg_.grad_accum);
  s.step_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  s.tokens_per_s = static_cast<double>(cfg_.batch * cfg_.seq_len * cfg_.grad_accum) / (s.step_ms / 1000.0);
  if (val_ && cfg_.eval_interval > 0 && (step_ % cfg_.eval_interval == 0 || step_ == cfg_.steps)) s.val_loss = evaluate();
  if (!cfg_.ckpt_dir.empty() && ((cfg_.ckpt_interval > 0 && step_ % cfg_.ckpt_interval == 0) || step_ == cfg_.steps))
    save();
  return s;
}

double Trainer::evaluate() {
  ZT_CHECK(val_, "evaluate() without validation data");
  NoGradGuard no_grad;
  val_->reset();  // every evaluation reads the same batches
  Tensor x, y;
  const int64_t n = std::min<int64_t>(cfg_.eval_batches, val_->num_batches());
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    val_->next_batch(x, y);
    sum += model_->loss(x, y).value().item();
  }
  return sum / static_cast<double>(n);
}

std::string Trainer::save() {
  ZT_CHECK(!cfg_.ckpt_dir.empty(), "save() without a checkpoint directory");
  nlohmann::json meta;
  meta["model"] = mcfg_;
  meta["training"] = cfg_;
  meta["rng_state"] = std::to_string(rng_.state());
  meta["data_position"] = train_->position();
  meta["optimizer_steps"] = opt_->step_count();
  nlohmann::json units = nlohmann::json::array();
  std::vector<NamedTensor> tensors;
  for (Unit* u : model_->units()) {
    const ParamSet& ps = u->params();
    nlohmann::json params = nlohmann::json::array();
    for (const ParamInfo& p : ps.infos())
      params.push_back({{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}, {"decay", p.decay}});
    units.push_back({{"name", ps.unit_name()}, {"numel", ps.numel()}, {"padded_numel", ps.padded_numel()}, {"params", params}});
    tensors.push_back({ps.unit_name() + "/param", ps.flat()});
  }
  meta["units"] = units;
  for (auto& [name, t] : opt_->state()) tensors.push_back({name, t});  // "<unit>/exp_avg", ...
  return save_checkpoint(cfg_.ckpt_dir, step_, meta, tensors);
}

namespace {
// Copies each unit's saved flat buffer into the model (same layout required).
void load_params(const SavedCheckpoint& ck, Model& m) {
  for (Unit* u : m.units()) {
    ParamSet& ps = u->params();
    const Tensor& t = ck.get(ps.unit_name() + "/param");
    if (t.shape() != ps.flat().shape() || t.dtype() != ps.flat().dtype())
      ZT_THROW("checkpoint '", ck.path, "': unit '", ps.unit_name(), "' has ", t.str(), ", the model expects ",
               ps.flat().str());
    Tensor flat = ps.flat();
    flat.copy_(t);
  }
}
}  // namespace

std::unique_ptr<Model> load_trained_model(const std::string& path) {
  SavedCheckpoint ck = load_checkpoint(path);
  try {
    std::unique_ptr<Model> m = make_model(ck.meta.at("model").get<ModelConfig>());
    load_params(ck, *m);
    return m;
  } catch (const nlohmann::json::exception& e) {
    ZT_THROW("checkpoint '", ck.path, "': meta.json lacks or mistypes a field: ", e.what());
  }
}

void Trainer::resume_from(const std::string& dir) {
  SavedCheckpoint ck = load_checkpoint(latest_checkpoint(dir));
  try {
    restore(ck);
  } catch (const nlohmann::json::exception& e) {
    ZT_THROW("checkpoint '", ck.path, "': meta.json lacks or mistypes a field: ", e.what());
  }
}

void Trainer::restore(const SavedCheckpoint& ck) {
  ModelConfig saved = ck.meta.at("model").get<ModelConfig>();
  if (!(saved == mcfg_))
    ZT_THROW("checkpoint '", ck.path, "' holds a different model: ", ck.meta.at("model").dump(),
             ", this run builds ", nlohmann::json(mcfg_).dump());
  // Everything that shapes the trajectory must match, or the "continuation" would silently be
  // another run: the data position counts batches of B x T, the schedule depends on steps, etc.
  // (Where the run writes checkpoints, logs or evaluates, and activation checkpointing, which
  // recomputes bitwise the same values, may change freely.)
  const nlohmann::json saved_tr = ck.meta.at("training"), now_tr = cfg_;
  for (const char* key : {"model", "init_from", "train_data", "batch", "seq_len", "grad_accum", "steps", "optimizer",
                          "lr", "min_lr_frac", "warmup", "schedule", "weight_decay", "beta1", "beta2", "eps",
                          "momentum", "grad_clip", "seed"})
    if (!saved_tr.contains(key) || saved_tr.at(key) != now_tr.at(key))
      ZT_THROW("checkpoint '", ck.path, "' was trained with ", key, " = ",
               saved_tr.contains(key) ? saved_tr.at(key).dump() : "(missing)", ", this run has ", key, " = ",
               now_tr.at(key).dump(), ": resume with the same value");
  load_params(ck, *model_);
  step_ = ck.meta.at("step").get<int64_t>();
  opt_->load_state(ck.meta.at("optimizer_steps").get<int64_t>(), [&ck](const std::string& n) { return ck.get(n); });
  rng_.set_state(std::stoull(ck.meta.at("rng_state").get<std::string>()));
  train_->set_position(ck.meta.at("data_position").get<int64_t>());
}

}  // namespace zt
