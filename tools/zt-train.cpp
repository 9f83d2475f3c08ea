// zt-train — train a GPT-2 or Llama model on a token shard or a text file, on the CPU, on one
// rank or on N MPI ranks with ZeRO stages 0-3.
//
//   zt-train --model gpt-mini --train data/corpus/train.txt --val data/corpus/val.txt
//              --steps 300 --batch 8 --seq-len 256 --lr 1e-3 --log run.jsonl --ckpt-dir runs/mini
//   mpirun -np 4 zt-train --config configs/zero3.json --train data/corpus/train.txt --steps 100
//
// Rank 0 prints a live progress line on stderr and writes one JSON object per step with --log;
// every rank saves its shards of a checkpoint (--ckpt-dir, --ckpt-interval, --resume). At the end
// a table of every rank's memory by category. An error on any rank stops the whole job with a
// message naming the rank.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <unistd.h>

#include "core/backend.h"             // defines: backend, parse_f32_matmul (--f32-matmul)
#include "core/json.h"                // defines: parse_json, read_json_file
#include "core/kernels/gemm_libs.h"   // defines: gemm_lib, gemm_lib_name (the banner)
#include "core/parallel.h"            // defines: set_num_threads
#include "tools/run_device.h"         // defines: select_run_device (--device, --dist)
#include "dist/process_group.h"       // defines: init_process_group, ProcessGroup
#include "dist/trace_file.h"          // defines: write_trace (--trace)
#include "tools/train_report.h"       // defines: flops_per_token, peak_flops, print_*_table, print_run_summary
#include "models/gpt2.h"              // defines: GPT2 (for --save-llmc)
#include "formats/hf_weights.h"       // defines: save_hf_weights (--save-hf)
#include "formats/llmc_checkpoint.h"  // defines: save_llmc_checkpoint
#include "train/run_config.h"         // defines: RunConfig, run_config_from_json
#include "train/trainer.h"            // defines: Trainer, StepStats
#include "zero/estimator.h"           // defines: estimate, EstimateRequest, model_shape

using namespace zt;

