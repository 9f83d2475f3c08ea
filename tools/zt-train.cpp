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
#include <fstream>
#include <iostream>
#include <thread>
#include <unistd.h>

#include "core/backend.h"           // defines: backend, parse_f32_matmul (--f32-matmul)
#include "core/parallel.h"          // defines: set_num_threads
#include "tools/run_device.h"      // defines: select_run_device (--device, --dist)
#include "dist/process_group.h"     // defines: init_process_group, ProcessGroup
#include "models/gpt2.h"            // defines: GPT2 (for --save-llmc)
#include "models/llmc_checkpoint.h" // defines: save_llmc_checkpoint
#include "models/trainer.h"         // defines: TrainConfig, Trainer, StepStats
#include "zero/estimator.h"         // defines: estimate, EstimateRequest, model_shape

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

// Every rank's current and run-peak bytes per category, printed by rank 0 (collective), and the
// estimator's prediction of the per-rank peak beside them (zero/estimator.h).
void print_memory_table(ProcessGroup& g, const RunPeaks& run, const Estimate& est) {
  const MemoryStats m = default_allocator().stats();
  const int64_t K = kNumCategories + 1;  // categories + total
  Tensor mine = Tensor::empty({2 * K}, DType::f64, Category::comm);
  double* v = mine.data<double>();
  for (Category c : kAllCategories) {
    v[static_cast<int>(c)] = static_cast<double>(m.cur(c));
    v[K + static_cast<int>(c)] = static_cast<double>(run.peaks.max(c));
  }
  v[K - 1] = static_cast<double>(m.total());
  v[2 * K - 1] = static_cast<double>(run.peaks.peak_total);
  Tensor all = Tensor::empty({2 * K * g.size()}, DType::f64, Category::comm);
  g.all_gather(mine, all);
  if (g.rank() != 0) return;
  const double* a = all.data<double>();
  std::fprintf(stderr, "\nmemory by category per rank (%s allocator, the device): current / peak over the run\n",
               default_allocator().name());
  std::fprintf(stderr, "  %-5s", "rank");
  for (Category c : kAllCategories) std::fprintf(stderr, " %23s", category_name(c));
  std::fprintf(stderr, " %23s\n", "total");
  for (int r = 0; r < g.size(); ++r) {
    std::fprintf(stderr, "  %-5d", r);
    for (int64_t k = 0; k < K; ++k) {
      const std::string cell = format_bytes(static_cast<int64_t>(a[r * 2 * K + k])) + " / " +
                               format_bytes(static_cast<int64_t>(a[r * 2 * K + K + k]));
      std::fprintf(stderr, " %23s", cell.c_str());
    }
    std::fprintf(stderr, "\n");
  }
  std::fprintf(stderr, "  %-5s", "est.");
  for (Category c : kAllCategories) {
    const std::string cell = "peak " + format_bytes(est.max(c));
    std::fprintf(stderr, " %23s", cell.c_str());
  }
  std::fprintf(stderr, " %23s\n", ("sum " + format_bytes(est.peak_sum())).c_str());
  std::fprintf(stderr, "  (est. = zt-estimate's per-rank peak for this model, stage, world size, batch and threads)\n");
}

