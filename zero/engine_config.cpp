// defines: parse_engine_config, engine_config_from_file, zeropp_problem (zero/engine_config.h) and one parse_* per section.
//
// The DeepSpeed-style config parser (zero/engine_config.h; every key and error case: docs/config.md).
//
// One pass over the JSON object tree: every object's keys are checked against the list of known
// keys first, then each key is read with a type check, a range check and its default. Errors name
// the source, the key path and what was expected:
//   config 'configs/x.json': zero_optimization.stage = 4 is invalid: expected 0, 1, 2 or 3
#include "zero/engine_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <vector>

#include "core/json.h"  // defines: parse_json
#include "core/check.h"
#include "zero/config_reader.h"  // defines: Reader (the checked reads), join

namespace zt {

using nlohmann::json;


namespace {

using namespace config_reader;

OffloadConfig parse_offload(const Reader& r, const json& o, const std::string& p) {
  r.unsupported(o, p, "fast_init", "DeepSpeed-only key");
  r.unsupported(o, p, "ratio", "DeepSpeed-only key: the whole optimizer state is offloaded");
  r.check_keys(o, p, {"device", "pin_memory", "nvme_path", "buffer_count", "buffer_size"});
  OffloadConfig c;
  c.device = offload_device_from_name(r.choice(o, p, "device", "none", {"none", "cpu", "nvme"}));
  c.pin_memory = r.boolean(o, p, "pin_memory", c.pin_memory);
  if (o.contains("nvme_path")) {
    if (!o["nvme_path"].is_string()) r.fail(p, ".nvme_path must be a string, got ", o["nvme_path"].dump());
    c.nvme_path = o["nvme_path"].get<std::string>();
  }
  c.buffer_count = r.integer(o, p, "buffer_count", c.buffer_count, 1, 1 << 20, kIntPos);
  c.buffer_size = r.integer(o, p, "buffer_size", c.buffer_size, 1, kBig, kIntPos);
  if (c.nvme() && c.nvme_path.empty())
    r.fail(p, ".device = \"nvme\" requires ", p, ".nvme_path (a directory), which is missing or empty");
  return c;
}

ZeroOptimization parse_zero(const Reader& r, const json& o) {
  const std::string p = "zero_optimization";
  r.check_keys(o, p,
               {"stage",
                "overlap_comm",
                "contiguous_gradients",
                "reduce_bucket_size",
                "allgather_bucket_size",
                "stage3_prefetch_bucket_size",
                "stage3_param_persistence_threshold",
                "stage3_max_live_parameters",
                "stage3_max_reuse_distance",
                "sub_group_size",
                "offload_optimizer",
                "offload_param",
                "allgather_partitions",
                "reduce_scatter",
                "round_robin_gradients",
                "zero_quantized_weights",
                "zero_hpz_partition_size",
                "zero_hpz_secondary_exact",
                "zero_quantized_gradients",
                "zero_quantized_gradients_one_node",
                "zero_quantized_gradients_bits",
                "zero_quantized_gradients_format",
                "zero_quantized_nontrainable_weights",
                "zero_quantization_block_size"});
  ZeroOptimization z;
  z.stage = static_cast<int>(r.integer(o, p, "stage", 0, 0, 3, "0, 1, 2 or 3"));
  z.overlap_comm = r.boolean(o, p, "overlap_comm", default_overlap_comm(z.stage));
  r.fixed(o, p, "contiguous_gradients", true, "always true: gradients live in flat buffers");
  r.fixed(o, p, "allgather_partitions", true, "parameters are always all-gathered");
  r.fixed(o, p, "reduce_scatter", true, "gradients are always reduce-scattered from stage 1 on");
  r.fixed(o, p, "round_robin_gradients", false, "not implemented");
  z.reduce_bucket_size = r.integer(o, p, "reduce_bucket_size", z.reduce_bucket_size, 1, kBig, kIntPos, true);
  z.allgather_bucket_size = r.integer(o, p, "allgather_bucket_size", z.allgather_bucket_size, 1, kBig, kIntPos, true);
  z.stage3_prefetch_bucket_size = r.integer(o, p, "stage3_prefetch_bucket_size", z.stage3_prefetch_bucket_size,
                                            0, kBig, "an integer >= 0 (0: no prefetch)", true);
  z.stage3_param_persistence_threshold = r.integer(o, p, "stage3_param_persistence_threshold",
                                                   z.stage3_param_persistence_threshold, 0, kBig, kIntNonNeg, true);
  z.stage3_max_live_parameters = r.integer(o, p, "stage3_max_live_parameters", z.stage3_max_live_parameters,
                                           0, kBig, kIntNonNeg, true);
  z.stage3_max_reuse_distance = r.integer(o, p, "stage3_max_reuse_distance", z.stage3_max_reuse_distance,
                                          0, kBig, kIntNonNeg, true);
  z.sub_group_size = r.integer(o, p, "sub_group_size", z.sub_group_size, 1, kBig, kIntPos, true);
  for (const char* key : {"offload_optimizer", "offload_param"}) {
    if (!o.contains(key)) continue;
    OffloadConfig c = parse_offload(r, o[key], p + "." + key);
    const bool is_param = std::string(key) == "offload_param";
    if (c.enabled() && is_param && z.stage != 3)
      r.fail(p, ".offload_param.device = \"", offload_device_name(c.device), "\" requires ", p, ".stage = 3 (stage is ",
             z.stage, "; parameters are partitioned only in stage 3)");
    if (c.enabled() && !is_param && z.stage < 1)
      r.fail(p, ".offload_optimizer.device = \"", offload_device_name(c.device), "\" requires ", p,
             ".stage 1, 2 or 3 (stage is ", z.stage, ")");
    if (!is_param && c.nvme() && c.buffer_count < 2)
      r.fail(p, ".offload_optimizer.buffer_count = ", c.buffer_count,
             " is invalid with device \"nvme\": expected >= 2 (one sub-group updating while the next is read)");
    (is_param ? z.offload_param : z.offload_optimizer) = c;
  }
  // ZeRO++ (zero/zeropp.h). Whether the hpZ size fits the nodes is known only once the ranks are
  // placed: the engine checks it against the topology.
  z.zero_quantized_weights = r.boolean(o, p, "zero_quantized_weights", false);
  // DeepSpeed: 0 and 1 both mean no secondary shard (every use tests > 1).
  z.zero_hpz_partition_size = r.integer(o, p, "zero_hpz_partition_size", 1, 0, 1 << 20, kIntNonNeg);
  z.zero_hpz_secondary_exact = r.boolean(o, p, "zero_hpz_secondary_exact", false);
  z.zero_quantized_gradients = r.boolean(o, p, "zero_quantized_gradients", false);
  z.zero_quantized_gradients_one_node = r.boolean(o, p, "zero_quantized_gradients_one_node", false);
  z.zero_quantized_nontrainable_weights = r.boolean(o, p, "zero_quantized_nontrainable_weights", false);
  z.zero_quantized_gradients_bits = static_cast<int>(
      r.integer(o, p, "zero_quantized_gradients_bits", 4, 4, 8, "4 or 8"));
  z.zero_quantized_gradients_format = r.choice(o, p, "zero_quantized_gradients_format", "deepspeed",
                                               {"deepspeed", "blocks"});
  z.zero_quantization_block_size = r.integer(o, p, "zero_quantization_block_size", z.zero_quantization_block_size, 1,
                                             1 << 24, kIntPos);
  return z;
}

Fp16Config parse_fp16(const Reader& r, const json& o) {
  const std::string p = "fp16";
  r.check_keys(o, p, {"enabled", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
                      "min_loss_scale", "auto_cast", "consecutive_hysteresis"});
  Fp16Config f;
  f.enabled = r.boolean(o, p, "enabled", false);
  r.fixed(o, p, "auto_cast", false, "auto_cast is not supported: the model runs in the working precision");
  r.fixed(o, p, "consecutive_hysteresis", false, "not implemented");
  f.loss_scale = r.number(o, p, "loss_scale", f.loss_scale, 0, 1e38, "0 (dynamic) or a positive static scale");
  f.initial_scale_power = static_cast<int>(r.integer(o, p, "initial_scale_power", f.initial_scale_power, 0, 63,
                                                     "an integer in [0, 63]"));
  f.loss_scale_window = r.integer(o, p, "loss_scale_window", f.loss_scale_window, 1, kBig, kIntPos);
  f.hysteresis = static_cast<int>(r.integer(o, p, "hysteresis", f.hysteresis, 1, 1 << 30, kIntPos));
  f.min_loss_scale = r.number(o, p, "min_loss_scale", f.min_loss_scale, 0, 1e38, "a number > 0", false, true);
  return f;
}

OptimizerConfig parse_optimizer(const Reader& r, const json& o) {
  const std::string p = "optimizer";
  r.check_keys(o, p, {"type", "params"});
  OptimizerConfig c;
  if (!o.contains("type")) r.fail("optimizer.type is missing: expected \"AdamW\", \"Adam\" or \"SGD\"");
  const std::string type = r.choice(o, p, "type", "AdamW", {"AdamW", "Adam", "SGD"}, true);
  c.type = type == "SGD" ? OptimizerType::sgd : type == "Adam" ? OptimizerType::adam : OptimizerType::adamw;
  const bool sgd = c.sgd();
  if (sgd) c.weight_decay = 0;  // torch.optim.SGD's default
  if (!o.contains("params")) return c;
  const json& q = o["params"];
  const std::string pp = "optimizer.params";
  if (sgd) r.check_keys(q, pp, {"lr", "momentum", "weight_decay"}, " for SGD");
  else r.check_keys(q, pp, {"lr", "betas", "eps", "weight_decay", "adam_w_mode"}, std::string(" for ") + type);
  c.lr = r.number(q, pp, "lr", c.lr, 0, 1e6, "a number >= 0", true);
  c.weight_decay = r.number(q, pp, "weight_decay", c.weight_decay, 0, 1e6, "a number >= 0", true);
  if (sgd) {
    c.momentum = r.number(q, pp, "momentum", c.momentum, 0, 1, "a number in [0, 1)", true);
    if (c.momentum == 1) r.fail(pp, ".momentum = 1 is invalid: expected a number in [0, 1)");
    return c;
  }
  r.fixed(q, pp, "adam_w_mode", true, "decoupled weight decay (AdamW) is the only mode");
  c.eps = r.number(q, pp, "eps", c.eps, 0, 1, "a number > 0", true, true);
  if (const json* b = r.get(q, pp, "betas", true, "[beta1, beta2]")) {
    auto beta_ok = [](const json& x) { return x.is_number() && x.get<double>() >= 0 && x.get<double>() < 1; };
    if (!b->is_array() || b->size() != 2 || !beta_ok((*b)[0]) || !beta_ok((*b)[1]))
      r.fail(pp, ".betas must be an array of 2 numbers in [0, 1) ([beta1, beta2]), got ", b->dump());
    c.beta1 = (*b)[0].get<double>();
    c.beta2 = (*b)[1].get<double>();
  }
  return c;
}

// "scheduler" (optim/schedule.h): DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR with
// their parameters, defaults and meaning, llm.c's "constant" and "cosine", or "none". A parameter
// the type does not use is an error (it would be ignored). "auto" takes the default, except
// warmup_max_lr, whose "auto" is the optimizer's lr (as Hugging Face's integration fills it), and
// total_num_steps, whose "auto" (and 0) is the run's steps.
SchedulerConfig parse_scheduler(const Reader& r, const json& o, double lr) {
  const std::string p = "scheduler";
  r.check_keys(o, p, {"type", "params"});
  if (!o.contains("type"))
    r.fail(
        "scheduler.type is missing: expected \"WarmupLR\", \"WarmupDecayLR\", \"WarmupCosineLR\", "
        "\"constant\", \"cosine\" or \"none\"");
  const std::vector<std::string> types = {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "constant", "cosine", "none"};
  SchedulerConfig s = SchedulerConfig::defaults(scheduler_type_from_name(r.choice(o, p, "type", "none", types)));
  const json empty = json::object();
  const json& q = o.contains("params") ? o["params"] : empty;
  const std::string pp = "scheduler.params";
  std::vector<std::string> known;
  for (const char* k : {"warmup_num_steps", "warmup_type", "warmup_min_lr", "warmup_max_lr", "total_num_steps",
                        "warmup_min_ratio", "cos_min_ratio"})
    if (s.uses(k)) known.push_back(k);
  r.check_keys(q, pp, known, std::string(" for ") + scheduler_type_name(s.type));
  s.warmup_num_steps = r.integer(q, pp, "warmup_num_steps", s.warmup_num_steps, 0, kBig, kIntNonNeg, true);
  if (s.uses("warmup_type") && q.contains("warmup_type") && !Reader::is_auto(q["warmup_type"]))
    s.warmup_type = warmup_type_from_name(r.choice(q, pp, "warmup_type", "log", {"log", "linear"}));
  s.warmup_min_lr = r.number(q, pp, "warmup_min_lr", s.warmup_min_lr, 0, 1e6, "a number >= 0", true);
  if (s.uses("warmup_max_lr")) {
    s.warmup_max_lr = r.number(q, pp, "warmup_max_lr", s.warmup_max_lr, 0, 1e6, "a number >= 0", true);
    if (q.contains("warmup_max_lr") && Reader::is_auto(q["warmup_max_lr"])) s.warmup_max_lr = lr;
  }
  s.total_num_steps = r.integer(q, pp, "total_num_steps", s.total_num_steps, 0, kBig,
                                "an integer >= 0 (0: the run's steps)", true);
  s.warmup_min_ratio = r.number(q, pp, "warmup_min_ratio", s.warmup_min_ratio, 0, 1, "a number in [0, 1]", true);
  s.cos_min_ratio = r.number(q, pp, "cos_min_ratio", s.cos_min_ratio, 0, 1, "a number in [0, 1]", true);
  try {
    s.validate();
  } catch (const Error& e) {
    r.fail(e.what());
  }
  return s;
}

// "aio": the NVMe tier's IO (zero/aio.h). block_size a multiple of 4096 (O_DIRECT).
AioConfig parse_aio(const Reader& r, const json& o) {
  const std::string p = "aio";
  r.check_keys(o, p, {"block_size", "queue_depth", "thread_count", "single_submit", "overlap_events",
                      "use_gds"});
  AioConfig a;
  a.block_size = r.integer(o, p, "block_size", a.block_size, 4096, int64_t(1) << 30,
                           "a multiple of 4096 in [4096, 2^30] (bytes)");
  if (a.block_size % 4096 != 0)
    r.fail(p, ".block_size = ", a.block_size, " is invalid: expected a multiple of 4096 (O_DIRECT alignment)");
  a.queue_depth = r.integer(o, p, "queue_depth", a.queue_depth, 1, 4096, "an integer in [1, 4096]");
  r.fixed(o, p, "thread_count", 1, "one IO thread per rank");
  r.fixed(o, p, "single_submit", false, "requests are submitted in batches");
  r.fixed(o, p, "overlap_events", true, "completions are always overlapped with submissions");
  r.fixed(o, p, "use_gds", false, "GPUDirect Storage is not implemented");
  return a;
}

// "activation_checkpointing": our "enabled", DeepSpeed's "cpu_checkpointing" (the checkpoints in
// the host tier: zero/activation_offload.h), and DeepSpeed's other keys, accepted only at their
// defaults. Sets c.activation_checkpointing and c.cpu_checkpointing.
void parse_activation_checkpointing(const Reader& r, const json& o, EngineConfig& c) {
  const std::string p = "activation_checkpointing";
  r.check_keys(o, p, {"enabled", "partition_activations", "cpu_checkpointing", "contiguous_memory_optimization",
                      "number_checkpoints", "synchronize_checkpoint_boundary", "profile"});
  for (const char* k : {"partition_activations", "contiguous_memory_optimization", "synchronize_checkpoint_boundary",
                        "profile"})
    r.fixed(o, p, k, false, "DeepSpeed-only option, not supported");
  r.fixed(o, p, "number_checkpoints", nullptr, "DeepSpeed-only option, not supported");
  c.activation_checkpointing = r.boolean(o, p, "enabled", false);
  c.cpu_checkpointing = r.boolean(o, p, "cpu_checkpointing", false);
  // DeepSpeed offloads the checkpoints that checkpointing makes: without it there are none.
  if (c.cpu_checkpointing && !c.activation_checkpointing)
    r.fail("activation_checkpointing.cpu_checkpointing = true needs activation_checkpointing.enabled = true "
           "(it moves the checkpoints that activation checkpointing keeps to host memory), got enabled = false");
}

// DeepSpeed's batch arithmetic: train_batch_size = micro x accumulation x world; any two given
// (or one, or none) determine the rest.
void resolve_batch(const Reader& r, const json& j, int world, EngineConfig& c) {
  auto opt = [&](const char* key) -> std::optional<int64_t> {
    if (!j.contains(key) || Reader::is_auto(j[key])) return std::nullopt;
    return r.integer(j, "", key, 0, 1, kMaxBatch, kIntPos);
  };
  const auto t = opt("train_batch_size"), m = opt("train_micro_batch_size_per_gpu"),
             a = opt("gradient_accumulation_steps");
  const int64_t w = world;
  auto divide = [&](int64_t total, int64_t by, const std::string& by_text) {
    if (total % by != 0)
      r.fail("train_batch_size = ", total, " is invalid: expected a multiple of ", by_text, " = ", by);
    return total / by;
  };
  if (t && m && a) {
    if (*t != *m * *a * w)
      r.fail("train_batch_size = ", *t, " is invalid: expected train_micro_batch_size_per_gpu x "
             "gradient_accumulation_steps x world_size = ", *m, " x ", *a, " x ", w, " = ", *m * *a * w);
    c.train_micro_batch_size_per_gpu = *m, c.gradient_accumulation_steps = *a;
  } else if (t && m) {
    c.train_micro_batch_size_per_gpu = *m;
    c.gradient_accumulation_steps = divide(*t, *m * w, "train_micro_batch_size_per_gpu x world_size (" +
                                                       std::to_string(*m) + " x " + std::to_string(w) + ")");
  } else if (t && a) {
    c.gradient_accumulation_steps = *a;
    c.train_micro_batch_size_per_gpu = divide(*t, *a * w, "gradient_accumulation_steps x world_size (" +
                                                          std::to_string(*a) + " x " + std::to_string(w) + ")");
  } else if (t) {
    c.gradient_accumulation_steps = 1;
    c.train_micro_batch_size_per_gpu = divide(*t, w, "world_size");
  } else {
    c.train_micro_batch_size_per_gpu = m.value_or(1);
    c.gradient_accumulation_steps = a.value_or(1);
  }
  c.train_batch_size = c.train_micro_batch_size_per_gpu * c.gradient_accumulation_steps * w;
}

}  // namespace

EngineConfig parse_engine_config(const json& j, const std::string& source, int world_size,
                                 const std::set<std::string>& caller_keys) {
  const Reader r{source};
  if (world_size < 1) r.fail("world_size = ", world_size, " is invalid: expected >= 1");
  std::vector<std::string> known = {"train_batch_size", "train_micro_batch_size_per_gpu",
                                    "gradient_accumulation_steps", "gradient_clipping", "steps_per_print",
                                    "wall_clock_breakdown", "zero_allow_untested_optimizer", "bf16", "bfloat16",
                                    "fp16", "optimizer", "scheduler", "zero_optimization",
                                    "aio", "activation_checkpointing"};
  known.insert(known.end(), caller_keys.begin(), caller_keys.end());
  r.check_keys(j, "", known);

  EngineConfig c;
  resolve_batch(r, j, world_size, c);
  c.gradient_clipping = r.number(j, "", "gradient_clipping", 0, 0, 1e30, "a number >= 0 (0: off)", true);
  c.steps_per_print = r.integer(j, "", "steps_per_print", c.steps_per_print, 1, kBig, kIntPos);
  c.wall_clock_breakdown = r.boolean(j, "", "wall_clock_breakdown", false);
  r.boolean(j, "", "zero_allow_untested_optimizer", false);  // no effect: every accepted optimizer is tested

  if (j.contains("bf16") && j.contains("bfloat16"))
    r.fail("both bf16 and its alias bfloat16 are given: expected one of them");
  bool bf16 = false;
  for (const char* key : {"bf16", "bfloat16"})
    if (j.contains(key)) {
      r.check_keys(r.section(j, key), key, {"enabled"});
      bf16 = r.boolean(j[key], key, "enabled", false);
    }
  if (j.contains("fp16")) c.fp16 = parse_fp16(r, r.section(j, "fp16"));
  if (bf16 && c.fp16.enabled)
    r.fail("bf16.enabled and fp16.enabled are both true: expected at most one of them");
  c.precision = bf16 ? Precision::bf16 : c.fp16.enabled ? Precision::f16 : Precision::f32;

  if (j.contains("optimizer")) c.optimizer = parse_optimizer(r, r.section(j, "optimizer"));
  if (j.contains("scheduler")) c.scheduler = parse_scheduler(r, r.section(j, "scheduler"), c.optimizer.lr);
  if (j.contains("zero_optimization")) c.zero = parse_zero(r, r.section(j, "zero_optimization"));
  if (j.contains("aio")) c.aio = parse_aio(r, r.section(j, "aio"));
  // Offload combinations (docs/offload.md): the offloaded optimizer is the CPU AdamW (DeepSpeed's
  // DeepSpeedCPUAdam), and parameter offload needs it (the updated parameters are made on the host).
  const ZeroOptimization& z = c.zero;
  if (z.offload_optimizer.enabled() && c.optimizer.sgd())
    r.fail("zero_optimization.offload_optimizer.device = \"", offload_device_name(z.offload_optimizer.device),
           "\" needs optimizer.type \"AdamW\" or \"Adam\" (the CPU AdamW); got \"SGD\"");
  if (z.offload_param.enabled() && !z.offload_optimizer.enabled())
    r.fail("zero_optimization.offload_param.device = \"", offload_device_name(z.offload_param.device),
           "\" needs zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\" (the parameters are updated on "
           "the host), got \"none\"");
  if (const std::string bad = zeropp_problem(z, world_size); !bad.empty()) r.fail(bad);
  if (j.contains("activation_checkpointing"))
    parse_activation_checkpointing(r, r.section(j, "activation_checkpointing"), c);
  return c;
}

std::string zeropp_problem(const ZeroOptimization& z, int world_size) {
  const std::string p = "zero_optimization.";
  std::ostringstream m;
  if (z.zero_quantized_gradients_bits != 4 && z.zero_quantized_gradients_bits != 8)
    m << p << "zero_quantized_gradients_bits = " << z.zero_quantized_gradients_bits << " is invalid: expected 4 or 8";
  else if (z.zero_quantization_block_size < 1)
    m << p << "zero_quantization_block_size = " << z.zero_quantization_block_size << " is invalid: expected >= 1";
  else if (z.zero_quantized_gradients_format != "deepspeed" && z.zero_quantized_gradients_format != "blocks")
    m << p << "zero_quantized_gradients_format = \"" << z.zero_quantized_gradients_format
      << "\" is invalid: expected \"deepspeed\" or \"blocks\"";
  else if (z.zero_hpz_partition_size < 0)
    m << p << "zero_hpz_partition_size = " << z.zero_hpz_partition_size << " is invalid: expected >= 0 (0 or 1 = off)";
  else if (z.zero_quantized_weights && z.stage != 3)
    m << p << "zero_quantized_weights = true requires " << p << "stage = 3 (stage is " << z.stage
      << "; only stage 3 all-gathers the parameters before every use)";
  else if (z.zero_hpz_partition_size > 1 && z.stage != 3)
    m << p << "zero_hpz_partition_size = " << z.zero_hpz_partition_size << " requires " << p << "stage = 3 (stage is "
      << z.stage << "; the secondary shards are of partitioned parameters)";
  else if (z.zero_quantized_gradients && z.stage != 3)
    m << p << "zero_quantized_gradients = true requires " << p << "stage = 3 (stage is " << z.stage
      << "; DeepSpeed reads it at stage 3 only and reduces exactly below: remove the key for the same run)";
  else if (z.zero_hpz_secondary_exact && !(z.zero_quantized_weights && z.zero_hpz_partition_size > 1))
    m << p << "zero_hpz_secondary_exact = true needs " << p << "zero_quantized_weights = true and " << p
      << "zero_hpz_partition_size > 1 (it keeps hpZ's gather exact under qwZ)";
  else if (z.zero_quantized_gradients_one_node && !z.zero_quantized_gradients)
    m << p << "zero_quantized_gradients_one_node = true needs " << p << "zero_quantized_gradients = true";
  else if (z.zero_hpz_partition_size > 1 && world_size % z.zero_hpz_partition_size != 0)
    m << p << "zero_hpz_partition_size = " << z.zero_hpz_partition_size << " does not divide the world size "
      << world_size << " (expected a divisor of the ranks per node)";
  return m.str();
}

EngineConfig engine_config_from_file(const std::string& path, int world_size,
                                     const std::set<std::string>& caller_keys) {
  const json j = read_json_file(path, "config '" + path + "'");
  return parse_engine_config(j, path, world_size, caller_keys);
}

}  // namespace zt
