// defines: precision_name, offload_device_name, offload_device_from_name, optimizer_type_name, to_json (zero/engine_config.h).
//
// The DeepSpeed-style config written back (zero/engine_config.h): precision_name and
// to_json(EngineConfig), every key explicit (checkpoints' meta.json keep it).
#include "zero/engine_config.h"

#include "core/check.h"

namespace zt {

using nlohmann::json;

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::f32: return "fp32";
    case Precision::bf16: return "bf16";
    case Precision::f16: return "fp16";
  }
  ZT_THROW("precision_name: unknown Precision value ", static_cast<int>(p));
}

const char* offload_device_name(OffloadDevice d) {
  switch (d) {
    case OffloadDevice::none: return "none";
    case OffloadDevice::cpu: return "cpu";
    case OffloadDevice::nvme: return "nvme";
  }
  ZT_THROW("offload_device_name: unknown OffloadDevice value ", static_cast<int>(d));
}

OffloadDevice offload_device_from_name(const std::string& name) {
  for (OffloadDevice d : {OffloadDevice::none, OffloadDevice::cpu, OffloadDevice::nvme})
    if (name == offload_device_name(d)) return d;
  ZT_THROW("offload device \"", name, "\" is invalid: expected \"none\", \"cpu\" or \"nvme\"");
}

const char* optimizer_type_name(OptimizerType t) {
  switch (t) {
    case OptimizerType::adamw: return "AdamW";
    case OptimizerType::adam: return "Adam";
    case OptimizerType::sgd: return "SGD";
  }
  ZT_THROW("optimizer_type_name: unknown OptimizerType value ", static_cast<int>(t));
}

void to_json(json& j, const EngineConfig& c) {
  auto offload = [](const OffloadConfig& o) {
    return json{{"device", offload_device_name(o.device)},
                {"pin_memory", o.pin_memory},
                {"nvme_path", o.nvme_path},
                {"buffer_count", o.buffer_count},
                {"buffer_size", o.buffer_size}};
  };
  const auto& z = c.zero;
  const auto& o = c.optimizer;
  const auto& s = c.scheduler;
  j = json{
      {"train_batch_size", c.train_batch_size},
      {"train_micro_batch_size_per_gpu", c.train_micro_batch_size_per_gpu},
      {"gradient_accumulation_steps", c.gradient_accumulation_steps},
      {"gradient_clipping", c.gradient_clipping},
      {"steps_per_print", c.steps_per_print},
      {"wall_clock_breakdown", c.wall_clock_breakdown},
      {"bf16", {{"enabled", c.precision == Precision::bf16}}},
      {"fp16",
       {{"enabled", c.precision == Precision::f16},
        {"loss_scale", c.fp16.loss_scale},
        {"initial_scale_power", c.fp16.initial_scale_power},
        {"loss_scale_window", c.fp16.loss_scale_window},
        {"hysteresis", c.fp16.hysteresis},
        {"min_loss_scale", c.fp16.min_loss_scale}}},
      {"zero_optimization",
       {{"stage", z.stage},
        {"overlap_comm", z.overlap_comm},
        {"contiguous_gradients", z.contiguous_gradients},
        {"reduce_bucket_size", z.reduce_bucket_size},
        {"allgather_bucket_size", z.allgather_bucket_size},
        {"stage3_prefetch_bucket_size", z.stage3_prefetch_bucket_size},
        {"stage3_param_persistence_threshold", z.stage3_param_persistence_threshold},
        {"stage3_max_live_parameters", z.stage3_max_live_parameters},
        {"stage3_max_reuse_distance", z.stage3_max_reuse_distance},
        {"sub_group_size", z.sub_group_size},
        {"offload_optimizer", offload(z.offload_optimizer)},
        {"offload_param", offload(z.offload_param)},
        {"zero_quantized_weights", z.zero_quantized_weights},
        {"zero_hpz_partition_size", z.zero_hpz_partition_size},
        {"zero_hpz_secondary_exact", z.zero_hpz_secondary_exact},
        {"zero_quantized_gradients", z.zero_quantized_gradients},
        {"zero_quantized_gradients_one_node", z.zero_quantized_gradients_one_node},
        {"zero_quantized_nontrainable_weights", z.zero_quantized_nontrainable_weights},
        {"zero_quantized_gradients_bits", z.zero_quantized_gradients_bits},
        {"zero_quantized_gradients_format", z.zero_quantized_gradients_format},
        {"zero_quantization_block_size", z.zero_quantization_block_size}}},
      {"aio", {{"block_size", c.aio.block_size}, {"queue_depth", c.aio.queue_depth}}},
      {"activation_checkpointing",
       {{"enabled", c.activation_checkpointing}, {"cpu_checkpointing", c.cpu_checkpointing}}},
  };
  json params = {{"lr", o.lr}, {"weight_decay", o.weight_decay}};
  if (o.sgd()) {
    params["momentum"] = o.momentum;
  } else {
    params["betas"] = {o.beta1, o.beta2};
    params["eps"] = o.eps;
  }
  j["optimizer"] = {{"type", optimizer_type_name(o.type)}, {"params", params}};
  // No scheduler (constant lr) is DeepSpeed's "no scheduler key"; the key is left out. Otherwise
  // the parameters the type uses (SchedulerConfig::uses), so that the file reads back the same.
  if (s.type != SchedulerType::none) {
    json sp = json::object();
    if (s.uses("warmup_num_steps")) sp["warmup_num_steps"] = s.warmup_num_steps;
    if (s.uses("warmup_type")) sp["warmup_type"] = warmup_type_name(s.warmup_type);
    if (s.uses("warmup_min_lr")) sp["warmup_min_lr"] = s.warmup_min_lr;
    if (s.uses("warmup_max_lr")) sp["warmup_max_lr"] = s.warmup_max_lr;
    if (s.uses("total_num_steps")) sp["total_num_steps"] = s.total_num_steps;
    if (s.uses("warmup_min_ratio")) sp["warmup_min_ratio"] = s.warmup_min_ratio;
    if (s.uses("cos_min_ratio")) sp["cos_min_ratio"] = s.cos_min_ratio;
    j["scheduler"] = {{"type", scheduler_type_name(s.type)}, {"params", sp}};
  }
}

}  // namespace zt
