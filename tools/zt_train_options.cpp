// defines: parse_train_options, resolve_run_config (tools/zt_train_options.h)
//
// parse_train_options, resolve_run_config (tools/zt_train_options.h): zt-train's options, their
// help texts and defaults (tests/cli checks them), and the --config merge.
#include "tools/zt_train_options.h"

#include <CLI/CLI.hpp>

#include "core/check.h"  // defines: ZT_THROW
#include "core/json.h"   // defines: read_json_file
#include "formats/hf_weights.h"  // defines: parse_shard_size
#include "models/model_config.h"  // defines: model_config_names

namespace zt {

std::optional<int> parse_train_options(int argc, char** argv, TrainOptions& o) {
  CLI::App app{"zt-train: train a GPT-2 or Llama model on the CPU (ZeroTensor)"};
  RunConfig& c = o.run;
  std::string names;
  for (const std::string& n : model_config_names()) names += (names.empty() ? "" : ", ") + n;
  app.add_option(
         "--model", c.model,
         "named model config (" + names + ") or a model config file (*.json, e.g. configs/models/llama3-8b.json)")
      ->capture_default_str();
  app.add_option("--init-from", c.init_from,
                 "start from pretrained weights instead of a fresh init: an llm.c GPT-2 checkpoint (.bin) or a Hugging "
                 "Face GPT-2 / Llama directory (config.json + model.safetensors) or .safetensors file");
  app.add_option("--config", o.config_path,
                 "DeepSpeed-style JSON config (docs/config.md): batch, optimizer, scheduler, zero_optimization, ...");
  // The engine's settings (EngineConfig, DeepSpeed's defaults), without --config: each flag writes
  // the config key it names.
  EngineConfig& e = c.engine;
  app.add_option("--zero-stage", e.zero.stage, "ZeRO stage 0-3 (zero_optimization.stage)")->capture_default_str();
  // ZeRO++ (docs/zero.md), the config's zero_optimization keys of the same names
  app.add_flag("--zero-quantized-weights", e.zero.zero_quantized_weights,
               "ZeRO++ qwZ: stage 3's parameter all-gathers sent as int8 blocks");
  app.add_option("--zero-hpz-partition-size", e.zero.zero_hpz_partition_size,
                 "ZeRO++ hpZ: a secondary shard over this many ranks of a node serves the backward's all-gather "
                 "(0 or 1 = off; usually the ranks per node)")
      ->capture_default_str();
  app.add_flag("--zero-hpz-secondary-exact", e.zero.zero_hpz_secondary_exact,
               "under qwZ, hpZ's secondary gather at full precision (DeepSpeed quantizes it too)");
  app.add_flag("--zero-quantized-gradients", e.zero.zero_quantized_gradients,
               "ZeRO++ qgZ: stage 3's gradient reduce-scatter as a hierarchical all-to-all of quantized blocks, "
               "across nodes only (as DeepSpeed)");
  app.add_flag("--zero-quantized-gradients-one-node", e.zero.zero_quantized_gradients_one_node,
               "qgZ on one node too: its intra-node hop quantized (DeepSpeed reduces exactly there)");
  app.add_option("--zero-quantized-gradients-bits", e.zero.zero_quantized_gradients_bits, "qgZ's code width: 4 or 8")
      ->capture_default_str();
  app.add_option("--zero-quantized-gradients-format", e.zero.zero_quantized_gradients_format,
                 "qgZ's wire format: deepspeed (DeepSpeed's groups of about a row, rounding and fp16 sums) or blocks "
                 "(fixed blocks of --zero-quantization-block-size, float32 sums)")
      ->capture_default_str();
  app.add_option("--zero-quantization-block-size", e.zero.zero_quantization_block_size,
                 "ZeRO++: elements per quantization block (one float32 scale each)")
      ->capture_default_str();
  app.add_option("--train", c.train_data, "training tokens: an llm.c token shard or a text file (byte tokens)");
  app.add_option("--val", c.val_data, "validation tokens (same formats)");
  app.add_option("--tokenizer", c.tokenizer,
                 "tokenizer of text --train/--val (default: bytes): a tokenizer.json, vocab.json (merges.txt beside "
                 "it), a SentencePiece .model, or a directory; a named --model takes its vocabulary size");
  app.add_option("--steps", c.steps, "optimizer steps")->capture_default_str();
  app.add_option("-b,--batch", e.train_micro_batch_size_per_gpu, "micro-batch size B (train_micro_batch_size_per_gpu)")
      ->capture_default_str();
  app.add_option("-t,--seq-len", c.seq_len, "sequence length T (0 = the model's context length)")
      ->capture_default_str();
  app.add_option("--grad-accum", e.gradient_accumulation_steps,
                 "micro-batches per optimizer step (gradient_accumulation_steps)")
      ->capture_default_str();
  app.add_option("--optimizer", o.optimizer_text, "adamw or sgd (optimizer.type)")
      ->check(CLI::IsMember({"adamw", "sgd"}))
      ->capture_default_str();
  app.add_option("--lr", e.optimizer.lr, "learning rate, the peak of a schedule (optimizer.params.lr)")
      ->capture_default_str();
  app.add_option("--schedule", o.schedule_text,
                 "learning-rate scheduler (scheduler.type): none, DeepSpeed's WarmupLR, WarmupDecayLR or "
                 "WarmupCosineLR, or llm.c's constant or cosine (docs/config.md)")
      ->check(CLI::IsMember({"none", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "constant", "cosine"}))
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "warmup steps of --schedule (scheduler.params.warmup_num_steps)");
  app.add_option("--min-lr-frac", o.min_lr_frac,
                 "the floor of --schedule cosine or WarmupCosineLR as a fraction of --lr (scheduler.params."
                 "cos_min_ratio)");
  app.add_option("--weight-decay", e.optimizer.weight_decay,
                 "decoupled weight decay, 2-D weights only (optimizer.params.weight_decay; SGD: 0 unless given)")
      ->capture_default_str();
  app.add_option("--beta1", e.optimizer.beta1)->capture_default_str();
  app.add_option("--beta2", e.optimizer.beta2)->capture_default_str();
  app.add_option("--eps", e.optimizer.eps, "AdamW epsilon")->capture_default_str();
  app.add_option("--momentum", e.optimizer.momentum, "SGD momentum")->capture_default_str();
  app.add_option("--grad-clip", e.gradient_clipping, "global gradient norm clip (gradient_clipping; 0 = off)")
      ->capture_default_str();
  app.add_option("--steps-per-print", e.steps_per_print,
                 "print a step's line every N steps (steps_per_print; a terminal shows every step in place)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--wall-clock-breakdown", e.wall_clock_breakdown,
               "print each phase's time with those lines: forward, backward, step, collectives, offload "
               "(wall_clock_breakdown)");
  app.add_option("--seed", c.seed, "seed of the initialization RNG")->capture_default_str();
  app.add_option("--eval-interval", c.eval_interval, "evaluate on --val every N steps (0 = never)")
      ->capture_default_str();
  app.add_option("--eval-batches", c.eval_batches, "validation batches per evaluation")->capture_default_str();
  app.add_option("--ckpt-dir", c.ckpt_dir, "checkpoint directory (saved at the end and every --ckpt-interval)");
  app.add_option("--ckpt-interval", c.ckpt_interval, "save every N steps (0 = only at the end)")->capture_default_str();
  app.add_flag("--resume", c.resume, "continue from --ckpt-dir/latest");
  app.add_option("--keep-last", c.keep_last,
                 "after each save, remove all but the newest N step directories (never the one latest names; "
                 "0 = keep all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--activation-checkpointing", e.activation_checkpointing, "recompute each block's forward in backward");
  app.add_flag("--cpu-checkpointing", e.cpu_checkpointing,
               "with --activation-checkpointing: keep each block's checkpointed input in host memory between its "
               "forward and its recompute (DeepSpeed's activation_checkpointing.cpu_checkpointing)");
  app.add_option("--memory-limit-mib", o.memory_limit_mib,
                 "cap the allocator of --device from the first byte (MiB; 0 = none): construction (partitioned: "
                 "each rank creates only what its ZeRO stage keeps), training, checkpoints")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--host-memory-limit-mib", o.host_memory_limit_mib,
                 "cap the host tier (offloaded model states, staging buffers, offloaded activations) from process "
                 "start (MiB; 0 = none; config key host_memory_limit_mib)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--tensor-parallel-size", c.tensor_parallel_size,
                 "split each block over this many ranks (Megatron's tensor parallelism; docs/parallel.md; config "
                 "key tensor_parallel_size)");
  app.add_option("--sequence-parallel-size", c.sequence_parallel_size,
                 "split each sequence over this many ranks (DeepSpeed-Ulysses; docs/parallel.md; config key "
                 "sequence_parallel_size)");
  app.add_flag("--megatron-sequence-parallel", c.megatron_sequence_parallel,
               "with --tensor-parallel-size: split the tokens between the sub-layers over the tensor group "
               "(Megatron's sequence parallelism; docs/parallel.md; config key megatron_sequence_parallel)");
  app.add_option("--collective-timeout-s", c.collective_timeout_s,
                 "abort the job when one collective waits longer than this, naming the ranks it waits for "
                 "(seconds; 0 = never; config key collective_timeout_s)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--compute-dtype", o.compute_dtype_text,
                 "dtype the model is built and computes in: auto (bf16 on a GPU with bf16 enabled, else f32), f32, "
                 "or bf16 (needs bf16 enabled in --config)")
      ->check(CLI::IsMember({"auto", "f32", "bf16"}))
      ->capture_default_str();
  app.add_option(
         "--f32-matmul", o.f32_matmul,
         "float32 GEMM precision (torch.set_float32_matmul_precision): highest (IEEE fp32) or high (TF32, GPU only)")
      ->capture_default_str();
  app.add_option("--device", o.device_text, "where each rank trains: cpu, cuda (GPU = local rank % GPUs) or cuda:N")
      ->capture_default_str();
  app.add_option("--dist", o.dist_text, "collectives: auto (NCCL between GPUs, else MPI), mpi or nccl")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "threads per rank (0 = cores / ranks on this machine)")->capture_default_str();
  app.add_option("--log", o.log_path, "write one JSON object per step to this file");
  app.add_option("--save-llmc", o.save_llmc, "at the end, also write the model as an llm.c GPT-2 checkpoint");
  app.add_option("--save-llmc-version", o.save_llmc_version, "llm.c checkpoint version: 3 = float32, 5 = bfloat16")
      ->check(CLI::IsMember({3, 5}))
      ->capture_default_str();
  app.add_option(
      "--save-hf", o.save_hf,
      "at the end, also write the model as a Hugging Face directory (config.json + model.safetensors, float32; "
      "sharded past --save-hf-shard-size)");
  app.add_option("--save-hf-shard-size", o.save_hf_shard_size,
                 "largest --save-hf weight file, as transformers' max_shard_size: past it, model-0000k-of-0000n."
                 "safetensors + model.safetensors.index.json")
      ->check([](const std::string& s) {
        try {
          parse_shard_size(s, "--save-hf-shard-size");
          return std::string();
        } catch (const std::exception& e) {
          return std::string(e.what());
        }
      })
      ->capture_default_str();
  app.add_option("--trace", o.trace_path,
                 "write a Chrome trace-event JSON of every rank (open in ui.perfetto.dev): units' forward/backward, "
                 "collectives, optimizer, offload IO, memory counters (docs/memory-mechanics.md)");
  app.add_option("--trace-steps", o.trace_steps, "trace only the first N steps (0 = every step)")
      ->capture_default_str();
  app.add_option("--peak-tflops", o.peak_tflops,
                 "per-rank peak for MFU in TFLOP/s (0 = cpu: the measured FMA ceiling of the rank's threads; GPU: 989)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // --help (0) or CLI11's message about the bad flag
  }
  for (const CLI::Option* opt : app.get_options())
    if (opt->count() > 0)
      for (const std::string& name : opt->get_lnames()) o.given.insert("--" + name);
  return std::nullopt;
}

