// defines: precision_name, to_json (zero/engine_config.h).
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

void to_json(json& j, const EngineConfig& c) {
  auto offload = [](const OffloadConfig& o) {
    return json{{"device", o.device}, {"pin_memory", o.pin_memory}, {"nvme_path", o.nvme_path},
                {"buffer_count", o.buffer_count}, {"buffer_size", o.buffer_size}};
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
        {"zero_quantized_gradients", z.zero_quantized_gradients},
        {"zero_quantized_gradients_bits", z.zero_quantized_gradients_bits},
        {"zero_quantization_block_size", z.zero_quantization_block_size}}},
      {"aio", {{"block_size", c.aio.block_size}, {"queue_depth", c.aio.queue_depth}}},
      {"activation_checkpointing",
       {{"enabled", c.activation_checkpointing}, {"cpu_checkpointing", c.cpu_checkpointing}}},
  };
  json params = {{"lr", o.lr}, {"weight_decay", o.weight_decay}};
  if (o.type == "SGD") {
    params["momentum"] = o.momentum;
  } else {
    params["betas"] = {o.beta1, o.beta2};
    params["eps"] = o.eps;
  }
  j["optimizer"] = {{"type", o.type}, {"params", params}};
  // No scheduler (constant lr) is DeepSpeed's "no scheduler key"; the key is left out.
  if (s.type == "WarmupCosineLR")
    j["scheduler"] = {{"type", s.type},
                      {"params", {{"warmup_num_steps", s.warmup_num_steps}, {"total_num_steps", s.total_num_steps},
                                  {"cos_min_ratio", s.cos_min_ratio}, {"warmup_type", "linear"}}}};
  else if (s.type == "WarmupLR")
    j["scheduler"] = {{"type", s.type},
                      {"params", {{"warmup_num_steps", s.warmup_num_steps}, {"warmup_max_lr", o.lr},
                                  {"warmup_min_lr", 0}, {"warmup_type", "linear"}}}};
}

}  // namespace zt
