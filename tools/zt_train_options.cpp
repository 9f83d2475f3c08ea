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
  app.add_option("--zero-stage", c.zero.stage, "ZeRO stage 0-3 (without --config)")->capture_default_str();
  // ZeRO++ (docs/zero.md), the config's zero_optimization keys of the same names
  app.add_flag("--zero-quantized-weights", c.zero.zero_quantized_weights,
               "ZeRO++ qwZ: stage 3's parameter all-gathers sent as int8 blocks");
  app.add_option("--zero-hpz-partition-size", c.zero.zero_hpz_partition_size,
                 "ZeRO++ hpZ: a secondary shard over this many ranks of a node serves the backward's all-gather "
                 "(1 = off; usually the ranks per node)")
      ->capture_default_str();
  app.add_flag("--zero-quantized-gradients", c.zero.zero_quantized_gradients,
               "ZeRO++ qgZ: the gradient reduce-scatter as a hierarchical all-to-all of quantized blocks");
  app.add_option("--zero-quantized-gradients-bits", c.zero.zero_quantized_gradients_bits, "qgZ's code width: 4 or 8")
      ->capture_default_str();
  app.add_option("--zero-quantization-block-size", c.zero.zero_quantization_block_size,
                 "ZeRO++: elements per quantization block (one float32 scale each)")
      ->capture_default_str();
  app.add_option("--train", c.train_data, "training tokens: an llm.c token shard or a text file (byte tokens)");
  app.add_option("--val", c.val_data, "validation tokens (same formats)");
  app.add_option("--tokenizer", c.tokenizer,
                 "tokenizer of text --train/--val (default: bytes): a tokenizer.json, vocab.json (merges.txt beside "
                 "it), a SentencePiece .model, or a directory; a named --model takes its vocabulary size");
  app.add_option("--steps", c.steps, "optimizer steps")->capture_default_str();
  app.add_option("-b,--batch", c.batch, "micro-batch size B")->capture_default_str();
  app.add_option("-t,--seq-len", c.seq_len, "sequence length T (0 = the model's context length)")
      ->capture_default_str();
  app.add_option("--grad-accum", c.grad_accum, "micro-batches per optimizer step")->capture_default_str();
  app.add_option("--optimizer", c.optimizer, "adamw or sgd")->capture_default_str();
  app.add_option("--lr", c.lr, "peak learning rate")->capture_default_str();
  app.add_option("--min-lr-frac", c.min_lr_frac, "cosine floor as a fraction of --lr")->capture_default_str();
  app.add_option("--warmup", c.warmup, "linear warmup steps")->capture_default_str();
  app.add_option("--schedule", c.schedule, "cosine or constant")->capture_default_str();
  app.add_option("--weight-decay", c.weight_decay, "decoupled weight decay (2-D weights only)")->capture_default_str();
  app.add_option("--beta1", c.beta1)->capture_default_str();
  app.add_option("--beta2", c.beta2)->capture_default_str();
  app.add_option("--eps", c.eps, "AdamW epsilon")->capture_default_str();
  app.add_option("--momentum", c.momentum, "SGD momentum")->capture_default_str();
  app.add_option("--grad-clip", c.grad_clip, "global gradient norm clip (0 = off)")->capture_default_str();
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
  app.add_flag("--activation-checkpointing", c.activation_checkpointing, "recompute each block's forward in backward");
  app.add_flag("--cpu-checkpointing", c.cpu_checkpointing,
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
  app.add_option("--collective-timeout-s", c.collective_timeout_s,
                 "abort the job when one collective waits longer than this, naming the ranks it waits for "
                 "(seconds; 0 = never; config key collective_timeout_s)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c.compute_dtype = "auto";  // resolved once the device is known (below)
  app.add_option("--compute-dtype", c.compute_dtype,
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

RunConfig resolve_run_config(const TrainOptions& o, int world_size) {
  const std::string& config_path = o.config_path;
  auto given = [&](const char* flag) { return o.given.count(flag) > 0; };
  RunConfig c = o.run;
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
                             "--activation-checkpointing",
                             "--cpu-checkpointing",
                             "--zero-stage",
                             "--zero-quantized-weights",
                             "--zero-hpz-partition-size",
                             "--zero-quantized-gradients",
                             "--zero-quantized-gradients-bits",
                             "--zero-quantization-block-size"})
      if (given(flag))
        ZT_THROW(flag, " cannot be combined with --config '", config_path, "': set it in the config file");
    RunConfig from_file = c;
    run_config_from_json(config_path, world_size, from_file);
    // The host cap is a run setting either place may give, but not both (which would win is a guess).
    if (given("--host-memory-limit-mib") &&
        read_json_file(config_path, "config '" + config_path + "'").contains("host_memory_limit_mib"))
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
    if (given("--seed")) from_file.seed = c.seed;
    if (given("--eval-interval")) from_file.eval_interval = c.eval_interval;
    if (given("--eval-batches")) from_file.eval_batches = c.eval_batches;
    if (given("--compute-dtype")) from_file.compute_dtype = c.compute_dtype;
    if (given("--collective-timeout-s")) from_file.collective_timeout_s = c.collective_timeout_s;
    c = from_file;
  }
  c.memory_limit = static_cast<int64_t>(o.memory_limit_mib * 1024 * 1024);
  if (config_path.empty()) c.host_memory_limit = static_cast<int64_t>(o.host_memory_limit_mib * 1024 * 1024);
  return c;
}

}  // namespace zt