RunConfig resolve_run_config(const TrainOptions& o, int world_size, bool* compute_dtype_auto) {
  const std::string& config_path = o.config_path;
  auto given = [&](const char* flag) { return o.given.count(flag) > 0; };
  RunConfig c = o.run;
  bool dtype_auto = !given("--compute-dtype") || o.compute_dtype_text == "auto";
  if (!dtype_auto) c.compute_dtype = compute_dtype_from_name(o.compute_dtype_text, "--compute-dtype");
  if (!config_path.empty()) {
    // The config file holds the engine settings; a flag that would contradict it is an error.
    for (const char* flag : {"--batch",
                             "--grad-accum",
                             "--optimizer",
                             "--lr",
                             "--min-lr-frac",
                             "--warmup",
                             "--schedule",
                             "--weight-decay",
                             "--beta1",
                             "--beta2",
                             "--eps",
                             "--momentum",
                             "--grad-clip",
                             "--steps-per-print",
                             "--wall-clock-breakdown",
                             "--activation-checkpointing",
                             "--cpu-checkpointing",
                             "--zero-stage",
                             "--zero-quantized-weights",
                             "--zero-hpz-partition-size",
                             "--zero-hpz-secondary-exact",
                             "--zero-quantized-gradients",
                             "--zero-quantized-gradients-one-node",
                             "--zero-quantized-gradients-bits",
                             "--zero-quantized-gradients-format",
                             "--zero-quantization-block-size"})
      if (given(flag))
        ZT_THROW(flag, " cannot be combined with --config '", config_path, "': set it in the config file");
    RunConfig from_file = c;
    const nlohmann::json file = read_json_file(config_path, "config '" + config_path + "'");
    // The grid's degrees: from either place, not both (the batch keys are checked against them).
    for (const auto& [flag, key] : {std::pair{"--tensor-parallel-size", "tensor_parallel_size"},
                                    std::pair{"--sequence-parallel-size", "sequence_parallel_size"}})
      if (given(flag) && file.contains(key))
        ZT_THROW(flag, " cannot be combined with --config '", config_path, "', which sets ", key,
                 ": give it in one place");
    run_config_from_json(config_path, world_size, from_file);
    // The host cap is a run setting either place may give, but not both (which would win is a guess).
    if (given("--host-memory-limit-mib") && file.contains("host_memory_limit_mib"))
      ZT_THROW("--host-memory-limit-mib cannot be combined with --config '", config_path,
               "', which sets host_memory_limit_mib: give it in one place");
    if (given("--host-memory-limit-mib"))
      from_file.host_memory_limit = static_cast<int64_t>(o.host_memory_limit_mib * 1024 * 1024);
    // Run settings: the command line wins over the file.
    if (given("--model")) from_file.model = c.model;
    if (given("--train")) from_file.train_data = c.train_data;
    if (given("--val")) from_file.val_data = c.val_data;
    if (given("--tokenizer")) from_file.tokenizer = c.tokenizer;
    if (given("--steps")) from_file.steps = c.steps;
    if (given("--seq-len")) from_file.seq_len = c.seq_len;
    if (given("--megatron-sequence-parallel")) from_file.megatron_sequence_parallel = true;
    if (given("--seed")) from_file.seed = c.seed;
    if (given("--eval-interval")) from_file.eval_interval = c.eval_interval;
    if (given("--eval-batches")) from_file.eval_batches = c.eval_batches;
    if (given("--collective-timeout-s")) from_file.collective_timeout_s = c.collective_timeout_s;
    if (!dtype_auto) from_file.compute_dtype = c.compute_dtype;
    else if (file.contains("compute_dtype")) dtype_auto = false;  // the file's
    c = from_file;
  } else {
    // The engine from the flags: what the config parser would make of the same keys.
    EngineConfig& e = c.engine;
    if (o.optimizer_text == "sgd") {
      e.optimizer.type = OptimizerType::sgd;
      if (!given("--weight-decay")) e.optimizer.weight_decay = 0;  // torch.optim.SGD's default, as the config's
    }
    SchedulerConfig s = SchedulerConfig::defaults(scheduler_type_from_name(o.schedule_text));
    auto schedule_param = [&](const char* flag, const char* param) {
      if (given(flag) && !s.uses(param))
        ZT_THROW(flag, " sets scheduler.params.", param, ", which --schedule ", o.schedule_text,
                 " does not use: give --schedule ",
                 std::string(flag) == "--warmup" ? "WarmupLR, WarmupDecayLR, WarmupCosineLR, constant or cosine"
                                                 : "WarmupCosineLR or cosine",
                 " (or leave ", flag, " out)");
      return given(flag);
    };
    if (schedule_param("--warmup", "warmup_num_steps")) s.warmup_num_steps = o.warmup;
    if (schedule_param("--min-lr-frac", "cos_min_ratio")) s.cos_min_ratio = o.min_lr_frac;
    if (s.uses("warmup_max_lr")) s.warmup_max_lr = e.optimizer.lr;  // --lr is the peak of the warmup
    e.scheduler = s;
    e.zero.overlap_comm = default_overlap_comm(e.zero.stage);  // DeepSpeed's, as the config's
    e.train_batch_size = e.train_micro_batch_size_per_gpu * e.gradient_accumulation_steps *
                         data_parallel_size(world_size, c, "--tensor-parallel-size / --sequence-parallel-size: ");
  }
  c.memory_limit = static_cast<int64_t>(o.memory_limit_mib * 1024 * 1024);
  if (config_path.empty()) c.host_memory_limit = static_cast<int64_t>(o.host_memory_limit_mib * 1024 * 1024);
  if (compute_dtype_auto) *compute_dtype_auto = dtype_auto;
  return c;
}

}  // namespace zt