namespace {

std::string fmt_duration(double seconds) {
  char buf[32];
  const long s = std::lround(std::max(0.0, seconds));
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  else std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

nlohmann::json memory_json() {
  MemoryStats m = default_allocator().stats();
  nlohmann::json cur, peak;
  for (Category c : kAllCategories) {
    cur[category_name(c)] = m.cur(c);
    peak[category_name(c)] = m.max(c);
  }
  return {{"current", cur}, {"peak", peak}, {"peak_total", m.peak_total}};  // peaks: this step's
}

// The allocator's peaks restart every step (the log reports each step's peak); the run's peak is
// the maximum over the steps, kept here.
struct RunPeaks {
  MemoryStats peaks;
  void update() {
    const MemoryStats m = default_allocator().stats();
    for (Category c : kAllCategories) {
      const int i = static_cast<int>(c);
      peaks.peak[i] = std::max(peaks.peak[i], m.peak[i]);
    }
    peaks.peak_total = std::max(peaks.peak_total, m.peak_total);
  }
};

// Threads per rank: --threads, else the cores shared among the ranks on this machine.
int threads_per_rank(int requested) {
  if (requested > 0) return requested;
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int ranks_here = local ? std::max(1, std::atoi(local)) : 1;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks_here);
}

}  // namespace

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) must be an error that names the file (EFBIG from the write:
  // swap files, checkpoints, logs), not a kill by SIGXFSZ that leaves the job without a word.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"zt-train: train a GPT-2 or Llama model on the CPU (ZeroTensor)"};
  RunConfig c;
  int threads = 0;
  std::string log_path, save_llmc;
  int save_llmc_version = 3;
  double memory_limit_mib = 0, host_memory_limit_mib = 0;
  app.add_option("--model", c.model, "named model config: gpt2-nano, gpt-micro, gpt-mini, gpt2-124m, llama-nano, llama-mini, llama-100m")->capture_default_str();
  app.add_option("--init-from", c.init_from, "start from pretrained weights instead of a fresh init: an llm.c GPT-2 checkpoint (.bin) or a Hugging Face GPT-2 / Llama directory (config.json + model.safetensors) or .safetensors file");
  std::string config_path;
  app.add_option("--config", config_path, "DeepSpeed-style JSON config (docs/config.md): batch, optimizer, scheduler, zero_optimization, ...");
  app.add_option("--zero-stage", c.zero.stage, "ZeRO stage 0-3 (without --config)")->capture_default_str();
  app.add_option("--train", c.train_data, "training tokens: an llm.c token shard or a text file (byte tokens)");
  app.add_option("--val", c.val_data, "validation tokens (same formats)");
  app.add_option("--tokenizer", c.tokenizer,
                 "tokenizer of text --train/--val (default: bytes): a tokenizer.json, vocab.json (merges.txt beside "
                 "it), a SentencePiece .model, or a directory; a named --model takes its vocabulary size");
  app.add_option("--steps", c.steps, "optimizer steps")->capture_default_str();
  app.add_option("-b,--batch", c.batch, "micro-batch size B")->capture_default_str();
  app.add_option("-t,--seq-len", c.seq_len, "sequence length T (0 = the model's context length)")->capture_default_str();
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
  app.add_option("--eval-interval", c.eval_interval, "evaluate on --val every N steps (0 = never)")->capture_default_str();
  app.add_option("--eval-batches", c.eval_batches, "validation batches per evaluation")->capture_default_str();
  app.add_option("--ckpt-dir", c.ckpt_dir, "checkpoint directory (saved at the end and every --ckpt-interval)");
  app.add_option("--ckpt-interval", c.ckpt_interval, "save every N steps (0 = only at the end)")->capture_default_str();
  app.add_flag("--resume", c.resume, "continue from --ckpt-dir/latest");
  app.add_option("--keep-last", c.keep_last,
                 "after each save, remove all but the newest N step directories (never the one latest names; "
                 "0 = keep all)")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_flag("--activation-checkpointing", c.activation_checkpointing, "recompute each block's forward in backward");
  app.add_flag("--cpu-checkpointing", c.cpu_checkpointing,
               "with --activation-checkpointing: keep each block's checkpointed input in host memory between its "
               "forward and its recompute (DeepSpeed's activation_checkpointing.cpu_checkpointing)");
  app.add_option("--memory-limit-mib", memory_limit_mib,
                 "cap the allocator of --device from the first byte (MiB; 0 = none): construction (partitioned: "
                 "each rank creates only what its ZeRO stage keeps), training, checkpoints")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--host-memory-limit-mib", host_memory_limit_mib,
                 "cap the host tier (offloaded model states, staging buffers, offloaded activations) from process "
                 "start (MiB; 0 = none; config key host_memory_limit_mib)")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--collective-timeout-s", c.collective_timeout_s,
                 "abort the job when one collective waits longer than this, naming the ranks it waits for "
                 "(seconds; 0 = never; config key collective_timeout_s)")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c.compute_dtype = "auto";  // resolved once the device is known (below)
  app.add_option("--compute-dtype", c.compute_dtype,
                 "dtype the model is built and computes in: auto (bf16 on a GPU with bf16 enabled, else f32), f32, "
                 "or bf16 (needs bf16 enabled in --config)")
      ->check(CLI::IsMember({"auto", "f32", "bf16"}))->capture_default_str();
  std::string device_text = "cpu", dist_text = "auto", f32_matmul = "highest";
  app.add_option("--f32-matmul", f32_matmul,
                 "float32 GEMM precision (torch.set_float32_matmul_precision): highest (IEEE fp32) or high (TF32, GPU only)")
      ->capture_default_str();
  app.add_option("--device", device_text, "where each rank trains: cpu, cuda (GPU = local rank % GPUs) or cuda:N")
      ->capture_default_str();
  app.add_option("--dist", dist_text, "collectives: auto (NCCL between GPUs, else MPI), mpi or nccl")
      ->capture_default_str();
  app.add_option("--threads", threads, "threads per rank (0 = cores / ranks on this machine)")->capture_default_str();
  app.add_option("--log", log_path, "write one JSON object per step to this file");
  app.add_option("--save-llmc", save_llmc, "at the end, also write the model as an llm.c GPT-2 checkpoint");
  app.add_option("--save-llmc-version", save_llmc_version, "llm.c checkpoint version: 3 = float32, 5 = bfloat16")
      ->check(CLI::IsMember({3, 5}))->capture_default_str();
  std::string save_hf;  // --save-hf (formats/hf_weights.h)
  app.add_option("--save-hf", save_hf, "at the end, also write the model as a Hugging Face directory (config.json + model.safetensors, float32)");
  std::string trace_path;
  int64_t trace_steps = 0;
  double peak_tflops = 0;
  app.add_option("--trace", trace_path,
                 "write a Chrome trace-event JSON of every rank (open in ui.perfetto.dev): units' forward/backward, "
                 "collectives, optimizer, offload IO, memory counters (docs/memory-mechanics.md)");
  app.add_option("--trace-steps", trace_steps, "trace only the first N steps (0 = every step)")->capture_default_str();
  app.add_option("--peak-tflops", peak_tflops,
                 "per-rank peak for MFU in TFLOP/s (0 = cpu: the measured FMA ceiling of the rank's threads; GPU: 989)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  ProcessGroup& group = init_process_group();
  const bool lead = group.rank() == 0;  // rank 0 prints and logs
  try {
    const int nt = set_num_threads(threads_per_rank(threads));
    if (!config_path.empty()) {
      // The config file holds the engine settings; a flag that would contradict it is an error.
      for (const char* flag : {"--batch", "--grad-accum", "--optimizer", "--lr", "--min-lr-frac", "--warmup",
                               "--schedule", "--weight-decay", "--beta1", "--beta2", "--eps", "--momentum",
                               "--grad-clip", "--activation-checkpointing", "--cpu-checkpointing", "--zero-stage"})
        if (app.count(flag))
          ZT_THROW(flag, " cannot be combined with --config '", config_path, "': set it in the config file");
      RunConfig from_file = c;
      run_config_from_json(config_path, group.size(), from_file);
      // The host cap is a run setting either place may give, but not both (which would win is a guess).
      if (app.count("--host-memory-limit-mib") &&
          read_json_file(config_path, "config '" + config_path + "'").contains("host_memory_limit_mib"))
        ZT_THROW("--host-memory-limit-mib cannot be combined with --config '", config_path,
                 "', which sets host_memory_limit_mib: give it in one place");
      if (app.count("--host-memory-limit-mib"))
        from_file.host_memory_limit = static_cast<int64_t>(host_memory_limit_mib * 1024 * 1024);
      // Run settings: the command line wins over the file.
      if (app.count("--model")) from_file.model = c.model;
      if (app.count("--train")) from_file.train_data = c.train_data;
      if (app.count("--val")) from_file.val_data = c.val_data;
      if (app.count("--tokenizer")) from_file.tokenizer = c.tokenizer;
      if (app.count("--steps")) from_file.steps = c.steps;
      if (app.count("--seq-len")) from_file.seq_len = c.seq_len;
      if (app.count("--seed")) from_file.seed = c.seed;
      if (app.count("--eval-interval")) from_file.eval_interval = c.eval_interval;
      if (app.count("--eval-batches")) from_file.eval_batches = c.eval_batches;
      if (app.count("--compute-dtype")) from_file.compute_dtype = c.compute_dtype;
      if (app.count("--collective-timeout-s")) from_file.collective_timeout_s = c.collective_timeout_s;
      c = from_file;
    }
    c.memory_limit = static_cast<int64_t>(memory_limit_mib * 1024 * 1024);
    if (config_path.empty()) c.host_memory_limit = static_cast<int64_t>(host_memory_limit_mib * 1024 * 1024);
    // The device is chosen before anything is allocated: the model, the engine and the optimizer
    // allocate on the default device (core/backend.h). Collectives of training go through
    // run.group (MPI, or NCCL between GPUs); `group` (MPI) stays for the banner and the abort.
    const RunDevice run = select_run_device(device_text, dist_text, group);
    // The collective timeout (dist/mpi_watchdog.h) guards the MPI group; NCCL's own is not wired yet.
    group.set_collective_timeout(c.collective_timeout_s);
    if (run.group != &group && !run.group->set_collective_timeout(c.collective_timeout_s) && lead && group.size() > 1)
      std::fprintf(stderr, "zt-train: note: the %s backend does not enforce collective_timeout_s (docs/faults.md)\n",
                   run.group->backend().c_str());
    backend(run.device).set_f32_matmul_precision(parse_f32_matmul(f32_matmul));  // high on the cpu: an error
    // auto: a GPU computes bf16 runs in bf16 (its kernels take bf16; DeepSpeed's bf16 mode); the
    // cpu computes in float32, faster there than bf16 through float32 stand-ins (core/cpu_bf16.h).
    if (c.compute_dtype == "auto")
      c.compute_dtype = !run.device.is_cpu() && c.precision == Precision::bf16 ? "bf16" : "f32";
    Trainer tr(c, *run.group);
    if (lead && tr.tokenizer())
      std::fprintf(stderr, "zt-train: tokenizer '%s' (%s, %d tokens); the model's vocabulary: %lld (padded %lld)\n",
                   tr.tokenizer()->source().c_str(), tr.tokenizer()->kind().c_str(), tr.tokenizer()->vocab_size(),
                   static_cast<long long>(tr.model_config().vocab_size),
                   static_cast<long long>(tr.model_config().padded_vocab_size));
    if (!trace_path.empty()) {  // a trace that cannot be written is an error now, not after the run
      const std::filesystem::path dir = std::filesystem::absolute(trace_path).parent_path();
      if (!std::filesystem::is_directory(dir))
        ZT_THROW("--trace '", trace_path, "': the directory '", dir.string(), "' does not exist");
    }
    // --trace: the clocks of all ranks start together (after a barrier); the engine hands the
    // tracer to its group and swap files (core/trace.h).
    std::unique_ptr<Tracer> tracer;
    if (!trace_path.empty()) {
      tracer = std::make_unique<Tracer>(group.rank());
      group.barrier();
      tracer->set_origin(Tracer::Clock::now());
      tr.engine().set_tracer(tracer.get());
    }
    const PeakFlops peak = peak_flops(run.device, nt, peak_tflops);
    const double flops_tok = flops_per_token(tr.model_config(), tr.model().num_params(), tr.config().seq_len);
    RunTotals totals;
    const CommCounters comm0 = tr.group().counters();
    const CommTimes times0 = tr.group().times();
    std::ofstream log;
    if (!log_path.empty() && lead) {
      // On resume, keep the lines up to the checkpoint's step and drop any a killed run wrote
      // after it: those steps are about to be run again.
      std::vector<std::string> kept;
      if (c.resume) {
        std::ifstream old(log_path);
        for (std::string line; std::getline(old, line);) {
          try {
            if (parse_json(line, "log '" + log_path + "'").at("step").get<int64_t>() <= tr.step_count())
              kept.push_back(line);
          } catch (const std::exception&) {  // a torn last line of a killed run (or no "step")
          }
        }
      }
      log.open(log_path, std::ios::trunc);
      if (!log) ZT_THROW("cannot open log file '", log_path, "'");
      for (const std::string& line : kept) log << line << "\n";
    }
    if (lead)
      std::fprintf(stderr, "zt-train: %s, %lld parameters, %d rank%s, ZeRO stage %d, %s, B=%lld per rank, T=%lld, %d threads per rank (float32 GEMM: %s), %lld steps%s\n",
                   c.init_from.empty() ? c.model.c_str() : c.init_from.c_str(), static_cast<long long>(tr.model().num_params()),
                   group.size(), group.size() > 1 ? "s" : "", c.zero.stage,
                   (std::string(precision_name(c.precision)) + (c.precision == Precision::f32 ? "" : " (compute " + c.compute_dtype + ")")).c_str(),
                   static_cast<long long>(tr.config().batch),
                   static_cast<long long>(tr.config().seq_len), nt, gemm_lib_name(gemm_lib()), static_cast<long long>(c.steps),
                   tr.step_count() ? (" (resumed at step " + std::to_string(tr.step_count()) + ")").c_str() : "");
    if (lead && c.zero.offload_optimizer.enabled()) {
      auto where = [](const OffloadConfig& o) {
        return o.device == "nvme" ? "nvme (" + o.nvme_path + ")" : o.device;
      };
      std::fprintf(stderr, "zt-train: offload: optimizer -> %s, parameters -> %s, sub_group_size %lld%s\n",
                   where(c.zero.offload_optimizer).c_str(), where(c.zero.offload_param).c_str(),
                   static_cast<long long>(c.zero.sub_group_size),
                   run.device.is_cpu() ? "; the device is the --memory-limit-mib capped cpu allocator, the host "
                                         "tier the rest of RAM (pin_memory has no meaning on a cpu device)"
                                       : "");
    }
    if (lead && c.cpu_checkpointing)
      std::fprintf(stderr, "zt-train: activation checkpoints in host memory between forward and recompute "
                           "(cpu_checkpointing), brought back one block ahead\n");
    if (lead) std::fprintf(stderr, "zt-train: MFU = (6N + 6LCT) FLOPs per token x tokens/s per rank / %s\n", peak.source.c_str());
    if (lead && !run.device.is_cpu())
      std::fprintf(stderr, "zt-train: device %s, float32 matmul %s\n", run.describe().c_str(), f32_matmul.c_str());
    const bool tty = lead && isatty(STDERR_FILENO);
    const int64_t every = std::max<int64_t>(1, c.steps / 20);  // non-tty: about 20 lines per run
    double ms_sum = 0;
    int64_t timed = 0;
    RunPeaks run_peaks;  // from the first step on: the setup's peak is printed apart, below
    const MemoryStats setup = default_allocator().stats();
    // Printed and logged from inside step(), before the step's checkpoint is written (trainer.h).
    auto report = [&](const StepStats& s) {
      ms_sum += s.step_ms;
      ++timed;
      const double eta = (ms_sum / timed) * static_cast<double>(c.steps - s.step) / 1000.0;
      totals.step_s += s.step_ms / 1000.0;
      ++totals.steps;
      const double mfu = s.tokens_per_s / group.size() * flops_tok / peak.flops_per_s;
      const MemoryStats mem = default_allocator().stats();  // peaks: this step's
      char line[400];
      std::snprintf(line, sizeof line,
                    "step %5lld/%lld | loss %.4f | lr %.2e | norm %.3f | %.0f tok/s | MFU %.1f%% | mem %s (peak %s) | ETA %s",
                    static_cast<long long>(s.step), static_cast<long long>(c.steps), s.loss, s.lr, s.grad_norm,
                    s.tokens_per_s, 100.0 * mfu, format_bytes(mem.total()).c_str(),
                    format_bytes(mem.peak_total).c_str(), fmt_duration(eta).c_str());
      if (c.precision == Precision::f16) {  // fp16: the loss scale, and whether the step was skipped
        const size_t len = std::strlen(line);
        std::snprintf(line + len, sizeof line - len, " | scale %g%s", s.loss_scale,
                      s.skipped ? " | overflow: step skipped" : "");
      }
      // An overflow is always worth a line of its own (also when not a tty / between prints).
      const bool show = s.skipped;
      if (!lead) {
      } else if (s.val_loss >= 0) {
        if (tty) std::fprintf(stderr, "\r\033[K");
        std::fprintf(stderr, "%s | val loss %.4f\n", line, s.val_loss);
      } else if (tty) {
        std::fprintf(stderr, "\r\033[K%s", line);
      } else if (s.step % every == 0 || s.step == c.steps || show) {
        std::fprintf(stderr, "%s\n", line);
      }
      if (log) {
        nlohmann::json j = {{"step", s.step}, {"loss", s.loss}, {"lr", s.lr}, {"grad_norm", s.grad_norm},
                            {"tokens_per_s", s.tokens_per_s}, {"mfu", mfu}, {"step_ms", s.step_ms}, {"memory", memory_json()},
                            {"comm_bytes", tr.group().counters().total()}};
        if (c.precision == Precision::f16) {
          j["loss_scale"] = s.loss_scale;
          j["skipped"] = s.skipped;
        }
        if (s.val_loss >= 0) j["val_loss"] = s.val_loss;
        log << j.dump() << "\n" << std::flush;
      }
    };
    while (!tr.done()) {
      if (tracer && trace_steps > 0 && totals.steps >= trace_steps) tracer->set_recording(false);
      tr.step(report);
      run_peaks.update();
    }
    totals.comm = tr.group().counters() - comm0;
    const CommTimes times1 = tr.group().times();
    for (int k = 0; k < kNumCollectives; ++k) {
      totals.comm_times.busy_s[k] = times1.busy_s[k] - times0.busy_s[k];
      totals.comm_times.wait_s[k] = times1.wait_s[k] - times0.wait_s[k];
    }
    totals.engine = tr.engine().times();
    if (tracer) tr.engine().set_tracer(nullptr);  // the trace holds the training; not the tables below
    if (tty) std::fprintf(stderr, "\n");
    if (!save_llmc.empty()) {
      if (c.zero.stage == 3) ZT_THROW("--save-llmc with ZeRO stage 3: consolidate the checkpoint instead (zt-ckpt consolidate --format llmc)");
      auto* gpt = dynamic_cast<GPT2*>(&tr.model());
      if (!gpt) ZT_THROW("--save-llmc: llm.c checkpoints hold GPT-2 models; this is a ", tr.model().family(), " model");
      if (lead) {
        save_llmc_checkpoint(save_llmc, *gpt, save_llmc_version);
        std::fprintf(stderr, "wrote %s\n", save_llmc.c_str());
      }
    }
    if (!save_hf.empty()) {  // --save-hf: stages 0-2 hold the whole model on every rank
      if (c.zero.stage == 3) ZT_THROW("--save-hf with ZeRO stage 3: consolidate the checkpoint instead (zt-ckpt consolidate --format hf)");
      if (lead) save_hf_weights(save_hf, tr.model());
      if (lead) std::fprintf(stderr, "wrote %s\n", save_hf.c_str());
    }
    if (!c.ckpt_dir.empty() && lead) std::fprintf(stderr, "checkpoint: %s/latest\n", c.ckpt_dir.c_str());
    EstimateRequest req;
    req.has_model = true;
    req.model = model_shape(tr.model_config(), tr.model(), group.size());
    req.stage = c.zero.stage;
    req.world_size = group.size();
    req.precision = c.precision;
    req.micro_batch = tr.config().batch;
    req.seq_len = tr.config().seq_len;
    req.activation_checkpointing = c.activation_checkpointing;
    req.cpu_checkpointing = c.cpu_checkpointing;
    req.zero = c.zero;
    req.threads = nt;
    const Estimate est = estimate(req);
    if (lead)
      std::fprintf(stderr, "\nsetup (rank 0): partitioned construction (each unit created as the stage keeps it, "
                           "under --memory-limit-mib): peak %s\n", format_bytes(setup.peak_total).c_str());
    print_memory_table(group, run_peaks.peaks, est);
    if (c.zero.offload_optimizer.enabled()) print_offload_table(group, tr.engine().memory_report(), est);
    if (c.cpu_checkpointing && lead) {  // the checkpoints' round trip (zero/activation_offload.h)
      const MemoryReport m = tr.engine().memory_report();
      std::fprintf(stderr, "\nactivation checkpoints in host memory (cpu_checkpointing; rank 0, %s allocator): peak %s, "
                           "now %s; waited for their return %.3f s\n",
                   m.host_name.c_str(), format_bytes(m.host.max(Category::activations)).c_str(),
                   format_bytes(m.host.cur(Category::activations)).c_str(), tr.engine().times().checkpoint_wait_s);
    }
    print_run_summary(group, totals);
    if (tracer) {
      const nlohmann::json about = {{"model", c.init_from.empty() ? c.model : c.init_from}, {"zero_stage", c.zero.stage},
                                    {"steps", c.steps}, {"micro_batch", tr.config().batch}, {"seq_len", tr.config().seq_len},
                                    {"traced_steps", trace_steps > 0 ? std::min(trace_steps, c.steps) : c.steps}};
      write_trace(*tracer, group, trace_path, about);
      if (lead) std::fprintf(stderr, "\ntrace: %s (%zu events on rank 0; open in https://ui.perfetto.dev)\n", trace_path.c_str(), tracer->size());
    }
  } catch (const std::exception& e) {
    // One rank's error must not leave the others waiting in a collective: stop the whole job.
    if (group.size() > 1) group.abort(std::string("zt-train: ") + e.what());
    std::fprintf(stderr, "\nzt-train: error: %s\n", e.what());
    return 1;
  }
  finalize_process_group();
  return 0;
}