// Offload: every rank's model states in the host tier and the swap file (current / peak), with
// the estimator's model-state bytes beside them (collective; rank 0 prints).
void print_offload_table(ProcessGroup& g, const MemoryReport& m, const Estimate& est) {
  const Category cats[3] = {Category::params, Category::grads, Category::optim};
  Tensor mine = Tensor::empty({12}, DType::f64, Category::comm);
  double* v = mine.data<double>();
  for (int k = 0; k < 3; ++k) {
    v[k] = static_cast<double>(m.host.cur(cats[k]));
    v[3 + k] = static_cast<double>(m.host.max(cats[k]));
    v[6 + k] = static_cast<double>(m.nvme.cur(cats[k]));
    v[9 + k] = static_cast<double>(m.nvme.max(cats[k]));
  }
  Tensor all = Tensor::empty({12 * g.size()}, DType::f64, Category::comm);
  g.all_gather(mine, all);
  if (g.rank() != 0) return;
  const double* a = all.data<double>();
  std::fprintf(stderr, "\noffloaded model states per rank (%s memory, nvme swap file): current / peak\n",
               m.host_name.c_str());
  std::fprintf(stderr, "  %-5s %-5s  %25s  %25s  %25s\n", "rank", "tier", "params", "grads", "optim");
  for (int r = 0; r < g.size(); ++r)
    for (int t = 0; t < 2; ++t) {
      std::fprintf(stderr, "  %-5d %-5s", r, t == 0 ? "host" : "nvme");
      for (int k = 0; k < 3; ++k) {
        const double* x = a + 12 * r + 6 * t;
        const std::string cell = format_bytes(static_cast<int64_t>(x[k])) + " / " + format_bytes(static_cast<int64_t>(x[3 + k]));
        std::fprintf(stderr, "  %25s", cell.c_str());
      }
      std::fprintf(stderr, "\n");
    }
  for (int t = 0; t < 2; ++t) {
    std::fprintf(stderr, "  %-5s %-5s", "est.", t == 0 ? "host" : "nvme");
    for (Category c : cats) {
      const int64_t b = (t == 0 ? est.host_state : est.nvme_state)[static_cast<int>(c)];
      std::fprintf(stderr, "  %25s", format_bytes(b).c_str());
    }
    std::fprintf(stderr, "\n");
  }
}

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
  TrainConfig c;
  int threads = 0;
  std::string log_path, save_llmc;
  int save_llmc_version = 3;
  double memory_limit_mib = 0;
  app.add_option("--model", c.model, "named model config: gpt2-nano, gpt-micro, gpt-mini, gpt2-124m, llama-nano, llama-100m")->capture_default_str();
  app.add_option("--init-from", c.init_from, "start from an llm.c GPT-2 checkpoint (.bin) instead of a fresh init");
  std::string config_path;
  app.add_option("--config", config_path, "DeepSpeed-style JSON config (docs/config.md): batch, optimizer, scheduler, zero_optimization, ...");
  app.add_option("--zero-stage", c.zero.stage, "ZeRO stage 0-3 (without --config)")->capture_default_str();
  app.add_option("--train", c.train_data, "training tokens: an llm.c token shard or a text file (byte tokens)");
  app.add_option("--val", c.val_data, "validation tokens (same formats)");
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
  app.add_flag("--activation-checkpointing", c.activation_checkpointing, "recompute each block's forward in backward");
  app.add_option("--memory-limit-mib", memory_limit_mib,
                 "cap the allocator of --device from the end of setup on (MiB; 0 = none; the whole-model build before "
                 "sharding is not capped)")->capture_default_str();
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
  CLI11_PARSE(app, argc, argv);

  ProcessGroup& group = init_process_group();
  const bool lead = group.rank() == 0;  // rank 0 prints and logs
  try {
    const int nt = set_num_threads(threads_per_rank(threads));
    if (!config_path.empty()) {
      // The config file holds the engine settings; a flag that would contradict it is an error.
      for (const char* flag : {"--batch", "--grad-accum", "--optimizer", "--lr", "--min-lr-frac", "--warmup",
                               "--schedule", "--weight-decay", "--beta1", "--beta2", "--eps", "--momentum",
                               "--grad-clip", "--activation-checkpointing", "--zero-stage"})
        if (app.count(flag))
          ZT_THROW(flag, " cannot be combined with --config '", config_path, "': set it in the config file");
      TrainConfig from_file = c;
      train_config_from_json(config_path, group.size(), from_file);
      // Run settings: the command line wins over the file.
      if (app.count("--model")) from_file.model = c.model;
      if (app.count("--train")) from_file.train_data = c.train_data;
      if (app.count("--val")) from_file.val_data = c.val_data;
      if (app.count("--steps")) from_file.steps = c.steps;
      if (app.count("--seq-len")) from_file.seq_len = c.seq_len;
      if (app.count("--seed")) from_file.seed = c.seed;
      if (app.count("--eval-interval")) from_file.eval_interval = c.eval_interval;
      if (app.count("--eval-batches")) from_file.eval_batches = c.eval_batches;
      if (app.count("--compute-dtype")) from_file.compute_dtype = c.compute_dtype;
      c = from_file;
    }
    c.memory_limit = static_cast<int64_t>(memory_limit_mib * 1024 * 1024);
    // The device is chosen before anything is allocated: the model, the engine and the optimizer
    // allocate on the default device (core/backend.h). Collectives of training go through
    // run.group (MPI, or NCCL between GPUs); `group` (MPI) stays for the banner and the abort.
    const RunDevice run = select_run_device(device_text, dist_text, group);
    backend(run.device).set_f32_matmul_precision(parse_f32_matmul(f32_matmul));  // high on the cpu: an error
    // auto: a GPU computes bf16 runs in bf16 (its kernels take bf16; DeepSpeed's bf16 mode); the
    // cpu computes in float32, faster there than bf16 through float32 stand-ins (core/cpu_bf16.h).
    if (c.compute_dtype == "auto")
      c.compute_dtype = !run.device.is_cpu() && c.precision == Precision::bf16 ? "bf16" : "f32";
    Trainer tr(c, *run.group);
    std::ofstream log;
    if (!log_path.empty() && lead) {
      // On resume, keep the lines up to the checkpoint's step and drop any a killed run wrote
      // after it: those steps are about to be run again.
      std::vector<std::string> kept;
      if (c.resume) {
        std::ifstream old(log_path);
        for (std::string line; std::getline(old, line);) {
          try {
            if (nlohmann::json::parse(line).at("step").get<int64_t>() <= tr.step_count()) kept.push_back(line);
          } catch (const nlohmann::json::exception&) {  // a torn last line of a killed run
          }
        }
      }
      log.open(log_path, std::ios::trunc);
      if (!log) ZT_THROW("cannot open log file '", log_path, "'");
      for (const std::string& line : kept) log << line << "\n";
    }
    if (lead)
      std::fprintf(stderr, "zt-train: %s, %lld parameters, %d rank%s, ZeRO stage %d, %s, B=%lld per rank, T=%lld, %d threads per rank, %lld steps%s\n",
                   c.init_from.empty() ? c.model.c_str() : c.init_from.c_str(), static_cast<long long>(tr.model().num_params()),
                   group.size(), group.size() > 1 ? "s" : "", c.zero.stage,
                   (std::string(precision_name(c.precision)) + (c.precision == Precision::f32 ? "" : " (compute " + c.compute_dtype + ")")).c_str(),
                   static_cast<long long>(tr.config().batch),
                   static_cast<long long>(tr.config().seq_len), nt, static_cast<long long>(c.steps),
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
      char line[320];
      std::snprintf(line, sizeof line, "step %5lld/%lld | loss %.4f | lr %.2e | norm %.3f | %.0f tok/s | ETA %s",
                    static_cast<long long>(s.step), static_cast<long long>(c.steps), s.loss, s.lr, s.grad_norm,
                    s.tokens_per_s, fmt_duration(eta).c_str());
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
                            {"tokens_per_s", s.tokens_per_s}, {"step_ms", s.step_ms}, {"memory", memory_json()},
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
      tr.step(report);
      run_peaks.update();
    }
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
    req.zero = c.zero;
    req.threads = nt;
    req.whole_model_build = false;  // the run peaks start at the first step
    const Estimate est = estimate(req);
    if (lead)
      std::fprintf(stderr, "\nsetup (rank 0): the whole model built, then sharded (no zero.Init; not under "
                           "--memory-limit-mib): peak %s\n", format_bytes(setup.peak_total).c_str());
    print_memory_table(group, run_peaks, est);
    if (c.zero.offload_optimizer.enabled()) print_offload_table(group, tr.engine().memory_report(), est);
  } catch (const std::exception& e) {
    // One rank's error must not leave the others waiting in a collective: stop the whole job.
    if (group.size() > 1) group.abort(std::string("zt-train: ") + e.what());
    std::fprintf(stderr, "\nzt-train: error: %s\n", e.what());
    return 1;
  }
  finalize_process_group();
  return 0;
}
